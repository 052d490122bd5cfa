/* text: what WordPiece (wordpiece.c) and BPE (bpe.c) both build on, below
 * both: id vectors, the string table, the tokenizer struct's id index, its
 * free and its accessors. tokenizer.c dispatches to the two by kind. */
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>

int cz_ids_push(cz_ids *v, uint32_t id, cz_error *err) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        uint32_t *p = realloc(v->ids, cap * sizeof *p);
        if (!p) return cz_fail(err, "tokenizer: out of memory for %zu ids", cap);
        v->ids = p, v->cap = cap;
    }
    v->ids[v->n++] = id;
    return 0;
}

void cz_ids_free(cz_ids *v) {
    free(v->ids);
    v->ids = NULL, v->n = v->cap = 0;
}

void cz_tokenizer_options_default(cz_tokenizer_options *o) {
    o->lower_case = 1;
    /* HF BertTokenizer's max_input_chars_per_word; google-research/bert uses 200. */
    o->max_word_chars = 100;
    o->tokenize_chinese = 1;
}

/* ---- string table ---- */

int cz_strtab_init(cz_strtab *t, uint32_t expected, cz_error *err) {
    memset(t, 0, sizeof *t);
    uint32_t slots = 1024;
    while (slots < 2 * expected + 16) slots *= 2;
    t->mask = slots - 1;
    t->slot_hash = calloc(slots, sizeof *t->slot_hash);
    t->slot_val = calloc(slots, sizeof *t->slot_val);
    t->slot_id = calloc(slots, sizeof *t->slot_id);
    if (!t->slot_hash || !t->slot_val || !t->slot_id) {
        cz_strtab_free(t);
        return cz_fail(err, "tokenizer: out of memory for a %u-slot table", slots);
    }
    return 0;
}

void cz_strtab_free(cz_strtab *t) {
    free(t->blob), free(t->off), free(t->len);
    free(t->slot_hash), free(t->slot_val), free(t->slot_id);
    memset(t, 0, sizeof *t);
}

static int strtab_grow(cz_strtab *t, cz_error *err) {
    /* Rehash into twice the slots; entries keep their index and blob offset. */
    uint32_t slots = 2 * (t->mask + 1), mask = slots - 1;
    uint64_t *h = calloc(slots, sizeof *h);
    uint32_t *v = calloc(slots, sizeof *v), *id = calloc(slots, sizeof *id);
    if (!h || !v || !id) {
        free(h), free(v), free(id);
        return cz_fail(err, "tokenizer: out of memory growing a table to %u slots", slots);
    }
    for (uint32_t s = 0; s <= t->mask; s++) {
        if (!t->slot_val[s]) continue;
        uint32_t j = (uint32_t)t->slot_hash[s] & mask;
        while (v[j]) j = (j + 1) & mask;
        h[j] = t->slot_hash[s], v[j] = t->slot_val[s], id[j] = t->slot_id[s];
    }
    free(t->slot_hash), free(t->slot_val), free(t->slot_id);
    t->slot_hash = h, t->slot_val = v, t->slot_id = id, t->mask = mask;
    return 0;
}

int cz_strtab_put(cz_strtab *t, const char *s, size_t len, uint32_t id, cz_error *err) {
    if (len > UINT32_MAX / 2) return cz_fail(err, "tokenizer: token of %zu bytes", len);
    uint64_t h = cz_hash_bytes(s, len);
    uint32_t j = (uint32_t)h & t->mask;
    while (t->slot_val[j]) {
        uint32_t e = t->slot_val[j] - 1;
        if (t->slot_hash[j] == h && t->len[e] == len && memcmp(t->blob + t->off[e], s, len) == 0) {
            t->slot_id[j] = id;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    if (2 * (size_t)(t->n + 1) > t->mask + 1) {
        if (strtab_grow(t, err)) return -1;
        return cz_strtab_put(t, s, len, id, err);
    }
    const cz_grow_item columns[] = {CZ_GROW_ITEM(t->off), CZ_GROW_ITEM(t->len)};
    if (cz_grow(columns, 2, t->n, &t->cap, 1024, "tokenizer", "tokens", err)) return -1;
    if (t->blob_len + len + 1 > t->blob_cap) {
        size_t cap = t->blob_cap ? t->blob_cap : 4096;
        while (cap < t->blob_len + len + 1) cap *= 2;
        char *b = realloc(t->blob, cap);
        if (!b) return cz_fail(err, "tokenizer: out of memory for %zu bytes of tokens", cap);
        t->blob = b, t->blob_cap = cap;
    }
    if (t->blob_len > UINT32_MAX - len - 1)
        return cz_fail(err, "tokenizer: vocabulary strings over 4 GiB");
    memcpy(t->blob + t->blob_len, s, len);
    t->blob[t->blob_len + len] = 0;
    t->off[t->n] = (uint32_t)t->blob_len, t->len[t->n] = (uint32_t)len;
    t->blob_len += len + 1;
    t->slot_hash[j] = h, t->slot_val[j] = ++t->n, t->slot_id[j] = id;
    return 0;
}

int32_t cz_strtab_get(const cz_strtab *t, const char *s, size_t len) {
    uint64_t h = cz_hash_bytes(s, len);
    uint32_t j = (uint32_t)h & t->mask;
    while (t->slot_val[j]) {
        uint32_t e = t->slot_val[j] - 1;
        if (t->slot_hash[j] == h && t->len[e] == len && memcmp(t->blob + t->off[e], s, len) == 0)
            return (int32_t)t->slot_id[j];
        j = (j + 1) & t->mask;
    }
    return -1;
}

int cz_tokenizer_index_ids(cz_tokenizer *t, cz_error *err) {
    uint32_t n = 0;
    for (uint32_t s = 0; s <= t->vocab.mask; s++)
        if (t->vocab.slot_val[s] && t->vocab.slot_id[s] + 1 > n) n = t->vocab.slot_id[s] + 1;
    t->vocab_size = n;
    t->id_to_token = calloc(n ? n : 1, sizeof *t->id_to_token);
    if (!t->id_to_token) return cz_fail(err, "tokenizer: out of memory for %u ids", n);
    for (uint32_t s = 0; s <= t->vocab.mask; s++) {
        if (!t->vocab.slot_val[s]) continue;
        char *tok = t->vocab.blob + t->vocab.off[t->vocab.slot_val[s] - 1];
        char **slot = &t->id_to_token[t->vocab.slot_id[s]];
        /* two tokens with one id could not both decode (an encoder.json
         * with a repeated value; vocab.txt gives each line its own id) */
        if (*slot)
            return cz_fail(err, "id %u is given to two tokens, \"%.40s\" and \"%.40s\"",
                           t->vocab.slot_id[s], *slot, tok);
        *slot = tok;
    }
    return 0;
}

/* ---- the tokenizer struct: freeing it, looking into it ---- */

void cz_tokenizer_free(cz_tokenizer *t) {
    if (!t) return;
    cz_strtab_free(&t->vocab);
    cz_strtab_free(&t->cont);
    free(t->merges.key), free(t->merges.rank), free(t->merges.merged);
    free(t->id_to_token);
    free(t);
}

cz_tokenizer_kind cz_tokenizer_kind_of(const cz_tokenizer *t) {
    return t->kind;
}
uint32_t cz_tokenizer_vocab_size(const cz_tokenizer *t) {
    return t->vocab_size;
}
uint64_t cz_vocab_fingerprint(const void *vocab, size_t vocab_len, const void *merges,
                              size_t merges_len) {
    uint64_t fp = cz_fnv1a64(vocab, vocab_len, CZ_FNV_SEED);
    return merges ? cz_fnv1a64(merges, merges_len, fp) : fp;
}

uint64_t cz_tokenizer_fingerprint(const cz_tokenizer *t) {
    return t->fingerprint;
}

int32_t cz_tokenizer_token_id(const cz_tokenizer *t, const char *token) {
    return cz_strtab_get(&t->vocab, token, strlen(token));
}

const char *cz_tokenizer_token(const cz_tokenizer *t, uint32_t id) {
    return id < t->vocab_size ? t->id_to_token[id] : NULL;
}
