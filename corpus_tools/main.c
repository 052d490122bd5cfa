/* cloze-prep: raw text -> vocabularies, token shards and manifests.
 *
 *   cloze-prep shards   --vocab F [--merges F] --out DIR --shards S ... INPUTS...
 *   cloze-prep vocab    --kind wordpiece|bpe --size N --out FILE INPUTS...
 *   cloze-prep tokenize --vocab F [--merges F] [--cased] [--tokens]   (stdin)
 *   cloze-prep inspect  [--vocab F [--merges F]] [--docs N] SHARD
 *   cloze-prep verify   MANIFEST
 *
 * Formats: docs/formats.md. Every failure is one line on stderr naming the
 * file and the offset or field, and a non-zero exit. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cloze/shard.h"
#include "prep_input.h"
#include "prep_shards.h"
#include "prep_text.h"
#include "tokenizer.h"
#include "vocab_learn.h"

static int die(const cz_error *err) {
    fprintf(stderr, "cloze-prep: error: %s\n", err->msg);
    return 1;
}

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "cloze-prep %s: %s (see cloze-prep %s --help)\n", cmd, msg, cmd);
    return 2;
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
 * without the tokens its kind needs is the wrong file. */
static int load_tokenizer(const tok_args *a, cz_tokenizer **tok, cz_error *err) {
    if (!a->vocab) return cz_fail(err, "--vocab is required");
    if (a->merges) {
        if (cz_tokenizer_load_bpe(tok, a->vocab, a->merges, err) != 0) return -1;
        return 0;
    }
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    o.lower_case = !a->cased;
    if (cz_tokenizer_load_wordpiece(tok, a->vocab, &o, err) != 0) return -1;
    if (cz_tokenizer_token_id(*tok, "[UNK]") < 0) {
        cz_tokenizer_free(*tok);
        *tok = NULL;
        return cz_fail(err, "%s: no [UNK] entry: not a WordPiece vocab.txt (BPE needs --merges)",
                       a->vocab);
    }
    return 0;
}

/* ------------------------------------------------------------------ shards */

static const char SHARDS_HELP[] =
    "usage: cloze-prep shards --vocab FILE [--merges FILE] [--cased] --out DIR --shards S\n"
    "                         [--heldout FRACTION] [--threads N] [--format F]\n"
    "                         [--jsonl-field NAME] [--wikitext-detok] [--quiet] INPUTS...\n"
    "Tokenizes text files/directories into S shards DIR/train-KKKKK.bin and\n"
    "DIR/train.manifest; --heldout puts that fraction of documents (chosen by a hash of\n"
    "their normalised text) into DIR/heldout-RRRRR.bin and DIR/heldout.manifest.\n"
    "  --vocab FILE       WordPiece vocab.txt, or GPT-2 encoder.json with --merges vocab.bpe\n"
    "  --cased            WordPiece: keep case and accents (default: uncased)\n"
    "  --format F         auto (default), text, wikitext, jsonl, gutenberg\n"
    "  --jsonl-field NAME JSON Lines: the string field with the text (default: text)\n"
    "  --wikitext-detok   turn ' @-@ ', ' @,@ ', ' @.@ ' into '-', ',', '.'\n"
    "  --threads N        tokenizer threads (default 1); output is identical for any N\n"
    "Under mpirun, input file i goes to rank i %% np; rank r writes train shards\n"
    "k with k %% np == r (S >= np) and heldout-r; rank 0 writes the manifests.\n";

static int mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

static void print_summary(const cz_prep_stats *s, double secs) {
    fprintf(stderr,
            "cloze-prep: %llu documents (%llu held out), %llu sentences, %llu tokens, "
            "[UNK] %.4f%%, %llu invalid bytes replaced, %llu control chars dropped, "
            "%.1f MB in %.1f s (%.2f MB/s)\n",
            (unsigned long long)s->documents, (unsigned long long)s->heldout_documents,
            (unsigned long long)s->sentences, (unsigned long long)s->tokens,
            s->tokens ? 100.0 * (double)s->unk / (double)s->tokens : 0.0,
            (unsigned long long)s->bytes_replaced, (unsigned long long)s->chars_dropped,
            (double)s->bytes_in / 1e6, secs, secs > 0 ? (double)s->bytes_in / 1e6 / secs : 0.0);
}

static int cmd_shards(int argc, char **argv) {
    tok_args ta = {0};
    cz_prep_options o = {0};
    o.threads = 1;
    o.progress = 1;
    o.world = 1;
    cz_file_list files = {0};
    cz_error err = {{0}};
    /* at most argc inputs; argv outlives this function */
    const char *inputs[argc];
    int n_inputs = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help")) return fputs(SHARDS_HELP, stdout), 0;
        if (tok_arg(&ta, argc, argv, &i)) continue;
        if (!strcmp(a, "--out") && more)
            o.out_dir = argv[++i];
        else if (!strcmp(a, "--shards") && more)
            o.n_shards = atoi(argv[++i]);
        else if (!strcmp(a, "--heldout") && more)
            o.heldout = atof(argv[++i]);
        else if (!strcmp(a, "--threads") && more)
            o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--jsonl-field") && more)
            o.jsonl_field = argv[++i];
        else if (!strcmp(a, "--wikitext-detok"))
            o.wikitext_detok = 1;
        else if (!strcmp(a, "--quiet"))
            o.progress = 0;
        else if (!strcmp(a, "--format") && more) {
            if (cz_input_format_parse(argv[++i], &o.fmt) != 0)
                return usage_error("shards", "unknown --format");
        } else if (a[0] == '-' && a[1])
            return usage_error("shards", "unknown option");
        else
            inputs[n_inputs++] = argv[i]; /* options may follow inputs */
    }
    if (!o.out_dir || o.n_shards < 1 || n_inputs == 0 || o.threads < 1 || o.heldout < 0 ||
        o.heldout >= 1)
        return usage_error("shards", "need --vocab, --out, --shards >= 1 and inputs");

    int use_mpi = mpi_launched();
    if (use_mpi) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &o.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &o.world);
        if (o.rank != 0) o.progress = 0;
    }
    int rc = 1;
    cz_tokenizer *tok = NULL;
    double t0 = cz_now();
    if (mkdir(o.out_dir, 0755) != 0 && errno != EEXIST) {
        cz_fail(&err, "%s: cannot create directory: %s", o.out_dir, strerror(errno));
        goto fail;
    }
    for (int i = 0; i < n_inputs; i++)
        if (cz_file_list_add(&files, inputs[i], &err) != 0) goto fail;
    if (load_tokenizer(&ta, &tok, &err) != 0) goto fail;
    cz_prep_stats st;
    if (cz_prep_shards(&o, tok, &files, &st, &err) != 0) goto fail;
    if (use_mpi) {
        cz_prep_stats sum;
        MPI_Reduce(&st, &sum, CZ_PREP_STATS_N, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        st = sum;
        MPI_Barrier(MPI_COMM_WORLD); /* every rank's shards are in place */
    }
    if (o.rank == 0) {
        if (cz_prep_write_manifests(&o, tok, ta.vocab, &err) != 0) goto fail;
        print_summary(&st, cz_now() - t0);
    }
    rc = 0;
fail:
    if (rc != 0) {
        die(&err);
        if (use_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cz_tokenizer_free(tok);
    cz_file_list_free(&files);
    if (use_mpi) MPI_Finalize();
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
            return usage_error("vocab", "unknown option");
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
        return usage_error("vocab", "--kind must be wordpiece or bpe");
    }
    rc = 0;
done:
    if (rc) die(&err);
    cz_file_list_free(&files);
    return rc;
}

/* ---------------------------------------------------------------- tokenize */

static const char TOKENIZE_HELP[] =
    "usage: cloze-prep tokenize --vocab FILE [--merges FILE] [--cased] [--tokens]\n"
    "Reads lines on stdin, normalises each (docs/formats.md) and prints one line of\n"
    "token ids per input line (--tokens: the token strings).\n";

static int cmd_tokenize(int argc, char **argv) {
    tok_args ta = {0};
    int as_tokens = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) return fputs(TOKENIZE_HELP, stdout), 0;
        if (tok_arg(&ta, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--tokens"))
            as_tokens = 1;
        else
            return usage_error("tokenize", "unknown option");
    }
    cz_error err = {{0}};
    cz_tokenizer *tok = NULL;
    if (load_tokenizer(&ta, &tok, &err) != 0) return die(&err);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    cz_buf norm = {0};
    cz_ids ids = {0};
    int rc = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        norm.len = 0;
        ids.n = 0;
        cz_norm_stats ns = {0, 0};
        if (cz_normalize(line, (size_t)n, 0, &norm, &ns, &err) != 0 ||
            cz_tokenizer_encode(tok, norm.data ? norm.data : "", norm.len, &ids, &err) != 0) {
            rc = die(&err);
            break;
        }
        for (size_t k = 0; k < ids.n; k++) {
            if (k) putchar(' ');
            if (as_tokens)
                fputs(cz_tokenizer_token(tok, ids.ids[k]), stdout);
            else
                printf("%u", ids.ids[k]);
        }
        putchar('\n');
    }
    free(line);
    cz_buf_free(&norm);
    cz_ids_free(&ids);
    cz_tokenizer_free(tok);
    return rc;
}

/* ----------------------------------------------------------------- inspect */

static const char INSPECT_HELP[] =
    "usage: cloze-prep inspect [--vocab FILE [--merges FILE]] [--docs N] SHARD\n"
    "Prints the header and counts of a shard and decodes its first N documents\n"
    "(default 3), one sentence per line. Without --vocab the vocabulary named by\n"
    "train.manifest next to the shard is used (BPE: vocab.bpe next to encoder.json).\n";

/* The vocabulary of the manifest next to a shard, when there is one. */
static void vocab_from_manifest(const char *shard, tok_args *ta, char *vbuf, char *mbuf) {
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s", shard);
    char *slash = strrchr(mpath, '/');
    snprintf(slash ? slash + 1 : mpath, sizeof mpath - (size_t)(slash ? slash + 1 - mpath : 0),
             "train.manifest");
    cz_manifest m;
    cz_error err;
    if (cz_manifest_load(&m, mpath, &err) != 0) return;
    snprintf(vbuf, PATH_MAX, "%s", m.vocab_path);
    ta->vocab = vbuf;
    if (!strcmp(m.vocab_kind, "bpe")) {
        snprintf(mbuf, PATH_MAX, "%s", m.vocab_path);
        char *s = strrchr(mbuf, '/');
        snprintf(s ? s + 1 : mbuf, PATH_MAX - (size_t)(s ? s + 1 - mbuf : 0), "vocab.bpe");
        ta->merges = mbuf;
    }
    cz_manifest_free(&m);
}

static void print_document(const cz_shard *s, const cz_tokenizer *tok, uint64_t d) {
    uint64_t s0 = s->doc_start[d], s1 = s->doc_start[d + 1];
    printf("--- document %llu: %llu sentences, %llu tokens\n", (unsigned long long)d,
           (unsigned long long)(s1 - s0),
           (unsigned long long)(s->sent_start[s1] - s->sent_start[s0]));
    uint32_t *ids = malloc(sizeof(uint32_t) * 4096);
    for (uint64_t k = s0; k < s1; k++) {
        uint64_t a = s->sent_start[k], b = s->sent_start[k + 1];
        if (!tok || b - a > 4096) {
            for (uint64_t i = a; i < b; i++) printf("%s%u", i > a ? " " : "", cz_shard_token(s, i));
            putchar('\n');
            continue;
        }
        for (uint64_t i = a; i < b; i++) ids[i - a] = cz_shard_token(s, i);
        char *text = cz_tokenizer_decode(tok, ids, (size_t)(b - a));
        /* BPE sentences after the first carry their separating space or
         * paragraph break */
        printf("%s\n", text ? text + (text[0] == ' ' || text[0] == '\n') : "(decode failed)");
        free(text);
    }
    free(ids);
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
            return usage_error("inspect", "unknown option");
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

/* The fingerprint of the vocabulary files as the tokenizer computes it:
 * FNV-1a 64 of vocab.txt, or of vocab.bpe seeded with that of encoder.json. */
static int file_fingerprint(const cz_manifest *m, uint64_t *fp, char *which, size_t len) {
    void *a = NULL, *b = NULL;
    size_t na, nb;
    cz_error e;
    if (cz_read_file(m->vocab_path, &a, &na, &e) != 0) return -1;
    *fp = cz_fnv1a64(a, na, CZ_FNV_SEED);
    snprintf(which, len, "%s", m->vocab_path);
    cz_free(a);
    if (!strcmp(m->vocab_kind, "bpe")) {
        char mp[PATH_MAX];
        snprintf(mp, sizeof mp, "%s", m->vocab_path);
        char *s = strrchr(mp, '/');
        snprintf(s ? s + 1 : mp, sizeof mp - (size_t)(s ? s + 1 - mp : 0), "vocab.bpe");
        if (cz_read_file(mp, &b, &nb, &e) != 0) return -1;
        *fp = cz_fnv1a64(b, nb, *fp);
        cz_free(b);
    }
    return 0;
}

static int verify_shard(const cz_manifest *m, const cz_manifest_shard *e, cz_error *err) {
    cz_shard s;
    if (cz_shard_open(&s, e->path, 1, err) != 0) return -1;
    const cz_shard_header *h = &s.hdr;
    int rc = 0;
    if (h->vocab_fingerprint != m->vocab_fingerprint)
        rc = cz_fail(err, "%s: vocab_fingerprint (offset 16) %016llx, manifest %s says %016llx",
                     e->path, (unsigned long long)h->vocab_fingerprint, m->path,
                     (unsigned long long)m->vocab_fingerprint);
    else if (h->vocab_size != m->vocab_size)
        rc = cz_fail(err, "%s: vocab_size (offset 24) %u, manifest %s says %u", e->path,
                     h->vocab_size, m->path, m->vocab_size);
    else if (h->n_tokens != e->n_tokens || h->n_sentences != e->n_sentences ||
             h->n_documents != e->n_documents || h->payload_checksum != e->payload_checksum)
        rc = cz_fail(err, "%s: counts/checksum (offsets 32-95) differ from its line in %s", e->path,
                     m->path);
    cz_shard_close(&s);
    return rc;
}

static int cmd_verify(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[2], "--help")) return fputs(VERIFY_HELP, stdout), 0;
    if (argc != 3) return usage_error("verify", "need one manifest");
    cz_error err = {{0}};
    cz_manifest m;
    if (cz_manifest_load(&m, argv[2], &err) != 0) return die(&err);
    int bad = 0;
    uint64_t fp, tokens = 0;
    char which[PATH_MAX];
    if (file_fingerprint(&m, &fp, which, sizeof which) == 0) {
        if (fp != m.vocab_fingerprint) {
            fprintf(stderr,
                    "cloze-prep: error: %s: vocab line: fingerprint %016llx, but %s now hashes to "
                    "%016llx\n",
                    m.path, (unsigned long long)m.vocab_fingerprint, which, (unsigned long long)fp);
            bad++;
        }
    } else {
        fprintf(stderr,
                "cloze-prep: warning: %s: vocabulary file %s not readable, its fingerprint is not "
                "checked\n",
                m.path, m.vocab_path);
    }
    for (int i = 0; i < m.n_shards; i++) {
        if (verify_shard(&m, &m.shards[i], &err) != 0) {
            die(&err);
            bad++;
        } else {
            tokens += m.shards[i].n_tokens;
        }
    }
    if (!bad) printf("ok: %d shards, %llu tokens\n", m.n_shards, (unsigned long long)tokens);
    cz_manifest_free(&m);
    return bad ? 1 : 0;
}

/* -------------------------------------------------------------------- main */

static const char MAIN_HELP[] = "usage: cloze-prep COMMAND [--help] ...\n"
                                "  shards    text files -> token shards + manifest\n"
                                "  vocab     learn a WordPiece or BPE vocabulary\n"
                                "  tokenize  stdin lines -> token ids\n"
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
    if (!strcmp(c, "inspect")) return cmd_inspect(argc, argv);
    if (!strcmp(c, "verify")) return cmd_verify(argc, argv);
    fprintf(stderr, "cloze-prep: unknown command '%s'\n%s", c, MAIN_HELP);
    return 2;
}
