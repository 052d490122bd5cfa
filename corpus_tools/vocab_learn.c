/* vocab_learn: frequency-based merge learning (BPE, Sennrich et al. 2016,
 * "Neural Machine Translation of Rare Words with Subword Units", sec. 3.2)
 * over the words of a corpus, for both vocabularies:
 *   1. split the files into words exactly as the tokenizer will (BERT's
 *      BasicTokenizer / GPT-2's regex) and count each distinct word;
 *   2. the alphabet: every character (WordPiece: and its "##" form when it
 *      occurs inside a word) / all 256 bytes (GPT-2);
 *   3. repeat: merge the adjacent symbol pair with the highest count (summed
 *      over words, weighted by word count; ties: the pair first seen first),
 *      until the vocabulary is full or the best count < min_frequency.
 * WordPiece merges glue "x" + "##y" -> "xy" (as HF's WordPiece trainer does);
 * greedy longest-match then segments text with the pieces. Everything is
 * ordered by first appearance in the files, so the output depends only on
 * the files and options. Memory: the distinct-word table, their symbol
 * sequences and the pair table (no copy of the corpus). */
#include "cloze/prep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cz_vocab_learn_options_default(cz_vocab_learn_options *o) {
    o->vocab_size = 30522;
    o->lower_case = 1;
    o->n_unused = 99;
    o->min_frequency = 2;
    o->max_word_chars = 100;
}

/* ---- growable arrays ---- */
#define GROW(ptr, n, cap, err)                                                                     \
    cz_grow(&CZ_GROW_ITEM(ptr), 1, (n), &(cap), 16, "vocab", "entries", (err))

/* ---- word counting ---- */
typedef struct word_counts {
    cz_strtab words; /* word bytes -> index (first-appearance order) */
    uint64_t *count;
    uint32_t n, cap;
    int max_chars;
} word_counts;

static int count_word(word_counts *wc, const char *w, size_t len, cz_error *err) {
    int32_t k = cz_strtab_get(&wc->words, w, len);
    if (k >= 0) {
        wc->count[k]++;
        return 0;
    }
    if (GROW(wc->count, wc->n, wc->cap, err)) return -1;
    if (cz_strtab_put(&wc->words, w, len, wc->n, err)) return -1;
    wc->count[wc->n++] = 1;
    return 0;
}

typedef struct split_ctx {
    word_counts *wc;
    cz_error *err;
} split_ctx;

static int on_bert_word(void *ctx, const char *word, const uint32_t *offs, int ncp) {
    split_ctx *c = ctx;
    if (ncp > c->wc->max_chars) return 0; /* [UNK] anyway */
    return count_word(c->wc, word, offs[ncp], c->err);
}

/* Reads files in blocks that end at a newline (so no word is cut) and hands
 * each block to the splitter: memory stays at one block. */
static int count_files(const char *const *files, int n_files, int gpt2,
                       const cz_tokenizer_options *o, word_counts *wc, cz_error *err) {
    size_t cap = (size_t)16 << 20;
    char *buf = malloc(cap);
    if (!buf) return cz_fail(err, "vocab: out of memory for the read buffer");
    split_ctx sc = {wc, err};
    int rc = 0;
    for (int f = 0; f < n_files && rc == 0; f++) {
        FILE *fp = fopen(files[f], "rb");
        if (!fp) {
            rc = cz_fail(err, "%s: cannot open", files[f]);
            break;
        }
        size_t have = 0;
        for (;;) {
            size_t got = fread(buf + have, 1, cap - have, fp);
            have += got;
            int eof = got == 0;
            size_t cut = have;
            if (!eof) {
                while (cut > 0 && buf[cut - 1] != '\n') cut--;
                if (cut == 0) { /* a line longer than the buffer */
                    char *nb = realloc(buf, 2 * cap);
                    if (!nb) {
                        rc = cz_fail(err, "%s: out of memory for a long line", files[f]);
                        break;
                    }
                    buf = nb, cap *= 2;
                    continue;
                }
            }
            if (gpt2) {
                const unsigned char *s = (const unsigned char *)buf;
                for (size_t i = 0; i < cut && rc == 0;) {
                    size_t e = cz_gpt2_piece_end(s, cut, i);
                    rc = count_word(wc, buf + i, e - i, err);
                    i = e;
                }
            } else {
                rc = cz_bert_split(o, buf, cut, on_bert_word, &sc, err);
            }
            if (rc) {
                cz_fail_prefix(err, "%s", files[f]);
                break;
            }
            memmove(buf, buf + cut, have - cut);
            have -= cut;
            if (eof) break;
        }
        if (ferror(fp) && rc == 0) rc = cz_fail(err, "%s: read error", files[f]);
        fclose(fp);
    }
    free(buf);
    return rc;
}

/* ---- the merge learner ---- */
typedef struct heap_entry {
    int64_t count;
    uint32_t pair;
} heap_entry;

typedef struct learner {
    int wordpiece;
    cz_strtab syms; /* symbol string -> symbol id (ids 0.. in creation order) */
    /* words: symbol sequences */
    uint32_t nwords;
    uint64_t *wcount;
    uint32_t *wstart, *wlen, *wsym, *wstamp;
    /* pairs */
    uint64_t *pkey; /* hash slots: (a << 32 | b) + 1 */
    uint32_t *pslot_idx, pmask;
    uint32_t *pa, *pb, *pstamp, npairs, pcap;
    int64_t *pcount;
    uint32_t **plist, *plist_n, *plist_cap;
    heap_entry *heap;
    uint32_t nheap, heap_cap;
    /* merges in order: (left, right) symbol ids */
    uint32_t *ml, *mr, nmerges, mcap;
} learner;

static int heap_push(learner *L, uint32_t p, cz_error *err) {
    if (GROW(L->heap, L->nheap, L->heap_cap, err)) return -1;
    heap_entry e = {L->pcount[p], p};
    uint32_t i = L->nheap++;
    while (i > 0) {
        uint32_t up = (i - 1) / 2;
        heap_entry u = L->heap[up];
        if (u.count > e.count || (u.count == e.count && u.pair < e.pair)) break;
        L->heap[i] = u, i = up;
    }
    L->heap[i] = e;
    return 0;
}

static heap_entry heap_pop(learner *L) {
    heap_entry top = L->heap[0], e = L->heap[--L->nheap];
    uint32_t i = 0, n = L->nheap;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n &&
            (L->heap[c + 1].count > L->heap[c].count ||
             (L->heap[c + 1].count == L->heap[c].count && L->heap[c + 1].pair < L->heap[c].pair)))
            c++;
        heap_entry ce = L->heap[c];
        if (e.count > ce.count || (e.count == ce.count && e.pair < ce.pair)) break;
        L->heap[i] = ce, i = c;
    }
    if (n) L->heap[i] = e;
    return top;
}

static int pair_grow(learner *L, cz_error *err) {
    uint32_t slots = 2 * (L->pmask + 1), mask = slots - 1;
    uint64_t *key = calloc(slots, sizeof *key);
    uint32_t *idx = calloc(slots, sizeof *idx);
    if (!key || !idx) {
        free(key), free(idx);
        return cz_fail(err, "vocab: out of memory for %u pairs", slots);
    }
    for (uint32_t s = 0; s <= L->pmask; s++) {
        if (!L->pkey[s]) continue;
        uint32_t j = (uint32_t)((L->pkey[s] * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
        while (key[j]) j = (j + 1) & mask;
        key[j] = L->pkey[s], idx[j] = L->pslot_idx[s];
    }
    free(L->pkey), free(L->pslot_idx);
    L->pkey = key, L->pslot_idx = idx, L->pmask = mask;
    return 0;
}

/* Index of pair (a, b), created with count 0 if new; -1 on failure. */
static int64_t pair_get(learner *L, uint32_t a, uint32_t b, cz_error *err) {
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint32_t j = (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & L->pmask;
    while (L->pkey[j]) {
        if (L->pkey[j] == key) return L->pslot_idx[j];
        j = (j + 1) & L->pmask;
    }
    if (2 * (L->npairs + 1) > L->pmask + 1) {
        if (pair_grow(L, err)) return -1;
        return pair_get(L, a, b, err);
    }
    /* the pair table's columns, one index */
    const cz_grow_item pair_columns[] = {CZ_GROW_ITEM(L->pa),       CZ_GROW_ITEM(L->pb),
                                         CZ_GROW_ITEM(L->pstamp),   CZ_GROW_ITEM(L->pcount),
                                         CZ_GROW_ITEM(L->plist),    CZ_GROW_ITEM(L->plist_n),
                                         CZ_GROW_ITEM(L->plist_cap)};
    if (cz_grow(pair_columns, 7, L->npairs, &L->pcap, 1024, "vocab", "pairs", err)) return -1;
    uint32_t p = L->npairs++;
    L->pa[p] = a, L->pb[p] = b, L->pcount[p] = 0, L->pstamp[p] = 0;
    L->plist[p] = NULL, L->plist_n[p] = 0, L->plist_cap[p] = 0;
    L->pkey[j] = key, L->pslot_idx[j] = p;
    return p;
}

/* Adds delta occurrences of (a, b) in word w; lists w under the pair when
 * asked (the pair is new to that word). Marks the pair for a heap push. */
static int pair_add(learner *L, uint32_t a, uint32_t b, int64_t delta, uint32_t w, int list,
                    uint32_t stamp, uint32_t **dirty, uint32_t *ndirty, uint32_t *dcap,
                    cz_error *err) {
    int64_t p = pair_get(L, a, b, err);
    if (p < 0) return -1;
    L->pcount[p] += delta;
    if (list) {
        if (GROW(L->plist[p], L->plist_n[p], L->plist_cap[p], err)) return -1;
        L->plist[p][L->plist_n[p]++] = w;
    }
    if (L->pstamp[p] != stamp) {
        L->pstamp[p] = stamp;
        if (GROW(*dirty, *ndirty, *dcap, err)) return -1;
        (*dirty)[(*ndirty)++] = (uint32_t)p;
    }
    return 0;
}

static void learner_free(learner *L) {
    cz_strtab_free(&L->syms);
    free(L->wcount), free(L->wstart), free(L->wlen), free(L->wsym), free(L->wstamp);
    free(L->pkey), free(L->pslot_idx), free(L->pa), free(L->pb), free(L->pstamp);
    free(L->pcount);
    for (uint32_t p = 0; p < L->npairs; p++) free(L->plist[p]);
    free(L->plist), free(L->plist_n), free(L->plist_cap), free(L->heap), free(L->ml), free(L->mr);
}

static int32_t sym_intern(learner *L, const char *s, size_t len, cz_error *err) {
    int32_t id = cz_strtab_get(&L->syms, s, len);
    if (id >= 0) return id;
    id = (int32_t)L->syms.n;
    return cz_strtab_put(&L->syms, s, len, (uint32_t)id, err) ? -1 : id;
}

static const char *sym_str(const learner *L, uint32_t id, size_t *len) {
    *len = L->syms.len[id];
    return L->syms.blob + L->syms.off[id];
}

/* Words -> initial symbol sequences, pairs counted and listed. */
static int learner_init(learner *L, const word_counts *wc, cz_error *err) {
    L->nwords = wc->n;
    size_t total = 0;
    for (uint32_t w = 0; w < wc->n; w++) total += wc->words.len[w];
    L->wcount = malloc((wc->n + 1) * sizeof *L->wcount);
    L->wstart = malloc((wc->n + 1) * sizeof *L->wstart);
    L->wlen = malloc((wc->n + 1) * sizeof *L->wlen);
    L->wstamp = calloc(wc->n + 1, sizeof *L->wstamp);
    L->wsym = malloc((total + 1) * sizeof *L->wsym);
    L->pmask = 4095;
    L->pkey = calloc(L->pmask + 1, sizeof *L->pkey);
    L->pslot_idx = calloc(L->pmask + 1, sizeof *L->pslot_idx);
    if (!L->wcount || !L->wstart || !L->wlen || !L->wstamp || !L->wsym || !L->pkey || !L->pslot_idx)
        return cz_fail(err, "vocab: out of memory for %u words", wc->n);
    if (total > UINT32_MAX) return cz_fail(err, "vocab: over 4G characters of distinct words");
    uint32_t pos = 0, *dirty = NULL, nd = 0, dcap = 0;
    for (uint32_t w = 0; w < wc->n; w++) {
        const unsigned char *s = (const unsigned char *)wc->words.blob + wc->words.off[w];
        size_t len = wc->words.len[w];
        L->wcount[w] = wc->count[w], L->wstart[w] = pos;
        for (size_t i = 0; i < len;) {
            char tmp[8];
            size_t n;
            if (L->wordpiece) { /* a character; "##" form inside the word */
                size_t e = i;
                cz_utf8_next(s, len, &e);
                n = 0;
                if (i > 0) tmp[n++] = '#', tmp[n++] = '#';
                memcpy(tmp + n, s + i, e - i);
                n += e - i, i = e;
            } else {
                tmp[0] = (char)s[i++], n = 1;
            }
            int32_t id = sym_intern(L, tmp, n, err);
            if (id < 0) return -1;
            L->wsym[pos++] = (uint32_t)id;
        }
        L->wlen[w] = pos - L->wstart[w];
        uint32_t *q = L->wsym + L->wstart[w];
        for (uint32_t k = 0; k + 1 < L->wlen[w]; k++)
            if (pair_add(L, q[k], q[k + 1], (int64_t)L->wcount[w], w, 1, 1, &dirty, &nd, &dcap,
                         err)) {
                free(dirty);
                return -1;
            }
    }
    int rc = 0;
    for (uint32_t k = 0; k < nd && rc == 0; k++) rc = heap_push(L, dirty[k], err);
    free(dirty);
    return rc;
}

/* Merges pairs until `max_syms` symbols exist or counts drop below min_freq. */
static int learner_run(learner *L, uint32_t max_syms, int min_freq, cz_error *err) {
    uint32_t *dirty = NULL, nd = 0, dcap = 0, stamp = 1;
    char *tmp = NULL;
    size_t tmp_cap = 0;
    int rc = 0;
    while (L->syms.n < max_syms && L->nheap > 0 && rc == 0) {
        heap_entry top = heap_pop(L);
        uint32_t p = top.pair;
        if (top.count != L->pcount[p] || top.count <= 0) continue; /* stale */
        if (top.count < min_freq) break;
        uint32_t a = L->pa[p], b = L->pb[p];
        size_t la, lb;
        const char *sa = sym_str(L, a, &la), *sb = sym_str(L, b, &lb);
        if (L->wordpiece && lb >= 2 && sb[0] == '#' && sb[1] == '#') sb += 2, lb -= 2;
        if (la + lb > tmp_cap) {
            tmp_cap = 2 * (la + lb) + 64;
            char *t = realloc(tmp, tmp_cap);
            if (!t) {
                rc = cz_fail(err, "vocab: out of memory");
                break;
            }
            tmp = t;
        }
        memcpy(tmp, sa, la);
        memcpy(tmp + la, sb, lb);
        int32_t c = sym_intern(L, tmp, la + lb, err);
        if (c < 0) {
            rc = -1;
            break;
        }
        const cz_grow_item merge_columns[] = {CZ_GROW_ITEM(L->ml), CZ_GROW_ITEM(L->mr)};
        if (cz_grow(merge_columns, 2, L->nmerges, &L->mcap, 1024, "vocab", "merges", err)) {
            rc = -1;
            break;
        }
        L->ml[L->nmerges] = a, L->mr[L->nmerges++] = b;
        stamp++, nd = 0;
        /* Re-count the words that hold (a, b): drop their old pairs, merge,
         * add the new ones (only pairs with c are new to the word's lists). */
        uint32_t nlist = L->plist_n[p];
        uint32_t *list = L->plist[p];
        L->plist[p] = NULL, L->plist_n[p] = L->plist_cap[p] = 0;
        for (uint32_t li = 0; li < nlist && rc == 0; li++) {
            uint32_t w = list[li];
            if (L->wstamp[w] == stamp) continue;
            L->wstamp[w] = stamp;
            uint32_t *q = L->wsym + L->wstart[w], n = L->wlen[w];
            int has = 0;
            for (uint32_t k = 0; k + 1 < n; k++) has |= q[k] == a && q[k + 1] == b;
            if (!has) continue;
            int64_t cnt = (int64_t)L->wcount[w];
            for (uint32_t k = 0; k + 1 < n && rc == 0; k++)
                rc = pair_add(L, q[k], q[k + 1], -cnt, w, 0, stamp, &dirty, &nd, &dcap, err);
            uint32_t out = 0;
            for (uint32_t k = 0; k < n;) {
                if (k + 1 < n && q[k] == a && q[k + 1] == b)
                    q[out++] = (uint32_t)c, k += 2;
                else
                    q[out++] = q[k++];
            }
            L->wlen[w] = n = out;
            for (uint32_t k = 0; k + 1 < n && rc == 0; k++)
                rc = pair_add(L, q[k], q[k + 1], cnt, w,
                              q[k] == (uint32_t)c || q[k + 1] == (uint32_t)c, stamp, &dirty, &nd,
                              &dcap, err);
        }
        free(list);
        for (uint32_t k = 0; k < nd && rc == 0; k++)
            if (L->pcount[dirty[k]] > 0) rc = heap_push(L, dirty[k], err);
    }
    free(dirty), free(tmp);
    return rc;
}

static int learn_from_files(learner *L, const char *const *files, int n_files, int gpt2,
                            const cz_tokenizer_options *o, cz_error *err) {
    word_counts wc = {0};
    wc.max_chars = o->max_word_chars;
    int rc = cz_strtab_init(&wc.words, 1 << 16, err);
    if (rc == 0) rc = count_files(files, n_files, gpt2, o, &wc, err);
    if (rc == 0) rc = cz_strtab_init(&L->syms, 4096, err);
    if (rc == 0 && gpt2) { /* the 256 bytes first, in GPT-2's id order */
        uint32_t b2u[256];
        cz_gpt2_byte_map(b2u);
        for (uint32_t u = 0; u < 512 && rc == 0; u++)
            for (int b = 0; b < 256; b++)
                if (b2u[b] == u) {
                    char c = (char)b;
                    rc = sym_intern(L, &c, 1, err) < 0;
                }
    }
    if (rc == 0) rc = learner_init(L, &wc, err);
    cz_strtab_free(&wc.words);
    free(wc.count);
    return rc ? -1 : 0;
}

int cz_learn_wordpiece_opts(const char *const *files, int n_files, const cz_vocab_learn_options *o,
                            const char *out_vocab, cz_error *err) {
    static const char *const specials[] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    int reserved = 1 + o->n_unused + 4;
    if (o->vocab_size <= reserved)
        return cz_fail(err, "%s: vocab_size %d leaves no room after %d special tokens", out_vocab,
                       o->vocab_size, reserved);
    cz_tokenizer_options to;
    cz_tokenizer_options_default(&to);
    to.lower_case = o->lower_case;
    to.max_word_chars = o->max_word_chars;
    learner L = {0};
    L.wordpiece = 1;
    int rc = learn_from_files(&L, files, n_files, 0, &to, err);
    uint32_t target = (uint32_t)(o->vocab_size - reserved);
    if (rc == 0 && L.syms.n > target)
        rc = cz_fail(err, "%s: the text has %u distinct characters, more than vocab_size %d allows",
                     out_vocab, L.syms.n, o->vocab_size);
    if (rc == 0) rc = learner_run(&L, target, o->min_frequency, err);
    char *out = NULL;
    size_t len = 0;
    if (rc == 0) {
        size_t cap = L.syms.blob_len + 64 + (size_t)reserved * 16;
        out = malloc(cap);
        if (!out) rc = cz_fail(err, "%s: out of memory", out_vocab);
    }
    if (rc == 0) {
        len += (size_t)sprintf(out + len, "[PAD]\n");
        for (int k = 0; k < o->n_unused; k++) len += (size_t)sprintf(out + len, "[unused%d]\n", k);
        for (int k = 0; k < 4; k++) len += (size_t)sprintf(out + len, "%s\n", specials[k]);
        for (uint32_t s = 0; s < L.syms.n; s++) {
            size_t l;
            const char *str = sym_str(&L, s, &l);
            memcpy(out + len, str, l);
            len += l;
            out[len++] = '\n';
        }
        rc = cz_write_file_atomic(out_vocab, out, len, err);
    }
    free(out);
    learner_free(&L);
    return rc;
}

int cz_learn_wordpiece(const char *const *files, int n_files, int vocab_size, int lower_case,
                       const char *out_vocab, cz_error *err) {
    cz_vocab_learn_options o;
    cz_vocab_learn_options_default(&o);
    o.vocab_size = vocab_size, o.lower_case = lower_case;
    return cz_learn_wordpiece_opts(files, n_files, &o, out_vocab, err);
}

/* A symbol's bytes in GPT-2's printable byte-to-unicode spelling. */
static size_t gpt2_spell(const learner *L, const uint32_t b2u[256], uint32_t id, char *out) {
    size_t l, n = 0;
    const char *s = sym_str(L, id, &l);
    for (size_t i = 0; i < l; i++) n += (size_t)cz_utf8_put(b2u[(unsigned char)s[i]], out + n);
    return n;
}

int cz_learn_bpe(const char *const *files, int n_files, int vocab_size,
                 const char *out_encoder_json, const char *out_merges, cz_error *err) {
    if (vocab_size < 257)
        return cz_fail(err, "%s: vocab_size %d < 257 (256 bytes + <|endoftext|>)", out_merges,
                       vocab_size);
    cz_tokenizer_options to;
    cz_tokenizer_options_default(&to);
    learner L = {0};
    int rc = learn_from_files(&L, files, n_files, 1, &to, err);
    if (rc == 0) rc = learner_run(&L, (uint32_t)vocab_size - 1, 2, err);
    uint32_t b2u[256];
    cz_gpt2_byte_map(b2u);
    /* Sizes: each byte spells as at most 2 UTF-8 bytes; JSON adds escapes. */
    size_t ecap = 4 * L.syms.blob_len + 16 * (size_t)L.syms.n + 64;
    size_t mcap = 4 * L.syms.blob_len + 8 * (size_t)L.nmerges + 64;
    char *enc = rc ? NULL : malloc(ecap), *mer = rc ? NULL : malloc(mcap);
    char *tok = rc ? NULL : malloc(2 * L.syms.blob_len + 16);
    if (rc == 0 && (!enc || !mer || !tok)) rc = cz_fail(err, "%s: out of memory", out_merges);
    if (rc == 0) {
        size_t e = 0, m = 0;
        enc[e++] = '{';
        for (uint32_t s = 0; s < L.syms.n; s++) {
            size_t n = gpt2_spell(&L, b2u, s, tok);
            enc[e++] = '"';
            for (size_t i = 0; i < n; i++) {
                if (tok[i] == '"' || tok[i] == '\\') enc[e++] = '\\';
                enc[e++] = tok[i];
            }
            e += (size_t)sprintf(enc + e, "\": %u, ", s);
        }
        e += (size_t)sprintf(enc + e, "\"<|endoftext|>\": %u}", L.syms.n);
        m += (size_t)sprintf(mer + m, "#version: 0.2\n");
        for (uint32_t k = 0; k < L.nmerges; k++) {
            m += gpt2_spell(&L, b2u, L.ml[k], mer + m);
            mer[m++] = ' ';
            m += gpt2_spell(&L, b2u, L.mr[k], mer + m);
            mer[m++] = '\n';
        }
        rc = cz_write_file_atomic(out_encoder_json, enc, e, err);
        if (rc == 0) rc = cz_write_file_atomic(out_merges, mer, m, err);
    }
    free(enc), free(mer), free(tok);
    learner_free(&L);
    return rc;
}
