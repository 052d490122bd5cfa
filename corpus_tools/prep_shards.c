/* prep_shards: documents -> token shards, see cloze/prep.h. */
#include "cloze/prep.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cloze/sha256.h"
#include "cloze/shard.h"

/* ---------------------------------------------------------- one document */

static int push_sent_len(cz_prep_doc *d, uint32_t n, cz_error *err) {
    if (d->n_sent == d->cap_sent) {
        size_t c = d->cap_sent ? 2 * d->cap_sent : 64;
        uint32_t *p = realloc(d->sent_len, c * sizeof *p);
        if (!p) return cz_fail(err, "out of memory (sentence lengths)");
        d->sent_len = p;
        d->cap_sent = c;
    }
    d->sent_len[d->n_sent++] = n;
    return 0;
}

/* GPT mode: the document's bytes are its text, encoded in one piece exactly
 * as GPT-2's encoder would encode them, and stored as one "sentence" (GPT
 * training reads documents as a token stream; sentences are BERT's). */
static int prep_gpt_document(const cz_tokenizer *tok, cz_prep_doc *d, cz_error *err) {
    if (cz_tokenizer_encode(tok, d->norm.data ? d->norm.data : "", d->norm.len, &d->ids, err) != 0)
        return -1;
    if (d->ids.n > UINT32_MAX) return cz_fail(err, "document of %zu tokens", d->ids.n);
    return d->ids.n ? push_sent_len(d, (uint32_t)d->ids.n, err) : 0;
}

int cz_prep_document(const cz_tokenizer *tok, const char *raw, size_t len, int detok,
                     cz_prep_doc *d, cz_error *err) {
    d->norm.len = 0;
    d->spans.n = 0;
    d->ids.n = 0;
    d->n_sent = 0;
    memset(&d->st, 0, sizeof d->st);
    d->st.bytes_in = len;
    cz_norm_stats ns = {0, 0};
    int bpe = cz_tokenizer_kind_of(tok) == CZ_TOK_BPE;
    if ((bpe ? cz_verbatim : cz_normalize)(raw, len, detok, &d->norm, &ns, err) != 0) return -1;
    d->st.bytes_replaced = ns.bytes_replaced;
    d->st.chars_dropped = ns.chars_dropped;
    d->hash = cz_fnv1a64(d->norm.data, d->norm.len, CZ_FNV_SEED);
    if (bpe) {
        if (prep_gpt_document(tok, d, err) != 0) return -1;
    } else {
        if (cz_split_sentences(d->norm.data, d->norm.len, &d->spans, err) != 0) return -1;
        int32_t unk = cz_tokenizer_token_id(tok, "[UNK]");
        for (size_t i = 0; i < d->spans.n; i++) {
            size_t before = d->ids.n;
            if (cz_tokenizer_encode(tok, d->norm.data + d->spans.v[i].start, d->spans.v[i].len,
                                    &d->ids, err) != 0)
                return -1;
            uint32_t got = (uint32_t)(d->ids.n - before);
            if (got == 0) continue;
            if (push_sent_len(d, got, err) != 0) return -1;
            if (unk >= 0)
                for (size_t k = before; k < d->ids.n; k++)
                    d->st.unk += d->ids.ids[k] == (uint32_t)unk;
        }
    }
    d->st.sentences = d->n_sent;
    d->st.tokens = d->ids.n;
    d->st.documents = d->ids.n > 0;
    return 0;
}

void cz_prep_doc_free(cz_prep_doc *d) {
    cz_buf_free(&d->norm);
    cz_spans_free(&d->spans);
    cz_ids_free(&d->ids);
    free(d->sent_len);
    memset(d, 0, sizeof *d);
}

int cz_prep_is_heldout(uint64_t hash, double fraction) {
    /* the top 53 bits as a uniform number in [0, 1) */
    return (double)(hash >> 11) * 0x1p-53 < fraction;
}

static void stats_add(cz_prep_stats *a, const cz_prep_stats *b) {
    uint64_t *x = (uint64_t *)a;
    const uint64_t *y = (const uint64_t *)b;
    for (int i = 0; i < CZ_PREP_STATS_N; i++) x[i] += y[i];
}

/* -------------------------------------------------------------- the pipeline */

/* Enough documents per batch that the serial read/write between two
 * parallel loops is short even for one-paragraph documents. */
#define BATCH_DOCS 4096
#define BATCH_BYTES (16u << 20)
#define SLOT_KEEP_BYTES (64u << 10)

typedef struct batch {
    cz_buf raw[BATCH_DOCS];
    cz_prep_doc doc[BATCH_DOCS];
    int rc[BATCH_DOCS];
    int first_bad; /* lowest index whose document failed, -1 if none */
    cz_error err;  /* its message */
    int n;
    size_t bytes;
} batch;

typedef struct run {
    const cz_prep_options *o;
    const cz_tokenizer *tok;
    cz_shard_writer **train; /* the shards this rank owns */
    int n_train;
    cz_shard_writer *heldout;
    uint64_t n_train_docs; /* train documents written so far: picks the shard */
    cz_prep_stats st;
    double t0, last_progress;
    int progress_shown; /* a live progress line is on the terminal */
    uint64_t bytes_total;
    const _Atomic uint64_t *bytes_read; /* advanced by the reader thread */
} run;

/* A live progress line, on a terminal only (a log keeps no \r lines), and
 * erased when the pipeline ends (final): what stays is the summary line, or
 * the error line alone (a finished progress line used to stand before it). */
static void progress(run *r, int final) {
    double now = cz_now();
    if (!r->o->progress || (!final && now - r->last_progress < 1.0)) return;
    if (final) {
        if (r->progress_shown) fprintf(stderr, "\r\033[K");
        r->progress_shown = 0;
        return;
    }
    if (!isatty(STDERR_FILENO)) return;
    r->last_progress = now;
    uint64_t done = atomic_load(r->bytes_read);
    double dt = now - r->t0, mb = (double)done / 1e6;
    double rate = dt > 0 ? mb / dt : 0;
    double left = rate > 0 ? ((double)r->bytes_total / 1e6 - mb) / rate : 0;
    char eta[32];
    fprintf(stderr, "\rcloze-prep: %.1f / %.1f MB  %.1f MB/s  ETA %s  %llu docs   ", mb,
            (double)r->bytes_total / 1e6, rate, cz_format_duration(left, eta, sizeof eta),
            (unsigned long long)r->st.documents);
    r->progress_shown = 1;
}

/* Tokenizes a full batch on the OpenMP pool, then writes its documents in
 * read order: the output does not depend on the thread count. */
static int write_batch(run *r, batch *b, cz_error *err) {
    int threads = r->o->threads > 0 ? r->o->threads : 1;
    b->first_bad = -1;
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (int i = 0; i < b->n; i++) {
        cz_error e;
        b->rc[i] = cz_prep_document(r->tok, b->raw[i].data, b->raw[i].len, r->o->wikitext_detok,
                                    &b->doc[i], &e);
        if (b->rc[i] != 0) {
            /* report the first failing document whatever the thread timing */
#pragma omp critical(cz_prep_batch_error)
            if (b->first_bad < 0 || i < b->first_bad) {
                b->first_bad = i;
                b->err = e;
            }
        }
    }
    for (int i = 0; i < b->n; i++) {
        cz_prep_doc *d = &b->doc[i];
        if (b->rc[i] != 0) {
            *err = b->err;
            return -1;
        }
        d->st.bytes_in = 0; /* counted per file, by the reader */
        if (d->ids.n == 0) {
            stats_add(&r->st, &d->st);
            continue;
        }
        cz_shard_writer *w;
        if (r->heldout && cz_prep_is_heldout(d->hash, r->o->heldout)) {
            w = r->heldout;
            d->st.heldout_documents = 1;
        } else {
            w = r->train[r->n_train_docs++ % (uint64_t)r->n_train];
        }
        stats_add(&r->st, &d->st);
        if (cz_shard_writer_add_document(w, d->ids.ids, d->sent_len, d->n_sent, err) != 0)
            return -1;
    }
    /* A slot that once held a huge document gives its memory back, so
     * that what stays allocated is bounded by the batch, not by the
     * largest document seen in every slot. */
    for (int i = 0; i < b->n; i++) {
        if (b->raw[i].cap > SLOT_KEEP_BYTES) cz_buf_free(&b->raw[i]);
        if (b->doc[i].norm.cap > SLOT_KEEP_BYTES) cz_prep_doc_free(&b->doc[i]);
    }
    b->n = 0;
    b->bytes = 0;
    progress(r, 0);
    return 0;
}

/* The reader thread: fills the two batches in turn while the main thread
 * tokenizes and writes the other one (reader -> worker pool -> ordered
 * writer, with at most two batches in memory). */
typedef struct feeder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    batch *slot[2];
    int full[2]; /* 1: filled, the main thread's turn */
    int last[2]; /* 1: nothing follows this batch (end of input or error) */
    int stop;    /* the main thread gave up */
    int rc;      /* the reader failed; err says why */
    cz_error err;
    const cz_prep_options *o;
    const cz_file_list *files;
    int verbatim;                /* GPT mode: documents keep their bytes (cloze/prep.h) */
    _Atomic uint64_t bytes_read; /* for progress */
    uint64_t bytes_in;           /* whole files consumed, for the summary */
    uint64_t lines_dropped;      /* lines that were no text passage (--passages) */
    uint64_t wiki_unmarked;      /* WikiExtractor files without heading marks (cz_prep_stats) */
} feeder;

/* Fills b from the files; returns 1 when the input is exhausted (or failed). */
static int fill_batch(feeder *f, batch *b, cz_reader *rd, int *open, int *next_file) {
    while (b->n < BATCH_DOCS && b->bytes < BATCH_BYTES) {
        if (!*open) {
            if (*next_file >= f->files->n) return 1;
            const char *path = f->files->paths[*next_file];
            *next_file += f->o->world;
            if (cz_reader_open(rd, path, f->o->fmt, f->o->jsonl_field, f->verbatim, &f->err) != 0) {
                f->rc = -1;
                return 1;
            }
            cz_reader_set_passages(rd, f->o->passages);
            *open = 1;
        }
        int got = cz_reader_next(rd, &b->raw[b->n], &f->err);
        if (got == 1) {
            b->bytes += b->raw[b->n].len;
            b->n++;
            atomic_store(&f->bytes_read, f->bytes_in + rd->offset);
            continue;
        }
        if (got < 0) {
            f->rc = -1;
            return 1;
        }
        /* input bytes as read, skipped lines and markup included */
        f->bytes_in += rd->offset;
        f->lines_dropped += rd->lines_dropped;
        f->wiki_unmarked += rd->passages && rd->lines_dropped > 0 && rd->headings_marked == 0 &&
                            (rd->fmt == CZ_FMT_WIKIEXTRACTOR || rd->wiki_json);
        atomic_store(&f->bytes_read, f->bytes_in);
        cz_reader_close(rd);
        *open = 0;
    }
    return 0;
}

static void *feeder_main(void *arg) {
    feeder *f = arg;
    cz_reader rd;
    int open = 0, next_file = f->o->rank;
    for (int k = 0;; k ^= 1) {
        pthread_mutex_lock(&f->mu);
        while (f->full[k] && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) break;
        int last = fill_batch(f, f->slot[k], &rd, &open, &next_file);
        pthread_mutex_lock(&f->mu);
        f->full[k] = 1;
        f->last[k] = last;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (last) break;
    }
    if (open) cz_reader_close(&rd);
    return NULL;
}

/* The main thread's side: takes full batches in order and writes them. */
static int consume(run *r, feeder *f, cz_error *err) {
    for (int k = 0;; k ^= 1) {
        pthread_mutex_lock(&f->mu);
        while (!f->full[k]) pthread_cond_wait(&f->cv, &f->mu);
        int last = f->last[k];
        pthread_mutex_unlock(&f->mu);
        if (write_batch(r, f->slot[k], err) != 0) return -1;
        if (last) return f->rc ? (*err = f->err, -1) : 0;
        pthread_mutex_lock(&f->mu);
        f->full[k] = 0;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
    }
}

static int run_pipeline(run *r, const cz_file_list *files, cz_error *err) {
    feeder f;
    memset(&f, 0, sizeof f);
    f.o = r->o;
    f.files = files;
    f.verbatim = cz_tokenizer_kind_of(r->tok) == CZ_TOK_BPE;
    atomic_init(&f.bytes_read, 0);
    r->bytes_read = &f.bytes_read;
    f.slot[0] = calloc(1, sizeof(batch));
    f.slot[1] = calloc(1, sizeof(batch));
    int rc = -1;
    pthread_t th;
    if (!f.slot[0] || !f.slot[1]) {
        cz_fail(err, "out of memory (batches)");
        goto done;
    }
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    if (pthread_create(&th, NULL, feeder_main, &f) != 0) {
        cz_fail(err, "cannot start the reader thread");
    } else {
        rc = consume(r, &f, err);
        pthread_mutex_lock(&f.mu);
        f.stop = 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        pthread_join(th, NULL);
        r->st.bytes_in = f.bytes_in;
        r->st.lines_dropped = f.lines_dropped;
        r->st.wiki_files_unmarked = f.wiki_unmarked;
        progress(r, 1);
        r->bytes_read = NULL; /* f dies with this function */
    }
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
done:
    for (int s = 0; s < 2; s++) {
        if (!f.slot[s]) continue;
        for (int i = 0; i < BATCH_DOCS; i++) {
            cz_buf_free(&f.slot[s]->raw[i]);
            cz_prep_doc_free(&f.slot[s]->doc[i]);
        }
        free(f.slot[s]);
    }
    return rc;
}

static void shard_path(char *buf, size_t len, const char *dir, const char *kind, int k) {
    snprintf(buf, len, "%s/%s-%05d.bin", dir, kind, k);
}

static void abort_all(run *r) {
    for (int i = 0; i < r->n_train; i++) cz_shard_writer_abort(r->train[i]);
    cz_shard_writer_abort(r->heldout);
    r->n_train = 0;
    r->heldout = NULL;
}

static int open_writers(run *r, cz_error *err) {
    const cz_prep_options *o = r->o;
    uint32_t vs = cz_tokenizer_vocab_size(r->tok);
    uint64_t fp = cz_tokenizer_fingerprint(r->tok);
    char path[2048];
    for (int k = o->rank; k < o->n_shards; k += o->world) {
        shard_path(path, sizeof path, o->out_dir, "train", k);
        if (cz_shard_writer_open(&r->train[r->n_train], path, vs, fp, err) != 0) return -1;
        r->n_train++;
    }
    if (o->heldout > 0) {
        shard_path(path, sizeof path, o->out_dir, "heldout", o->rank);
        if (cz_shard_writer_open(&r->heldout, path, vs, fp, err) != 0) return -1;
    }
    return 0;
}

int cz_prep_shards(const cz_prep_options *o, const cz_tokenizer *tok, const cz_file_list *files,
                   cz_prep_stats *st, cz_error *err) {
    memset(st, 0, sizeof *st);
    if (o->n_shards < o->world)
        return cz_fail(err, "--shards %d: need at least one shard per rank (%d ranks)", o->n_shards,
                       o->world);
    run r = {0};
    r.o = o;
    r.tok = tok;
    r.t0 = r.last_progress = cz_now();
    r.bytes_total = files->total_bytes / (uint64_t)o->world; /* about this rank's share */
    r.train = calloc((size_t)o->n_shards, sizeof *r.train);
    int rc = -1;
    if (!r.train) {
        cz_fail(err, "out of memory");
        goto done;
    }
    if (open_writers(&r, err) != 0 || run_pipeline(&r, files, err) != 0) goto done;
    for (int i = 0; i < r.n_train; i++) {
        cz_shard_writer *w = r.train[i];
        r.train[i] = NULL;
        if (cz_shard_writer_finish(w, NULL, err) != 0) goto done;
    }
    if (r.heldout) {
        cz_shard_writer *w = r.heldout;
        r.heldout = NULL;
        if (cz_shard_writer_finish(w, NULL, err) != 0) goto done;
    }
    *st = r.st;
    rc = 0;
done:
    if (rc != 0 && r.train) abort_all(&r);
    free(r.train);
    return rc;
}

/* ---------------------------------------------------------------- manifests */

static void special_ids(cz_manifest *m, const cz_tokenizer *tok) {
    m->cls_id = cz_tokenizer_token_id(tok, "[CLS]");
    m->sep_id = cz_tokenizer_token_id(tok, "[SEP]");
    m->mask_id = cz_tokenizer_token_id(tok, "[MASK]");
    m->pad_id = cz_tokenizer_token_id(tok, "[PAD]");
    m->unk_id = cz_tokenizer_token_id(tok, "[UNK]");
    m->eot_id = cz_tokenizer_token_id(tok, "<|endoftext|>");
}

/* Adds the shard at path to m (opened to read its header), or removes it
 * when it holds no document. */
static int add_shard(cz_manifest *m, const char *path, cz_error *err) {
    cz_shard s;
    if (cz_shard_open(&s, path, 0, err) != 0) return -1;
    cz_shard_header h = s.hdr;
    cz_shard_close(&s);
    if (h.n_documents == 0) {
        unlink(path);
        return 0;
    }
    cz_manifest_shard *e = &m->shards[m->n_shards++];
    snprintf(e->path, sizeof e->path, "%s", path);
    e->n_tokens = h.n_tokens;
    e->n_sentences = h.n_sentences;
    e->n_documents = h.n_documents;
    e->payload_checksum = h.payload_checksum;
    return 0;
}

/* The vocabulary record of a manifest: kind, size, fingerprint, and each
 * file's absolute path, path as given and SHA-256. */
static int vocab_record(cz_manifest *m, const cz_tokenizer *tok, const char *vocab_path,
                        const char *merges_path, cz_error *err) {
    snprintf(m->vocab_kind, sizeof m->vocab_kind, "%s",
             cz_tokenizer_kind_of(tok) == CZ_TOK_BPE ? "bpe" : "wordpiece");
    m->vocab_size = cz_tokenizer_vocab_size(tok);
    m->vocab_fingerprint = cz_tokenizer_fingerprint(tok);
    const char *given[CZ_VOCAB_FILES] = {vocab_path, merges_path};
    for (int k = 0; k < CZ_VOCAB_FILES; k++) {
        if (!given[k]) continue;
        cz_manifest_file *f = &m->vocab_files[k];
        char abs[PATH_MAX];
        snprintf(f->path, sizeof f->path, "%s", realpath(given[k], abs) ? abs : given[k]);
        snprintf(f->given, sizeof f->given, "%s", given[k]);
        if (cz_sha256_file(given[k], f->sha256, err) != 0) return -1;
    }
    snprintf(m->vocab_path, sizeof m->vocab_path, "%s", m->vocab_files[CZ_VOCAB_FILE_VOCAB].path);
    special_ids(m, tok);
    return 0;
}

int cz_prep_collect_manifests(const cz_prep_options *o, const cz_tokenizer *tok,
                              const char *vocab_path, const char *merges_path, cz_manifest *train,
                              cz_manifest *heldout, cz_error *err) {
    memset(train, 0, sizeof *train);
    memset(heldout, 0, sizeof *heldout);
    if (vocab_record(train, tok, vocab_path, merges_path, err) != 0) return -1;
    *heldout = *train;
    int cap = o->n_shards > o->world ? o->n_shards : o->world;
    train->shards = cz_alloc((size_t)cap * sizeof *train->shards, err);
    heldout->shards = cz_alloc((size_t)o->world * sizeof *heldout->shards, err);
    if (!train->shards || !heldout->shards) goto fail;
    char path[2048];
    for (int k = 0; k < o->n_shards; k++) {
        shard_path(path, sizeof path, o->out_dir, "train", k);
        if (add_shard(train, path, err) != 0) goto fail;
    }
    if (train->n_shards == 0) {
        cz_fail(err, "no document in any shard: the inputs hold no text");
        goto fail;
    }
    for (int k = 0; o->heldout > 0 && k < o->world; k++) {
        shard_path(path, sizeof path, o->out_dir, "heldout", k);
        if (add_shard(heldout, path, err) != 0) goto fail;
    }
    if (o->heldout > 0 && heldout->n_shards == 0)
        cz_warn("--heldout %g selected no document; heldout.manifest lists no shard", o->heldout);
    return 0;
fail:
    cz_manifest_free(train);
    cz_manifest_free(heldout);
    return -1;
}
