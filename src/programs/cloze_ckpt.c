/* cloze-ckpt: look into checkpoint files, and move models to and from
 * Hugging Face directories.
 *   cloze-ckpt info FILE     blobs, sizes, step (when a "step" blob exists)
 *   cloze-ckpt verify FILE   full decompression + checksums; exit 0 ok, 1 bad
 *   cloze-ckpt dump-blob FILE NAME   one blob's raw bytes on stdout
 *   cloze-ckpt export-hf CKPT DIR    model.safetensors, config.json, tokenizer
 *   cloze-ckpt import-hf DIR OUT     a checkpoint to start training from */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cloze/ckpt.h"
#include "cloze/config.h"
#include "cloze/hf.h"
#include "cloze/json.h"
#include "cloze/safetensors.h"
#include "cloze/sha256.h"
#include "cloze/shard.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: cloze-ckpt info FILE     list blobs, sizes and the step\n"
        "       cloze-ckpt verify FILE   check every checksum (exit 0 = good, 1 = bad)\n"
        "       cloze-ckpt dump-blob FILE NAME   write one blob's raw bytes to stdout\n"
        "                                        (params: the flat fp32 parameter buffer)\n"
        "       cloze-ckpt export-hf CKPT DIR [--vocab FILE [--merges FILE]] [--cased|--uncased]\n"
        "                 write DIR/model.safetensors, config.json and the tokenizer files\n"
        "                 (vocab.txt, or vocab.json + merges.txt; tokenizer_config.json,\n"
        "                 special_tokens_map.json) so that transformers' AutoModelFor*\n"
        "                 and AutoTokenizer load DIR: BertForPreTraining,\n"
        "                 OpenAIGPTLMHeadModel or GPT2LMHeadModel (model.layout = pre_ln;\n"
        "                 the word embedding without its padding rows), or for a\n"
        "                 cloze-finetune checkpoint\n"
        "                 BertFor{SequenceClassification,QuestionAnswering,TokenClassification}\n"
        "                 or OpenAIGPTForSequenceClassification\n"
        "       cloze-ckpt import-hf DIR OUT.lz4 [--seed N]\n"
        "                 read a BertForPreTraining, BertModel, OpenAIGPTLMHeadModel,\n"
        "                 OpenAIGPTModel, GPT2LMHeadModel or GPT2Model directory\n"
        "                 (config.json + model.safetensors) into a\n"
        "                 checkpoint for model.init_from (cloze-train) or --init\n"
        "                 (cloze-finetune); heads the files lack start fresh (seed N,\n"
        "                 12345), listed in one line\n"
        "       cloze-ckpt --help\n"
        "FILE / CKPT: a ckpt-<step>.lz4 of cloze-train or cloze-finetune, or import-hf's\n"
        "output (an LZ4 frame: `lz4 -d` opens it). export-hf takes the vocabulary the\n"
        "checkpoint carries, else the files its training manifest records (checked by\n"
        "SHA-256 and the shards' fingerprint), else --vocab. Casing: the checkpoint's,\n"
        "else guessed from vocab.txt; --cased / --uncased force it.\n");
}

/* An argument error: one line naming the command and the argument, exit 2. */
static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cloze-ckpt%s%s: %s (see cloze-ckpt --help)\n", cmd ? " " : "", cmd ? cmd : "",
            msg);
    return 2;
}

/* argv[i], which no option of cmd took: an option of cmd that takes a
 * value and came last is missing it; anything else is unknown. */
static int bad_option(const char *cmd, const char *const *with_value, int argc, char **argv,
                      int i) {
    for (int k = 0; with_value[k] && i + 1 >= argc; k++)
        if (!strcmp(argv[i], with_value[k])) return usage_error(cmd, "%s: needs a value", argv[i]);
    if (argv[i][0] == '-') return usage_error(cmd, "unknown option '%s'", argv[i]);
    return usage_error(cmd, "unexpected argument '%s'", argv[i]);
}

typedef struct info_ctx {
    int count;
    unsigned long long total;
    long long step;
    int has_step;
} info_ctx;

static void on_blob(void *p, const char *name, size_t size, const void *data) {
    info_ctx *c = p;
    printf("  %-40s %14zu bytes\n", name, size);
    c->count++;
    c->total += size;
    /* the train loop stores "step" as a little-endian int64 (or int32) */
    if (data && strcmp(name, CZ_BLOB_STEP) == 0 && (size == 8 || size == 4)) {
        const unsigned char *b = data;
        unsigned long long v = 0;
        for (size_t i = 0; i < size; i++) v |= (unsigned long long)b[i] << (8 * i);
        c->step = size == 8 ? (long long)v : (long long)(int)(unsigned)v;
        c->has_step = 1;
    }
}

static int dump_blob(const char *path, const char *name) {
    cz_error err;
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(path, &c, &err) != 0) {
        fprintf(stderr, "cloze-ckpt: error: %s\n", err.msg);
        return 1;
    }
    size_t size = 0;
    const void *data = cz_ckpt_get(c, name, &size);
    int rc = 0;
    if (!data) {
        fprintf(stderr, "cloze-ckpt: error: %s: no blob named '%s' (cloze-ckpt info lists them)\n",
                path, name);
        rc = 1;
    } else if (fwrite(data, 1, size, stdout) != size || fflush(stdout) != 0) {
        fprintf(stderr, "cloze-ckpt: error: writing blob '%s' of %s to stdout: %s\n", name, path,
                strerror(errno));
        rc = 1;
    }
    cz_ckpt_free(c);
    return rc;
}

/* ---- export-hf ---- */

/* The model of a checkpoint: its configuration and parameters. */
static int model_of_ckpt(const char *path, const cz_ckpt *c, cz_config *cfg, cz_model **m,
                         cz_error *err) {
    size_t n = 0;
    const char *text = cz_ckpt_get(c, CZ_BLOB_CONFIG, &n);
    if (!text) return cz_fail(err, "%s: no config blob (not written by cloze?)", path);
    char *t = strndup(text, n);
    if (!t) return cz_fail(err, "out of memory");
    int rc = cz_config_from_string(cfg, t, path, err);
    free(t);
    if (rc) return -1;
    cz_hf_head_from_ckpt(c, &cfg->model); /* a cloze-finetune checkpoint: its task head */
    if (cz_model_create(m, &cfg->model, 1, 1, 1, NULL, err)) return cz_fail_prefix(err, "%s", path);
    if (cz_ckpt_get_params(c, path, CZ_BLOB_PARAMS, *m, cz_model_params(*m), err)) return -1;
    return 0;
}

/* The vocabulary of the training manifest the checkpoint's config names:
 * the files the manifest records (their SHA-256 checked), or for manifests
 * older than those records the path of its vocab line (BPE merges beside
 * encoder.json, cloze-prep's old convention); either way the FNV
 * fingerprint every shard holds is checked too. */
static int vocab_of_manifest(const cz_config *cfg, int lower, cz_hf_vocab *v, cz_error *err) {
    const char *mpath = cfg->data.train_manifest;
    if (!mpath[0]) return 0;
    cz_manifest man;
    if (cz_manifest_load(&man, mpath, err)) return -1;
    int bpe = !strcmp(man.vocab_kind, "bpe");
    const cz_manifest_file *vf = &man.vocab_files[CZ_VOCAB_FILE_VOCAB],
                           *mf = &man.vocab_files[CZ_VOCAB_FILE_MERGES];
    char vocab[CZ_PATH_MAX + 16], merges[CZ_PATH_MAX + 16];
    snprintf(vocab, sizeof vocab, "%s", vf->path[0] ? vf->path : man.vocab_path);
    if (bpe && mf->path[0]) {
        snprintf(merges, sizeof merges, "%s", mf->path);
    } else if (bpe) {
        snprintf(merges, sizeof merges, "%s", vocab);
        char *slash = strrchr(merges, '/');
        snprintf(slash ? slash + 1 : merges,
                 sizeof merges - (size_t)(slash ? slash + 1 - merges : 0), "vocab.bpe");
    }
    int rc = 0;
    const cz_manifest_file *files[2] = {vf, bpe ? mf : NULL};
    for (int i = 0; i < 2 && rc == 0; i++) {
        char hex[65];
        if (!files[i] || !files[i]->sha256[0]) continue;
        if (cz_sha256_file(files[i]->path, hex, err))
            rc = -1;
        else if (strcmp(hex, files[i]->sha256))
            rc = cz_fail(err,
                         "%s: SHA-256 %s, but %s was made with %s: the vocabulary changed since; "
                         "give the one used with --vocab",
                         files[i]->path, hex, mpath, files[i]->sha256);
    }
    if (rc == 0) rc = cz_hf_vocab_read(v, man.vocab_kind, vocab, bpe ? merges : NULL, lower, err);
    uint32_t size;
    uint64_t fp;
    if (rc == 0 && cz_hf_vocab_identity(v, &size, &fp, err) == 0 && fp != man.vocab_fingerprint)
        rc = cz_fail(err,
                     "%s: fingerprint %016llx, but %s was made with %016llx: the vocabulary "
                     "changed since; give the one used with --vocab",
                     vocab, (unsigned long long)fp, mpath,
                     (unsigned long long)man.vocab_fingerprint);
    cz_manifest_free(&man);
    if (rc) {
        if (v->owned[0] || v->owned[1]) cz_hf_vocab_free(v);
        return -1;
    }
    return 1;
}

/* A cloze-finetune checkpoint names its classes ("finetune.task": "task
 * NAME\nlabels A B ..."): config.json gets them as id2label / label2id, so
 * that transformers' pipelines and model.config.id2label say "positive"
 * rather than LABEL_1. Nothing to do for other checkpoints. */
static int add_label_names(const cz_ckpt *c, const char *dir, cz_error *err) {
    char task[CZ_HF_LABEL_LEN], names[64][CZ_HF_LABEL_LEN];
    int k = cz_hf_task_from_ckpt(c, task, names, 64);
    if (k <= 0) return 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    void *old;
    size_t len;
    if (cz_read_file(path, &old, &len, err)) return -1;
    char *json = NULL;
    size_t jl = 0;
    FILE *f = open_memstream(&json, &jl);
    if (!f || len < 2 || ((char *)old)[0] != '{') {
        if (f) fclose(f);
        free(json);
        cz_free(old);
        return cz_fail(err, "%s: not the JSON object export-hf wrote", path);
    }
    fputs("{\n  \"id2label\": {", f);
    for (int i = 0; i < k; i++) {
        fprintf(f, "%s\"%d\": ", i ? ", " : "", i);
        cz_json_write_string(f, names[i]);
    }
    fputs("},\n  \"label2id\": {", f);
    for (int i = 0; i < k; i++) {
        if (i) fputs(", ", f);
        cz_json_write_string(f, names[i]);
        fprintf(f, ": %d", i);
    }
    fputs("},", f);
    fwrite((char *)old + 1, 1, len - 1, f);
    fclose(f);
    cz_free(old);
    int rc = cz_write_file_atomic(path, json, jl, err);
    free(json);
    return rc;
}

static int export_hf(int argc, char **argv) {
    const char *ckpt = argv[2], *dir = argv[3], *vocab = NULL, *merges = NULL;
    int lower = -1;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc)
            vocab = argv[++i];
        else if (!strcmp(argv[i], "--merges") && i + 1 < argc)
            merges = argv[++i];
        else if (!strcmp(argv[i], "--cased"))
            lower = 0;
        else if (!strcmp(argv[i], "--uncased"))
            lower = 1;
        else {
            static const char *const with_value[] = {"--vocab", "--merges", NULL};
            return bad_option("export-hf", with_value, argc, argv, i);
        }
    }
    cz_error err;
    cz_ckpt *c = NULL;
    cz_config cfg;
    cz_model *m = NULL;
    cz_hf_vocab v;
    memset(&v, 0, sizeof v);
    int found = 0, rc = 1;
    if (cz_ckpt_read(ckpt, &c, &err) || model_of_ckpt(ckpt, c, &cfg, &m, &err)) goto done;
    if (vocab) {
        found =
            cz_hf_vocab_read(&v, merges ? "bpe" : "wordpiece", vocab, merges, lower, &err) ? -1 : 1;
    } else {
        found = cz_hf_vocab_from_ckpt(&v, c, &err);
        if (found == 1 && lower >= 0) v.lower_case = lower;
        if (found == 0) found = vocab_of_manifest(&cfg, lower, &v, &err);
    }
    if (found < 0) goto done;
    if (found == 0) {
        cz_fail(&err, "%s: carries no vocabulary and names no training manifest: give --vocab",
                ckpt);
        goto done;
    }
    if (cz_hf_export(m, &v, dir, &err) || add_label_names(c, dir, &err)) goto done;
    int bert = cfg.model.arch == CZ_ARCH_BERT;
    printf("%s -> %s: model.safetensors (%d tensors, %.1f MB), config.json (%s), %s, "
           "tokenizer_config.json (%s%s) from %s\n",
           ckpt, dir, cz_model_num_tensors(m), cz_model_num_params(m) * 4.0 / 1e6,
           cz_hf_architecture(&cfg.model), bert ? "vocab.txt" : "vocab.json + merges.txt",
           bert ? "BertTokenizer" : "GPT2Tokenizer",
           bert ? (v.lower_case ? ", uncased" : ", cased") : "", v.source);
    rc = 0;
done:
    if (rc) fprintf(stderr, "cloze-ckpt: error: %s\n", err.msg);
    if (v.owned[0] || v.owned[1]) cz_hf_vocab_free(&v);
    cz_model_free(m);
    cz_ckpt_free(c);
    return rc;
}

/* ---- import-hf ---- */

/* The full configuration of an imported model: the defaults of its
 * architecture with the model section from config.json. */
static int config_of_hf(const cz_model_config *mc, cz_config *cfg, cz_error *err) {
    char o[17][96];
    int n = 0;
    snprintf(o[n++], 96, "model.arch=%s", mc->arch == CZ_ARCH_BERT ? "bert" : "gpt");
    snprintf(o[n++], 96, "model.layout=%s", mc->layout == CZ_LAYOUT_PRE_LN ? "pre_ln" : "post_ln");
    snprintf(o[n++], 96, "model.vocab_size=%d", mc->vocab_size);
    snprintf(o[n++], 96, "model.hidden=%d", mc->hidden);
    snprintf(o[n++], 96, "model.layers=%d", mc->layers);
    snprintf(o[n++], 96, "model.heads=%d", mc->heads);
    snprintf(o[n++], 96, "model.intermediate=%d", mc->intermediate);
    snprintf(o[n++], 96, "model.max_positions=%d", mc->max_positions);
    snprintf(o[n++], 96, "model.type_vocab_size=%d", mc->type_vocab_size);
    snprintf(o[n++], 96, "model.layer_norm_eps=%.9g", (double)mc->layer_norm_eps);
    snprintf(o[n++], 96, "model.gelu=%s", mc->gelu_tanh ? "tanh" : "erf");
    snprintf(o[n++], 96, "model.hidden_dropout=%.9g", (double)mc->hidden_dropout);
    snprintf(o[n++], 96, "model.attn_dropout=%.9g", (double)mc->attn_dropout);
    snprintf(o[n++], 96, "model.init_range=%.9g", (double)mc->init_range);
    snprintf(o[n++], 96, "model.lm_head=%s", mc->untied_head ? "untied" : "tied");
    int seq = mc->arch == CZ_ARCH_BERT ? 128 : mc->layout == CZ_LAYOUT_PRE_LN ? 1024 : 512;
    snprintf(o[n++], 96, "data.seq=%d", seq < mc->max_positions ? seq : mc->max_positions);
    const char *ov[17];
    for (int i = 0; i < n; i++) ov[i] = o[i];
    return cz_config_load(cfg, NULL, ov, n, err);
}

static int import_hf(int argc, char **argv) {
    const char *dir = argv[2], *out = argv[3];
    unsigned long long seed = 12345;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            char *end;
            const char *v = argv[++i];
            errno = 0;
            seed = strtoull(v, &end, 10);
            if (end == v || *end || errno || v[0] == '-')
                return usage_error("import-hf", "--seed %s: not a non-negative integer", v);
        } else {
            static const char *const with_value[] = {"--seed", NULL};
            return bad_option("import-hf", with_value, argc, argv, i);
        }
    }
    cz_error err;
    cz_model_config mc;
    cz_config cfg;
    cz_model *m = NULL;
    cz_hf_vocab v;
    memset(&v, 0, sizeof v);
    char arch[64];
    cz_hf_load_report rep;
    int rc = 1, has_vocab = 0;
    char *config_text = NULL;
    /* config.json is checked against the weights file's header before a
     * model of its size is allocated: a config that asks for more than the
     * file holds costs nothing */
    if (cz_hf_read_config(dir, &mc, arch, sizeof arch, &err) ||
        cz_hf_check_weights(dir, &mc, &err) || config_of_hf(&mc, &cfg, &err))
        goto done;
    if (cz_model_create(&m, &cfg.model, 1, 1, 1, NULL, &err)) goto done;
    cz_model_init_weights(m, seed);
    if (cz_hf_load(m, dir, &rep, &err)) goto done;
    has_vocab = cz_hf_vocab_read_dir(&v, dir, &err);
    if (has_vocab < 0) goto done;
    config_text = cz_config_to_string(&cfg);
    if (!config_text) {
        cz_fail(&err, "out of memory");
        goto done;
    }
    char source[1200], meta[1200];
    snprintf(source, sizeof source, "imported from %s (%s)\n", dir, arch[0] ? arch : "?");
    cz_blob blobs[7] = {
        {CZ_BLOB_CONFIG, config_text, strlen(config_text)},
        {CZ_BLOB_PARAMS, cz_model_params(m), cz_model_num_params(m) * sizeof(float)},
        {"source", source, strlen(source)},
        {CZ_BLOB_LAYOUT, CZ_PARAMS_LAYOUT, strlen(CZ_PARAMS_LAYOUT)},
    };
    int nb = 4;
    if (has_vocab) nb += cz_hf_vocab_blobs(&v, meta, sizeof meta, blobs + 4);
    if (cz_ckpt_write(out, blobs, nb, &err)) goto done;
    printf("%s -> %s: %s, %d tensors loaded%s", dir, out, arch[0] ? arch : "model", rep.loaded,
           rep.unprefixed ? " (names without the task model's prefix)" : "");
    if (rep.ignored) printf(", %d ignored (tied copies, buffers, other heads)", rep.ignored);
    printf("\n");
    if (rep.fresh)
        printf("initialised fresh (seed %llu): %d head tensor(s): %s\n", seed, rep.fresh,
               rep.fresh_list);
    printf("vocabulary: %s\n",
           has_vocab ? v.source : "none in the directory (export will need --vocab)");
    rc = 0;
done:
    if (rc) fprintf(stderr, "cloze-ckpt: error: %s\n", err.msg);
    free(config_text);
    if (has_vocab > 0) cz_hf_vocab_free(&v);
    cz_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* "cloze-ckpt verify --help" too */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    /* each command and its operands (export-hf and import-hf take options
     * after them) */
    static const struct {
        const char *name, *operands;
        int n;
    } commands[] = {{"info", "FILE", 1},
                    {"verify", "FILE", 1},
                    {"dump-blob", "FILE NAME", 2},
                    {"export-hf", "CKPT DIR", 2},
                    {"import-hf", "DIR OUT.lz4", 2}};
    if (argc < 2)
        return usage_error(NULL,
                           "no command: one of info, verify, dump-blob, export-hf, import-hf");
    int cmd = -1;
    for (int k = 0; k < (int)(sizeof commands / sizeof commands[0]); k++)
        if (!strcmp(argv[1], commands[k].name)) cmd = k;
    if (cmd < 0)
        return usage_error(NULL,
                           "%s '%s' (the commands: info, verify, dump-blob, export-hf, "
                           "import-hf)",
                           argv[1][0] == '-' ? "an option before the command:" : "unknown command",
                           argv[1]);
    const char *name = commands[cmd].name;
    int n = commands[cmd].n;
    for (int i = 2; i < argc && i < 2 + n; i++)
        if (argv[i][0] == '-' && argv[i][1])
            return usage_error(name, "%s: an option where %s is expected", argv[i],
                               commands[cmd].operands);
    if (argc < 2 + n) return usage_error(name, "needs %s", commands[cmd].operands);
    if (cmd >= 3) {
        cz_log_setup(0, CZ_LOG_WARN);
        return cmd == 3 ? export_hf(argc, argv) : import_hf(argc, argv);
    }
    if (argc > 2 + n) {
        static const char *const none[] = {NULL};
        return bad_option(name, none, argc, argv, 2 + n);
    }
    if (cmd == 2) return dump_blob(argv[2], argv[3]);
    cz_log_setup(0, CZ_LOG_WARN);
    const char *path = argv[2];
    cz_error err;
    if (strcmp(argv[1], "verify") == 0) {
        if (cz_ckpt_verify(path, &err) != 0) {
            fprintf(stderr, "cloze-ckpt: error: %s\n", err.msg);
            return 1;
        }
        printf("%s: ok\n", path);
        return 0;
    }
    info_ctx c = {0, 0, 0, 0};
    printf("%s:\n", path);
    if (cz_ckpt_scan(path, on_blob, &c, &err) != 0) {
        fprintf(stderr, "cloze-ckpt: error: %s\n", err.msg);
        return 1;
    }
    struct stat st;
    long long file_size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    printf("blobs %d, %llu bytes uncompressed, %lld bytes on disk", c.count, c.total, file_size);
    if (file_size > 0) printf(" (ratio %.3f)", (double)c.total / (double)file_size);
    printf("\n");
    if (c.has_step) printf("step %lld\n", c.step);
    return 0;
}
