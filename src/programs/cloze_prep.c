/* cloze-prep: raw text -> vocabularies, token shards and manifests.
 *
 *   cloze-prep shards   --vocab F [--merges F] --out DIR --shards S ... INPUTS...
 *   cloze-prep vocab    --kind wordpiece|bpe --size N --out FILE INPUTS...
 *   cloze-prep tokenize --vocab F [--merges F] [--cased] [--tokens] [--whole]   (stdin)
 *   cloze-prep decode   --vocab F [--merges F] [--whole]   (stdin: ids)
 *   cloze-prep inspect  [--vocab F [--merges F]] [--docs N] SHARD
 *   cloze-prep verify   MANIFEST
 *
 * Formats: docs/formats.md. Every failure is one line on stderr naming the
 * file and the offset or field, and a non-zero exit. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cloze/comm.h"
#include "cloze/prep.h"
#include "cloze/shard.h"
#include "cloze/text.h"

static int die(const cz_error *err) {
    fprintf(stderr, "cloze-prep: error: %s\n", err->msg);
    return 1;
}

/* Under mpirun, argument errors are found before MPI starts, by every rank
 * alike (cz_launch_rank, cz_launch_size: 0 without mpirun), and said by
 * rank 0 alone; every rank then ends after it has (cz_comm_end_early). */
static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    if (cz_launch_rank() != 0) return cz_comm_end_early(NULL, NULL, 2);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cloze-prep %s: %s (see cloze-prep %s --help)\n", cmd, msg, cmd);
    return cz_comm_end_early(NULL, NULL, 2);
}

/* An option of some command that takes a value: given last, it is missing
 * its value rather than unknown. */
static int is_option_with_value(const char *a) {
    static const char *const with_value[] = {
        "--vocab",   "--merges",      "--out",    "--shards",   "--heldout",
        "--threads", "--jsonl-field", "--format", "--passages", "--kind",
        "--size",    "--merges-out",  "--docs"};
    for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
        if (!strcmp(a, with_value[k])) return 1;
    return 0;
}

/* argv[i], which no option of cmd took: one that takes a value and came
 * last is missing it, anything else is unknown. */
static int bad_option(const char *cmd, int argc, char **argv, int i) {
    const char *a = argv[i];
    return usage_error(cmd, "%s: %s", a,
                       i + 1 >= argc && is_option_with_value(a) ? "needs a value"
                                                                : "unknown option");
}

/* ------------------------------------------------------- tokenizer options */

typedef struct tok_args {
    const char *vocab, *merges;
    int cased;
} tok_args;

/* Consumes --vocab/--merges/--cased at argv[*i]; 1 if it did. */
static int tok_arg(tok_args *t, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (!strcmp(a, "--vocab") && *i + 1 < argc) return t->vocab = argv[++*i], 1;
    if (!strcmp(a, "--merges") && *i + 1 < argc) return t->merges = argv[++*i], 1;
    if (!strcmp(a, "--cased")) return t->cased = 1, 1;
    return 0;
}

/* WordPiece when no merges are given, GPT-2 BPE otherwise. A vocabulary
 * without the tokens its kind needs is the wrong file (the loaders say so:
 * a WordPiece vocab.txt without [UNK]). */
static int load_tokenizer(const tok_args *a, cz_tokenizer **tok, cz_error *err) {
    if (!a->vocab) return cz_fail(err, "--vocab is required");
    if (a->merges) {
        if (cz_tokenizer_load_bpe(tok, a->vocab, a->merges, err) != 0) return -1;
        return 0;
    }
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    o.lower_case = !a->cased;
    return cz_tokenizer_load_wordpiece(tok, a->vocab, &o, err);
}

/* ------------------------------------------------------------------ shards */

static const char SHARDS_HELP[] =
    "usage: cloze-prep shards --vocab FILE [--merges FILE] [--cased] --out DIR --shards S\n"
    "                         [--heldout FRACTION] [--threads N] [--format F]\n"
    "                         [--jsonl-field NAME] [--wikitext-detok] [--passages P]\n"
    "                         [--quiet] INPUTS...\n"
    "Tokenizes text files/directories into S shards and DIR/train.manifest; --heldout\n"
    "puts that fraction of documents (chosen by a hash of their text) into held-out\n"
    "shards and DIR/heldout.manifest. The shards go to DIR/set-NNNN/; a new set\n"
    "replaces the one in DIR only once it is complete, so a failed or killed run\n"
    "leaves DIR as it was. WordPiece (BERT) normalises the text and splits it into\n"
    "sentences; GPT-2 BPE keeps every byte of a document as it is (docs/formats.md).\n"
    "  --vocab FILE       WordPiece vocab.txt, or GPT-2 encoder.json with --merges vocab.bpe\n"
    "  --cased            WordPiece: keep case and accents (default: uncased)\n"
    "  --format F         auto (default), text, wikitext, jsonl, gutenberg, wikiextractor\n"
    "                     (WikiExtractor's <doc> files or its --json output)\n"
    "  --passages P       auto (default: on for WikiExtractor output), on, off: keep only\n"
    "                     text passages, as BERT did (no headings, list or table lines)\n"
    "  --jsonl-field NAME JSON Lines: the string field with the text (default: text)\n"
    "  --wikitext-detok   turn ' @-@ ', ' @,@ ', ' @.@ ' into '-', ',', '.'\n"
    "  --threads N        tokenizer threads (default 1); output is identical for any N\n"
    "Under mpirun, input file i goes to rank i % np; rank r writes train shards\n"
    "k with k % np == r (S >= np) and heldout-r; rank 0 writes the manifests.\n"
    "One cloze-prep at a time writes a DIR (DIR/.cloze-prep.lock).\n";

static void print_summary(const cz_prep_stats *s, double secs, int verbatim) {
    char chars[400];
    if (verbatim) /* GPT mode: every byte is text (docs/formats.md) */
        snprintf(chars, sizeof chars, "%llu invalid UTF-8 bytes kept as bytes",
                 (unsigned long long)s->bytes_replaced);
    else
        snprintf(chars, sizeof chars, "%llu invalid bytes replaced, %llu control chars dropped",
                 (unsigned long long)s->bytes_replaced, (unsigned long long)s->chars_dropped);
    if (s->lines_dropped) /* --passages: say what the text lost */
        snprintf(chars + strlen(chars), sizeof chars - strlen(chars),
                 ", %llu lines that are no text passage dropped",
                 (unsigned long long)s->lines_dropped);
    if (s->wiki_files_unmarked) /* plain WikiExtractor: headings by length only */
        snprintf(chars + strlen(chars), sizeof chars - strlen(chars),
                 " (%llu WikiExtractor files without heading marks: their headings told by "
                 "length only; corpus_tools/wikiextract.py marks them)",
                 (unsigned long long)s->wiki_files_unmarked);
    fprintf(stderr,
            "cloze-prep: %llu documents (%llu held out), %llu sentences, %llu tokens, "
            "[UNK] %.4f%%, %s, %.1f MB in %.1f s (%.2f MB/s)\n",
            (unsigned long long)s->documents, (unsigned long long)s->heldout_documents,
            (unsigned long long)s->sentences, (unsigned long long)s->tokens,
            s->tokens ? 100.0 * (double)s->unk / (double)s->tokens : 0.0, chars,
            (double)s->bytes_in / 1e6, secs, secs > 0 ? (double)s->bytes_in / 1e6 / secs : 0.0);
}

/* The options of `shards` into ta, o and inputs (argv's own strings):
 * -1 to go on, or the exit status (--help: 0, a usage error: 2). */
static int parse_shards(int argc, char **argv, tok_args *ta, cz_prep_options *o,
                        const char **inputs, int *n_inputs) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help")) {
            if (cz_launch_rank() == 0) fputs(SHARDS_HELP, stdout);
            return 0;
        }
        if (tok_arg(ta, argc, argv, &i)) continue;
        if (!strcmp(a, "--out") && more)
            o->out_dir = argv[++i];
        else if (!strcmp(a, "--shards") && more)
            o->n_shards = atoi(argv[++i]);
        else if (!strcmp(a, "--heldout") && more)
            o->heldout = atof(argv[++i]);
        else if (!strcmp(a, "--threads") && more)
            o->threads = atoi(argv[++i]);
        else if (!strcmp(a, "--jsonl-field") && more)
            o->jsonl_field = argv[++i];
        else if (!strcmp(a, "--wikitext-detok"))
            o->wikitext_detok = 1;
        else if (!strcmp(a, "--quiet"))
            o->progress = 0;
        else if (!strcmp(a, "--passages") && more) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto") || !strcmp(v, "on") || !strcmp(v, "off"))
                o->passages = v[0] == 'a'   ? CZ_PASSAGES_AUTO
                              : v[1] == 'n' ? CZ_PASSAGES_ON
                                            : CZ_PASSAGES_OFF;
            else
                return usage_error("shards", "--passages %s: not auto, on or off", v);
        } else if (!strcmp(a, "--format") && more) {
            if (cz_input_format_parse(argv[++i], &o->fmt) != 0)
                return usage_error("shards",
                                   "--format %s: not auto, text, wikitext, jsonl, "
                                   "gutenberg or wikiextractor",
                                   argv[i]);
        } else if (a[0] == '-' && a[1])
            return bad_option("shards", argc, argv, i);
        else
            inputs[(*n_inputs)++] = argv[i]; /* options may follow inputs */
    }
    if (o->heldout < 0 || o->heldout >= 1)
        return usage_error("shards", "--heldout must be a fraction in [0, 1)");
    if (o->threads < 1) return usage_error("shards", "--threads must be >= 1");
    if (!o->out_dir || o->n_shards < 1 || *n_inputs == 0)
        return usage_error("shards", "need --vocab, --out, --shards >= 1 and inputs");
    if (cz_launch_size() > o->n_shards)
        return usage_error("shards", "--shards %d: need at least one shard per rank (%d ranks)",
                           o->n_shards, cz_launch_size());
    return -1;
}

/* Rank 0 locks the output directory and makes the staging directory every
 * rank writes into (the set replaces the current one only once complete,
 * cloze/prep.h); its path reaches every rank in staging. 1 when rank 0
 * failed (said once). */
static int begin_set(cz_prep_world *w, const char *out_dir, cz_prep_set *set,
                     char staging[PATH_MAX], cz_error *err) {
    staging[0] = 0;
    if (cz_prep_rank0_verdict(w, w->rank == 0 ? cz_prep_set_begin(set, out_dir, err) : 0, err))
        return 1;
    if (w->rank == 0) snprintf(staging, PATH_MAX, "%s", set->staging);
    if (w->comm && cz_comm_bcast(w->comm, staging, PATH_MAX, 0, err) != 0) {
        fprintf(stderr, "cloze-prep: error (rank %d): %s\n", w->rank, err->msg);
        cz_comm_abort(w->comm, 1);
    }
    return 0;
}

/* No input gave a document: say why, and of which inputs. With passages
 * on, every line was dropped by the passage rule (the inputs are then all
 * of them: none kept a line); else they hold no text. */
static int no_document(const cz_file_list *files, const cz_prep_stats *st, cz_error *err) {
    char names[600] = "";
    for (int i = 0; i < files->n && strlen(names) < 400; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 files->paths[i]);
    if (strlen(names) >= 400 || files->n > 1)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s (%d files)",
                 strlen(names) >= 400 ? ", ..." : "", files->n);
    if (st->lines_dropped == 0)
        return cz_fail(err, "no document in any shard: the inputs hold no text: %s", names);
    return cz_fail(err,
                   "no document in any shard: the passage rule (--passages on; docs/formats.md, "
                   "\"Text passages\") dropped all %llu lines of the inputs: %s; --passages off "
                   "keeps every line",
                   (unsigned long long)st->lines_dropped, names);
}

/* The run of `shards` on every rank of w: 0, or 1 once the failure was said. */
static int run_shards(cz_prep_world *w, cz_prep_options o, const tok_args *ta,
                      const char *const *inputs, int n_inputs) {
    int rc = 1;
    cz_error err = {{0}};
    cz_file_list files = {0};
    cz_tokenizer *tok = NULL;
    cz_prep_set set;
    memset(&set, 0, sizeof set);
    set.lock_fd = -1;
    cz_manifest train, heldout;
    memset(&train, 0, sizeof train);
    memset(&heldout, 0, sizeof heldout);
    double t0 = cz_now();
    /* every rank lists every input and loads the vocabulary: they find the
     * same errors, said once */
    int bad = 0;
    for (int i = 0; !bad && i < n_inputs; i++) bad = cz_file_list_add(&files, inputs[i], &err);
    if (!bad) bad = load_tokenizer(ta, &tok, &err);
    if (cz_prep_agree(w, bad, &err)) goto done;
    char staging[PATH_MAX];
    if (begin_set(w, o.out_dir, &set, staging, &err)) goto done;
    const char *out_dir = o.out_dir;
    o.out_dir = staging;
    cz_prep_stats st;
    /* each rank its own inputs and shards: the first failure is said, and
     * all end alike (rank 0 removes the staging directory); once agreed,
     * every rank's shards are in place */
    if (cz_prep_agree(w, cz_prep_shards(&o, tok, &files, &st, &err), &err)) goto done;
    if (w->comm &&
        cz_comm_allreduce_u64(w->comm, (uint64_t *)&st, CZ_PREP_STATS_N, CZ_OP_SUM, &err) != 0) {
        fprintf(stderr, "cloze-prep: error (rank %d): %s\n", w->rank, err.msg);
        cz_comm_abort(w->comm, 1);
    }
    int committed = 0;
    if (o.rank == 0 && st.documents == 0) /* (every rank has every rank's counts) */
        committed = no_document(&files, &st, &err);
    else if (o.rank == 0)
        committed =
            cz_prep_collect_manifests(&o, tok, ta->vocab, ta->merges, &train, &heldout, &err) !=
                        0 ||
                    cz_prep_set_commit(&set, &train, o.heldout > 0 ? &heldout : NULL, &err) != 0
                ? -1
                : 0;
    if (cz_prep_rank0_verdict(w, committed, &err)) goto done;
    if (o.rank == 0) {
        print_summary(&st, cz_now() - t0, cz_tokenizer_kind_of(tok) == CZ_TOK_BPE);
        if (o.progress)
            fprintf(stderr, "cloze-prep: %s/train.manifest%s: set-%04d (%d train shards%s)%s\n",
                    out_dir, o.heldout > 0 ? " and heldout.manifest" : "", set.number,
                    train.n_shards, o.heldout > 0 ? ", held-out shards" : "",
                    set.removed_sets ? ", the previous set removed" : "");
    }
    rc = 0;
done:
    cz_prep_set_end(&set); /* a failed set's staging directory goes */
    cz_manifest_free(&train);
    cz_manifest_free(&heldout);
    cz_tokenizer_free(tok);
    cz_file_list_free(&files);
    return rc;
}

static int cmd_shards(int argc, char **argv) {
    tok_args ta = {0};
    cz_prep_options o = {0};
    o.threads = 1;
    o.progress = 1;
    o.world = 1;
    /* at most argc inputs; argv outlives this function */
    const char *inputs[argc];
    int n_inputs = 0;
    int rc = parse_shards(argc, argv, &ta, &o, inputs, &n_inputs);
    if (rc >= 0) return rc;

    cz_prep_world w = {.comm = NULL, .rank = 0};
    if (cz_launch_size() > 0) {
        cz_error err = {{0}};
        if (cz_comm_init(&w.c, &argc, &argv, &err) != 0) return die(&err);
        w.comm = &w.c;
        w.rank = o.rank = w.c.rank;
        o.world = w.c.size;
        if (o.rank != 0) o.progress = 0;
    }
    rc = run_shards(&w, o, &ta, inputs, n_inputs);
    if (w.comm) cz_comm_finalize(w.comm);
    return rc;
}

/* ------------------------------------------------------------------- vocab */

static const char VOCAB_HELP[] =
    "usage: cloze-prep vocab --kind wordpiece|bpe --size N [--cased] --out FILE\n"
    "                        [--merges-out FILE] INPUTS...\n"
    "Learns a vocabulary of N entries from text files (docs/tokenizers.md).\n"
    "  wordpiece: FILE is a BERT vocab.txt ([PAD] [unused..] [UNK] [CLS] [SEP] [MASK] ...)\n"
    "  bpe:       FILE is encoder.json, the merges go to --merges-out\n"
    "             (default: vocab.bpe next to FILE)\n";

static int cmd_vocab(int argc, char **argv) {
    const char *kind = NULL, *out = NULL, *merges_out = NULL;
    int size = 0, cased = 0, n_inputs = 0;
    const char *inputs[argc];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help")) return fputs(VOCAB_HELP, stdout), 0;
        if (!strcmp(a, "--kind") && more)
            kind = argv[++i];
        else if (!strcmp(a, "--size") && more)
            size = atoi(argv[++i]);
        else if (!strcmp(a, "--out") && more)
            out = argv[++i];
        else if (!strcmp(a, "--merges-out") && more)
            merges_out = argv[++i];
        else if (!strcmp(a, "--cased"))
            cased = 1;
        else if (a[0] == '-' && a[1])
            return bad_option("vocab", argc, argv, i);
        else
            inputs[n_inputs++] = argv[i];
    }
    if (!kind || !out || size <= 0 || n_inputs == 0)
        return usage_error("vocab", "need --kind, --size, --out and inputs");
    cz_file_list files = {0};
    cz_error err = {{0}};
    int rc = 1;
    for (int i = 0; i < n_inputs; i++)
        if (cz_file_list_add(&files, inputs[i], &err) != 0) goto done;
    if (!strcmp(kind, "wordpiece")) {
        if (cz_learn_wordpiece((const char *const *)files.paths, files.n, size, !cased, out,
                               &err) != 0)
            goto done;
    } else if (!strcmp(kind, "bpe")) {
        char mpath[PATH_MAX];
        if (!merges_out) {
            snprintf(mpath, sizeof mpath, "%s", out);
            char *slash = strrchr(mpath, '/');
            snprintf(slash ? slash + 1 : mpath,
                     sizeof mpath - (size_t)(slash ? slash + 1 - mpath : 0), "vocab.bpe");
            merges_out = mpath;
        }
        if (cz_learn_bpe((const char *const *)files.paths, files.n, size, out, merges_out, &err) !=
            0)
            goto done;
    } else {
        cz_file_list_free(&files);
        return usage_error("vocab", "--kind %s: must be wordpiece or bpe", kind);
    }
    rc = 0;
done:
    if (rc) die(&err);
    cz_file_list_free(&files);
    return rc;
}

/* ---------------------------------------------------------------- tokenize */

static const char TOKENIZE_HELP[] =
    "usage: cloze-prep tokenize --vocab FILE [--merges FILE] [--cased] [--tokens] [--whole]\n"
    "Reads lines on stdin and prints one line of token ids per input line (--tokens:\n"
    "the token strings). WordPiece normalises each line first (docs/formats.md);\n"
    "GPT-2 BPE encodes each line's bytes as they are, less its '\\n' (leading,\n"
    "trailing and repeated whitespace, tabs and '\\r' are text, as in GPT-2).\n"
    "  --whole   all of stdin is one text, newlines included: one line of ids\n";

/* All of a stream, for --whole. */
static int read_all(FILE *f, cz_buf *b, cz_error *err) {
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (cz_buf_append(b, chunk, n, err) != 0) return -1;
    return ferror(f) ? cz_fail(err, "stdin: read error") : 0;
}

/* One text to one line of ids (or token strings). */
static int tokenize_text(const cz_tokenizer *tok, const char *text, size_t n, int as_tokens,
                         cz_buf *norm, cz_ids *ids, cz_error *err) {
    norm->len = 0;
    ids->n = 0;
    cz_norm_stats ns = {0, 0};
    /* GPT-2's BPE is lossless: its input is the bytes as they are */
    int bpe = cz_tokenizer_kind_of(tok) == CZ_TOK_BPE;
    if (!bpe && cz_normalize(text, n, 0, norm, &ns, err) != 0) return -1;
    const char *in = bpe ? text : norm->data ? norm->data : "";
    if (cz_tokenizer_encode(tok, in, bpe ? n : norm->len, ids, err) != 0) return -1;
    for (size_t k = 0; k < ids->n; k++) {
        if (k) putchar(' ');
        if (as_tokens)
            fputs(cz_tokenizer_token(tok, ids->ids[k]), stdout);
        else
            printf("%u", ids->ids[k]);
    }
    putchar('\n');
    return 0;
}

static int cmd_tokenize(int argc, char **argv) {
    tok_args ta = {0};
    int as_tokens = 0, whole = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) return fputs(TOKENIZE_HELP, stdout), 0;
        if (tok_arg(&ta, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--tokens"))
            as_tokens = 1;
        else if (!strcmp(argv[i], "--whole"))
            whole = 1;
        else
            return bad_option("tokenize", argc, argv, i);
    }
    cz_error err = {{0}};
    cz_tokenizer *tok = NULL;
    if (load_tokenizer(&ta, &tok, &err) != 0) return die(&err);
    cz_buf norm = {0}, all = {0};
    cz_ids ids = {0};
    int rc = 0;
    if (whole) {
        if (read_all(stdin, &all, &err) != 0 ||
            tokenize_text(tok, all.data ? all.data : "", all.len, as_tokens, &norm, &ids, &err))
            rc = die(&err);
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n') n--;
            /* WordPiece: a CRLF line's '\r' is whitespace either way */
            if (tokenize_text(tok, line, (size_t)n, as_tokens, &norm, &ids, &err) != 0) {
                rc = die(&err);
                break;
            }
        }
        free(line);
    }
    cz_buf_free(&norm);
    cz_buf_free(&all);
    cz_ids_free(&ids);
    cz_tokenizer_free(tok);
    return rc;
}

/* ------------------------------------------------------------------ decode */

static const char DECODE_HELP[] =
    "usage: cloze-prep decode --vocab FILE [--merges FILE] [--whole]\n"
    "Reads lines of token ids on stdin (what tokenize prints) and writes each line's\n"
    "text followed by a newline. GPT-2 BPE gives back the exact bytes: decode of\n"
    "tokenize is the input, and with --whole on both sides (no newline added) byte\n"
    "for byte. WordPiece joins the pieces into space-separated words.\n";

static int cmd_decode(int argc, char **argv) {
    tok_args ta = {0};
    int whole = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) return fputs(DECODE_HELP, stdout), 0;
        if (tok_arg(&ta, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--whole"))
            whole = 1;
        else
            return bad_option("decode", argc, argv, i);
    }
    cz_error err = {{0}};
    cz_tokenizer *tok = NULL;
    if (load_tokenizer(&ta, &tok, &err) != 0) return die(&err);
    uint32_t vs = cz_tokenizer_vocab_size(tok);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    cz_ids ids = {0};
    int rc = 0;
    for (unsigned long lineno = 1; rc == 0 && (n = getline(&line, &cap, stdin)) >= 0; lineno++) {
        ids.n = 0;
        for (char *p = line;;) {
            while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
            if (!*p) break;
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || *p == '-' || errno || v >= vs) {
                int w = (int)strcspn(p, " \t\r\n");
                rc = cz_fail(&err, "stdin line %lu column %zu: '%.*s' is not a token id < %u",
                             lineno, (size_t)(p - line) + 1, w < 40 ? w : 40, p, vs);
                break;
            }
            if (cz_ids_push(&ids, (uint32_t)v, &err) != 0) {
                rc = -1;
                break;
            }
            p = end;
        }
        if (rc) break;
        size_t len = 0;
        char *text = cz_tokenizer_decode(tok, ids.ids, ids.n, &len);
        if (!text) {
            rc = cz_fail(&err, "stdin line %lu: out of memory", lineno);
            break;
        }
        fwrite(text, 1, len, stdout);
        if (!whole) putchar('\n');
        free(text);
    }
    if (rc) die(&err);
    free(line);
    cz_ids_free(&ids);
    cz_tokenizer_free(tok);
    return rc ? 1 : 0;
}

/* ----------------------------------------------------------------- inspect */

static const char INSPECT_HELP[] =
    "usage: cloze-prep inspect [--vocab FILE [--merges FILE]] [--docs N] SHARD\n"
    "Prints the header and counts of a shard and decodes its first N documents\n"
    "(default 3), one sentence per line. Without --vocab the vocabulary named by\n"
    "train.manifest next to the shard is used (BPE: vocab.bpe next to encoder.json).\n";

/* The vocabulary of the train.manifest that lists a shard: next to it, or
 * one directory up (shards live in DIR/set-NNNN/, the manifest in DIR). */
static void vocab_from_manifest(const char *shard, tok_args *ta, char *vbuf, char *mbuf) {
    char dir[PATH_MAX], mpath[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", shard);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    cz_manifest m;
    cz_error err;
    snprintf(mpath, sizeof mpath, "%s/train.manifest", dir);
    if (cz_manifest_load(&m, mpath, &err) != 0) {
        snprintf(mpath, sizeof mpath, "%s/../train.manifest", dir);
        if (cz_manifest_load(&m, mpath, &err) != 0) return;
    }
    snprintf(vbuf, PATH_MAX, "%s", m.vocab_path);
    ta->vocab = vbuf;
    if (!strcmp(m.vocab_kind, "bpe")) {
        cz_prep_manifest_merges(&m, mbuf, PATH_MAX);
        ta->merges = mbuf;
    }
    cz_manifest_free(&m);
}

/* The ids [a, b) of a shard in a malloc'ed array. */
static uint32_t *shard_ids(const cz_shard *s, uint64_t a, uint64_t b) {
    uint32_t *ids = malloc((size_t)(b - a + 1) * sizeof *ids);
    for (uint64_t i = a; ids && i < b; i++) ids[i - a] = cz_shard_token(s, i);
    return ids;
}

/* A document: GPT (BPE) as its text, byte for byte (its sentences, if an
 * older cloze-prep wrote several, carry their separators); BERT one
 * sentence per line; without a vocabulary the ids, one sentence per line. */
static void print_document(const cz_shard *s, const cz_tokenizer *tok, uint64_t d) {
    uint64_t s0 = s->doc_start[d], s1 = s->doc_start[d + 1];
    printf("--- document %llu: %llu sentences, %llu tokens\n", (unsigned long long)d,
           (unsigned long long)(s1 - s0),
           (unsigned long long)(s->sent_start[s1] - s->sent_start[s0]));
    int whole = tok && cz_tokenizer_kind_of(tok) == CZ_TOK_BPE;
    for (uint64_t k = s0; k < s1; k++) {
        uint64_t a = s->sent_start[k], b = whole ? s->sent_start[s1] : s->sent_start[k + 1];
        if (!tok) {
            for (uint64_t i = a; i < b; i++) printf("%s%u", i > a ? " " : "", cz_shard_token(s, i));
            putchar('\n');
            continue;
        }
        uint32_t *ids = shard_ids(s, a, b);
        size_t len = 0;
        char *text = ids ? cz_tokenizer_decode(tok, ids, (size_t)(b - a), &len) : NULL;
        if (text)
            fwrite(text, 1, len, stdout);
        else
            fputs("(out of memory)", stdout);
        putchar('\n');
        free(text);
        free(ids);
        if (whole) break;
    }
}

static int cmd_inspect(int argc, char **argv) {
    tok_args ta = {0};
    int n_docs = 3;
    const char *path = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) return fputs(INSPECT_HELP, stdout), 0;
        if (tok_arg(&ta, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--docs") && i + 1 < argc)
            n_docs = atoi(argv[++i]);
        else if (argv[i][0] == '-')
            return bad_option("inspect", argc, argv, i);
        else
            path = argv[i];
    }
    if (!path) return usage_error("inspect", "need a shard file");
    cz_error err = {{0}};
    cz_shard s;
    if (cz_shard_open(&s, path, 1, &err) != 0) return die(&err);
    const cz_shard_header *h = &s.hdr;
    printf("shard %s\n", path);
    printf("version %u  token_width %u  vocab_size %u  vocab_fingerprint %016llx\n", h->version,
           h->token_width, h->vocab_size, (unsigned long long)h->vocab_fingerprint);
    printf(
        "documents %llu  sentences %llu  tokens %llu  file_size %llu  payload_checksum %016llx\n",
        (unsigned long long)h->n_documents, (unsigned long long)h->n_sentences,
        (unsigned long long)h->n_tokens, (unsigned long long)h->file_size,
        (unsigned long long)h->payload_checksum);
    char vbuf[PATH_MAX], mbuf[PATH_MAX];
    if (!ta.vocab) vocab_from_manifest(path, &ta, vbuf, mbuf);
    cz_tokenizer *tok = NULL;
    if (ta.vocab) {
        if (load_tokenizer(&ta, &tok, &err) != 0) {
            cz_shard_close(&s);
            return die(&err);
        }
        if (cz_tokenizer_fingerprint(tok) != h->vocab_fingerprint) {
            fprintf(stderr,
                    "cloze-prep: error: %s: vocab_fingerprint (offset 16) %016llx does not match "
                    "%s (%016llx)\n",
                    path, (unsigned long long)h->vocab_fingerprint, ta.vocab,
                    (unsigned long long)cz_tokenizer_fingerprint(tok));
            cz_tokenizer_free(tok);
            cz_shard_close(&s);
            return 1;
        }
    }
    for (uint64_t d = 0; d < h->n_documents && d < (uint64_t)n_docs; d++)
        print_document(&s, tok, d);
    cz_tokenizer_free(tok);
    cz_shard_close(&s);
    return 0;
}

/* ------------------------------------------------------------------ verify */

static const char VERIFY_HELP[] =
    "usage: cloze-prep verify MANIFEST\n"
    "Checks every shard of a manifest: header, offsets, boundary tables, payload\n"
    "checksum, token ids < vocab_size, and vocabulary fingerprint, size and counts\n"
    "against the manifest (and against the vocabulary file when it is present).\n"
    "Prints one line per bad shard and exits 1 if any is bad.\n";

/* verify's findings, one line each on stderr */
static void say_line(void *ctx, int warning, const char *line) {
    (void)ctx;
    fprintf(stderr, "cloze-prep: %s: %s\n", warning ? "warning" : "error", line);
}

static int cmd_verify(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[2], "--help")) return fputs(VERIFY_HELP, stdout), 0;
    if (argc != 3) return usage_error("verify", "need one manifest");
    cz_error err = {{0}};
    cz_manifest m;
    if (cz_manifest_load(&m, argv[2], &err) != 0) return die(&err);
    uint64_t tokens = 0;
    int bad = cz_prep_verify(&m, say_line, NULL, &tokens);
    if (!bad) printf("ok: %d shards, %llu tokens\n", m.n_shards, (unsigned long long)tokens);
    cz_manifest_free(&m);
    return bad ? 1 : 0;
}

/* -------------------------------------------------------------------- main */

static const char MAIN_HELP[] = "usage: cloze-prep COMMAND [--help] ...\n"
                                "  shards    text files -> token shards + manifest\n"
                                "  vocab     learn a WordPiece or BPE vocabulary\n"
                                "  tokenize  stdin lines -> token ids\n"
                                "  decode    token ids -> text\n"
                                "  inspect   print a shard's header and first documents\n"
                                "  verify    check every shard of a manifest\n"
                                "Formats: docs/formats.md\n";

int main(int argc, char **argv) {
    cz_log_setup(0, CZ_LOG_INFO);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(MAIN_HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *c = argv[1];
    if (!strcmp(c, "shards")) return cmd_shards(argc, argv);
    if (!strcmp(c, "vocab")) return cmd_vocab(argc, argv);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc, argv);
    if (!strcmp(c, "decode")) return cmd_decode(argc, argv);
    if (!strcmp(c, "inspect")) return cmd_inspect(argc, argv);
    if (!strcmp(c, "verify")) return cmd_verify(argc, argv);
    fprintf(stderr, "cloze-prep: unknown command '%s'\n%s", c, MAIN_HELP);
    return 2;
}
