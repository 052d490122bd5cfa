/* Hugging Face model directories (include/cloze/hf.h): config.json in,
 * safetensors by name both ways, tokenizer files out. */
#include "cloze/hf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cloze/json.h"
#include "cloze/safetensors.h"
#include "cloze/text.h"

static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- config.json ---- */

/* The largest integer a config.json field may hold: every size cloze takes
 * from it is an int, and what the weights file then has to hold is checked
 * against the file (cz_hf_check_weights). */
#define HF_INT_MAX 1000000000

/* An integer field; required (def < 0) or with a default. */
static int int_field(const cz_json *o, const char *path, const char *key, int def, int *out,
                     cz_error *err) {
    const cz_json *v = cz_json_get(o, key);
    if (!v) {
        if (def < 0) return cz_fail(err, "%s: %s missing", path, key);
        *out = def;
        return 0;
    }
    if (v->type != CZ_JSON_NUMBER || v->number != floor(v->number))
        return cz_fail(err, "%s: %s: expected an integer", path, key);
    if (v->number < 0) return cz_fail(err, "%s: %s = %.0f is negative", path, key, v->number);
    if (v->number > HF_INT_MAX)
        return cz_fail(err, "%s: %s = %.17g exceeds %d, the largest size cloze reads", path, key,
                       v->number, HF_INT_MAX);
    *out = (int)v->number;
    return 0;
}

static int float_field(const cz_json *o, const char *path, const char *key, float def, float *out,
                       cz_error *err) {
    const cz_json *v = cz_json_get(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (v->type != CZ_JSON_NUMBER) return cz_fail(err, "%s: %s: expected a number", path, key);
    *out = (float)v->number;
    return 0;
}

/* A boolean field: -1 absent, else 0 / 1; -2 (err set) when not a boolean. */
static int bool_field(const cz_json *o, const char *path, const char *key, cz_error *err) {
    const cz_json *v = cz_json_get(o, key);
    if (!v || v->type == CZ_JSON_NULL) return -1;
    if (v->type != CZ_JSON_BOOL) {
        cz_fail(err, "%s: %s: expected true or false", path, key);
        return -2;
    }
    return v->boolean;
}

/* Fields that change what the model computes and that cloze's model does
 * not have: refused by name rather than dropped (an import that computes
 * another function than the file's model is worse than none).
 * tie_word_embeddings = false is GPT's untied LM head (model.lm_head =
 * untied); BERT's MLM decoder is always tied in cloze. GPT-2's attention
 * scales Q K^T by 1/sqrt(d) (scale_attn_weights = true) and by nothing
 * else (scale_attn_by_inverse_layer_idx = false, which would divide layer
 * l's scores by l + 1). */
static int function_fields(const cz_json *root, const char *path, cz_model_config *c,
                           cz_error *err) {
    int tie = bool_field(root, path, "tie_word_embeddings", err);
    if (tie == -2) return -1;
    if (tie == 0 && c->arch == CZ_ARCH_BERT)
        return cz_fail(err,
                       "%s: tie_word_embeddings = false: cloze's BERT ties its MLM decoder to "
                       "the word embedding (an untied LM head is GPT's, model.lm_head)",
                       path);
    c->untied_head = tie == 0;
    if (c->arch == CZ_ARCH_GPT && c->layout == CZ_LAYOUT_PRE_LN) {
        int scale = bool_field(root, path, "scale_attn_weights", err);
        int inv = bool_field(root, path, "scale_attn_by_inverse_layer_idx", err);
        if (scale == -2 || inv == -2) return -1;
        if (scale == 0)
            return cz_fail(err,
                           "%s: scale_attn_weights = false: cloze's attention always divides "
                           "Q K^T by sqrt(head size)",
                           path);
        if (inv == 1)
            return cz_fail(err,
                           "%s: scale_attn_by_inverse_layer_idx = true: cloze's attention does "
                           "not divide layer l's scores by l + 1",
                           path);
    }
    if (c->arch == CZ_ARCH_BERT) {
        int dec = bool_field(root, path, "is_decoder", err);
        int cross = bool_field(root, path, "add_cross_attention", err);
        if (dec == -2 || cross == -2) return -1;
        if (dec == 1)
            return cz_fail(err, "%s: is_decoder = true: cloze's BERT is the bidirectional encoder",
                           path);
        if (cross == 1)
            return cz_fail(err, "%s: add_cross_attention = true: cloze has no cross-attention",
                           path);
    } else {
        int cross = bool_field(root, path, "add_cross_attention", err);
        if (cross == -2) return -1;
        if (cross == 1)
            return cz_fail(err, "%s: add_cross_attention = true: cloze has no cross-attention",
                           path);
    }
    return 0;
}

/* config.json's field for a key of the model section (cz_model_config_check
 * blames keys; the user wrote fields). */
const char *cz_hf_config_field(const cz_model_config *c, const char *key) {
    static const char *const bert[][2] = {{"vocab_size", "vocab_size"},
                                          {"hidden", "hidden_size"},
                                          {"layers", "num_hidden_layers"},
                                          {"heads", "num_attention_heads"},
                                          {"intermediate", "intermediate_size"},
                                          {"max_positions", "max_position_embeddings"},
                                          {"type_vocab_size", "type_vocab_size"},
                                          {"hidden_dropout", "hidden_dropout_prob"},
                                          {"attn_dropout", "attention_probs_dropout_prob"},
                                          {"arch", "model_type"}};
    static const char *const gpt[][2] = {{"arch", "model_type"},
                                         {"vocab_size", "vocab_size"},
                                         {"hidden", "n_embd"},
                                         {"layers", "n_layer"},
                                         {"heads", "n_head"},
                                         {"intermediate", "n_inner"},
                                         {"max_positions", "n_positions"},
                                         {"hidden_dropout", "resid_pdrop"},
                                         {"attn_dropout", "attn_pdrop"},
                                         {"layout", "model_type"},
                                         {"lm_head", "tie_word_embeddings"}};
    int bert_arch = c->arch == CZ_ARCH_BERT;
    int n = bert_arch ? (int)(sizeof bert / sizeof bert[0]) : (int)(sizeof gpt / sizeof gpt[0]);
    for (int i = 0; key && i < n; i++) {
        const char *const *row = bert_arch ? bert[i] : gpt[i];
        if (!strcmp(row[0], key)) return row[1];
    }
    return NULL;
}

int cz_hf_read_config(const char *dir, cz_model_config *c, char *architecture, size_t len,
                      cz_error *err) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    void *text;
    size_t n;
    if (cz_read_file(path, &text, &n, err)) return -1;
    cz_json *root = NULL;
    int rc = cz_json_parse(text, n, &root, err);
    cz_free(text);
    if (rc) return cz_fail_prefix(err, "%s", path);
    memset(c, 0, sizeof *c);
    rc = -1;
    const char *type = cz_json_get_string(root, "model_type");
    const cz_json *archs = cz_json_get(root, "architectures");
    if (architecture && len) {
        architecture[0] = 0;
        if (archs && archs->type == CZ_JSON_ARRAY && archs->child &&
            archs->child->type == CZ_JSON_STRING)
            snprintf(architecture, len, "%s", archs->child->string);
    }
    if (root->type != CZ_JSON_OBJECT) {
        cz_fail(err, "%s: not a JSON object", path);
    } else if (!type) {
        cz_fail(err, "%s: model_type missing", path);
    } else if (!strcmp(type, "bert")) {
        c->arch = CZ_ARCH_BERT;
        const char *act = cz_json_get_string(root, "hidden_act");
        const char *pos = cz_json_get_string(root, "position_embedding_type");
        if (int_field(root, path, "vocab_size", -1, &c->vocab_size, err) ||
            int_field(root, path, "hidden_size", -1, &c->hidden, err) ||
            int_field(root, path, "num_hidden_layers", -1, &c->layers, err) ||
            int_field(root, path, "num_attention_heads", -1, &c->heads, err) ||
            int_field(root, path, "intermediate_size", -1, &c->intermediate, err) ||
            int_field(root, path, "max_position_embeddings", 512, &c->max_positions, err) ||
            int_field(root, path, "type_vocab_size", 2, &c->type_vocab_size, err) ||
            float_field(root, path, "layer_norm_eps", 1e-12f, &c->layer_norm_eps, err) ||
            float_field(root, path, "hidden_dropout_prob", 0.1f, &c->hidden_dropout, err) ||
            float_field(root, path, "attention_probs_dropout_prob", 0.1f, &c->attn_dropout, err) ||
            float_field(root, path, "initializer_range", 0.02f, &c->init_range, err)) {
        } else if (act && strcmp(act, "gelu") && strcmp(act, "gelu_new") &&
                   strcmp(act, "gelu_pytorch_tanh")) {
            cz_fail(err, "%s: hidden_act \"%s\": cloze has gelu (erf) and gelu_new (tanh)", path,
                    act);
        } else if (pos && strcmp(pos, "absolute")) {
            cz_fail(err, "%s: position_embedding_type \"%s\": cloze has absolute positions", path,
                    pos);
        } else {
            c->gelu_tanh = act && strcmp(act, "gelu") != 0;
            rc = 0;
        }
    } else if (!strcmp(type, "openai-gpt")) {
        c->arch = CZ_ARCH_GPT;
        const char *afn = cz_json_get_string(root, "afn");
        if (int_field(root, path, "vocab_size", -1, &c->vocab_size, err) ||
            int_field(root, path, "n_embd", -1, &c->hidden, err) ||
            int_field(root, path, "n_layer", -1, &c->layers, err) ||
            int_field(root, path, "n_head", -1, &c->heads, err) ||
            int_field(root, path, "n_positions", 512, &c->max_positions, err) ||
            float_field(root, path, "layer_norm_epsilon", 1e-5f, &c->layer_norm_eps, err) ||
            float_field(root, path, "resid_pdrop", 0.1f, &c->hidden_dropout, err) ||
            float_field(root, path, "attn_pdrop", 0.1f, &c->attn_dropout, err) ||
            float_field(root, path, "initializer_range", 0.02f, &c->init_range, err)) {
        } else if (afn && strcmp(afn, "gelu")) {
            cz_fail(err, "%s: afn \"%s\": cloze's GPT has gelu (tanh form)", path, afn);
        } else {
            c->intermediate = 4 * c->hidden; /* OpenAIGPTConfig has no inner size: 4H */
            c->gelu_tanh = 1;
            rc = 0;
        }
    } else if (!strcmp(type, "gpt2")) {
        /* GPT2Config: the pre-LN decoder (model.layout = pre_ln); n_inner null = 4 n_embd */
        c->arch = CZ_ARCH_GPT;
        c->layout = CZ_LAYOUT_PRE_LN;
        const char *act = cz_json_get_string(root, "activation_function");
        const cz_json *inner = cz_json_get(root, "n_inner");
        if (int_field(root, path, "vocab_size", -1, &c->vocab_size, err) ||
            int_field(root, path, "n_embd", -1, &c->hidden, err) ||
            int_field(root, path, "n_layer", -1, &c->layers, err) ||
            int_field(root, path, "n_head", -1, &c->heads, err) ||
            int_field(root, path, "n_positions", 1024, &c->max_positions, err) ||
            (inner && inner->type != CZ_JSON_NULL &&
             int_field(root, path, "n_inner", -1, &c->intermediate, err)) ||
            float_field(root, path, "layer_norm_epsilon", 1e-5f, &c->layer_norm_eps, err) ||
            float_field(root, path, "resid_pdrop", 0.1f, &c->hidden_dropout, err) ||
            float_field(root, path, "attn_pdrop", 0.1f, &c->attn_dropout, err) ||
            float_field(root, path, "initializer_range", 0.02f, &c->init_range, err)) {
        } else if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
            cz_fail(err, "%s: activation_function \"%s\": cloze's GPT-2 has gelu_new (tanh form)",
                    path, act);
        } else {
            if (!inner || inner->type == CZ_JSON_NULL) c->intermediate = 4 * c->hidden;
            c->gelu_tanh = 1;
            rc = 0;
        }
    } else {
        cz_fail(err, "%s: model_type \"%s\": cloze reads bert, openai-gpt and gpt2", path, type);
    }
    if (rc == 0) rc = function_fields(root, path, c, err);
    cz_json_free(root);
    const char *key = NULL;
    cz_error why;
    if (rc == 0 && cz_model_config_check(c, &key, &why) != 0) {
        const char *field = cz_hf_config_field(c, key);
        if (field)
            rc = cz_fail(err, "%s: %s: %s", path, field, why.msg);
        else
            rc = cz_fail(err, "%s: %s", path, why.msg);
    }
    return rc;
}

/* ---- the weights file against config.json, before any allocation ---- */

/* A tensor of the file under the model's name or without its task model's
 * prefix ("bert." / "transformer."); -1 when neither. */
static int find_either(const cz_st_file *f, const char *name) {
    int k = cz_safetensors_find(f, name);
    const char *dot = strchr(name, '.');
    if (k < 0 && (starts_with(name, "bert.") || starts_with(name, "transformer.")))
        k = cz_safetensors_find(f, dot + 1);
    return k;
}

/* Tensor `name` must be in the file with shape [d0, d1] (d1 < 0: 1-D), the
 * config.json fields f0 and f1 saying d0 and d1. */
static int expect_shape(const cz_st_file *f, const char *cfg_path, const char *name, int d0,
                        const char *f0, int d1, const char *f1, cz_error *err) {
    int k = find_either(f, name);
    if (k < 0)
        return cz_fail(err,
                       "%s: tensor %s missing (config.json %s does not describe these weights)",
                       f->path, name, cfg_path);
    const cz_st_entry *e = &f->entries[k];
    int nd = d1 < 0 ? 1 : 2;
    if (e->ndim != nd)
        return cz_fail(err, "%s: tensor %s has %d dimension(s), expected %d", f->path, e->name,
                       e->ndim, nd);
    if (e->shape[0] != (uint64_t)d0)
        return cz_fail(err, "%s: %s = %d, but %s's %s has %llu rows", cfg_path, f0, d0, f->path,
                       e->name, (unsigned long long)e->shape[0]);
    if (nd == 2 && e->shape[1] != (uint64_t)d1)
        return cz_fail(err, "%s: %s = %d, but %s's %s has %llu columns", cfg_path, f1, d1, f->path,
                       e->name, (unsigned long long)e->shape[1]);
    return 0;
}

int cz_hf_check_weights(const char *dir, const cz_model_config *c, cz_error *err) {
    char path[1100], cfg[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    struct stat st;
    if (stat(path, &st) != 0) return cz_hf_load_missing(dir, path, err);
    cz_st_file f;
    if (cz_safetensors_open_header(&f, path, err)) return -1;
    int bert = c->arch == CZ_ARCH_BERT, pre = c->layout == CZ_LAYOUT_PRE_LN;
    const char *fv = "vocab_size", *fh = bert ? "hidden_size" : "n_embd",
               *fl = bert ? "num_hidden_layers" : "n_layer",
               *fp = bert ? "max_position_embeddings" : "n_positions",
               *fi = bert  ? "intermediate_size"
                     : pre ? "n_inner"
                           : "n_embd";
    int H = c->hidden, rc = 0;
    /* each layer has at least two tensors checked below: a layer count the
     * file cannot hold is refused before it is looped over */
    if (c->layers > f.n / 2) {
        rc = cz_fail(err, "%s: %s = %d, but %s holds %d tensors (too few for %d layers)", cfg, fl,
                     c->layers, path, f.n, c->layers);
        goto done;
    }
    if (bert) {
        rc = expect_shape(&f, cfg, "bert.embeddings.word_embeddings.weight", c->vocab_size, fv, H,
                          fh, err) ||
             expect_shape(&f, cfg, "bert.embeddings.position_embeddings.weight", c->max_positions,
                          fp, H, fh, err) ||
             expect_shape(&f, cfg, "bert.embeddings.token_type_embeddings.weight",
                          c->type_vocab_size, "type_vocab_size", H, fh, err);
    } else {
        rc = expect_shape(&f, cfg,
                          pre ? "transformer.wte.weight" : "transformer.tokens_embed.weight",
                          c->vocab_size, fv, H, fh, err) ||
             expect_shape(&f, cfg,
                          pre ? "transformer.wpe.weight" : "transformer.positions_embed.weight",
                          c->max_positions, fp, H, fh, err);
        if (rc == 0 && c->untied_head && cz_safetensors_find(&f, "lm_head.weight") >= 0)
            rc = expect_shape(&f, cfg, "lm_head.weight", c->vocab_size, fv, H, fh, err);
    }
    char a[128], b[128];
    int l = 0;
    for (; l < c->layers && rc == 0; l++) {
        if (bert) {
            snprintf(a, sizeof a, "bert.encoder.layer.%d.attention.self.query.weight", l);
            snprintf(b, sizeof b, "bert.encoder.layer.%d.intermediate.dense.weight", l);
            if (find_either(&f, a) < 0) break;
            rc = expect_shape(&f, cfg, a, H, fh, H, fh, err) ||
                 expect_shape(&f, cfg, b, c->intermediate, fi, H, fh, err);
        } else { /* Conv1D: [in, out] */
            snprintf(a, sizeof a, "transformer.h.%d.attn.c_attn.weight", l);
            snprintf(b, sizeof b, "transformer.h.%d.mlp.c_fc.weight", l);
            if (find_either(&f, a) < 0) break;
            rc = expect_shape(&f, cfg, a, H, fh, 3 * H, fh, err) ||
                 expect_shape(&f, cfg, b, H, fh, c->intermediate, fi, err);
        }
    }
    if (rc == 0 && l < c->layers)
        rc = cz_fail(err, "%s: %s = %d, but %s has no layer %d (no tensor %s)", cfg, fl, c->layers,
                     path, l, a);
done:
    cz_safetensors_close(&f);
    return rc ? -1 : 0;
}

/* ---- weights in ---- */

/* Head tensors may be missing from a file (BertModel has no MLM/NSP heads,
 * a pre-trained file no task head): everything outside the encoder's
 * "bert." / "transformer." names, and BERT's pooler. */
static int is_head(const char *name) {
    return starts_with(name, "bert.pooler.") ||
           (!starts_with(name, "bert.") && !starts_with(name, "transformer."));
}

/* File tensors with no place in the model that are not an error: tied
 * copies of the word embedding, integer buffers, heads of other tasks. */
static int ignorable(const char *name, int untied) {
    if (untied && !strcmp(name, "lm_head.weight")) return 0; /* the model's own (loaded) */
    /* GPT-2's causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias) in older files */
    return ends_with(name, "position_ids") || ends_with(name, ".attn.bias") ||
           ends_with(name, ".attn.masked_bias") ||
           !strcmp(name, "cls.predictions.decoder.weight") ||
           !strcmp(name, "cls.predictions.decoder.bias") || !strcmp(name, "lm_head.weight") ||
           starts_with(name, "cls.") || starts_with(name, "classifier.") ||
           starts_with(name, "qa_outputs.") || starts_with(name, "score.") ||
           starts_with(name, "multiple_choice_head.") || starts_with(name, "pooler.") ||
           starts_with(name, "bert.pooler.");
}

/* The file's name for the model's tensor: the same, or without the task
 * model's prefix (BertModel / OpenAIGPTModel), or HF's alternative for the
 * MLM output bias. */
static int find_in_file(const cz_st_file *f, const char *name, int *unprefixed) {
    int k = cz_safetensors_find(f, name);
    if (k >= 0) return k;
    const char *prefixes[2] = {"bert.", "transformer."};
    for (int p = 0; p < 2; p++)
        if (starts_with(name, prefixes[p])) {
            k = cz_safetensors_find(f, name + strlen(prefixes[p]));
            if (k >= 0) *unprefixed = 1;
            return k;
        }
    if (!strcmp(name, "cls.predictions.bias"))
        return cz_safetensors_find(f, "cls.predictions.decoder.bias");
    return -1;
}

/* The word embedding (and an untied LM head) as Hugging Face has it:
 * vocab_size rows, without the padding rows of model.vocab_pad_to (which
 * follow them in the buffer and stay 0). Other tensors as they are. */
static const cz_tensor_info *real_rows(const cz_model *m, const cz_tensor_info *t,
                                       cz_tensor_info *buf) {
    const cz_model_config *c = cz_model_get_config(m);
    int word_rows =
        t->offset == 0 || !strcmp(t->name, "lm_head.weight"); /* untied head: padded too */
    if (!word_rows || t->ndim != 2 || t->shape[0] == c->vocab_size) return t;
    *buf = *t;
    buf->shape[0] = c->vocab_size;
    buf->numel = (size_t)c->vocab_size * (size_t)t->shape[1];
    return buf;
}

int cz_hf_load_missing(const char *dir, const char *path, cz_error *err) {
    int e = errno;
    char bin[1100];
    struct stat st;
    snprintf(bin, sizeof bin, "%s/pytorch_model.bin", dir);
    if (stat(bin, &st) == 0)
        return cz_fail(err,
                       "%s: only pytorch_model.bin here; cloze reads model.safetensors "
                       "(convert it with transformers: model.save_pretrained(dir, "
                       "safe_serialization=True))",
                       dir);
    return cz_fail(err, "%s: %s", path, strerror(e));
}

/* The first non-finite value of a loaded tensor: a NaN or an infinity in
 * the weights makes every loss non-finite from the first step, and the
 * run would blame its learning rate or its data. */
static int check_finite(const char *path, const cz_tensor_info *t, const float *base,
                        cz_error *err) {
    const float *w = base + t->offset;
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(w[i]))
            return cz_fail(err, "%s: tensor %s: element %zu is %s", path, t->name, i,
                           isnan(w[i]) ? "NaN" : "infinite");
    return 0;
}

int cz_hf_load(cz_model *m, const char *dir, cz_hf_load_report *rep, cz_error *err) {
    memset(rep, 0, sizeof *rep);
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat st;
    if (stat(path, &st) != 0) return cz_hf_load_missing(dir, path, err);
    cz_st_file f;
    if (cz_safetensors_open(&f, path, err)) return -1;
    char *used = calloc((size_t)f.n + 1, 1);
    int rc = used ? 0 : cz_fail(err, "%s: out of memory", path);
    int nt = cz_model_num_tensors(m);
    for (int i = 0; i < nt && rc == 0; i++) {
        const cz_tensor_info *t = cz_model_tensor(m, i);
        int k = find_in_file(&f, t->name, &rep->unprefixed);
        if (k < 0) {
            if (!is_head(t->name)) {
                rc = cz_fail(err, "%s: tensor %s missing (nor %s without its prefix)", path,
                             t->name, strchr(t->name, '.') + 1);
                break;
            }
            size_t l = strlen(rep->fresh_list);
            if (l + strlen(t->name) + 8 < sizeof rep->fresh_list)
                snprintf(rep->fresh_list + l, sizeof rep->fresh_list - l, "%s%s", l ? ", " : "",
                         t->name);
            else if (!ends_with(rep->fresh_list, "..."))
                snprintf(rep->fresh_list + l, sizeof rep->fresh_list - l, ", ...");
            rep->fresh++;
            continue;
        }
        cz_tensor_info real;
        const cz_tensor_info *r = real_rows(m, t, &real);
        rc = cz_safetensors_load(&f, k, r, cz_model_params(m), err);
        if (rc == 0) rc = check_finite(path, r, cz_model_params(m), err);
        used[k] = 1;
        rep->loaded++;
    }
    for (int k = 0; k < f.n && rc == 0; k++) {
        if (used[k]) continue;
        const char *name = f.entries[k].name;
        if (ignorable(name, cz_model_get_config(m)->untied_head)) {
            rep->ignored++;
            continue;
        }
        rc = cz_fail(err,
                     "%s: tensor %s has no place in cloze's %s model (another architecture or "
                     "config.json does not match the weights)",
                     path, name, cz_model_get_config(m)->arch == CZ_ARCH_BERT ? "BERT" : "GPT");
    }
    free(used);
    cz_safetensors_close(&f);
    return rc;
}

/* ---- vocabulary ---- */

void cz_hf_vocab_free(cz_hf_vocab *v) {
    for (int i = 0; i < 2; i++) cz_free(v->owned[i]);
    memset(v, 0, sizeof *v);
}

/* Uncased BERT vocabularies have no capital letters but in [CLS]-style
 * special tokens; cased ones have thousands. */
static int guess_lower_case(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && s[e] != '\n') e++;
        int special = e > i && s[i] == '[' && s[e - 1 - (s[e - 1] == '\r')] == ']';
        for (size_t k = i; k < e && !special; k++)
            if (s[k] >= 'A' && s[k] <= 'Z') return 0;
        i = e + 1;
    }
    return 1;
}

int cz_hf_vocab_read(cz_hf_vocab *v, const char *kind, const char *vocab_path,
                     const char *merges_path, int lower_case, cz_error *err) {
    memset(v, 0, sizeof *v);
    int bpe = !strcmp(kind, "bpe");
    if (!bpe && strcmp(kind, "wordpiece"))
        return cz_fail(err, "vocabulary kind \"%s\": wordpiece or bpe", kind);
    if (bpe && !merges_path)
        return cz_fail(err, "%s: a BPE vocabulary needs its merges", vocab_path);
    snprintf(v->kind, sizeof v->kind, "%s", kind);
    snprintf(v->source, sizeof v->source, "%s", vocab_path);
    void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (cz_read_file(vocab_path, &a, &na, err)) return -1;
    if (bpe && cz_read_file(merges_path, &b, &nb, err)) {
        cz_free(a);
        return -1;
    }
    v->vocab = v->owned[0] = a;
    v->vocab_len = na;
    v->merges = v->owned[1] = b;
    v->merges_len = nb;
    v->lower_case = bpe ? 0 : lower_case >= 0 ? lower_case : guess_lower_case(a, na);
    return 0;
}

int cz_hf_vocab_read_dir(cz_hf_vocab *v, const char *dir, cz_error *err) {
    char a[1100], b[1100];
    struct stat st;
    snprintf(a, sizeof a, "%s/vocab.txt", dir);
    if (stat(a, &st) == 0) {
        int lower = -1;
        snprintf(b, sizeof b, "%s/tokenizer_config.json", dir);
        void *text;
        size_t n;
        cz_error ignore;
        if (stat(b, &st) == 0 && cz_read_file(b, &text, &n, &ignore) == 0) {
            cz_json *root = NULL;
            if (cz_json_parse(text, n, &root, &ignore) == 0) {
                const cz_json *dl = cz_json_get(root, "do_lower_case");
                if (dl && dl->type == CZ_JSON_BOOL) lower = dl->boolean;
            }
            cz_json_free(root);
            cz_free(text);
        }
        return cz_hf_vocab_read(v, "wordpiece", a, NULL, lower, err) ? -1 : 1;
    }
    snprintf(a, sizeof a, "%s/vocab.json", dir);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    if (stat(a, &st) == 0 && stat(b, &st) == 0)
        return cz_hf_vocab_read(v, "bpe", a, b, 0, err) ? -1 : 1;
    memset(v, 0, sizeof *v);
    return 0;
}

int cz_hf_vocab_identity(const cz_hf_vocab *v, uint32_t *size, uint64_t *fingerprint,
                         cz_error *err) {
    *fingerprint = cz_vocab_fingerprint(v->vocab, v->vocab_len, NULL, 0);
    if (!strcmp(v->kind, "wordpiece")) {
        const char *s = v->vocab;
        size_t len = v->vocab_len;
        uint32_t lines = 0;
        for (size_t i = 0; i < len; i++) lines += s[i] == '\n';
        *size = lines + (len > 0 && s[len - 1] != '\n'); /* the last line needs no newline */
        return 0;
    }
    cz_json *root = NULL;
    if (cz_json_parse(v->vocab, v->vocab_len, &root, err))
        return cz_fail_prefix(err, "%s", v->source);
    int rc = 0;
    if (root->type != CZ_JSON_OBJECT)
        rc = cz_fail(err, "%s: not a JSON object of token ids", v->source);
    else
        *size = (uint32_t)root->count;
    cz_json_free(root);
    *fingerprint = cz_vocab_fingerprint(v->vocab, v->vocab_len, v->merges, v->merges_len);
    return rc;
}

int cz_hf_vocab_blobs(const cz_hf_vocab *v, char *meta, size_t meta_cap, cz_blob blobs[3]) {
    snprintf(meta, meta_cap, "kind %s\nlower_case %d\nsource %s\n", v->kind, v->lower_case,
             v->source);
    blobs[0] = (cz_blob){CZ_BLOB_VOCAB_META, meta, strlen(meta)};
    blobs[1] = (cz_blob){CZ_BLOB_VOCAB_FILE, v->vocab, v->vocab_len};
    if (strcmp(v->kind, "bpe")) return 2;
    blobs[2] = (cz_blob){CZ_BLOB_VOCAB_MERGES, v->merges, v->merges_len};
    return 3;
}

int cz_hf_vocab_from_ckpt(cz_hf_vocab *v, const cz_ckpt *c, cz_error *err) {
    memset(v, 0, sizeof *v);
    size_t n = 0;
    const char *meta = cz_ckpt_get(c, CZ_BLOB_VOCAB_META, &n);
    if (!meta) return 0;
    char text[1200];
    snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text - 1 ? n : sizeof text - 1), meta);
    char *src = strstr(text, "source ");
    if (sscanf(text, "kind %15s lower_case %d", v->kind, &v->lower_case) != 2)
        return cz_fail(err, "vocab.meta: expected \"kind K\\nlower_case 0|1\"");
    if (src) {
        src += 7;
        src[strcspn(src, "\n")] = 0;
        snprintf(v->source, sizeof v->source, "%s", src);
    }
    v->vocab = cz_ckpt_get(c, CZ_BLOB_VOCAB_FILE, &v->vocab_len);
    v->merges = cz_ckpt_get(c, CZ_BLOB_VOCAB_MERGES, &v->merges_len);
    if (!v->vocab || (!strcmp(v->kind, "bpe") && !v->merges))
        return cz_fail(err, "vocab.meta says %s, but vocab.file%s is missing", v->kind,
                       strcmp(v->kind, "bpe") ? "" : " or vocab.merges");
    return 1;
}

/* tokenizer_config.json and special_tokens_map.json: the class that reads
 * these files (AutoTokenizer follows tokenizer_class), its casing, and the
 * special tokens by name. */
static int write_tokenizer_files(const cz_model_config *c, const cz_hf_vocab *v, const char *dir,
                                 cz_error *err) {
    char path[1100], text[1024];
    int bert = !strcmp(v->kind, "wordpiece");
    if (bert) {
        snprintf(path, sizeof path, "%s/vocab.txt", dir);
        if (cz_write_file_atomic(path, v->vocab, v->vocab_len, err)) return -1;
        snprintf(text, sizeof text,
                 "{\n  \"tokenizer_class\": \"BertTokenizer\",\n  \"do_lower_case\": %s,\n"
                 "  \"strip_accents\": null,\n  \"tokenize_chinese_chars\": true,\n"
                 "  \"model_max_length\": %d,\n  \"unk_token\": \"[UNK]\",\n"
                 "  \"sep_token\": \"[SEP]\",\n  \"pad_token\": \"[PAD]\",\n"
                 "  \"cls_token\": \"[CLS]\",\n  \"mask_token\": \"[MASK]\"\n}\n",
                 v->lower_case ? "true" : "false", c->max_positions);
    } else {
        snprintf(path, sizeof path, "%s/vocab.json", dir);
        if (cz_write_file_atomic(path, v->vocab, v->vocab_len, err)) return -1;
        snprintf(path, sizeof path, "%s/merges.txt", dir);
        if (cz_write_file_atomic(path, v->merges, v->merges_len, err)) return -1;
        snprintf(text, sizeof text,
                 "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"add_prefix_space\": false,\n"
                 "  \"model_max_length\": %d,\n  \"unk_token\": \"<|endoftext|>\",\n"
                 "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\"\n}\n",
                 c->max_positions);
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (cz_write_file_atomic(path, text, strlen(text), err)) return -1;
    const char *map = bert ? "{\"unk_token\": \"[UNK]\", \"sep_token\": \"[SEP]\", "
                             "\"pad_token\": \"[PAD]\", \"cls_token\": \"[CLS]\", "
                             "\"mask_token\": \"[MASK]\"}\n"
                           : "{\"unk_token\": \"<|endoftext|>\", \"bos_token\": \"<|endoftext|>\", "
                             "\"eos_token\": \"<|endoftext|>\"}\n";
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    return cz_write_file_atomic(path, map, strlen(map), err);
}

/* ---- the head of a fine-tuned checkpoint ---- */

void cz_hf_head_text(const cz_model_config *mc, char *buf, size_t cap) {
    snprintf(buf, cap, "head %d num_labels %d lm_weight %.9g vocab_size %d", mc->head,
             mc->num_labels, (double)mc->lm_weight, mc->vocab_size);
}

/* A buffer in the layout of before the tied word embedding went first
 * (files without the layout blob, run-state versions <= 2) into today's,
 * in place:
 *   before: [heads and layers: e][word embedding: vh][the other embeddings]
 *   now:    [word embedding: vh][heads and layers: e][the other embeddings]
 * The word embedding is tensor 0 at offset 0 today. */
static int relayout_v2(const cz_model *m, float *buf, cz_error *err) {
    size_t vh = cz_model_tensor(m, 0)->numel, e = cz_model_embeddings_begin(m) - vh;
    float *tmp = cz_alloc(vh * sizeof *tmp, err);
    if (!tmp) return -1;
    memcpy(tmp, buf + e, vh * sizeof *tmp);
    memmove(buf + vh, buf, e * sizeof *buf);
    memcpy(buf, tmp, vh * sizeof *tmp);
    cz_free(tmp);
    return 0;
}

int cz_ckpt_get_params(const cz_ckpt *c, const char *path, const char *name, const cz_model *m,
                       float *dst, cz_error *err) {
    if (cz_ckpt_get_exact(c, name, dst, cz_model_num_params(m) * sizeof(float), err) != 0)
        return -1;
    size_t len = 0;
    const char *layout = cz_ckpt_get(c, CZ_BLOB_LAYOUT, &len);
    if (!layout) return relayout_v2(m, dst, err);
    if (len != strlen(CZ_PARAMS_LAYOUT) || memcmp(layout, CZ_PARAMS_LAYOUT, len) != 0)
        return cz_fail(err, "%s: blob '%s': layout '%.*s' is not one this cloze reads ('%s')", path,
                       CZ_BLOB_LAYOUT, (int)(len < 64 ? len : 64), layout, CZ_PARAMS_LAYOUT);
    return 0;
}

int cz_hf_head_from_ckpt(const cz_ckpt *c, cz_model_config *mc) {
    size_t n = 0;
    const char *h = cz_ckpt_get(c, CZ_BLOB_FT_HEAD, &n);
    char text[256];
    if (!h || n >= sizeof text) return 0;
    memcpy(text, h, n);
    text[n] = 0;
    float lw = 0;
    int head = 0, labels = 0, vocab = 0;
    if (sscanf(text, "head %d num_labels %d lm_weight %f vocab_size %d", &head, &labels, &lw,
               &vocab) != 4)
        return 0;
    mc->head = head;
    mc->num_labels = labels;
    mc->lm_weight = lw;
    mc->vocab_size = vocab;
    return 1;
}

void cz_hf_task_text(const char *task, char (*labels)[CZ_HF_LABEL_LEN], int n, char *buf,
                     size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "task %s\nlabels", task);
    for (int i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, " %s", labels[i]);
}

int cz_hf_task_from_ckpt(const cz_ckpt *c, char *task, char (*labels)[CZ_HF_LABEL_LEN], int cap) {
    size_t n = 0;
    const char *blob = cz_ckpt_get(c, CZ_BLOB_FT_TASK, &n);
    char text[4096], *save = NULL;
    if (!blob || n >= sizeof text) return -1;
    memcpy(text, blob, n);
    text[n] = 0;
    char *l = strstr(text, "\nlabels");
    if (!l || sscanf(text, "task %31s", task) != 1) return -1;
    int k = 0;
    for (char *w = strtok_r(l + 7, " \n", &save); w && k < cap; w = strtok_r(NULL, " \n", &save))
        snprintf(labels[k++], CZ_HF_LABEL_LEN, "%s", w);
    return k;
}

/* ---- export ---- */

int cz_hf_export(cz_model *m, const cz_hf_vocab *v, const char *dir, cz_error *err) {
    const cz_model_config *c = cz_model_get_config(m);
    if (c->layout == CZ_LAYOUT_PRE_LN && !c->gelu_tanh)
        return cz_fail(err, "Hugging Face's GPT-2 has the tanh GELU (gelu_new); this model has "
                            "model.gelu = erf");
    if (c->arch == CZ_ARCH_GPT && c->layout != CZ_LAYOUT_PRE_LN &&
        (!c->gelu_tanh || c->intermediate != 4 * c->hidden))
        return cz_fail(err,
                       "Hugging Face's OpenAIGPT has the tanh GELU and an FFN of 4 x n_embd; this "
                       "model has gelu %s and intermediate %d",
                       c->gelu_tanh ? "tanh" : "erf", c->intermediate);
    /* µP away from its base width computes h W^T / w and q.k sqrt(d0)/d,
     * which transformers' BertForPreTraining and GPT2LMHeadModel cannot say */
    if (c->parametrization == CZ_PARAM_MUP && cz_model_width_mult(c) != 1.0)
        return cz_fail(err,
                       "model.parametrization = mup: outside cloze this model needs its logits "
                       "multiplied by %g (mup's MuReadout, base %d / hidden %d) and attention "
                       "logits scaled by %g instead of 1/sqrt(d_head), which Hugging Face's "
                       "models do not do; export a standard-parametrization model",
                       cz_model_output_mult(m), c->mup_base_width, c->hidden,
                       (double)cz_model_attn_scale(c));
    if (c->arch == CZ_ARCH_GPT && c->head != CZ_HEAD_PRETRAIN)
        return cz_fail(err, "a fine-tuned GPT has three tokens added to its vocabulary (GPT-1 "
                            "Sec. 3.3), which export-hf does not write: export its pre-trained "
                            "checkpoint");
    if (v) {
        uint32_t size;
        uint64_t fp;
        if (cz_hf_vocab_identity(v, &size, &fp, err)) return -1;
        if ((int)size != c->vocab_size)
            return cz_fail(err, "%s: %u tokens, but the model's vocab_size is %d", v->source, size,
                           c->vocab_size);
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return cz_fail(err, "%s: cannot create directory: %s", dir, strerror(errno));
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int nt = cz_model_num_tensors(m);
    cz_tensor_info *t = cz_alloc((size_t)nt * sizeof *t, err);
    if (!t) return -1;
    for (int i = 0; i < nt; i++) /* the word embedding without its padding rows */
        t[i] = *real_rows(m, cz_model_tensor(m, i), &t[i]);
    const char *meta[] = {"format", "pt", "producer", "cloze"};
    int rc = cz_safetensors_write(path, t, nt, cz_model_params(m), meta, 2, err);
    cz_free(t);
    if (rc) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (cz_hf_config_write(path, c, err)) return -1;
    return v ? write_tokenizer_files(c, v, dir, err) : 0;
}
