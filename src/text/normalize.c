/* normalize: cloze-prep's normaliser and sentence splitter (rules in
 * docs/formats.md, "Normalisation" and "Sentences"). */
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>

static int is_space_cp(uint32_t c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

static int is_dropped_cp(uint32_t c) {
    return (c < 0x20 && c != '\n') || (c >= 0x7F && c <= 0x9F) || c == 0xFEFF;
}

/* Appends one paragraph's bytes with spaces collapsed and trimmed; a '\n'
 * separates it from the previous non-empty paragraph. */
static int flush_para(cz_buf *out, size_t out_start, const char *p, size_t n, cz_error *err) {
    while (n && p[n - 1] == ' ') n--;
    if (n == 0) return 0;
    if (out->len > out_start && cz_buf_append(out, "\n", 1, err) != 0) return -1;
    return cz_buf_append(out, p, n, err);
}

/* " @-@ " -> "-" etc.: WikiText's tokenised intra-word hyphens, thousands
 * separators and decimal points (Merity et al. 2016). In place. */
static size_t wikitext_detok(char *s, size_t n) {
    size_t w = 0;
    for (size_t r = 0; r < n;) {
        if (r + 5 <= n && s[r] == ' ' && s[r + 1] == '@' && s[r + 3] == '@' && s[r + 4] == ' ' &&
            (s[r + 2] == '-' || s[r + 2] == ',' || s[r + 2] == '.')) {
            s[w++] = s[r + 2];
            r += 5;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

int cz_normalize(const char *in, size_t n, int detok, cz_buf *out, cz_norm_stats *st,
                 cz_error *err) {
    const unsigned char *p = (const unsigned char *)in;
    size_t out_start = out->len;
    cz_buf para = {0};
    int pending_space = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t len = cz_utf8_decode(p + i, n - i, &c), emit = len;
        const char *bytes = in + i;
        if (len == 0) { /* one invalid byte -> one U+FFFD */
            st->bytes_replaced++;
            c = 0xFFFD;
            bytes = "\xEF\xBF\xBD";
            len = 1;
            emit = 3;
        }
        i += len;
        if (c == '\n') {
            if (flush_para(out, out_start, para.data, para.len, err) != 0) goto fail;
            para.len = 0;
            pending_space = 0;
            continue;
        }
        if (is_space_cp(c)) {
            pending_space = para.len > 0;
            continue;
        }
        if (is_dropped_cp(c)) {
            st->chars_dropped++;
            continue;
        }
        if (pending_space && cz_buf_append(&para, " ", 1, err) != 0) goto fail;
        pending_space = 0;
        if (cz_buf_append(&para, bytes, emit, err) != 0) goto fail;
    }
    if (flush_para(out, out_start, para.data, para.len, err) != 0) goto fail;
    cz_buf_free(&para);
    if (detok && out->len > out_start) {
        size_t m = wikitext_detok(out->data + out_start, out->len - out_start);
        out->len = out_start + m;
        out->data[out->len] = 0;
    }
    return 0;
fail:
    cz_buf_free(&para);
    return -1;
}

int cz_verbatim(const char *in, size_t n, int detok, cz_buf *out, cz_norm_stats *st,
                cz_error *err) {
    const unsigned char *p = (const unsigned char *)in;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t len = cz_utf8_decode(p + i, n - i, &c);
        st->bytes_replaced += len == 0;
        i += len ? len : 1;
    }
    size_t start = out->len;
    if (cz_buf_append(out, in, n, err) != 0) return -1;
    if (detok && n) {
        out->len = start + wikitext_detok(out->data + start, n);
        out->data[out->len] = 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- splitting */

static int cz_spans_push(cz_spans *s, uint32_t start, uint32_t len, cz_error *err) {
    if (s->n == s->cap) {
        size_t c = s->cap ? 2 * s->cap : 64;
        cz_span *v = realloc(s->v, c * sizeof *v);
        if (!v) return cz_fail(err, "out of memory (sentence spans)");
        s->v = v;
        s->cap = c;
    }
    s->v[s->n].start = start;
    s->v[s->n].len = len;
    s->n++;
    return 0;
}

void cz_spans_free(cz_spans *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Words after which a period does not end a sentence (compared without the
 * period, case-sensitively). */
static const char *const ABBREVIATIONS[] = {
    "Mr",  "Mrs",  "Ms",  "Dr",     "Prof", "Sr",  "Jr",   "St",     "Mt",   "Rev",  "Gen",
    "Col", "Capt", "Lt",  "Sgt",    "Gov",  "Sen", "Rep",  "Hon",    "vs",   "etc",  "e.g",
    "i.e", "cf",   "al",  "approx", "No",   "Nos", "no",   "Fig",    "fig",  "Figs", "Vol",
    "vol", "pp",   "p",   "ch",     "Ch",   "Inc", "Ltd",  "Co",     "Corp", "Jan",  "Feb",
    "Mar", "Apr",  "Jun", "Jul",    "Aug",  "Sep", "Sept", "Oct",    "Nov",  "Dec",  "U.S",
    "U.K", "a.m",  "p.m", "ca",     "c",    "viz", "Esq",  "Messrs", "Mme",  "Mlle", "Ph.D"};

static int is_abbreviation(const char *w, size_t n) {
    if (n == 1 && w[0] >= 'A' && w[0] <= 'Z') return 1; /* an initial: "J. R. R. Tolkien" */
    for (size_t i = 0; i < sizeof ABBREVIATIONS / sizeof *ABBREVIATIONS; i++)
        if (strlen(ABBREVIATIONS[i]) == n && memcmp(ABBREVIATIONS[i], w, n) == 0) return 1;
    return 0;
}

/* Closing quotes and brackets that stay with the sentence they end. */
static size_t closer_len(const char *s, size_t n) {
    if (n >= 1 && (s[0] == '"' || s[0] == '\'' || s[0] == ')' || s[0] == ']')) return 1;
    if (n >= 3 && !memcmp(s, "\xE2\x80", 2) && (s[2] == '\x9D' || s[2] == '\x99')) return 3;
    return 0;
}

/* Can a sentence start here? Upper-case ASCII, a digit, an opening quote or
 * bracket, or any non-ASCII letter (we cannot tell its case cheaply). */
static int starts_sentence(const char *s, size_t n) {
    if (n == 0) return 0;
    unsigned char c = (unsigned char)s[0];
    if ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    if (c == '"' || c == '\'' || c == '(' || c == '[') return 1;
    if (n >= 3 && !memcmp(s, "\xE2\x80", 2) && (s[2] == '\x9C' || s[2] == '\x98')) return 1;
    return c >= 0xC0;
}

/* A sentence ends after '.', '!' or '?' (runs of them, then closing quotes
 * or brackets) when a space and a possible sentence start follow, unless
 * the word before a single '.' is an abbreviation or an initial. A '.'
 * inside a token ("3.14", "e.g.") is never followed by a space, so decimals
 * stay whole. */
static int split_paragraph(const char *t, size_t a, size_t b, cz_spans *out, cz_error *err) {
    size_t start = a;
    for (size_t i = a; i < b; i++) {
        char c = t[i];
        if (c != '.' && c != '!' && c != '?') continue;
        size_t j = i;
        while (j < b && (t[j] == '.' || t[j] == '!' || t[j] == '?')) j++;
        size_t run = j - i;
        size_t cl;
        while ((cl = closer_len(t + j, b - j)) > 0) j += cl;
        if (j >= b || t[j] != ' ' || !starts_sentence(t + j + 1, b - j - 1)) {
            i = j - 1;
            continue;
        }
        if (c == '.' && run == 1) {
            size_t w = i;
            while (w > start && t[w - 1] != ' ') w--;
            if (is_abbreviation(t + w, i - w)) {
                i = j;
                continue;
            }
        }
        if (cz_spans_push(out, (uint32_t)start, (uint32_t)(j - start), err) != 0) return -1;
        start = j + 1;
        i = j;
    }
    if (b > start && cz_spans_push(out, (uint32_t)start, (uint32_t)(b - start), err) != 0)
        return -1;
    return 0;
}

int cz_split_sentences(const char *text, size_t n, cz_spans *out, cz_error *err) {
    if (n > UINT32_MAX) return cz_fail(err, "document of %zu bytes is too long to split", n);
    size_t a = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || text[i] == '\n') {
            if (i > a && split_paragraph(text, a, i, out, err) != 0) return -1;
            a = i + 1;
        }
    }
    return 0;
}
