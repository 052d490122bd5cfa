/* instances: BERT pre-training pairs and GPT windows, built on the fly from
 * mmapped token shards (docs/data.md).
 *
 * BERT follows create_pretraining_data.py of google-research/bert
 * (create_instances_from_document, truncate_seq_pair,
 * create_masked_lm_predictions); the differences, all forced by building
 * sample g on its own instead of walking a document in order, are listed in
 * docs/data.md. Every random draw comes from the stream
 * (seed, CZ_RNG_INSTANCE, epoch, g) and the epoch order from
 * (seed, CZ_RNG_SHUFFLE, epoch): sample g never depends on which rank builds
 * it, on how many ranks there are, or on what was built before. */
#include "cloze/data.h"
#include "cloze/text.h"
#include "cloze/rng.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEQS 4 /* distinct sequence lengths per cz_data (length curriculum: 2) */

/* The BERT anchors for one sequence length: where each sample's chunk starts.
 * Cut like the original cuts a document when no short sequence is drawn:
 * whole sentences until max_num_tokens = seq - 3 is reached, then the next
 * chunk starts at the next sentence, so one epoch reads the corpus about
 * once and every document gives at least one anchor. */
typedef struct anchor_index {
    int seq;               /* 0 = free slot */
    uint64_t n;            /* anchors (= samples per epoch) */
    uint64_t *shard_first; /* [n_shards + 1] first anchor of each shard */
    uint64_t *sent;        /* [n] start sentence (shard-local) of each anchor */
} anchor_index;

struct cz_data {
    cz_manifest man;
    cz_arch arch;
    cz_data_config cfg;
    uint64_t seed;
    double masked_lm_prob; /* the decimal the user wrote, see mlm_prob_decimal() */
    cz_shard *shards;      /* [n_shards], mmapped on first use */
    uint8_t *opened;       /* [n_shards] */
    uint8_t *continuation; /* [vocab_size] 1 = "##" piece; NULL unless whole_word_mask */
    anchor_index idx[MAX_SEQS];
    uint64_t *stream_start; /* GPT: [n_shards + 1] offset of each shard in the token stream */
    cz_verified *verified;  /* payloads verified on first open, cached beside the manifest */
};

/* ---- small helpers ---- */

/* Largest i in [0, n) with a[i] <= x, for a non-decreasing a with a[0] <= x. */
static uint64_t last_le(const uint64_t *a, uint64_t n, uint64_t x) {
    uint64_t lo = 0, hi = n; /* a[lo] <= x, answer < hi */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The config keeps masked_lm_prob as a float (0.15f = 0.1500000059...).
 * num_to_predict = round(len * p) in the original uses the double 0.15, and
 * at len = 30 the two disagree (4.5 -> 4 vs 4.50000018 -> 5). Rounding the
 * float to 7 significant digits gives back the double of the decimal the
 * user wrote. */
static double mlm_prob_decimal(float p) {
    if (p <= 0) return 0;
    double scale = pow(10.0, 6 - floor(log10((double)p)));
    return rint((double)p * scale) / scale;
}

uint64_t cz_data_permute(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t i) {
    /* Balanced Feistel network on 2h bits, 4^h >= n, six rounds whose round
     * function is Philox keyed by (seed, epoch); values >= n are walked
     * through the permutation again until they land in [0, n) (cycle walking,
     * Black & Rogaway, CT-RSA 2002). A bijection on [0, n) that needs no
     * table, so any rank computes any position in O(1). */
    if (n <= 1) return 0;
    int h = 1;
    while (h < 32 && (1ULL << (2 * h)) < n) h++;
    uint64_t mask = (1ULL << h) - 1;
    cz_rng_stream s = cz_rng_stream_make(seed, CZ_RNG_SHUFFLE, epoch, 0, 0);
    uint64_t x = i;
    do {
        uint64_t l = x >> h, r = x & mask;
        for (uint64_t round = 0; round < 6; round++) {
            uint64_t f = cz_rng_u32(&s, (round << 32) | r) & mask;
            uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        x = (l << h) | r;
    } while (x >= n);
    return x;
}

/* ---- shards, opened on first use ---- */

static cz_shard *shard_get(cz_data *d, int k, cz_error *err) {
    cz_shard *s = &d->shards[k];
    if (d->opened[k]) return s;
    const cz_manifest_shard *ms = &d->man.shards[k];
    if (cz_shard_open(s, ms->path, 0, err) != 0) return NULL;
    const char *bad = NULL;
    size_t off = 0;
    unsigned long long got = 0, want = 0;
    if (s->hdr.vocab_fingerprint != d->man.vocab_fingerprint) {
        bad = "vocab_fingerprint", off = offsetof(cz_shard_header, vocab_fingerprint);
        got = s->hdr.vocab_fingerprint, want = d->man.vocab_fingerprint;
    } else if (s->hdr.vocab_size != d->man.vocab_size) {
        bad = "vocab_size", off = offsetof(cz_shard_header, vocab_size);
        got = s->hdr.vocab_size, want = d->man.vocab_size;
    } else if (s->hdr.n_tokens != ms->n_tokens) {
        bad = "n_tokens", off = offsetof(cz_shard_header, n_tokens);
        got = s->hdr.n_tokens, want = ms->n_tokens;
    } else if (s->hdr.n_sentences != ms->n_sentences) {
        bad = "n_sentences", off = offsetof(cz_shard_header, n_sentences);
        got = s->hdr.n_sentences, want = ms->n_sentences;
    } else if (s->hdr.n_documents != ms->n_documents) {
        bad = "n_documents", off = offsetof(cz_shard_header, n_documents);
        got = s->hdr.n_documents, want = ms->n_documents;
    } else if (s->hdr.payload_checksum != ms->payload_checksum) {
        bad = "payload_checksum", off = offsetof(cz_shard_header, payload_checksum);
        got = s->hdr.payload_checksum, want = ms->payload_checksum;
    }
    if (bad) {
        cz_fail(err, "%s: %s at offset %zu is %llx but manifest %s says %llx", ms->path, bad, off,
                got, d->man.path, want);
        cz_shard_close(s);
        return NULL;
    }
    /* the payload once (issue 15: flipped bits with ids below the vocabulary
     * size trained silently); later starts trust the cache while the file's
     * identity is unchanged */
    if (cz_verified_check(d->verified, s, k, err) != 0) {
        cz_shard_close(s);
        return NULL;
    }
    d->opened[k] = 1;
    return s;
}

static uint64_t sent_len(const cz_shard *s, uint64_t i) {
    return s->sent_start[i + 1] - s->sent_start[i];
}

/* Token i of shard s, checked against the vocabulary: bad ids are reported
 * with the file and byte offset rather than indexing past an embedding. */
static int read_token(const cz_data *d, const cz_shard *s, uint64_t i, int32_t *out,
                      cz_error *err) {
    uint32_t id = cz_shard_token(s, i);
    if (id >= d->man.vocab_size)
        return cz_fail(err, "%s: token at offset %llu: id %u >= vocab size %u", s->path,
                       (unsigned long long)(s->hdr.tokens_offset + i * s->hdr.token_width), id,
                       d->man.vocab_size);
    *out = (int32_t)id;
    return 0;
}

/* ---- BERT anchors ---- */

/* Walks the chunks of every document of shard s; stores their first
 * sentences in out (if not NULL) and returns how many there are. */
static uint64_t cut_anchors(const cz_shard *s, uint64_t max_num_tokens, uint64_t *out) {
    uint64_t n = 0;
    for (uint64_t doc = 0; doc < s->hdr.n_documents; doc++) {
        uint64_t i = s->doc_start[doc], end = s->doc_start[doc + 1];
        while (i < end) {
            uint64_t first = i, len = 0;
            while (i < end && len < max_num_tokens) len += sent_len(s, i++);
            if (len == 0) continue; /* only empty sentences: nothing to train on */
            if (out) out[n] = first;
            n++;
        }
    }
    return n;
}

static void index_free(anchor_index *ix) {
    cz_free(ix->shard_first);
    cz_free(ix->sent);
    memset(ix, 0, sizeof *ix);
}

static anchor_index *index_get(cz_data *d, int seq, cz_error *err) {
    for (int i = 0; i < MAX_SEQS; i++)
        if (d->idx[i].seq == seq) return &d->idx[i];
    anchor_index *ix = NULL;
    for (int i = 0; i < MAX_SEQS && !ix; i++)
        if (d->idx[i].seq == 0) ix = &d->idx[i];
    if (!ix) {
        cz_fail(err, "%s: more than %d sequence lengths asked for", d->man.path, MAX_SEQS);
        return NULL;
    }
    if (seq < 5) {
        cz_fail(err, "%s: seq %d too short for [CLS] A [SEP] B [SEP]", d->man.path, seq);
        return NULL;
    }
    int ns = d->man.n_shards;
    ix->shard_first = cz_alloc((size_t)(ns + 1) * sizeof(uint64_t), err);
    if (!ix->shard_first) goto fail;
    /* Only the boundary tables are read here (8 bytes per sentence); token
     * pages are touched by the samples that use them, and by shard_get's
     * payload verification the first time a shard set is used. */
    for (int k = 0; k < ns; k++) {
        cz_shard *s = shard_get(d, k, err);
        if (!s) goto fail;
        ix->shard_first[k + 1] = ix->shard_first[k] + cut_anchors(s, (uint64_t)seq - 3, NULL);
    }
    ix->n = ix->shard_first[ns];
    if (ix->n == 0) {
        cz_fail(err, "%s: no tokens to build samples from", d->man.path);
        goto fail;
    }
    ix->sent = cz_alloc(ix->n * sizeof(uint64_t), err);
    if (!ix->sent) goto fail;
    for (int k = 0; k < ns; k++)
        cut_anchors(&d->shards[k], (uint64_t)seq - 3, ix->sent + ix->shard_first[k]);
    ix->seq = seq;
    return ix;
fail:
    index_free(ix);
    return NULL;
}

/* ---- BERT: one pair ---- */

typedef struct span {
    const cz_shard *s;
    uint64_t lo, hi; /* token range [lo, hi) of the shard */
} span;

/* create_instances_from_document for the chunk that starts at sentence s0:
 * fills a (segment A), b (segment B) and returns the NSP label. */
static int choose_pair(const cz_shard *s, uint64_t s0, int seq, double short_seq_prob,
                       cz_rng_cursor *c, span *a, span *b) {
    uint64_t doc = last_le(s->doc_start, s->hdr.n_documents + 1, s0);
    uint64_t doc_end = s->doc_start[doc + 1];
    int64_t max_num_tokens = seq - 3;
    /* "target_seq_length": mostly fill the sequence, but short_seq_prob of
     * the time a random length in [2, max_num_tokens], so that the model also
     * sees short inputs as in fine-tuning. */
    int64_t target = max_num_tokens;
    if (cz_cursor_uniform(c) < short_seq_prob)
        target = 2 + (int64_t)cz_cursor_below(c, (uint64_t)max_num_tokens - 1);
    /* whole sentences until the target length or the end of the document */
    uint64_t i = s0;
    int64_t len = 0;
    while (i < doc_end && len < target) len += (int64_t)sent_len(s, i++);
    uint64_t n_chunk = i - s0;
    uint64_t a_end = 1;
    if (n_chunk >= 2) a_end = 1 + cz_cursor_below(c, n_chunk - 1);
    a->s = b->s = s;
    a->lo = s->sent_start[s0];
    a->hi = s->sent_start[s0 + a_end];
    int label;
    if (n_chunk == 1 || cz_cursor_uniform(c) < 0.5) {
        /* NotNext: B from a random other document of the same shard, starting
         * at a random sentence, long enough to fill the target. */
        label = 1;
        int64_t target_b = target - (int64_t)(a->hi - a->lo);
        uint64_t n_docs = s->hdr.n_documents, rdoc = doc;
        for (int t = 0; t < 10; t++) {
            rdoc = cz_cursor_below(c, n_docs);
            if (rdoc != doc) break;
        }
        uint64_t r_first = s->doc_start[rdoc], r_end = s->doc_start[rdoc + 1];
        uint64_t j = r_first + cz_cursor_below(c, r_end - r_first);
        b->lo = b->hi = s->sent_start[j];
        for (; j < r_end; j++) {
            b->hi = s->sent_start[j + 1];
            if ((int64_t)(b->hi - b->lo) >= target_b) break;
        }
    } else {
        label = 0; /* IsNext: the rest of the chunk, the true continuation */
        b->lo = a->hi;
        b->hi = s->sent_start[s0 + n_chunk];
    }
    /* truncate_seq_pair: cut one token at a time from the longer segment,
     * at its front or its back with equal probability, to avoid a bias
     * towards always keeping the starts. */
    while ((int64_t)((a->hi - a->lo) + (b->hi - b->lo)) > max_num_tokens) {
        span *t = (a->hi - a->lo) > (b->hi - b->lo) ? a : b;
        if (cz_cursor_uniform(c) < 0.5)
            t->lo++;
        else
            t->hi--;
    }
    return label;
}

/* create_masked_lm_predictions on row[0, n): picks whole words (or single
 * pieces) in random order until num_to_predict positions are chosen, and
 * replaces each position: 80% [MASK], 10% kept, 10% a random vocabulary id. */
static void mask_row(const cz_data *d, int32_t *scratch, int32_t *row, int n, int max_pred,
                     cz_rng_cursor *c, int32_t *positions, int32_t *labels, float *weights) {
    int32_t *group_start = scratch, *group_len = scratch + n, *chosen = scratch + 2 * n;
    int n_groups = 0;
    for (int i = 0; i < n; i++) {
        if (row[i] == d->man.cls_id || row[i] == d->man.sep_id) continue;
        /* A "##" piece joins the word before it. The original joins it to the
         * last candidate even across a [SEP]; we only join adjacent pieces. */
        if (d->continuation && d->continuation[row[i]] && n_groups > 0 &&
            group_start[n_groups - 1] + group_len[n_groups - 1] == i) {
            group_len[n_groups - 1]++;
            continue;
        }
        group_start[n_groups] = i;
        group_len[n_groups] = 1;
        n_groups++;
    }
    /* Python's random.shuffle: for i from the end, swap with j in [0, i]. */
    for (int i = n_groups - 1; i > 0; i--) {
        int j = (int)cz_cursor_below(c, (uint64_t)i + 1);
        int32_t ts = group_start[i], tl = group_len[i];
        group_start[i] = group_start[j], group_len[i] = group_len[j];
        group_start[j] = ts, group_len[j] = tl;
    }
    /* num_to_predict = min(max_pred, max(1, round(len * masked_lm_prob))),
     * len counting [CLS] and [SEP]; rint rounds half to even like Python 3. */
    int num = (int)rint((double)n * d->masked_lm_prob);
    if (num < 1) num = 1;
    if (num > max_pred) num = max_pred;
    int n_chosen = 0;
    for (int g = 0; g < n_groups && n_chosen < num; g++) {
        if (n_chosen + group_len[g] > num) continue; /* a whole word or nothing */
        for (int k = 0; k < group_len[g]; k++) chosen[n_chosen++] = group_start[g] + k;
    }
    /* ascending positions, as the original sorts masked_lms by index */
    for (int i = 1; i < n_chosen; i++) {
        int32_t v = chosen[i];
        int j = i;
        for (; j > 0 && chosen[j - 1] > v; j--) chosen[j] = chosen[j - 1];
        chosen[j] = v;
    }
    /* The draws happen in position order (the original draws in shuffled
     * order): same distribution, simpler code. */
    for (int k = 0; k < max_pred; k++) {
        if (k < n_chosen) {
            int p = chosen[k];
            positions[k] = p;
            labels[k] = row[p];
            weights[k] = 1.0f;
            if (cz_cursor_uniform(c) < 0.8)
                row[p] = d->man.mask_id;
            else if (cz_cursor_uniform(c) >= 0.5)
                row[p] = (int32_t)cz_cursor_below(c, d->man.vocab_size);
        } else {
            positions[k] = 0;
            labels[k] = 0;
            weights[k] = 0.0f;
        }
    }
}

static int copy_span(const cz_data *d, const span *sp, int32_t *dst, cz_error *err) {
    for (uint64_t i = sp->lo; i < sp->hi; i++)
        if (read_token(d, sp->s, i, dst++, err) != 0) return -1;
    return 0;
}

static int build_bert(cz_data *d, cz_batch_buf *buf, int slot, uint64_t g, int seq, int max_pred,
                      cz_error *err) {
    anchor_index *ix = index_get(d, seq, err);
    if (!ix) return -1;
    uint64_t epoch = g / ix->n;
    uint64_t item = cz_data_permute(d->seed, epoch, ix->n, g % ix->n);
    int k = (int)last_le(ix->shard_first, (uint64_t)d->man.n_shards + 1, item);
    const cz_shard *s = shard_get(d, k, err);
    if (!s) return -1;
    cz_rng_cursor c = cz_rng_cursor_make(cz_rng_stream_make(d->seed, CZ_RNG_INSTANCE, epoch, g, 0));
    span a, b;
    int label = choose_pair(s, ix->sent[item], seq, (double)d->cfg.short_seq_prob, &c, &a, &b);

    int32_t *row = buf->tokens + (size_t)slot * (size_t)seq;
    int32_t *seg = buf->segments + (size_t)slot * (size_t)seq;
    uint8_t *att = buf->attn_mask + (size_t)slot * (size_t)seq;
    int la = (int)(a.hi - a.lo), lb = (int)(b.hi - b.lo), n = la + lb + 3;
    row[0] = d->man.cls_id;
    if (copy_span(d, &a, row + 1, err) != 0) return -1;
    row[1 + la] = d->man.sep_id;
    if (copy_span(d, &b, row + 2 + la, err) != 0) return -1;
    row[2 + la + lb] = d->man.sep_id;
    for (int i = 0; i < seq; i++) {
        seg[i] = i >= 2 + la && i < n ? 1 : 0;
        att[i] = i < n;
        if (i >= n) row[i] = d->man.pad_id;
        buf->targets[(size_t)slot * (size_t)seq + (size_t)i] = -1;
    }
    /* work space per call (a few KB), so that threads can build samples of
     * one batch in parallel once cz_data_prepare has run */
    int32_t *scratch = cz_alloc((size_t)3 * (size_t)n * sizeof(int32_t), err);
    if (!scratch) return -1;
    size_t p0 = (size_t)slot * (size_t)max_pred;
    mask_row(d, scratch, row, n, max_pred, &c, buf->mlm_positions + p0, buf->mlm_labels + p0,
             buf->mlm_weights + p0);
    cz_free(scratch);
    buf->nsp_labels[slot] = label;
    return 0;
}

/* ---- GPT: one window of the document stream ---- */

/* The stream is every document of every shard in manifest order, each
 * followed by eot_id. In shard s, document d starts at stream position
 * doc_tokens_before(d) + d (the d end-of-text tokens before it). */
static uint64_t doc_stream_start(const cz_shard *s, uint64_t doc) {
    return s->sent_start[s->doc_start[doc]] + doc;
}

/* A reading position in the stream: shard k (NULL = none yet), document doc. */
typedef struct stream_cursor {
    int k;
    const cz_shard *s;
    uint64_t doc;
} stream_cursor;

static int stream_token(cz_data *d, stream_cursor *c, uint64_t p, int32_t *out, cz_error *err) {
    if (!c->s || p >= d->stream_start[c->k + 1]) {
        /* last shard starting at or before p: never an empty one, since p < total */
        c->k = (int)last_le(d->stream_start, (uint64_t)d->man.n_shards + 1, p);
        if (!(c->s = shard_get(d, c->k, err))) return -1;
        uint64_t q = p - d->stream_start[c->k], lo = 0, hi = c->s->hdr.n_documents;
        while (hi - lo > 1) { /* last document starting at or before q */
            uint64_t mid = lo + (hi - lo) / 2;
            if (doc_stream_start(c->s, mid) <= q)
                lo = mid;
            else
                hi = mid;
        }
        c->doc = lo;
    }
    const cz_shard *s = c->s;
    uint64_t q = p - d->stream_start[c->k];
    while (c->doc + 1 < s->hdr.n_documents && doc_stream_start(s, c->doc + 1) <= q) c->doc++;
    uint64_t t = q - c->doc; /* the token index, unless q is the eot after the document */
    if (t < s->sent_start[s->doc_start[c->doc + 1]]) return read_token(d, s, t, out, err);
    *out = d->man.eot_id;
    return 0;
}

static int build_gpt(cz_data *d, cz_batch_buf *buf, int slot, uint64_t g, int seq, int max_pred,
                     cz_error *err) {
    uint64_t n = cz_data_samples_per_epoch(d, seq);
    if (n == 0)
        return cz_fail(err, "%s: corpus of %llu stream tokens is too small for seq %d", d->man.path,
                       (unsigned long long)d->stream_start[d->man.n_shards], seq);
    uint64_t epoch = g / n;
    uint64_t pos = cz_data_permute(d->seed, epoch, n, g % n) * (uint64_t)seq;
    size_t r = (size_t)slot * (size_t)seq;
    stream_cursor c = {0, NULL, 0};
    for (int i = 0; i <= seq; i++) {
        int32_t id;
        if (stream_token(d, &c, pos + (uint64_t)i, &id, err) != 0) return -1;
        if (i < seq) buf->tokens[r + (size_t)i] = id;
        if (i > 0) buf->targets[r + (size_t)i - 1] = id; /* next-token targets */
    }
    for (int i = 0; i < seq; i++) {
        buf->segments[r + (size_t)i] = 0;
        buf->attn_mask[r + (size_t)i] = 1;
    }
    for (int i = 0; i < max_pred; i++) {
        size_t p = (size_t)slot * (size_t)max_pred + (size_t)i;
        buf->mlm_positions[p] = 0, buf->mlm_labels[p] = 0, buf->mlm_weights[p] = 0.0f;
    }
    buf->nsp_labels[slot] = 0;
    return 0;
}

/* ---- public ---- */

/* Marks the ids whose vocabulary line starts with "##" (WordPiece
 * continuation pieces). The file must be the one the shards were made with:
 * its fingerprint (cz_vocab_fingerprint) must equal the manifest's. */
static int load_continuations(cz_data *d, cz_error *err) {
    char path[2 * CZ_PATH_MAX];
    snprintf(path, sizeof path, "%s", d->man.vocab_path);
    /* as given (cloze-prep records it so), else beside the manifest */
    if (path[0] != '/' && access(path, R_OK) != 0)
        cz_manifest_resolve(&d->man, d->man.vocab_path, path, sizeof path);
    void *data;
    size_t len;
    if (cz_read_file(path, &data, &len, err) != 0)
        return cz_fail_prefix(err, "%s: whole_word_mask needs the vocabulary", d->man.path);
    uint64_t fp = cz_vocab_fingerprint(data, len, NULL, 0);
    if (fp != d->man.vocab_fingerprint) {
        cz_free(data);
        return cz_fail(err, "%s: fingerprint %016llx differs from manifest %s (%016llx)", path,
                       (unsigned long long)fp, d->man.path,
                       (unsigned long long)d->man.vocab_fingerprint);
    }
    d->continuation = cz_alloc(d->man.vocab_size, err);
    if (!d->continuation) {
        cz_free(data);
        return -1;
    }
    const char *p = data, *end = p + len;
    uint32_t id = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        if (id < d->man.vocab_size) d->continuation[id] = nl - p >= 2 && p[0] == '#' && p[1] == '#';
        id++;
        p = nl + 1;
    }
    cz_free(data);
    if (id != d->man.vocab_size)
        return cz_fail(err, "%s: %u lines but manifest %s says vocab size %u", path, id,
                       d->man.path, d->man.vocab_size);
    return 0;
}

int cz_data_open(cz_data **out, const char *manifest_path, cz_arch arch, const cz_data_config *cfg,
                 uint64_t seed, cz_error *err) {
    *out = NULL;
    cz_data *d = cz_alloc(sizeof *d, err);
    if (!d) return -1;
    if (cz_manifest_load(&d->man, manifest_path, err) != 0) {
        cz_free(d);
        return -1;
    }
    d->arch = arch;
    d->cfg = *cfg;
    d->seed = seed;
    d->masked_lm_prob = mlm_prob_decimal(cfg->masked_lm_prob);
    const cz_manifest *m = &d->man;
    int ns = m->n_shards;
    if (ns <= 0) {
        cz_fail(err, "%s: no shard lines", manifest_path);
        goto fail;
    }
    if (arch == CZ_ARCH_BERT) {
        const char *missing = m->cls_id < 0    ? "cls"
                              : m->sep_id < 0  ? "sep"
                              : m->mask_id < 0 ? "mask"
                              : m->pad_id < 0  ? "pad"
                                               : NULL;
        if (missing) {
            cz_fail(err, "%s: BERT needs a 'special %s' line", manifest_path, missing);
            goto fail;
        }
    } else if (m->eot_id < 0) {
        cz_fail(err, "%s: GPT needs a 'special eot' line", manifest_path);
        goto fail;
    }
    if (!(cfg->masked_lm_prob >= 0 && cfg->masked_lm_prob <= 1) ||
        !(cfg->short_seq_prob >= 0 && cfg->short_seq_prob <= 1)) {
        cz_fail(err, "%s: masked_lm_prob %g / short_seq_prob %g outside [0, 1]", manifest_path,
                (double)cfg->masked_lm_prob, (double)cfg->short_seq_prob);
        goto fail;
    }
    d->shards = cz_alloc((size_t)ns * sizeof(cz_shard), err);
    d->opened = cz_alloc((size_t)ns, err);
    d->stream_start = cz_alloc((size_t)(ns + 1) * sizeof(uint64_t), err);
    d->verified = cz_verified_load(manifest_path, err);
    if (!d->shards || !d->opened || !d->stream_start || !d->verified) goto fail;
    for (int k = 0; k < ns; k++)
        d->stream_start[k + 1] =
            d->stream_start[k] + m->shards[k].n_tokens + m->shards[k].n_documents;
    if (arch == CZ_ARCH_BERT && cfg->whole_word_mask && load_continuations(d, err) != 0) goto fail;
    *out = d;
    return 0;
fail:
    cz_data_close(d);
    return -1;
}

void cz_data_close(cz_data *d) {
    if (!d) return;
    for (int i = 0; i < MAX_SEQS; i++) index_free(&d->idx[i]);
    for (int k = 0; d->opened && k < d->man.n_shards; k++)
        if (d->opened[k]) cz_shard_close(&d->shards[k]);
    cz_free(d->shards);
    cz_free(d->opened);
    cz_free(d->stream_start);
    cz_free(d->continuation);
    cz_verified_close(d->verified);
    cz_manifest_free(&d->man);
    cz_free(d);
}

const cz_manifest *cz_data_manifest(const cz_data *d) {
    return &d->man;
}

uint64_t cz_data_samples_per_epoch(cz_data *d, int seq) {
    if (seq <= 0) return 0;
    if (d->arch == CZ_ARCH_GPT) {
        /* non-overlapping windows of seq + 1 tokens at multiples of seq */
        uint64_t total = d->stream_start[d->man.n_shards];
        return total > 0 ? (total - 1) / (uint64_t)seq : 0;
    }
    cz_error err;
    anchor_index *ix = index_get(d, seq, &err);
    if (!ix) {
        cz_warn("%s", err.msg);
        return 0;
    }
    return ix->n;
}

int cz_data_prepare(cz_data *d, int seq, cz_error *err) {
    if (d->arch == CZ_ARCH_BERT) {
        if (!index_get(d, seq, err)) return -1;
    } else {
        for (int k = 0; k < d->man.n_shards; k++)
            if (d->stream_start[k + 1] > d->stream_start[k] && !shard_get(d, k, err)) return -1;
    }
    cz_verified_flush(d->verified); /* every shard is open now */
    return 0;
}

int cz_data_locate(cz_data *d, uint64_t g, int seq, uint64_t *epoch, uint64_t *item,
                   cz_error *err) {
    uint64_t n = cz_data_samples_per_epoch(d, seq);
    if (n == 0) return cz_fail(err, "%s: no samples of length %d", d->man.path, seq);
    *epoch = g / n;
    *item = cz_data_permute(d->seed, *epoch, n, g % n);
    return 0;
}

int cz_data_build(cz_data *d, cz_batch_buf *buf, int slot, uint64_t g, int seq, int max_pred,
                  cz_error *err) {
    if (slot < 0 || slot >= buf->cap || seq != buf->seq || max_pred != buf->max_pred)
        return cz_fail(err,
                       "%s: slot %d / seq %d / max_pred %d do not fit the batch buffer (cap %d, "
                       "seq %d, max_pred %d)",
                       d->man.path, slot, seq, max_pred, buf->cap, buf->seq, buf->max_pred);
    buf->sample_ids[slot] = g;
    int rc = d->arch == CZ_ARCH_BERT ? build_bert(d, buf, slot, g, seq, max_pred, err)
                                     : build_gpt(d, buf, slot, g, seq, max_pred, err);
    return rc == 0 ? 0 : cz_fail_prefix(err, "sample %llu", (unsigned long long)g);
}
