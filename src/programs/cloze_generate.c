/* cloze-generate: what a trained model says.
 *   cloze-generate MODEL [--prompt TEXT] ...       GPT: text from a prompt
 *   cloze-generate fill-mask MODEL TEXT ...        BERT: words for [MASK]
 * MODEL is a cloze checkpoint (cloze-train, import-hf) or a Hugging Face
 * directory (config.json + model.safetensors); the tokenizer is the one the
 * model carries (its vocab.* blobs, the training manifest's files, the
 * directory's vocab files), else --vocab / --merges. The work is infer's
 * (include/cloze/infer.h); this file reads arguments and files. */
#define _GNU_SOURCE
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cloze/ckpt.h"
#include "cloze/config.h"
#include "cloze/hf.h"
#include "cloze/infer.h"
#include "cloze/shard.h"
#include "cloze/text.h"

#define EOT "<|endoftext|>"
#define MASK "[MASK]"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: cloze-generate MODEL [--prompt TEXT | --prompt-file FILE | --prompt-ids IDS]\n"
        "                      [--max-new-tokens N] [--greedy] [--temperature T] [--top-k K]\n"
        "                      [--top-p P] [--seed S] [--num-samples B] [--ignore-eos]\n"
        "                      [--no-cache] [--ids] [--stats] [--threads N]\n"
        "                      [--vocab FILE [--merges FILE]]\n"
        "       cloze-generate fill-mask MODEL TEXT [--top-k K] [--ids] [--threads N]\n"
        "                      [--vocab FILE] [--cased | --uncased]\n"
        "       cloze-generate --help\n"
        "MODEL: a checkpoint (ckpt-<step>.lz4 of cloze-train, cloze-ckpt import-hf's output)\n"
        "or a Hugging Face directory (config.json + model.safetensors + tokenizer files).\n"
        "\n"
        "Text generation (a GPT, model.layout post_ln or pre_ln), with a key-value cache:\n"
        "  --prompt TEXT        the text to continue (<|endoftext|> in it is that token);\n"
        "                       none: generation starts from <|endoftext|>\n"
        "  --prompt-file FILE   the prompt is the file's bytes, as they are\n"
        "  --prompt-ids IDS     the prompt as token ids (\"464 3290 318\"), no tokenizer needed\n"
        "                       for --ids output\n"
        "  --max-new-tokens N   tokens to add (default 100); the prompt and them must fit\n"
        "                       model.max_positions\n"
        "  --greedy             the most probable token each time (= --temperature 0)\n"
        "  --temperature T      divide the logits by T before the softmax (default 1; 0 = greedy)\n"
        "  --top-k K            sample among the K most probable tokens only (default 0: all)\n"
        "  --top-p P            nucleus: among the fewest most probable tokens holding\n"
        "                       probability P (default 1: all)\n"
        "  --seed S             the random draws (Philox, default 1): a seed gives the same\n"
        "                       text on every run and thread count\n"
        "  --num-samples B      B samples of the prompt at once (a batch; default 1)\n"
        "  --ignore-eos         go on after <|endoftext|> (default: a sample stops there)\n"
        "  --no-cache           run the whole prefix again for each token (slow: the\n"
        "                       check of the cache)\n"
        "  --ids                print token ids, one sample a line, instead of text\n"
        "  --stats              print tokens/s of the generation on stderr\n"
        "\n"
        "Fill-mask (a BERT pre-training model): the TEXT's [MASK] tokens, each with the\n"
        "--top-k (default 5, at most 64) most probable words and their probabilities.\n"
        "  --ids                print ids with the words, probabilities to 9 digits\n"
        "\n"
        "Both:\n"
        "  --threads N          threads (default: the CPUs this process may use)\n"
        "  --vocab FILE         the vocabulary, when the model carries none (vocab.txt, or\n"
        "                       encoder.json with --merges vocab.bpe)\n"
        "  --cased, --uncased   WordPiece casing (default: the model's, else guessed)\n"
        "Errors (a BERT given to generation, a GPT to fill-mask, a prompt longer than the\n"
        "model's positions, an id outside the vocabulary) are one line; exit 1, or 2 for\n"
        "a bad argument.\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cloze-generate: %s (see cloze-generate --help)\n", msg);
    return 2;
}

typedef struct args {
    int fill;
    const char *model, *text, *prompt, *prompt_file, *prompt_ids, *vocab, *merges;
    int max_new, top_k, samples, threads, ignore_eos, no_cache, ids, stats, lower;
    float temperature, top_p;
    unsigned long long seed;
} args;

static int num(const char *opt, const char *v, double lo, double hi, int integer, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || x < lo || x > hi || (integer && x != (double)(long long)x))
        return usage_error("%s %s: not %s in [%g, %g]", opt, v, integer ? "an integer" : "a number",
                           lo, hi);
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->max_new = 100;
    a->temperature = 1.0f;
    a->top_p = 1.0f;
    a->seed = 1;
    a->samples = 1;
    a->lower = -1;
    int i = 1;
    if (argc > 1 && !strcmp(argv[1], "fill-mask")) {
        a->fill = 1;
        a->top_k = 5;
        i = 2;
    }
    int pos = 0;
    for (; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc;
        double x;
        if (o[0] != '-' || !o[1]) {
            if (pos == 0)
                a->model = o;
            else if (pos == 1 && a->fill)
                a->text = o;
            else
                return usage_error("unexpected argument '%s'", o);
            pos++;
            continue;
        }
        static const char *const with_value[] = {"--prompt",
                                                 "--prompt-file",
                                                 "--prompt-ids",
                                                 "--max-new-tokens",
                                                 "--temperature",
                                                 "--top-k",
                                                 "--top-p",
                                                 "--seed",
                                                 "--num-samples",
                                                 "--threads",
                                                 "--vocab",
                                                 "--merges",
                                                 NULL};
        int takes = 0;
        for (int k = 0; with_value[k]; k++) takes |= !strcmp(o, with_value[k]);
        if (takes && !more) return usage_error("%s: needs a value", o);
        const char *v = takes ? argv[++i] : NULL;
        static const char *const gen_only[] = {"--prompt",      "--prompt-file",
                                               "--prompt-ids",  "--max-new-tokens",
                                               "--greedy",      "--temperature",
                                               "--top-p",       "--seed",
                                               "--num-samples", "--ignore-eos",
                                               "--no-cache",    "--stats",
                                               "--merges",      NULL};
        for (int k = 0; a->fill && gen_only[k]; k++)
            if (!strcmp(o, gen_only[k])) return usage_error("fill-mask takes no %s", o);
        if (!strcmp(o, "--prompt"))
            a->prompt = v;
        else if (!strcmp(o, "--prompt-file"))
            a->prompt_file = v;
        else if (!strcmp(o, "--prompt-ids"))
            a->prompt_ids = v;
        else if (!strcmp(o, "--vocab"))
            a->vocab = v;
        else if (!strcmp(o, "--merges"))
            a->merges = v;
        else if (!strcmp(o, "--max-new-tokens")) {
            if (num(o, v, 0, 1 << 20, 1, &x)) return 2;
            a->max_new = (int)x;
        } else if (!strcmp(o, "--temperature")) {
            if (num(o, v, 0, 1e6, 0, &x)) return 2;
            a->temperature = (float)x;
        } else if (!strcmp(o, "--top-k")) {
            if (num(o, v, a->fill ? 1 : 0, a->fill ? 64 : 1 << 30, 1, &x)) return 2;
            a->top_k = (int)x;
        } else if (!strcmp(o, "--top-p")) {
            if (num(o, v, 0, 1, 0, &x)) return 2;
            if (x == 0) return usage_error("--top-p 0 keeps no token: give P in (0, 1]");
            a->top_p = (float)x;
        } else if (!strcmp(o, "--seed")) {
            if (num(o, v, 0, 9007199254740992.0, 1, &x)) return 2;
            a->seed = (unsigned long long)x;
        } else if (!strcmp(o, "--num-samples")) {
            if (num(o, v, 1, 4096, 1, &x)) return 2;
            a->samples = (int)x;
        } else if (!strcmp(o, "--threads")) {
            if (num(o, v, 1, 4096, 1, &x)) return 2;
            a->threads = (int)x;
        } else if (!strcmp(o, "--greedy"))
            a->temperature = 0;
        else if (!strcmp(o, "--ignore-eos"))
            a->ignore_eos = 1;
        else if (!strcmp(o, "--no-cache"))
            a->no_cache = 1;
        else if (!strcmp(o, "--ids"))
            a->ids = 1;
        else if (!strcmp(o, "--stats"))
            a->stats = 1;
        else if (!strcmp(o, "--cased"))
            a->lower = 0;
        else if (!strcmp(o, "--uncased"))
            a->lower = 1;
        else
            return usage_error("unknown option '%s'", o);
    }
    if (!a->model) return usage_error(a->fill ? "needs MODEL TEXT" : "needs MODEL");
    if (a->fill && !a->text) return usage_error("fill-mask needs TEXT after MODEL");
    if (!!a->prompt + !!a->prompt_file + !!a->prompt_ids > 1)
        return usage_error("give one of --prompt, --prompt-file, --prompt-ids");
    if (a->merges && !a->vocab) return usage_error("--merges needs --vocab");
    return 0;
}

/* ---- the model and its vocabulary ---- */

typedef struct loaded {
    cz_ckpt *ck;
    cz_model_config mc;
    cz_model *m;
    cz_hf_vocab v;
    int has_vocab;
} loaded;

static void loaded_free(loaded *l) {
    if (l->v.owned[0] || l->v.owned[1]) cz_hf_vocab_free(&l->v);
    cz_model_free(l->m);
    cz_ckpt_free(l->ck);
}

/* The configuration and vocabulary of a checkpoint or Hugging Face
 * directory (the vocabulary when it carries one or names a training
 * manifest); the model itself comes with create_model, once the sequence's
 * shape is known. */
static int load_model(const char *path, loaded *l, cz_error *err) {
    struct stat st;
    if (stat(path, &st) != 0) return cz_fail(err, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        if (cz_hf_read_config(path, &l->mc, NULL, 0, err)) return -1;
        l->has_vocab = cz_hf_vocab_read_dir(&l->v, path, err);
        return l->has_vocab < 0 ? -1 : 0;
    }
    if (cz_ckpt_read(path, &l->ck, err)) return -1;
    size_t n = 0;
    const char *text = cz_ckpt_get(l->ck, CZ_BLOB_CONFIG, &n);
    if (!text) return cz_fail(err, "%s: no config blob: not a cloze checkpoint", path);
    char *t = strndup(text, n);
    cz_config cfg;
    int rc = t ? cz_config_from_string(&cfg, t, path, err) : cz_fail(err, "out of memory");
    free(t);
    if (rc) return -1;
    l->mc = cfg.model;
    cz_hf_head_from_ckpt(l->ck, &l->mc);
    l->has_vocab = cz_hf_vocab_from_ckpt(&l->v, l->ck, err);
    if (l->has_vocab < 0) return cz_fail_prefix(err, "%s", path);
    if (!l->has_vocab && cfg.data.train_manifest[0]) { /* the training manifest's files */
        cz_manifest man;
        if (cz_manifest_load(&man, cfg.data.train_manifest, err) == 0) {
            const char *mer = man.vocab_files[CZ_VOCAB_FILE_MERGES].path;
            int bpe = !strcmp(man.vocab_kind, "bpe");
            if (bpe && !mer[0]) mer = NULL;
            l->has_vocab = cz_hf_vocab_read(&l->v, man.vocab_kind, man.vocab_path, bpe ? mer : NULL,
                                            -1, err) == 0;
            cz_manifest_free(&man);
        }
    }
    return 0;
}

/* The model for one sequence of up to seq tokens with max_pred prediction
 * slots (fill-mask; generation uses its own buffers), its weights loaded;
 * g runs its products (freed after the model). */
static int create_model(const char *path, loaded *l, int seq, int max_pred, const cz_gemm_ctx *g,
                        cz_error *err) {
    if (seq > l->mc.max_positions) seq = l->mc.max_positions;
    if (cz_model_create(&l->m, &l->mc, 1, seq, max_pred, g, err))
        return cz_fail_prefix(err, "%s", path);
    if (!l->ck) {
        cz_hf_load_report rep;
        cz_model_init_weights(l->m, 0);
        return cz_hf_load(l->m, path, &rep, err);
    }
    return cz_ckpt_get_params(l->ck, path, CZ_BLOB_PARAMS, l->m, cz_model_params(l->m), err);
}

static int make_tokenizer(const args *a, loaded *l, cz_tokenizer **tok, cz_error *err) {
    if (a->vocab) {
        if (l->v.owned[0] || l->v.owned[1]) cz_hf_vocab_free(&l->v);
        memset(&l->v, 0, sizeof l->v);
        if (cz_hf_vocab_read(&l->v, a->merges ? "bpe" : "wordpiece", a->vocab, a->merges, a->lower,
                             err))
            return -1;
        l->has_vocab = 1;
    }
    if (!l->has_vocab)
        return cz_fail(err,
                       "%s carries no vocabulary and names no training manifest with one: "
                       "give --vocab",
                       a->model);
    if (!strcmp(l->v.kind, "bpe"))
        return cz_tokenizer_load_bpe_mem(tok, l->v.source, l->v.vocab, l->v.vocab_len, l->v.source,
                                         l->v.merges, l->v.merges_len, err);
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    o.lower_case = a->lower >= 0 ? a->lower : l->v.lower_case;
    return cz_tokenizer_load_wordpiece_mem(tok, l->v.source, l->v.vocab, l->v.vocab_len, &o, err);
}

/* text with every occurrence of `special` as that token's id, the rest
 * through the tokenizer */
static int encode_with(const cz_tokenizer *tok, const char *text, size_t len, const char *special,
                       cz_ids *out, cz_error *err) {
    int32_t sid = cz_tokenizer_token_id(tok, special);
    size_t sl = strlen(special), i = 0;
    while (i <= len) {
        const char *hit = sid >= 0 ? memmem(text + i, len - i, special, sl) : NULL;
        size_t end = hit ? (size_t)(hit - text) : len;
        if (end > i) {
            size_t bad = cz_utf8_invalid_at((const unsigned char *)text + i, end - i);
            if (bad < end - i && cz_tokenizer_kind_of(tok) == CZ_TOK_WORDPIECE)
                return cz_fail(err, "the text is not UTF-8 (byte %zu)", i + bad);
            if (cz_tokenizer_encode(tok, text + i, end - i, out, err)) return -1;
        }
        if (!hit) break;
        if (cz_ids_push(out, (uint32_t)sid, err)) return -1;
        i = end + sl;
    }
    return 0;
}

static int threads_setup(int threads, cz_gemm_ctx **g, cz_error *err) {
    if (threads <= 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    omp_set_num_threads(threads);
    *g = cz_gemm_setup(CZ_GEMM_AUTO, threads, err);
    return *g ? 0 : -1;
}

/* ---- generation ---- */

static int parse_ids(const char *s, int vocab, cz_ids *out, cz_error *err) {
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno) return cz_fail(err, "--prompt-ids: '%.20s' is not a token id", p);
        if (v < 0 || v >= vocab)
            return cz_fail(err,
                           "--prompt-ids: token id %ld is outside the model's vocabulary "
                           "[0, %d)",
                           v, vocab);
        if (cz_ids_push(out, (uint32_t)v, err)) return -1;
        p = end;
    }
    return 0;
}

static int generate(const args *a) {
    cz_error err;
    loaded l;
    memset(&l, 0, sizeof l);
    cz_tokenizer *tok = NULL;
    cz_gemm_ctx *g = NULL;
    cz_decoder *d = NULL;
    cz_ids prompt = {0};
    int32_t **out = NULL;
    int *lens = NULL, rc = 1;
    if (threads_setup(a->threads, &g, &err) || load_model(a->model, &l, &err)) goto done;
    if (l.mc.arch != CZ_ARCH_GPT) {
        cz_fail(&err,
                "%s is a BERT model: text generation needs a GPT (for BERT use "
                "cloze-generate fill-mask)",
                a->model);
        goto done;
    }
    int need_tok = !(a->prompt_ids && a->ids);
    if (need_tok && make_tokenizer(a, &l, &tok, &err)) goto done;
    if (tok && cz_tokenizer_kind_of(tok) != CZ_TOK_BPE) {
        cz_fail(&err, "%s: a GPT with a WordPiece vocabulary; generation decodes byte-level BPE",
                a->model);
        goto done;
    }
    if (tok && (int)cz_tokenizer_vocab_size(tok) != l.mc.vocab_size) {
        cz_fail(&err, "%s: the vocabulary has %u tokens, the model %d", l.v.source,
                cz_tokenizer_vocab_size(tok), l.mc.vocab_size);
        goto done;
    }
    int32_t eos = tok ? cz_tokenizer_token_id(tok, EOT) : -1;
    if (a->prompt_ids) {
        if (parse_ids(a->prompt_ids, l.mc.vocab_size, &prompt, &err)) goto done;
    } else if (a->prompt || a->prompt_file) {
        void *data = NULL;
        size_t len = a->prompt ? strlen(a->prompt) : 0;
        if (a->prompt_file && cz_read_file(a->prompt_file, &data, &len, &err)) goto done;
        int e = encode_with(tok, a->prompt ? a->prompt : data, len, EOT, &prompt, &err);
        cz_free(data);
        if (e) goto done;
    } else if (eos >= 0) {
        cz_ids_push(&prompt, (uint32_t)eos, &err);
    } else {
        cz_fail(&err, "the vocabulary has no %s to start from: give --prompt", EOT);
        goto done;
    }
    if (prompt.n == 0) {
        cz_fail(&err, "the prompt is empty: give some text");
        goto done;
    }
    int n = (int)prompt.n, P = l.mc.max_positions;
    if (n >= P) {
        cz_fail(&err,
                "the prompt is %d tokens, the model has %d positions "
                "(model.max_positions): at most %d prompt tokens",
                n, P, P - 1);
        goto done;
    }
    int max_len = n + a->max_new < P ? n + a->max_new : P;
    if (n + a->max_new > P)
        fprintf(stderr,
                "cloze-generate: %d prompt + %d new tokens exceed the model's %d "
                "positions: generating %d\n",
                n, a->max_new, P, P - n);
    if (create_model(a->model, &l, 1, 1, g, &err) ||
        cz_decoder_create(&d, l.m, a->samples, max_len, g, &err))
        goto done;
    out = calloc((size_t)a->samples, sizeof *out);
    lens = calloc((size_t)a->samples, sizeof *lens);
    if (!out || !lens) {
        cz_fail(&err, "out of memory");
        goto done;
    }
    for (int b = 0; b < a->samples; b++)
        if (!(out[b] = calloc((size_t)max_len, sizeof **out))) {
            cz_fail(&err, "out of memory");
            goto done;
        }
    int32_t *pr = malloc(prompt.n * sizeof *pr);
    if (!pr) {
        cz_fail(&err, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < prompt.n; i++) pr[i] = (int32_t)prompt.ids[i];
    cz_generate_params gp = {a->max_new,
                             {a->temperature, a->top_k, a->top_p},
                             a->seed,
                             a->ignore_eos ? -1 : eos,
                             a->no_cache};
    double t0 = cz_now();
    int grc = cz_generate(d, pr, n, &gp, out, lens, NULL, NULL, &err);
    double secs = cz_now() - t0;
    free(pr);
    if (grc) goto done;
    long new_tokens = 0;
    for (int b = 0; b < a->samples; b++) {
        new_tokens += lens[b] - n;
        if (a->ids) {
            for (int i = 0; i < lens[b]; i++) printf("%s%d", i ? " " : "", out[b][i]);
            printf("\n");
            continue;
        }
        size_t len;
        char *text = cz_tokenizer_decode(tok, (const uint32_t *)out[b], (size_t)lens[b], &len);
        if (!text) {
            cz_fail(&err, "out of memory");
            goto done;
        }
        if (b) printf("\n---------------\n");
        fwrite(text, 1, len, stdout);
        free(text);
    }
    if (!a->ids) printf("\n");
    fflush(stdout);
    if (a->stats)
        fprintf(stderr,
                "cloze-generate: %ld new tokens in %.3f s: %.1f tokens/s (%d sample(s), prompt "
                "%d tokens, %s)\n",
                new_tokens, secs, new_tokens / secs, a->samples, n,
                a->no_cache ? "no cache" : "key-value cache");
    rc = 0;
done:
    if (rc) fprintf(stderr, "cloze-generate: error: %s\n", err.msg);
    for (int b = 0; out && b < a->samples; b++) free(out[b]);
    free(out);
    free(lens);
    cz_ids_free(&prompt);
    cz_decoder_free(d);
    cz_tokenizer_free(tok);
    loaded_free(&l);
    if (g) cz_gemm_free(g);
    return rc;
}

/* ---- fill-mask ---- */

static int fill_mask(const args *a) {
    cz_error err;
    loaded l;
    memset(&l, 0, sizeof l);
    cz_tokenizer *tok = NULL;
    cz_gemm_ctx *g = NULL;
    cz_ids ids = {0};
    cz_fill_result *res = NULL;
    int rc = 1;
    if (threads_setup(a->threads, &g, &err) || load_model(a->model, &l, &err)) goto done;
    if (l.mc.arch != CZ_ARCH_BERT) {
        cz_fail(&err,
                "%s is a GPT model: fill-mask needs a BERT (for GPT use cloze-generate "
                "MODEL --prompt)",
                a->model);
        goto done;
    }
    if (make_tokenizer(a, &l, &tok, &err)) goto done;
    int32_t cls = cz_tokenizer_token_id(tok, "[CLS]"), sep = cz_tokenizer_token_id(tok, "[SEP]"),
            mask = cz_tokenizer_token_id(tok, MASK);
    if (cls < 0 || sep < 0 || mask < 0) {
        cz_fail(&err, "%s: the vocabulary lacks [CLS], [SEP] or [MASK]", l.v.source);
        goto done;
    }
    /* [CLS] text [SEP], as BertTokenizer and the fill-mask pipeline build it */
    if (cz_ids_push(&ids, (uint32_t)cls, &err) ||
        encode_with(tok, a->text, strlen(a->text), MASK, &ids, &err) ||
        cz_ids_push(&ids, (uint32_t)sep, &err))
        goto done;
    int n = (int)ids.n, masks = 0;
    for (int i = 0; i < n; i++) masks += (int32_t)ids.ids[i] == mask;
    if (masks == 0) {
        cz_fail(&err, "the text has no %s to fill", MASK);
        goto done;
    }
    if (n > l.mc.max_positions) {
        cz_fail(&err,
                "the text is %d tokens with [CLS] and [SEP], the model has %d positions "
                "(model.max_positions)",
                n, l.mc.max_positions);
        goto done;
    }
    res = calloc((size_t)masks, sizeof *res);
    int32_t *in = malloc((size_t)n * sizeof *in);
    int found = -1;
    if (!res || !in)
        cz_fail(&err, "out of memory");
    else if (create_model(a->model, &l, n, masks, g, &err) == 0) {
        for (int i = 0; i < n; i++) in[i] = (int32_t)ids.ids[i];
        found = cz_fill_mask(l.m, g, in, n, mask, a->top_k, res, masks, &err);
    }
    free(in);
    if (found < 0) goto done;
    for (int k = 0; k < found; k++) {
        if (found > 1) printf("[MASK] %d (token %d):\n", k + 1, res[k].position);
        for (int j = 0; j < a->top_k && j < l.mc.vocab_size; j++) {
            const char *w = cz_tokenizer_token(tok, (uint32_t)res[k].ids[j]);
            if (a->ids)
                printf("%.9g  %-6d %s\n", res[k].probs[j], res[k].ids[j], w ? w : "?");
            else
                printf("%8.6f  %s\n", res[k].probs[j], w ? w : "?");
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "cloze-generate: error: %s\n", err.msg);
    free(res);
    cz_ids_free(&ids);
    cz_tokenizer_free(tok);
    loaded_free(&l);
    if (g) cz_gemm_free(g);
    return rc;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    cz_log_setup(0, CZ_LOG_WARN);
    return a.fill ? fill_mask(&a) : generate(&a);
}
