/* bpe: GPT-2 byte-level BPE, exactly as openai/gpt-2 src/encoder.py:
 *   1. split text with the regex
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      (hand-written below; alternatives are tried in order, as the regex
 *      engine does);
 *   2. each piece is a sequence of bytes; every byte starts as its own token
 *      (encoder.json keys spell bytes through bytes_to_unicode);
 *   3. repeatedly take the adjacent pair with the lowest merge rank
 *      (vocab.bpe line order) and merge all its occurrences left to right,
 *      until no adjacent pair has a rank.
 * Tokens are ids throughout: a merge (left id, right id) maps to its rank and
 * the id of the merged string, so no strings are built while encoding. The
 * text "<|endoftext|>" is encoded as ordinary text, as encoder.py does. */
#include "text_internal.h"

#include "cloze/json.h"

#include <stdlib.h>
#include <string.h>

/* ---- bytes_to_unicode (encoder.py) ---- */

void cz_gpt2_byte_map(uint32_t byte_to_unicode[256]) {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        byte_to_unicode[b] = printable ? b : next++;
    }
}

/* ---- encoder.json: a flat object of string -> integer ---- */

static int load_encoder(cz_tokenizer *t, const char *path, const char *s, size_t len,
                        cz_error *err) {
    const char *p = cz_json_ws(s, s + len), *e = s + len;
    if (p >= e || *p != '{')
        return cz_fail(err, "%s: offset %zu: expected '{'", path, (size_t)(p - s));
    /* one key buffer for the whole file; allocated up front so that an empty
     * key still has data */
    cz_buf key = {0};
    if (cz_buf_append(&key, "", 0, err)) return cz_fail_prefix(err, "%s", path);
    p = cz_json_ws(p + 1, e);
    while (p < e && *p != '}') {
        key.len = 0;
        const char *q = p;
        /* keys must map exactly: a lone surrogate is an error, not U+FFFD */
        int rc = *p == '"' ? cz_json_string(&q, e, CZ_JSON_RAW_CONTROL, &key, err) : -1;
        if (rc == -2) goto fail;
        if (rc) goto bad;
        p = cz_json_ws(q, e);
        if (p >= e || *p != ':') goto bad;
        p = cz_json_ws(p + 1, e);
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p || id < 0 || id > INT32_MAX) goto bad;
        if (cz_strtab_put(&t->vocab, key.data, key.len, (uint32_t)id, err)) goto fail;
        p = cz_json_ws(end, e);
        if (p < e && *p == ',') p = cz_json_ws(p + 1, e);
    }
    cz_buf_free(&key);
    if (p >= e) return cz_fail(err, "%s: unterminated object", path);
    return 0;
fail:
    cz_buf_free(&key);
    return cz_fail_prefix(err, "%s", path);
bad:
    cz_buf_free(&key);
    return cz_fail(err, "%s: offset %zu: expected \"token\": id", path, (size_t)(p - s));
}

/* ---- merge table ---- */

static uint32_t pair_slot(const cz_pairtab *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(h >> 32) & m->mask;
}

/* rank of (a, b) or UINT32_MAX; *merged gets the id of a+b */
static inline uint32_t pair_rank(const cz_pairtab *m, uint32_t a, uint32_t b, uint32_t *merged) {
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint32_t j = pair_slot(m, key);
    while (m->key[j]) {
        if (m->key[j] == key) {
            *merged = m->merged[j];
            return m->rank[j];
        }
        j = (j + 1) & m->mask;
    }
    return UINT32_MAX;
}

static int load_merges(cz_tokenizer *t, const char *path, const char *s, size_t len,
                       cz_error *err) {
    uint32_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += s[i] == '\n';
    uint32_t slots = 1024;
    while (slots < 2 * lines + 16) slots *= 2;
    cz_pairtab *m = &t->merges;
    m->mask = slots - 1;
    m->key = calloc(slots, sizeof *m->key);
    m->rank = calloc(slots, sizeof *m->rank);
    m->merged = calloc(slots, sizeof *m->merged);
    char *joined = malloc(len + 1);
    if (!m->key || !m->rank || !m->merged || !joined) {
        free(joined);
        return cz_fail(err, "%s: out of memory", path);
    }
    uint32_t rank = 0, line = 0;
    for (size_t i = 0; i < len; line++) {
        size_t e = i;
        while (e < len && s[e] != '\n') e++;
        size_t n = e - i;
        if (n && s[i + n - 1] == '\r') n--;
        const char *l = s + i;
        i = e + 1;
        if (n == 0 || (line == 0 && l[0] == '#')) continue; /* "#version: 0.2" */
        const char *sp = memchr(l, ' ', n);
        if (!sp || sp == l || sp == l + n - 1) {
            free(joined);
            return cz_fail(err, "%s: line %u: expected \"left right\"", path, line + 1);
        }
        size_t ln = (size_t)(sp - l), rn = n - ln - 1;
        memcpy(joined, l, ln);
        memcpy(joined + ln, sp + 1, rn);
        int32_t a = cz_strtab_get(&t->vocab, l, ln), b = cz_strtab_get(&t->vocab, sp + 1, rn);
        int32_t ab = cz_strtab_get(&t->vocab, joined, ln + rn);
        if (a < 0 || b < 0 || ab < 0) {
            free(joined);
            return cz_fail(err,
                           "%s: line %u: merge \"%.*s\" has a part or result not in the encoder",
                           path, line + 1, (int)n, l);
        }
        /* A repeated pair keeps its last rank, as dict(zip(merges, range)) does. */
        uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
        uint32_t j = pair_slot(m, key);
        while (m->key[j] && m->key[j] != key) j = (j + 1) & m->mask;
        m->key[j] = key, m->rank[j] = rank++, m->merged[j] = (uint32_t)ab;
    }
    free(joined);
    return 0;
}

int cz_tokenizer_load_bpe(cz_tokenizer **out, const char *encoder_json, const char *merges_path,
                          cz_error *err) {
    *out = NULL;
    void *enc = NULL, *mer = NULL;
    size_t elen, mlen;
    int rc = -1;
    if (cz_read_file(encoder_json, &enc, &elen, err) == 0 &&
        cz_read_file(merges_path, &mer, &mlen, err) == 0)
        rc = cz_tokenizer_load_bpe_mem(out, encoder_json, enc, elen, merges_path, mer, mlen, err);
    cz_free(enc), cz_free(mer);
    return rc;
}

int cz_tokenizer_load_bpe_mem(cz_tokenizer **out, const char *encoder_json, const void *enc,
                              size_t elen, const char *merges_path, const void *mer, size_t mlen,
                              cz_error *err) {
    *out = NULL;
    cz_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cz_fail(err, "%s: out of memory", encoder_json);
    t->kind = CZ_TOK_BPE;
    cz_tokenizer_options_default(&t->opt);
    t->unk_id = -1;
    t->fingerprint = cz_vocab_fingerprint(enc, elen, mer, mlen);
    if (cz_strtab_init(&t->vocab, 65536, err) || load_encoder(t, encoder_json, enc, elen, err) ||
        load_merges(t, merges_path, mer, mlen, err))
        goto fail;
    if (cz_tokenizer_index_ids(t, err)) {
        cz_fail_prefix(err, "%s", encoder_json);
        goto fail;
    }
    cz_gpt2_byte_map(t->byte_to_unicode);
    for (int b = 0; b < 256; b++) {
        char u[4];
        int n = cz_utf8_put(t->byte_to_unicode[b], u);
        int32_t id = cz_strtab_get(&t->vocab, u, (size_t)n);
        if (id < 0) {
            cz_fail(err, "%s: no token for byte 0x%02x", encoder_json, b);
            goto fail;
        }
        t->byte_id[b] = (uint32_t)id;
        t->unicode_to_byte_lo[t->byte_to_unicode[b]] = (unsigned char)b;
    }
    *out = t;
    return 0;
fail:
    cz_tokenizer_free(t);
    return -1;
}

/* ---- pre-tokenisation (the regex) ---- */

enum { C_LETTER = 0, C_NUMBER = 1, C_SPACE = 2, C_OTHER = 3 };

static int char_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        if ((cp >= 0x09 && cp <= 0x0D) || cp == ' ') return C_SPACE;
        return C_OTHER;
    }
    if (cz_is_white_space(cp)) return C_SPACE;
    if (cz_is_letter(cp)) return C_LETTER;
    if (cz_is_number(cp)) return C_NUMBER;
    return C_OTHER;
}

static inline uint32_t peek(const unsigned char *s, size_t len, size_t i, size_t *next) {
    if (s[i] < 0x80) {
        *next = i + 1;
        return s[i];
    }
    *next = i;
    return cz_utf8_next(s, len, next);
}

/* Length in bytes of the contraction at s[i] ('s 't 're 've 'm 'll 'd), or 0. */
static size_t contraction(const unsigned char *s, size_t len, size_t i) {
    if (s[i] != '\'' || i + 1 >= len) return 0;
    unsigned char a = s[i + 1], b = i + 2 < len ? s[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* End of the regex match starting at s[i]. */
size_t cz_gpt2_piece_end(const unsigned char *s, size_t len, size_t i) {
    size_t c = contraction(s, len, i);
    if (c) return i + c;
    size_t j, k;
    uint32_t cp = peek(s, len, i, &j);
    int cls = char_class(cp);
    if (cp == ' ' && j < len) { /* " ?" before a letter, number or other run */
        int cls2 = char_class(peek(s, len, j, &k));
        if (cls2 != C_SPACE) cls = cls2, j = k;
    }
    if (cls != C_SPACE) { /* \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+ */
        while (j < len) {
            uint32_t c2 = peek(s, len, j, &k);
            if (char_class(c2) != cls) break;
            j = k;
        }
        return j;
    }
    /* \s+(?!\S): the whitespace run, less its last character when a
     * non-space follows and the run is longer than one; else \s+. */
    size_t last = i;
    j = i;
    while (j < len) {
        uint32_t c2 = peek(s, len, j, &k);
        if (char_class(c2) != C_SPACE) break;
        last = j;
        j = k;
    }
    if (j < len && last > i) return last;
    return j;
}

/* ---- byte-pair merging of one piece ---- */

/* Long pieces (a run of letters or spaces can be megabytes): a linked list of
 * symbols and a min-heap of (rank, position) pairs, O(n log n) instead of a
 * scan per merge. Popping the lowest rank, leftmost first, merges the same
 * pairs in the same order as encoder.py's "all occurrences of the best pair,
 * left to right" (a pair made by a merge always ranks after that merge). */
typedef struct long_pair {
    uint32_t rank, pos, left, right;
} long_pair;

static int lp_less(const long_pair *x, const long_pair *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void lp_push(long_pair *h, size_t *n, long_pair e) {
    size_t i = (*n)++;
    while (i > 0 && lp_less(&e, &h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static long_pair lp_pop(long_pair *h, size_t *n) {
    long_pair top = h[0], e = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && lp_less(&h[c + 1], &h[c])) c++;
        if (!lp_less(&h[c], &e)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = e;
    return top;
}

static int bpe_long_piece(const cz_tokenizer *t, const unsigned char *p, size_t n, cz_ids *out,
                          cz_error *err) {
    const uint32_t none = UINT32_MAX;
    uint32_t *sym = malloc(3 * n * sizeof *sym);
    long_pair *heap = malloc(2 * n * sizeof *heap);
    if (!sym || !heap || n >= UINT32_MAX) {
        free(sym), free(heap);
        return cz_fail(err, "bpe: out of memory for a %zu-byte piece", n);
    }
    uint32_t *prev = sym + n, *next = sym + 2 * n;
    size_t nh = 0, cap = 2 * n;
    for (size_t k = 0; k < n; k++) {
        sym[k] = t->byte_id[p[k]];
        prev[k] = k ? (uint32_t)k - 1 : none;
        next[k] = k + 1 < n ? (uint32_t)k + 1 : none;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t m, r = pair_rank(&t->merges, sym[k], sym[k + 1], &m);
        if (r != UINT32_MAX) lp_push(heap, &nh, (long_pair){r, (uint32_t)k, sym[k], sym[k + 1]});
    }
    int rc = 0;
    while (nh > 0) {
        long_pair e = lp_pop(heap, &nh);
        uint32_t q = e.pos, r2 = next[q];
        if (sym[q] != e.left || r2 == none || sym[r2] != e.right) continue; /* stale */
        uint32_t merged = 0;
        pair_rank(&t->merges, e.left, e.right, &merged);
        sym[q] = merged;
        next[q] = next[r2];
        if (next[r2] != none) prev[next[r2]] = q;
        sym[r2] = none;
        if (nh + 2 > cap) { /* each merge pushes at most 2 and pops 1 */
            cap *= 2;
            long_pair *h2 = realloc(heap, cap * sizeof *heap);
            if (!h2) {
                rc = cz_fail(err, "bpe: out of memory for a %zu-byte piece", n);
                break;
            }
            heap = h2;
        }
        uint32_t m, r;
        if (prev[q] != none && (r = pair_rank(&t->merges, sym[prev[q]], sym[q], &m)) != UINT32_MAX)
            lp_push(heap, &nh, (long_pair){r, prev[q], sym[prev[q]], sym[q]});
        if (next[q] != none && (r = pair_rank(&t->merges, sym[q], sym[next[q]], &m)) != UINT32_MAX)
            lp_push(heap, &nh, (long_pair){r, q, sym[q], sym[next[q]]});
    }
    for (uint32_t k = 0; rc == 0 && k != none; k = next[k]) rc = cz_ids_push(out, sym[k], err);
    free(sym), free(heap);
    return rc;
}

static int bpe_piece(const cz_tokenizer *t, const unsigned char *p, size_t n, cz_ids *out,
                     cz_error *err) {
    if (n == 1) return cz_ids_push(out, t->byte_id[p[0]], err);
    enum { SMALL = 128 };
    if (n > SMALL) return bpe_long_piece(t, p, n, out, err);
    /* Short pieces (nearly all): arrays on the stack, one scan per merge. */
    uint32_t sym[SMALL], rank[SMALL], mid[SMALL];
    unsigned char chg[SMALL];
    memset(chg, 0, n);
    for (size_t k = 0; k < n; k++) sym[k] = t->byte_id[p[k]];
    /* rank[k] / mid[k]: rank and merged id of the pair (sym[k], sym[k+1]). */
    for (size_t k = 0; k + 1 < n; k++) rank[k] = pair_rank(&t->merges, sym[k], sym[k + 1], &mid[k]);
    while (n > 1) {
        uint32_t best = UINT32_MAX;
        size_t bk = 0;
        for (size_t k = 0; k + 1 < n; k++)
            if (rank[k] < best) best = rank[k], bk = k;
        if (best == UINT32_MAX) break;
        uint32_t left = sym[bk], right = sym[bk + 1], merged = mid[bk];
        /* Merge every occurrence left to right, in place (w <= k); chg marks
         * merged symbols. A pair keeps its rank when neither side changed:
         * then the two were adjacent before too. */
        size_t w = bk, k = bk;
        while (k < n) {
            if (k + 1 < n && sym[k] == left && sym[k + 1] == right) {
                sym[w] = merged, chg[w] = 1;
                k += 2;
            } else {
                sym[w] = sym[k], rank[w] = rank[k], mid[w] = mid[k], chg[w] = 0;
                k++;
            }
            w++;
        }
        n = w;
        for (size_t q = bk ? bk - 1 : 0; q + 1 < n; q++)
            if (chg[q] || chg[q + 1]) rank[q] = pair_rank(&t->merges, sym[q], sym[q + 1], &mid[q]);
        for (size_t q = bk; q < n; q++) chg[q] = 0;
    }
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) rc = cz_ids_push(out, sym[k], err);
    return rc;
}

int cz_bpe_piece_ids(const cz_tokenizer *t, const unsigned char *p, size_t n, int force_long,
                     cz_ids *out, cz_error *err) {
    if (force_long && n > 1) return bpe_long_piece(t, p, n, out, err);
    return bpe_piece(t, p, n, out, err);
}

int cz_bpe_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out, cz_error *err) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t e = cz_gpt2_piece_end(s, len, i);
        if (bpe_piece(t, s + i, e - i, out, err)) return -1;
        i = e;
    }
    return 0;
}

char *cz_bpe_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len) {
    size_t cap = 1;
    for (size_t k = 0; k < n; k++) {
        const char *tok = cz_tokenizer_token(t, ids[k]);
        cap += tok ? strlen(tok) : 0; /* each byte costs >= 1 UTF-8 byte */
    }
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (size_t k = 0; k < n; k++) {
        const char *tok = cz_tokenizer_token(t, ids[k]);
        if (!tok) continue;
        size_t l = strlen(tok), i = 0;
        while (i < l) {
            uint32_t cp = cz_utf8_next((const unsigned char *)tok, l, &i);
            if (cp < 512) *o++ = (char)t->unicode_to_byte_lo[cp];
        }
    }
    *o = 0;
    if (len) *len = (size_t)(o - out);
    return out;
}
