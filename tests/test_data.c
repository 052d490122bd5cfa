/* data: instances built from small synthetic shards whose token ids encode
 * (document, token index in the document), so that every property of the
 * original create_pretraining_data.py can be read back from the output:
 * determinism whatever the order and the builder, pair structure, NSP
 * labels, short_seq_prob, 15% / 80-10-10 masking, epoch coverage, GPT
 * windows, whole-word masking, and errors on bad shards. */
#include "cloze/data.h"
#include "cloze/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* ---- synthetic corpus ---- */

enum { PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, EOT = 5, BASE = 16, DOC_SPAN = 4096 };
#define BIG_VOCAB (1u << 21)
#define MAX_DOCS 64
#define MAX_SENTS 400

/* A corpus as the test knows it: docs of sentences of given lengths. */
typedef struct corpus {
    int n_shards;
    int docs_per_shard[4];
    int n_docs; /* global doc numbering, shard-major */
    int n_sents[MAX_DOCS];
    int sent_len[MAX_DOCS][MAX_SENTS];
    int doc_len[MAX_DOCS];
    uint32_t vocab_size;
    uint64_t fingerprint;
    /* whole-word corpus: explicit token ids instead of the encoding */
    uint32_t *explicit_tokens[MAX_DOCS];
} corpus;

static uint32_t enc(int doc, int t) {
    return (uint32_t)(BASE + doc * DOC_SPAN + t);
}
static int dec_doc(int32_t id) {
    return (id - BASE) / DOC_SPAN;
}
static int dec_pos(int32_t id) {
    return (id - BASE) % DOC_SPAN;
}
static int is_content(int32_t id) {
    return id >= BASE && id < BASE + MAX_DOCS * DOC_SPAN;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static char tmpdir[256];

/* Writes the shards and a manifest "<tmpdir>/<name>.manifest". */
static void write_corpus(const corpus *c, const char *name, const char *vocab_path,
                         char *manifest_out) {
    cz_error err;
    cz_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.vocab_kind, sizeof m.vocab_kind, "wordpiece");
    m.vocab_size = c->vocab_size;
    m.vocab_fingerprint = c->fingerprint;
    snprintf(m.vocab_path, sizeof m.vocab_path, "%s", vocab_path);
    m.cls_id = CLS, m.sep_id = SEP, m.mask_id = MASK, m.pad_id = PAD, m.unk_id = UNK,
    m.eot_id = EOT;
    m.n_shards = c->n_shards;
    m.shards = cz_alloc(sizeof(cz_manifest_shard) * (size_t)c->n_shards, &err);
    int doc = 0;
    for (int k = 0; k < c->n_shards; k++) {
        cz_manifest_shard *ms = &m.shards[k];
        snprintf(ms->path, sizeof ms->path, "%s/%s-%d.shard", tmpdir, name, k);
        cz_shard_writer *w;
        CHECK(cz_shard_writer_open(&w, ms->path, c->vocab_size, c->fingerprint, &err) == 0, "%s",
              err.msg);
        for (int i = 0; i < c->docs_per_shard[k]; i++, doc++) {
            uint32_t toks[DOC_SPAN], lens[MAX_SENTS];
            for (int t = 0; t < c->doc_len[doc]; t++)
                toks[t] = c->explicit_tokens[doc] ? c->explicit_tokens[doc][t] : enc(doc, t);
            for (int s = 0; s < c->n_sents[doc]; s++) lens[s] = (uint32_t)c->sent_len[doc][s];
            CHECK(cz_shard_writer_add_document(w, toks, lens, (size_t)c->n_sents[doc], &err) == 0,
                  "%s", err.msg);
        }
        cz_shard_header h;
        CHECK(cz_shard_writer_finish(w, &h, &err) == 0, "%s", err.msg);
        ms->n_tokens = h.n_tokens, ms->n_sentences = h.n_sentences;
        ms->n_documents = h.n_documents, ms->payload_checksum = h.payload_checksum;
    }
    snprintf(manifest_out, 512, "%s/%s.manifest", tmpdir, name);
    CHECK(cz_manifest_write(&m, manifest_out, &err) == 0, "%s", err.msg);
    cz_free(m.shards);
}

static void add_doc(corpus *c, int n_sents, const int *lens) {
    int d = c->n_docs++;
    c->n_sents[d] = n_sents;
    c->doc_len[d] = 0;
    for (int s = 0; s < n_sents; s++) c->sent_len[d][s] = lens[s], c->doc_len[d] += lens[s];
}

/* 2 shards x 15 documents of 1..12 sentences of 1..25 tokens */
static void make_general(corpus *c) {
    memset(c, 0, sizeof *c);
    c->n_shards = 2;
    c->docs_per_shard[0] = c->docs_per_shard[1] = 15;
    c->vocab_size = BIG_VOCAB;
    c->fingerprint = 0x1234abcd;
    uint64_t r = 42;
    for (int d = 0; d < 30; d++) {
        int n = 1 + (int)(lcg(&r) % 12), lens[12];
        for (int s = 0; s < n; s++) lens[s] = 1 + (int)(lcg(&r) % 25);
        add_doc(c, n, lens);
    }
}

/* sentence index and first token of sentence s in doc d */
static int sent_first(const corpus *c, int d, int s) {
    int t = 0;
    for (int i = 0; i < s; i++) t += c->sent_len[d][i];
    return t;
}

/* The anchors, cut independently: whole sentences until max_num tokens. */
typedef struct anchor {
    int doc, first_token;
} anchor;

static int cut(const corpus *c, int max_num, anchor *out) {
    int n = 0;
    for (int d = 0; d < c->n_docs; d++) {
        int s = 0;
        while (s < c->n_sents[d]) {
            out[n].doc = d, out[n].first_token = sent_first(c, d, s);
            int len = 0;
            while (s < c->n_sents[d] && len < max_num) len += c->sent_len[d][s++];
            n++;
        }
    }
    return n;
}

static cz_data_config config(void) {
    cz_data_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.masked_lm_prob = 0.15f;
    cfg.short_seq_prob = 0.1f;
    return cfg;
}

/* ---- one BERT row, decoded ---- */
typedef struct pair {
    int n, la, lb;      /* real length, segment lengths */
    int32_t orig[1024]; /* tokens with masked positions restored from labels */
    int n_masked;
} pair;

static void decode(const cz_batch_buf *b, int slot, pair *p) {
    int T = b->seq, P = b->max_pred;
    const int32_t *row = b->tokens + slot * T, *seg = b->segments + slot * T;
    const uint8_t *att = b->attn_mask + slot * T;
    memcpy(p->orig, row, sizeof(int32_t) * (size_t)T);
    p->n_masked = 0;
    for (int k = 0; k < P; k++) {
        if (b->mlm_weights[slot * P + k] == 0) continue;
        p->orig[b->mlm_positions[slot * P + k]] = b->mlm_labels[slot * P + k];
        p->n_masked++;
    }
    p->n = 0;
    while (p->n < T && att[p->n]) p->n++;
    p->la = 0;
    while (1 + p->la < p->n && p->orig[1 + p->la] != SEP) p->la++;
    p->lb = p->n - 3 - p->la;
    CHECK(p->orig[0] == CLS, "row does not start with [CLS]");
    CHECK(p->lb >= 0 && p->orig[1 + p->la] == SEP && p->orig[p->n - 1] == SEP,
          "not [CLS] A [SEP] B [SEP]");
    for (int i = 0; i < T; i++) {
        int want_seg = i >= 2 + p->la && i < p->n;
        CHECK(seg[i] == want_seg, "segment id %d at %d (la %d, n %d)", seg[i], i, p->la, p->n);
        if (i >= p->n)
            CHECK(row[i] == PAD && !att[i], "padding at %d", i);
        else
            CHECK(att[i] == 1, "attention mask 0 inside the sequence at %d", i);
    }
}

/* A and B are each a run of consecutive tokens of one document */
static int contiguous(const int32_t *t, int n) {
    for (int i = 0; i < n; i++) {
        if (!is_content(t[i])) return 0;
        if (i > 0 && t[i] != t[i - 1] + 1) return 0;
    }
    return 1;
}

static int same_bytes(const cz_batch_buf *x, int sx, const cz_batch_buf *y, int sy) {
    int T = x->seq, P = x->max_pred;
    return !memcmp(x->tokens + sx * T, y->tokens + sy * T, sizeof(int32_t) * (size_t)T) &&
           !memcmp(x->segments + sx * T, y->segments + sy * T, sizeof(int32_t) * (size_t)T) &&
           !memcmp(x->attn_mask + sx * T, y->attn_mask + sy * T, (size_t)T) &&
           !memcmp(x->targets + sx * T, y->targets + sy * T, sizeof(int32_t) * (size_t)T) &&
           !memcmp(x->mlm_positions + sx * P, y->mlm_positions + sy * P,
                   sizeof(int32_t) * (size_t)P) &&
           !memcmp(x->mlm_labels + sx * P, y->mlm_labels + sy * P, sizeof(int32_t) * (size_t)P) &&
           !memcmp(x->mlm_weights + sx * P, y->mlm_weights + sy * P, sizeof(float) * (size_t)P) &&
           x->nsp_labels[sx] == y->nsp_labels[sy] && x->sample_ids[sx] == y->sample_ids[sy];
}

/* ---- tests ---- */

static void test_determinism(const char *manifest) {
    cz_error err;
    cz_data_config cfg = config();
    const int K = 200, T = 64, P = 10;
    cz_data *d1, *d2, *d3;
    CHECK(cz_data_open(&d1, manifest, CZ_ARCH_BERT, &cfg, 7, &err) == 0, "%s", err.msg);
    CHECK(cz_data_open(&d2, manifest, CZ_ARCH_BERT, &cfg, 7, &err) == 0, "%s", err.msg);
    CHECK(cz_data_open(&d3, manifest, CZ_ARCH_BERT, &cfg, 8, &err) == 0, "%s", err.msg);
    cz_batch_buf a, b, c;
    cz_batch_buf_alloc(&a, K, T, P, &err);
    cz_batch_buf_alloc(&b, K, T, P, &err);
    cz_batch_buf_alloc(&c, 1, T, P, &err);
    for (int g = 0; g < K; g++)
        CHECK(cz_data_build(d1, &a, g, (uint64_t)g, T, P, &err) == 0, "%s", err.msg);
    /* "three ranks", each building its own samples, last rank first, backwards,
     * into other slots: nothing may depend on order or on what came before */
    for (int r = 2; r >= 0; r--)
        for (int g = K - 1 - ((K - 1 - r) % 3); g >= 0; g -= 3)
            CHECK(cz_data_build(d2, &b, K - 1 - g, (uint64_t)g, T, P, &err) == 0, "%s", err.msg);
    int same = 0, differ_seed = 0;
    for (int g = 0; g < K; g++) {
        same += same_bytes(&a, g, &b, K - 1 - g);
        CHECK(cz_data_build(d3, &c, 0, (uint64_t)g, T, P, &err) == 0, "%s", err.msg);
        c.sample_ids[0] = (uint64_t)g;
        differ_seed += !same_bytes(&a, g, &c, 0);
    }
    CHECK(same == K, "only %d of %d samples identical when built in another order", same, K);
    CHECK(differ_seed > K * 9 / 10, "another seed changed only %d of %d samples", differ_seed, K);
    /* threads building one batch after cz_data_prepare, as a trainer would */
    cz_data *d4;
    CHECK(cz_data_open(&d4, manifest, CZ_ARCH_BERT, &cfg, 7, &err) == 0, "%s", err.msg);
    CHECK(cz_data_prepare(d4, T, &err) == 0, "%s", err.msg);
    cz_batch_buf_free(&b);
    cz_batch_buf_alloc(&b, K, T, P, &err);
    int build_failed = 0, same_threads = 0;
#pragma omp parallel for num_threads(4) schedule(dynamic, 1) reduction(+ : build_failed)
    for (int g = 0; g < K; g++) {
        cz_error e;
        build_failed += cz_data_build(d4, &b, g, (uint64_t)g, T, P, &e) != 0;
    }
    for (int g = 0; g < K; g++) same_threads += same_bytes(&a, g, &b, g);
    CHECK(build_failed == 0 && same_threads == K, "4 threads: %d failed, %d of %d identical",
          build_failed, same_threads, K);
    cz_data_close(d4);
    cz_batch view = cz_batch_view(&a, 5);
    CHECK(view.batch == 5 && view.seq == T && view.max_pred == P && view.tokens == a.tokens &&
              view.sample_ids[3] == 3,
          "cz_batch_view");
    cz_batch_buf_free(&a), cz_batch_buf_free(&b), cz_batch_buf_free(&c);
    cz_data_close(d1), cz_data_close(d2), cz_data_close(d3);
}

/* structure, NSP labels, epoch coverage and masking statistics on one run */
static void test_bert_pairs(const corpus *c, const char *manifest) {
    cz_error err;
    cz_data_config cfg = config();
    const int T = 64, P = 10, max_num = T - 3;
    cz_data *d;
    CHECK(cz_data_open(&d, manifest, CZ_ARCH_BERT, &cfg, 1, &err) == 0, "%s", err.msg);
    static anchor anchors[4096];
    int n_anchors = cut(c, max_num, anchors);
    uint64_t N = cz_data_samples_per_epoch(d, T);
    CHECK(N == (uint64_t)n_anchors, "samples per epoch %llu, independent cut gives %d",
          (unsigned long long)N, n_anchors);
    cz_batch_buf b;
    cz_batch_buf_alloc(&b, 1, T, P, &err);
    const int epochs = 60;
    long n_pairs = 0, n_isnext = 0, bad_struct = 0, bad_isnext = 0, bad_notnext = 0, bad_anchor = 0,
         front_cut_a = 0, gap_isnext = 0, bad_count = 0, bad_pos = 0, sel = 0, as_mask = 0,
         as_keep = 0, as_rand = 0, exact_start = 0;
    int *seen = calloc(N, sizeof(int));
    int order_changed = 0;
    uint64_t first_item_e0 = 0;
    for (int e = 0; e < epochs; e++) {
        memset(seen, 0, N * sizeof(int));
        for (uint64_t i = 0; i < N; i++) {
            uint64_t g = (uint64_t)e * N + i, ep, item;
            CHECK(cz_data_locate(d, g, T, &ep, &item, &err) == 0, "%s", err.msg);
            CHECK(ep == (uint64_t)e && item < N, "locate");
            if (item >= N) continue;
            seen[item]++;
            if (i == 0 && e == 0) first_item_e0 = item;
            if (i == 0 && e > 0 && item != first_item_e0) order_changed = 1;
            if (cz_data_build(d, &b, 0, g, T, P, &err) != 0) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            pair p;
            decode(&b, 0, &p);
            n_pairs++;
            const int32_t *A = p.orig + 1, *B = p.orig + 2 + p.la;
            if (p.la < 1 || p.lb < 1 || p.la + p.lb > max_num || !contiguous(A, p.la) ||
                !contiguous(B, p.lb)) {
                bad_struct++;
                continue;
            }
            /* A comes from the anchor's chunk; without any truncation it starts
             * exactly at the anchor sentence */
            const anchor *an = &anchors[item];
            if (dec_doc(A[0]) != an->doc || dec_pos(A[0]) < an->first_token) bad_anchor++;
            front_cut_a += dec_pos(A[0]) > an->first_token;
            if (p.la + p.lb < max_num) {
                exact_start++;
                if (dec_pos(A[0]) != an->first_token) bad_anchor++;
            }
            int da = dec_doc(A[0]), db = dec_doc(B[0]);
            int shard_a = da / 15, shard_b = db / 15;
            if (b.nsp_labels[0] == 0) {
                n_isnext++;
                /* IsNext: B continues A in the same document; untruncated, it
                 * starts right after A's last token */
                if (db != da || dec_pos(B[0]) <= dec_pos(A[p.la - 1])) bad_isnext++;
                if (p.la + p.lb < max_num && B[0] != A[p.la - 1] + 1) bad_isnext++;
                gap_isnext += B[0] != A[p.la - 1] + 1;
            } else {
                /* NotNext: another document of the same shard (10 tries of
                 * 15 documents never all fail in practice) */
                if (db == da || shard_a != shard_b || c->n_docs < 2) bad_notnext++;
            }
            /* masking: exactly min(P, max(1, round(n * 0.15))) positions,
             * Python's round half to even on the double 0.15 */
            int want = (int)rint(p.n * 0.15);
            if (want < 1) want = 1;
            if (want > P) want = P;
            if (p.n_masked != want) bad_count++;
            for (int k = 0; k < P; k++) {
                int pos = b.mlm_positions[k];
                float w = b.mlm_weights[k];
                if (k < p.n_masked) {
                    if (w != 1 || pos <= 0 || pos >= p.n - 1 || pos == 1 + p.la ||
                        (k > 0 && pos <= b.mlm_positions[k - 1]) || !is_content(b.mlm_labels[k]))
                        bad_pos++;
                    sel++;
                    int32_t out = b.tokens[pos];
                    if (out == MASK)
                        as_mask++;
                    else if (out == b.mlm_labels[k])
                        as_keep++;
                    else if (out >= 0 && out < (int32_t)BIG_VOCAB)
                        as_rand++;
                } else if (w != 0 || pos != 0 || b.mlm_labels[k] != 0) {
                    bad_pos++;
                }
            }
        }
        for (uint64_t i = 0; i < N; i++)
            CHECK(seen[i] == 1, "epoch %d: anchor %llu used %d times", e, (unsigned long long)i,
                  seen[i]);
    }
    CHECK(order_changed, "every epoch starts with the same anchor: no reshuffle");
    CHECK(bad_struct == 0, "%ld of %ld pairs are not [CLS] A [SEP] B [SEP] of contiguous spans",
          bad_struct, n_pairs);
    CHECK(bad_anchor == 0, "%ld pairs do not start at their anchor", bad_anchor);
    CHECK(exact_start > n_pairs / 10, "too few untruncated pairs (%ld) to test anchors",
          exact_start);
    /* truncate_seq_pair cuts at the front or the back: both must happen */
    CHECK(front_cut_a > 0 && gap_isnext > 0,
          "truncation never cut A's front (%ld) or between A and B (%ld)", front_cut_a, gap_isnext);
    CHECK(bad_isnext == 0 && bad_notnext == 0, "IsNext wrong %ld, NotNext wrong %ld", bad_isnext,
          bad_notnext);
    /* P(NotNext) = 0.5 for chunks of >= 2 sentences, 1 for single-sentence
     * chunks, so IsNext is somewhat below one half */
    double f_isnext = (double)n_isnext / (double)n_pairs;
    CHECK(f_isnext > 0.25 && f_isnext < 0.5, "IsNext fraction %.3f", f_isnext);
    CHECK(bad_count == 0, "%ld pairs with a wrong number of masked positions", bad_count);
    CHECK(bad_pos == 0, "%ld masked slots on [CLS]/[SEP]/padding, unsorted or badly padded",
          bad_pos);
    double fm = (double)as_mask / (double)sel, fk = (double)as_keep / (double)sel,
           fr = (double)as_rand / (double)sel;
    printf("bert: %ld pairs, N=%llu, IsNext %.3f, %ld masked: [MASK] %.4f keep %.4f random %.4f\n",
           n_pairs, (unsigned long long)N, f_isnext, sel, fm, fk, fr);
    /* sel is about 29000: 3 sigma of a proportion 0.1 is 0.005 */
    CHECK(fabs(fm - 0.8) < 0.01 && fabs(fk - 0.1) < 0.008 && fabs(fr - 0.1) < 0.008,
          "80/10/10 off: %.4f %.4f %.4f", fm, fk, fr);
    free(seen);
    cz_batch_buf_free(&b);
    cz_data_close(d);
}

/* Documents of 1-token sentences whose chunks always reach the target: an
 * IsNext pair then has exactly target tokens, which shows short_seq_prob. */
static void test_short_seq(void) {
    corpus *c = calloc(1, sizeof *c);
    c->n_shards = 1;
    c->docs_per_shard[0] = 8;
    c->vocab_size = BIG_VOCAB;
    c->fingerprint = 99;
    const int T = 32, max_num = T - 3;
    int ones[MAX_SENTS];
    for (int i = 0; i < MAX_SENTS; i++) ones[i] = 1;
    for (int d = 0; d < 8; d++) add_doc(c, max_num * (3 + d % 4), ones);
    char manifest[512];
    write_corpus(c, "short", "unused-vocab.txt", manifest);
    cz_error err;
    cz_data_config cfg = config();
    cz_data *d;
    CHECK(cz_data_open(&d, manifest, CZ_ARCH_BERT, &cfg, 3, &err) == 0, "%s", err.msg);
    cz_batch_buf b;
    cz_batch_buf_alloc(&b, 1, T, 5, &err);
    long isnext = 0, shorter = 0, not_target = 0;
    double sum_short = 0;
    for (uint64_t g = 0; g < 20000; g++) {
        if (cz_data_build(d, &b, 0, g, T, 5, &err) != 0) {
            CHECK(0, "%s", err.msg);
            break;
        }
        if (b.nsp_labels[0] != 0) continue;
        pair p;
        decode(&b, 0, &p);
        isnext++;
        int len = p.la + p.lb;
        if (len < 2 || len > max_num) not_target++;
        if (len < max_num) shorter++, sum_short += len;
    }
    /* short with probability 0.1, and then length uniform on [2, max_num],
     * which is max_num itself 1 time in max_num - 1 */
    double want = 0.1 * (1.0 - 1.0 / (max_num - 1)), f = (double)shorter / (double)isnext;
    double sigma = sqrt(want * (1 - want) / (double)isnext);
    printf("short_seq: %ld IsNext pairs, %.4f shorter than max (expected %.4f), mean short length "
           "%.2f\n",
           isnext, f, want, sum_short / (double)shorter);
    CHECK(not_target == 0, "lengths out of [2, max_num]");
    CHECK(fabs(f - want) < 4 * sigma, "short_seq fraction %.4f, expected %.4f", f, want);
    /* mean of uniform [2, max_num - 1] = (max_num + 1) / 2 */
    CHECK(fabs(sum_short / (double)shorter - (max_num + 1) / 2.0) < 1.5,
          "short lengths not uniform");
    cz_batch_buf_free(&b);
    cz_data_close(d);
    free(c);
}

static void test_gpt(void) {
    corpus *c = calloc(1, sizeof *c);
    c->n_shards = 3;
    c->docs_per_shard[0] = 4, c->docs_per_shard[1] = 1, c->docs_per_shard[2] = 5;
    c->vocab_size = BIG_VOCAB;
    c->fingerprint = 5;
    uint64_t r = 9;
    for (int d = 0; d < 10; d++) {
        int n = 1 + (int)(lcg(&r) % 5), lens[5];
        for (int s = 0; s < n; s++) lens[s] = 1 + (int)(lcg(&r) % 20);
        add_doc(c, n, lens);
    }
    char manifest[512];
    write_corpus(c, "gpt", "unused-vocab.txt", manifest);
    /* the stream, written independently: each document then EOT */
    int32_t stream[4096];
    int L = 0;
    for (int d = 0; d < c->n_docs; d++) {
        for (int t = 0; t < c->doc_len[d]; t++) stream[L++] = (int32_t)enc(d, t);
        stream[L++] = EOT;
    }
    cz_error err;
    cz_data_config cfg = config();
    cz_data *d;
    CHECK(cz_data_open(&d, manifest, CZ_ARCH_GPT, &cfg, 11, &err) == 0, "%s", err.msg);
    const int T = 16;
    uint64_t N = cz_data_samples_per_epoch(d, T);
    CHECK(N == (uint64_t)((L - 1) / T), "GPT windows per epoch %llu, want %d",
          (unsigned long long)N, (L - 1) / T);
    cz_batch_buf b;
    cz_batch_buf_alloc(&b, 2, T, 4, &err);
    int *seen = calloc(N, sizeof(int));
    long bad = 0;
    for (uint64_t g = 2 * N; g < 3 * N; g++) { /* the third epoch */
        uint64_t e, item;
        CHECK(cz_data_locate(d, g, T, &e, &item, &err) == 0 && e == 2 && item < N, "locate");
        if (item >= N) continue;
        seen[item]++;
        CHECK(cz_data_build(d, &b, 1, g, T, 4, &err) == 0, "%s", err.msg);
        const int32_t *tok = b.tokens + T, *tgt = b.targets + T;
        for (int i = 0; i < T; i++) {
            if (tok[i] != stream[item * T + (uint64_t)i] ||
                tgt[i] != stream[item * T + (uint64_t)i + 1])
                bad++;
            if (i + 1 < T && tgt[i] != tok[i + 1]) bad++;
            if (b.attn_mask[T + i] != 1 || b.segments[T + i] != 0) bad++;
        }
        if (b.sample_ids[1] != g) bad++;
    }
    for (uint64_t i = 0; i < N; i++)
        CHECK(seen[i] == 1, "window %llu used %d times", (unsigned long long)i, seen[i]);
    CHECK(bad == 0, "%ld GPT window mismatches against the independent stream", bad);
    printf("gpt: %d stream tokens, %llu windows of %d checked\n", L, (unsigned long long)N, T);
    free(seen);
    cz_batch_buf_free(&b);
    cz_data_close(d);
    free(c);
}

/* Words of 1-3 pieces, pieces >= 2000 are "##" continuations. */
static void test_whole_word(void) {
    enum { WV = 4096, FIRST_CONT = 2000 };
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", tmpdir);
    FILE *f = fopen(vocab, "wb");
    size_t cap = (size_t)WV * 16, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < WV; i++) {
        len += (size_t)(i < BASE         ? snprintf(text + len, cap - len, "[unused%d]\n", i)
                        : i < FIRST_CONT ? snprintf(text + len, cap - len, "w%d\n", i)
                                         : snprintf(text + len, cap - len, "##c%d\n", i));
    }
    fwrite(text, 1, len, f);
    fclose(f);
    corpus *c = calloc(1, sizeof *c);
    c->n_shards = 1;
    c->docs_per_shard[0] = 12;
    c->vocab_size = WV;
    c->fingerprint = cz_fnv1a64(text, len, CZ_FNV_SEED);
    free(text);
    uint64_t r = 5;
    for (int d = 0; d < 12; d++) {
        int n = 2 + (int)(lcg(&r) % 6), lens[8], total = 0;
        for (int s = 0; s < n; s++) lens[s] = 3 + (int)(lcg(&r) % 20), total += lens[s];
        add_doc(c, n, lens);
        c->explicit_tokens[d] = malloc(sizeof(uint32_t) * (size_t)total);
        for (int t = 0; t < total; t++) /* a word start about 60% of the time */
            c->explicit_tokens[d][t] = (t == 0 || lcg(&r) % 10 < 6)
                                           ? BASE + (uint32_t)(lcg(&r) % (FIRST_CONT - BASE))
                                           : FIRST_CONT + (uint32_t)(lcg(&r) % (WV - FIRST_CONT));
    }
    char manifest[512];
    write_corpus(c, "wwm", "vocab.txt", manifest); /* relative to the manifest */
    const int T = 48, P = 8;
    long partial[2] = {0, 0}, cont_masked[2] = {0, 0}, masked[2] = {0, 0}, want_total = 0;
    for (int wwm = 0; wwm <= 1; wwm++) {
        cz_error err;
        cz_data_config cfg = config();
        cfg.whole_word_mask = wwm;
        cz_data *d;
        if (cz_data_open(&d, manifest, CZ_ARCH_BERT, &cfg, 21, &err) != 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        cz_batch_buf b;
        cz_batch_buf_alloc(&b, 1, T, P, &err);
        for (uint64_t g = 0; g < 3000; g++) {
            CHECK(cz_data_build(d, &b, 0, g, T, P, &err) == 0, "%s", err.msg);
            pair p;
            decode(&b, 0, &p);
            int is_masked[64] = {0};
            for (int k = 0; k < p.n_masked; k++) is_masked[b.mlm_positions[k]] = 1;
            masked[wwm] += p.n_masked;
            if (wwm) {
                int want = (int)rint(p.n * 0.15);
                want_total += want < 1 ? 1 : want > P ? P : want;
            }
            /* a word: a piece and the "##" pieces right after it */
            for (int i = 1; i < p.n;) {
                int j = i + 1;
                while (j < p.n && p.orig[j] >= FIRST_CONT) j++;
                int m = 0;
                for (int k = i; k < j; k++)
                    m += is_masked[k], cont_masked[wwm] += is_masked[k] && k > i;
                if (p.orig[i] != SEP && m != 0 && m != j - i) partial[wwm]++;
                i = j;
            }
        }
        cz_batch_buf_free(&b);
        cz_data_close(d);
    }
    printf("whole word: partial words %ld (off) %ld (on); continuation pieces masked %ld / %ld\n",
           partial[0], partial[1], cont_masked[0], cont_masked[1]);
    CHECK(partial[0] > 0, "the test cannot see partial words (test is blind)");
    CHECK(partial[1] == 0, "%ld words only partly masked with whole_word_mask", partial[1]);
    CHECK(cont_masked[1] > 0, "no continuation piece ever masked");
    /* whole words may leave a slot or two unused, never more than asked */
    CHECK(masked[1] <= want_total && masked[1] > want_total * 9 / 10, "wwm masked %ld of %ld",
          masked[1], want_total);
    for (int d = 0; d < 12; d++) free(c->explicit_tokens[d]);
    free(c);
}

static void test_bad_data(const corpus *general) {
    cz_error err;
    cz_data_config cfg = config();
    /* a manifest whose fingerprint differs from the shards' */
    corpus *c = calloc(1, sizeof *c);
    *c = *general;
    char manifest[512];
    write_corpus(c, "fp", "unused.txt", manifest);
    char text[65536];
    FILE *f = fopen(manifest, "rb");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *hex = strstr(text, "1234abcd");
    CHECK(hex != NULL, "fingerprint not found in manifest text");
    if (hex) hex[0] = '9';
    f = fopen(manifest, "wb");
    fwrite(text, 1, n, f);
    fclose(f);
    cz_data *d;
    CHECK(cz_data_open(&d, manifest, CZ_ARCH_BERT, &cfg, 1, &err) == 0, "%s", err.msg);
    cz_batch_buf b;
    cz_batch_buf_alloc(&b, 1, 64, 10, &err);
    err.msg[0] = 0;
    CHECK(cz_data_build(d, &b, 0, 0, 64, 10, &err) != 0, "fingerprint mismatch not caught");
    CHECK(strstr(err.msg, "fp-0.shard") && strstr(err.msg, "vocab_fingerprint") &&
              strstr(err.msg, "offset"),
          "message does not name file, field and offset: %s", err.msg);
    cz_data_close(d);

    /* a token id >= vocab size in the payload (the writer refuses them, so
     * patch the file): the payload verification of the first open names
     * the token's offset, and every sample of the shard fails with it */
    write_corpus(c, "badtok", "unused.txt", manifest);
    char shard[600];
    snprintf(shard, sizeof shard, "%s/badtok-1.shard", tmpdir);
    FILE *sf = fopen(shard, "r+b");
    cz_shard_header h;
    CHECK(fread(&h, sizeof h, 1, sf) == 1, "read header");
    uint32_t bad = 0xffffff;
    fseek(sf, (long)(h.tokens_offset + 4 * 3), SEEK_SET);
    fwrite(&bad, 4, 1, sf);
    fclose(sf);
    CHECK(cz_data_open(&d, manifest, CZ_ARCH_GPT, &cfg, 1, &err) == 0, "%s", err.msg);
    uint64_t N = cz_data_samples_per_epoch(d, 64);
    int failed = 0;
    for (uint64_t g = 0; g < N; g++) {
        if (cz_data_build(d, &b, 0, g, 64, 10, &err) == 0) continue;
        failed++;
        char want[64];
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)(h.tokens_offset + 12));
        CHECK(strstr(err.msg, "badtok-1.shard") && strstr(err.msg, want),
              "message does not name file and offset: %s", err.msg);
    }
    CHECK(failed >= 1, "bad token id caught in %d windows", failed);
    cz_data_close(d);
    cz_batch_buf_free(&b);
    free(c);
}

static void test_permute(void) {
    /* a bijection for sizes around powers of four, different per epoch */
    const uint64_t sizes[] = {1, 2, 3, 4, 5, 15, 16, 17, 1000, 4097};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t n = sizes[k];
        char *hit = calloc(n, 1);
        int moved = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t p = cz_data_permute(3, 1, n, i);
            CHECK(p < n && !hit[p], "permute n=%llu not a bijection", (unsigned long long)n);
            if (p < n) hit[p] = 1;
            moved += p != cz_data_permute(3, 2, n, i);
        }
        if (n >= 16)
            CHECK(moved > (int)n / 2, "epochs 1 and 2 share most positions (n=%llu)",
                  (unsigned long long)n);
        free(hit);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cloze-data-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    static corpus general;
    make_general(&general);
    char manifest[512];
    write_corpus(&general, "general", "unused-vocab.txt", manifest);
    test_permute();
    test_determinism(manifest);
    test_bert_pairs(&general, manifest);
    test_short_seq();
    test_gpt();
    test_whole_word();
    test_bad_data(&general);
    return check_finish(tmpdir);
}
