/* wordpiece: BERT's tokenizer, exactly as google-research/bert
 * tokenization.py (BasicTokenizer + WordpieceTokenizer) and Hugging Face's
 * BertTokenizer split text:
 *   1. clean: drop U+0000, U+FFFD and control characters (category C*,
 *      except \t \n \r); whitespace (\t \n \r, Zs) becomes a space;
 *   2. CJK ideographs become words of their own;
 *   3. uncased: lower-case, NFD, drop Mn marks;
 *   4. split on whitespace, then every punctuation character is a word;
 *   5. each word: greedy longest-match-first against the vocabulary, pieces
 *      after the first prefixed "##"; a word with an unmatched rest, or longer
 *      than max_word_chars code points, is one [UNK].
 * All steps are per character, so one pass over the text does them all and
 * hands each finished word to the matcher; no strings are built per token. */
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>

enum { WP_DROP = 0, WP_SPACE = 1, WP_PUNCT = 2, WP_CHAR = 3 };

static uint32_t utf8_chars(const char *s, size_t len) {
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

int cz_tokenizer_load_wordpiece(cz_tokenizer **out, const char *vocab_path,
                                const cz_tokenizer_options *o, cz_error *err) {
    *out = NULL;
    void *data;
    size_t len;
    if (cz_read_file(vocab_path, &data, &len, err)) return -1;
    int rc = cz_tokenizer_load_wordpiece_mem(out, vocab_path, data, len, o, err);
    cz_free(data);
    return rc;
}

int cz_tokenizer_load_wordpiece_mem(cz_tokenizer **out, const char *vocab_path, const void *data,
                                    size_t len, const cz_tokenizer_options *o, cz_error *err) {
    *out = NULL;
    cz_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return cz_fail(err, "%s: out of memory", vocab_path);
    t->kind = CZ_TOK_WORDPIECE;
    if (o)
        t->opt = *o;
    else
        cz_tokenizer_options_default(&t->opt);
    if (t->opt.max_word_chars < 1) t->opt.max_word_chars = 1;
    t->fingerprint = cz_vocab_fingerprint(data, len, NULL, 0);
    if (cz_strtab_init(&t->vocab, 32768, err) || cz_strtab_init(&t->cont, 8192, err)) goto fail;
    /* One token per line, id = line number (BERT load_vocab); the last line
     * needs no newline; a repeated token keeps its last id (dict semantics). */
    const char *s = data;
    uint32_t id = 0;
    for (size_t i = 0; i < len; id++) {
        size_t e = i;
        while (e < len && s[e] != '\n') e++;
        size_t n = e - i;
        if (n && s[i + n - 1] == '\r') n--;
        if (cz_strtab_put(&t->vocab, s + i, n, id, err)) goto fail;
        uint32_t chars = utf8_chars(s + i, n);
        if (n > 2 && s[i] == '#' && s[i + 1] == '#') {
            if (cz_strtab_put(&t->cont, s + i + 2, n - 2, id, err)) goto fail;
            if (chars - 2 > t->max_cont_chars) t->max_cont_chars = chars - 2;
        }
        if (chars > t->max_start_chars) t->max_start_chars = chars;
        i = e + 1;
    }
    t->unk_id = cz_strtab_get(&t->vocab, "[UNK]", 5);
    if (t->unk_id < 0) {
        /* the wrong file: say which kind it looks like (the prefix below
         * names it) */
        size_t bad = cz_utf8_invalid_at((const unsigned char *)data, len);
        const char *nul = memchr(data, 0, len);
        size_t at = nul && (size_t)(nul - (const char *)data) < bad
                        ? (size_t)(nul - (const char *)data)
                        : bad;
        if (at < len)
            cz_fail(err,
                    "not a WordPiece vocab.txt: binary data (%s at byte %zu) and no [UNK] line; "
                    "a vocab.txt is UTF-8 text, one token per line",
                    at == bad ? "invalid UTF-8" : "a NUL byte", at);
        else
            cz_fail(err, "not a WordPiece vocab.txt: no [UNK] line (a GPT-2 encoder.json needs "
                         "--merges vocab.bpe)");
        goto fail;
    }
    if (cz_tokenizer_index_ids(t, err)) goto fail;
    *out = t;
    return 0;
fail:
    cz_fail_prefix(err, "%s", vocab_path);
    cz_tokenizer_free(t);
    return -1;
}

static inline int ascii_class(unsigned c) {
    if ((c | 0x20) - 'a' < 26 || c - '0' < 10) return WP_CHAR;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return WP_SPACE;
    if (c < 32 || c == 127) return WP_DROP;
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || c >= 123)
        return WP_PUNCT;
    return WP_CHAR;
}

/* The word being built: its normalised bytes and the byte offset of each code
 * point (the matcher works in code points, as Python slices characters). */
typedef struct wp_word {
    char *buf;
    uint32_t *offs;
    int ncp, max;
    cz_word_fn fn;
    void *ctx;
} wp_word;

static void word_add(wp_word *w, uint32_t cp) {
    if (w->ncp < w->max) {
        uint32_t o = w->offs[w->ncp];
        if (cp < 0x80)
            w->buf[o++] = (char)cp;
        else
            o += (uint32_t)cz_utf8_put(cp, w->buf + o);
        w->offs[++w->ncp] = o;
    } else if (w->ncp == w->max) {
        w->ncp++; /* over the limit: the word becomes [UNK] */
    }
}

static inline int word_flush(wp_word *w) {
    int ncp = w->ncp;
    if (!ncp) return 0;
    w->ncp = 0;
    return w->fn(w->ctx, w->buf, w->offs, ncp);
}

int cz_bert_split(const cz_tokenizer_options *o, const char *text, size_t len, cz_word_fn fn,
                  void *ctx, cz_error *err) {
    int max = o->max_word_chars < 1 ? 1 : o->max_word_chars, lower = o->lower_case;
    char small_buf[4 * 128 + 8];
    uint32_t small_offs[128 + 1];
    wp_word w = {small_buf, small_offs, 0, max, fn, ctx};
    if (max > 128) {
        w.buf = malloc(4 * (size_t)max + 8);
        w.offs = malloc(((size_t)max + 1) * sizeof *w.offs);
        if (!w.buf || !w.offs) {
            free(w.buf), free(w.offs);
            return cz_fail(err, "wordpiece: out of memory for max_word_chars %d", max);
        }
    }
    w.offs[0] = 0;
    const unsigned char *s = (const unsigned char *)text;
    int rc = 0;
    size_t i = 0;
    while (i < len && rc == 0) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            switch (ascii_class(c)) {
            case WP_CHAR:
                word_add(&w, lower && c >= 'A' && c <= 'Z' ? c + 32 : c);
                break;
            case WP_SPACE:
                rc = word_flush(&w);
                break;
            case WP_PUNCT:
                rc = word_flush(&w);
                word_add(&w, c);
                rc |= word_flush(&w);
                break;
            default:
                break;
            }
            continue;
        }
        uint32_t cp = cz_utf8_next(s, len, &i);
        if (cp == 0xFFFD || cz_is_bert_control(cp)) continue;
        if (cz_is_bert_space(cp)) {
            rc = word_flush(&w);
            continue;
        }
        uint32_t norm[18];
        int k = cz_bert_normalize_char(cp, lower, lower, norm);
        int cjk = o->tokenize_chinese && cz_is_cjk(cp);
        if (cjk) rc |= word_flush(&w);
        for (int j = 0; j < k; j++) {
            if (cz_is_bert_punct(norm[j])) {
                rc |= word_flush(&w);
                word_add(&w, norm[j]);
                rc |= word_flush(&w);
            } else {
                word_add(&w, norm[j]);
            }
        }
        if (cjk) rc |= word_flush(&w);
    }
    if (rc == 0) rc = word_flush(&w);
    if (w.buf != small_buf) free(w.buf), free(w.offs);
    return rc ? -1 : 0;
}

typedef struct wp_match {
    const cz_tokenizer *t;
    cz_ids *out;
    cz_error *err;
} wp_match;

/* Greedy longest-match-first of one word (WordpieceTokenizer.tokenize). */
static int match_word(void *ctx, const char *word, const uint32_t *offs, int ncp) {
    wp_match *m = ctx;
    const cz_tokenizer *t = m->t;
    if (ncp > t->opt.max_word_chars) return cz_ids_push(m->out, (uint32_t)t->unk_id, m->err);
    size_t mark = m->out->n;
    int start = 0;
    while (start < ncp) {
        const cz_strtab *tab = start ? &t->cont : &t->vocab;
        int limit = start + (int)(start ? t->max_cont_chars : t->max_start_chars);
        int end = ncp < limit ? ncp : limit;
        int32_t id = -1;
        for (; end > start; end--) {
            id = cz_strtab_get(tab, word + offs[start], offs[end] - offs[start]);
            if (id >= 0) break;
        }
        if (id < 0) {
            m->out->n = mark;
            return cz_ids_push(m->out, (uint32_t)t->unk_id, m->err);
        }
        if (cz_ids_push(m->out, (uint32_t)id, m->err)) return -1;
        start = end;
    }
    return 0;
}

int cz_wordpiece_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out,
                        cz_error *err) {
    wp_match m = {t, out, err};
    return cz_bert_split(&t->opt, text, len, match_word, &m, err);
}

char *cz_wordpiece_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len) {
    /* " ".join(tokens).replace(" ##", ""): a continuation glues to the left. */
    size_t cap = 1;
    for (size_t k = 0; k < n; k++) {
        const char *tok = cz_tokenizer_token(t, ids[k]);
        cap += (tok ? strlen(tok) : 0) + 1;
    }
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    for (size_t k = 0; k < n; k++) {
        const char *tok = cz_tokenizer_token(t, ids[k]);
        if (!tok) continue;
        if (tok[0] == '#' && tok[1] == '#' && tok[2] && p != s) {
            tok += 2;
        } else if (p != s) {
            *p++ = ' ';
        }
        size_t l = strlen(tok);
        memcpy(p, tok, l);
        p += l;
    }
    *p = 0;
    if (len) *len = (size_t)(p - s);
    return s;
}
