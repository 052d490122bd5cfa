/* tokenizers: WordPiece and GPT-2 BPE against reference outputs made by other
 * implementations (llama.cpp's and swift-transformers' golden files, made
 * with Hugging Face tokenizers; the files in tests/golden/ made by HF transformers on
 * shared/data text by tests/scripts/make_goldens.py), round trips, and the
 * vocabulary learners (determinism, layout, [UNK] rate, and a learned cased
 * vocabulary checked against HF BertTokenizer(do_lower_case=False)).
 * Needs ../shared/data (CLOZE_SHARED_DATA): exit 77 when it is absent. */
#include "../src/text/text_internal.h" /* the tokenizer's insides: options, BPE of one piece */
#include "cloze/prep.h"
#include "cloze/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

static char data_dir[4096], src_dir[4096];

static char *slurp(const char *dir, const char *rel, size_t *len) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    void *d;
    size_t n;
    cz_error err;
    if (cz_read_file(path, &d, &n, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        failures++;
        return NULL;
    }
    if (len) *len = n;
    return d;
}

/* ---- a minimal JSON reader (values the golden files use) ---- */
typedef struct jv {
    int type; /* 'o' 'a' 's' 'n' 'l' (literal) */
    char *s;  /* string (UTF-8, NUL-terminated) */
    size_t slen;
    double num;
    struct jv *items;
    char **keys;
    int n;
} jv;

static const char *jskip(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static void put_utf8(char **o, unsigned cp) {
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) {
        *u++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *u++ = (unsigned char)(0xC0 | (cp >> 6)), *u++ = (unsigned char)(0x80 | (cp & 63));
    } else if (cp < 0x10000) {
        *u++ = (unsigned char)(0xE0 | (cp >> 12));
        *u++ = (unsigned char)(0x80 | ((cp >> 6) & 63)), *u++ = (unsigned char)(0x80 | (cp & 63));
    } else {
        *u++ = (unsigned char)(0xF0 | (cp >> 18)), *u++ = (unsigned char)(0x80 | ((cp >> 12) & 63));
        *u++ = (unsigned char)(0x80 | ((cp >> 6) & 63)), *u++ = (unsigned char)(0x80 | (cp & 63));
    }
    *o = (char *)u;
}

static const char *jstr(const char *p, char **out, size_t *olen) {
    p++; /* opening quote */
    const char *e = p;
    while (*e && *e != '"') e += (*e == '\\') ? 2 : 1;
    char *s = malloc((size_t)(e - p) + 4), *o = s;
    while (*p && *p != '"') {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        p++;
        char c = *p++;
        if (c == 'u') {
            unsigned cp = (unsigned)strtoul((char[5]){p[0], p[1], p[2], p[3], 0}, NULL, 16);
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo = (unsigned)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            put_utf8(&o, cp);
        } else {
            *o++ = c == 'n'   ? '\n'
                   : c == 't' ? '\t'
                   : c == 'r' ? '\r'
                   : c == 'b' ? '\b'
                   : c == 'f' ? '\f'
                              : c;
        }
    }
    *o = 0;
    *out = s, *olen = (size_t)(o - s);
    return *p ? p + 1 : p;
}

static const char *jparse(const char *p, jv *v) {
    memset(v, 0, sizeof *v);
    p = jskip(p);
    if (*p == '{' || *p == '[') {
        int obj = *p == '{';
        v->type = obj ? 'o' : 'a';
        int cap = 8;
        v->items = malloc(cap * sizeof *v->items);
        if (obj) v->keys = malloc(cap * sizeof *v->keys);
        p = jskip(p + 1);
        while (*p && *p != '}' && *p != ']') {
            if (v->n == cap) {
                cap *= 2;
                v->items = realloc(v->items, cap * sizeof *v->items);
                if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
            }
            if (obj) {
                size_t kl;
                p = jstr(jskip(p), &v->keys[v->n], &kl);
                p = jskip(p) + 1; /* ':' */
            }
            p = jskip(jparse(p, &v->items[v->n++]));
            if (*p == ',') p = jskip(p + 1);
        }
        return *p ? p + 1 : p;
    }
    if (*p == '"') {
        v->type = 's';
        return jstr(p, &v->s, &v->slen);
    }
    char *e;
    v->num = strtod(p, &e);
    if (e != p) {
        v->type = 'n';
        return e;
    }
    v->type = 'l';
    while (*p && *p != ',' && *p != '}' && *p != ']') p++;
    return p;
}

static void jfree(jv *v) {
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items), free(v->keys), free(v->s);
}

static jv *jget(jv *o, const char *key) {
    for (int i = 0; o && o->type == 'o' && i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0) return &o->items[i];
    return NULL;
}

static int jload(const char *rel, jv *v) {
    char *d = slurp(data_dir, rel, NULL);
    if (!d) return -1;
    jparse(d, v);
    cz_free(d);
    return 0;
}

/* ---- comparing id sequences ---- */
static int same_ids(const cz_ids *got, const uint32_t *want, size_t n) {
    if (got->n != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (got->ids[i] != want[i]) return 0;
    return 1;
}

static void show_diff(const char *what, const char *text, const cz_ids *got, const uint32_t *want,
                      size_t n) {
    fprintf(stderr, "  %s: text [%.200s]\n  got :", what, text);
    for (size_t i = 0; i < got->n && i < 40; i++) fprintf(stderr, " %u", got->ids[i]);
    fprintf(stderr, "\n  want:");
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %u", want[i]);
    fprintf(stderr, "\n");
}

/* encode text and compare; returns 1 when equal */
static int check_encode(const cz_tokenizer *t, const char *what, const char *text, size_t len,
                        const uint32_t *want, size_t n) {
    cz_ids got = {0};
    cz_error err;
    int rc = cz_tokenizer_encode(t, text, len, &got, &err);
    CHECK(rc == 0, "%s: encode failed: %s", what, err.msg);
    int ok = same_ids(&got, want, n);
    if (!ok) {
        failures++;
        show_diff(what, text, &got, want, n);
    }
    cz_ids_free(&got);
    return ok;
}

static size_t parse_ids_line(const char *s, const char *end, uint32_t *ids, size_t cap) {
    size_t n = 0;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == ',')) s++;
        if (s >= end) break;
        char *e;
        unsigned long v = strtoul(s, &e, 10);
        if (e == s) break;
        if (n < cap) ids[n++] = (uint32_t)v;
        s = e;
    }
    return n;
}

/* llama.cpp's .inp/.out pairs: inputs separated by "\n__ggml_vocab_test__\n",
 * one line of space-separated ids per input. */
static void test_llama_golden(const cz_tokenizer *t, const char *inp_rel, const char *out_rel) {
    size_t ilen, olen;
    char *inp = slurp(data_dir, inp_rel, &ilen), *out = slurp(data_dir, out_rel, &olen);
    if (!inp || !out) return;
    const char *sep = "\n__ggml_vocab_test__\n";
    const char *p = inp, *q = out;
    int cases = 0, good = 0;
    uint32_t want[4096];
    for (;;) {
        const char *e = strstr(p, sep);
        if (!e) break;
        const char *qe = strchr(q, '\n');
        if (!qe) qe = out + olen;
        size_t n = parse_ids_line(q, qe, want, 4096);
        char *text = strndup(p, (size_t)(e - p));
        good += check_encode(t, inp_rel, text, (size_t)(e - p), want, n);
        free(text);
        cases++;
        p = e + strlen(sep);
        q = qe < out + olen ? qe + 1 : qe;
    }
    CHECK(cases == 46, "%s: %d cases, expected 46", inp_rel, cases);
    printf("  %s: %d/%d identical\n", out_rel, good, cases);
    cz_free(inp), cz_free(out);
}

/* swift-transformers: 10,570 SQuAD questions, their WordPiece ids (HF
 * BertTokenizer, no [CLS]/[SEP]) and BasicTokenizer words (for decode). */
static void test_squad_questions(const cz_tokenizer *t) {
    jv q, ids, basic;
    if (jload("vocab/golden/swift-transformers/question_tokens.json", &q) ||
        jload("vocab/golden/swift-transformers/tokenized_questions.json", &ids) ||
        jload("vocab/golden/swift-transformers/basic_tokenized_questions.json", &basic))
        return;
    CHECK(q.type == 'a' && ids.type == 'a' && q.n == ids.n && q.n == 10570 && basic.n == q.n,
          "question files: %d / %d / %d entries", q.n, ids.n, basic.n);
    int good = 0, round = 0, round_n = 0;
    uint32_t want[1024];
    for (int i = 0; i < q.n && i < ids.n; i++) {
        jv *orig = jget(&q.items[i], "original");
        jv *row = &ids.items[i];
        size_t n = 0;
        for (int k = 0; k < row->n && k < 1024; k++) want[n++] = (uint32_t)row->items[k].num;
        if (!orig || orig->type != 's') continue;
        good += check_encode(t, "squad", orig->s, orig->slen, want, n);
        /* decode(ids) joins the BasicTokenizer words when nothing is [UNK]. */
        int has_unk = 0;
        for (size_t k = 0; k < n; k++) has_unk |= want[k] == 100;
        if (has_unk) continue;
        jv *b = &basic.items[i];
        size_t blen = 1;
        for (int k = 0; k < b->n; k++) blen += b->items[k].slen + 1;
        char *joined = calloc(blen, 1);
        for (int k = 0; k < b->n; k++) {
            if (k) strcat(joined, " ");
            strcat(joined, b->items[k].s);
        }
        char *dec = cz_tokenizer_decode(t, want, n, NULL);
        round_n++;
        if (dec && strcmp(dec, joined) == 0)
            round++;
        else if (round_n - round <= 3)
            fprintf(stderr, "  decode mismatch: [%s] vs [%s]\n", dec, joined);
        free(dec), free(joined);
    }
    CHECK(good == q.n, "squad questions: %d/%d identical", good, q.n);
    CHECK(round == round_n, "squad decode == joined basic tokens: %d/%d", round, round_n);
    printf("  squad questions: %d/%d identical ids, decode %d/%d\n", good, q.n, round, round_n);
    jfree(&q), jfree(&ids), jfree(&basic);
}

/* multilingual stress inputs vs HF transformers 4.57.1 baselines. */
static void test_multilingual(const cz_tokenizer *t, const char *baseline_rel, int strip_cls_sep) {
    jv in, base;
    if (jload("vocab/golden/swift-transformers/multilingual_inputs.json", &in) ||
        jload(baseline_rel, &base))
        return;
    jv *entries = jget(&base, "entries");
    CHECK(entries && entries->n == in.n, "%s: entry count", baseline_rel);
    int good = 0;
    uint32_t want[4096];
    for (int i = 0; entries && i < entries->n && i < in.n; i++) {
        jv *text = jget(&in.items[i], "text"), *ids = jget(&entries->items[i], "input_ids");
        jv *id1 = jget(&in.items[i], "id"), *id2 = jget(&entries->items[i], "id");
        CHECK(id1 && id2 && strcmp(id1->s, id2->s) == 0, "%s: entry %d ids differ", baseline_rel,
              i);
        size_t n = 0;
        for (int k = 0; ids && k < ids->n && n < 4096; k++) want[n++] = (uint32_t)ids->items[k].num;
        uint32_t *w = want;
        if (strip_cls_sep && n >= 2 && want[0] == 101 && want[n - 1] == 102) w++, n -= 2;
        good += check_encode(t, id1 ? id1->s : "?", text->s, text->slen, w, n);
    }
    printf("  %s: %d/%d identical\n", baseline_rel, good, in.n);
    jfree(&in), jfree(&base);
}

static void test_paragraph(const cz_tokenizer *t, const char *rel, int strip_cls_sep) {
    jv d;
    if (jload(rel, &d)) return;
    jv *text = jget(&d, "text"), *ids = jget(&d, "token_ids");
    uint32_t want[4096];
    size_t n = 0;
    for (int k = 0; ids && k < ids->n && n < 4096; k++) want[n++] = (uint32_t)ids->items[k].num;
    uint32_t *w = want;
    if (strip_cls_sep && n >= 2) w++, n -= 2;
    int ok = check_encode(t, rel, text->s, text->slen, w, n);
    printf("  %s: %s (%zu ids)\n", rel, ok ? "identical" : "DIFFERENT", n);
    jfree(&d);
}

/* " ".join(BasicTokenizer words): what WordPiece decode must give back. */
typedef struct join_ctx {
    char *buf;
    size_t n, cap;
} join_ctx;

static int join_word(void *ctx, const char *word, const uint32_t *offs, int ncp) {
    join_ctx *j = ctx;
    size_t l = offs[ncp];
    if (j->n + l + 2 > j->cap) return -1;
    if (j->n) j->buf[j->n++] = ' ';
    memcpy(j->buf + j->n, word, l);
    j->n += l;
    j->buf[j->n] = 0;
    return 0;
}

static int wordpiece_round_trip(const cz_tokenizer *t, const char *text, size_t len,
                                const uint32_t *ids, size_t n) {
    int32_t unk = cz_tokenizer_token_id(t, "[UNK]");
    for (size_t k = 0; k < n; k++)
        if (ids[k] == (uint32_t)unk) return -1; /* not comparable */
    join_ctx j = {malloc(4 * len + 16), 0, 4 * len + 16};
    j.buf[0] = 0;
    cz_error err;
    int ok = cz_bert_split(&t->opt, text, len, join_word, &j, &err) == 0;
    char *dec = cz_tokenizer_decode(t, ids, n, NULL);
    ok = ok && dec && strcmp(dec, j.buf) == 0;
    free(dec), free(j.buf);
    return ok;
}

/* ---- goldens made by tests/scripts/make_goldens.py ---- */
static char *gunzip_file(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    int got;
    while (buf && (got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    gzclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

/* Lines of a shared/data file: pointers to their starts and lengths
 * (without "\r\n"). */
typedef struct text_lines {
    char *data;
    char **start;
    size_t *len, n;
} text_lines;

static int load_lines(const char *rel, text_lines *tl) {
    size_t len;
    memset(tl, 0, sizeof *tl);
    tl->data = slurp(data_dir, rel, &len);
    if (!tl->data) return -1;
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += tl->data[i] == '\n';
    tl->start = malloc(cap * sizeof *tl->start);
    tl->len = malloc(cap * sizeof *tl->len);
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && tl->data[e] != '\n') e++;
        size_t l = e - i;
        if (l && tl->data[i + l - 1] == '\r') l--;
        tl->start[tl->n] = tl->data + i, tl->len[tl->n++] = l;
        i = e + 1;
    }
    return 0;
}

static void free_lines(text_lines *tl) {
    cz_free(tl->data);
    free(tl->start), free(tl->len);
}

/* Every golden line must match; GPT-2 must also decode back byte-exactly. */
static void test_golden_file(const cz_tokenizer *t, const char *golden) {
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/golden/%s", src_dir, golden);
    size_t glen;
    char *g = gunzip_file(path, &glen);
    CHECK(g != NULL, "cannot read %s", path);
    if (!g) return;
    text_lines tl = {0};
    int have_src = 0;
    size_t units = 0, good = 0, round = 0, round_n = 0, bytes = 0;
    uint32_t *want = malloc(65536 * sizeof *want);
    char *text = malloc(1 << 20);
    for (char *p = g; p < g + glen;) {
        char *e = strchr(p, '\n');
        if (!e) e = g + glen;
        if (p[0] == 'S' && p[1] == ' ') {
            if (have_src) free_lines(&tl);
            *e = 0;
            have_src = load_lines(p + 2, &tl) == 0;
        } else if (have_src) {
            char *q;
            unsigned long k = strtoul(p, &q, 10);
            size_t n = parse_ids_line(q, e, want, 65536);
            if (k >= 1 && k <= tl.n && tl.len[k - 1] + 2 < (1 << 20)) {
                size_t l = tl.len[k - 1];
                memcpy(text, tl.start[k - 1], l);
                text[l++] = '\n';
                text[l] = 0;
                units++, bytes += l;
                good += check_encode(t, golden, text, l, want, n);
                if (cz_tokenizer_kind_of(t) == CZ_TOK_BPE) {
                    char *dec = cz_tokenizer_decode(t, want, n, NULL);
                    round += dec && strcmp(dec, text) == 0;
                    round_n++;
                    free(dec);
                } else {
                    int r = wordpiece_round_trip(t, text, l, want, n);
                    round += r == 1, round_n += r >= 0;
                }
            } else {
                CHECK(0, "%s: line %lu not in the source", golden, k);
            }
        }
        p = e + 1;
    }
    CHECK(units >= 900, "%s: only %zu lines", golden, units);
    CHECK(good == units, "%s: %zu/%zu lines identical", golden, good, units);
    CHECK(round == round_n, "%s: decode round trip %zu/%zu", golden, round, round_n);
    CHECK(round_n > units / 2, "%s: only %zu lines without [UNK]", golden, round_n);
    printf("  %s: %zu/%zu lines (%zu bytes) identical; decode %s on %zu/%zu lines%s\n", golden,
           good, units, bytes, cz_tokenizer_kind_of(t) == CZ_TOK_BPE ? "byte-exact" : "== words",
           round, units, cz_tokenizer_kind_of(t) == CZ_TOK_BPE ? "" : " (those without [UNK])");
    if (have_src) free_lines(&tl);
    free(want), free(text), free(g);
}

/* decode(encode(x)) == x for arbitrary bytes: byte-level BPE is lossless,
 * whatever the input (invalid UTF-8, NULs, lone continuation bytes,
 * surrogates, overlong forms, whitespace runs). Deterministic xorshift. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void random_bytes(unsigned char *b, size_t n) {
    static const char *const frag[] = {" ",
                                       "  ",
                                       "\t",
                                       "\n",
                                       "\r\n",
                                       "\x0b",
                                       "\x0c",
                                       "\x00",
                                       "'s",
                                       "'ll",
                                       "a",
                                       "Z",
                                       "7",
                                       ".,",
                                       "\xC3\xA9",
                                       "\xE4\xB8\xAD",
                                       "\xF0\x9F\x98\x80",
                                       "\xC2\xA0",
                                       "\xE3\x80\x80",
                                       "\xED\xA0\x80",
                                       "\xC0\xAF",
                                       "\x80",
                                       "\xBF",
                                       "\xF5",
                                       "\xFF",
                                       "\xE2\x82",
                                       "\xF0\x9F"};
    int mode = (int)rnd(3);
    for (size_t i = 0; i < n;) {
        if (mode == 0) { /* uniform bytes */
            b[i++] = (unsigned char)rnd(256);
            continue;
        }
        const char *f = frag[rnd(sizeof frag / sizeof *frag)];
        size_t l = f[0] ? strlen(f) : 1; /* "\x00" is one NUL byte */
        for (size_t k = 0; k < l && i < n; k++) b[i++] = (unsigned char)f[k];
        if (mode == 2 && i < n) b[i++] = (unsigned char)rnd(256);
    }
}

static void test_byte_round_trip(const cz_tokenizer *t, const char *what) {
    enum { CASES = 3000, MAX = 400, BIG = 1 << 20 };
    unsigned char *buf = malloc(BIG);
    cz_ids ids = {0};
    cz_error err;
    int good = 0;
    for (int c = 0; c <= CASES; c++) {
        size_t n = c == CASES ? BIG : rnd(MAX + 1);
        random_bytes(buf, n);
        ids.n = 0;
        if (cz_tokenizer_encode(t, (const char *)buf, n, &ids, &err) != 0) {
            CHECK(0, "%s: encode of %zu random bytes: %s", what, n, err.msg);
            continue;
        }
        size_t len;
        char *dec = cz_tokenizer_decode(t, ids.ids, ids.n, &len);
        int ok = dec && len == n && !memcmp(dec, buf, n);
        good += ok;
        if (!ok && c - good < 5) fprintf(stderr, "  %s: case %d (%zu bytes) differs\n", what, c, n);
        free(dec);
    }
    CHECK(good == CASES + 1, "%s: decode(encode(x)) == x on %d/%d byte strings", what, good,
          CASES + 1);
    printf("  %s: decode(encode(x)) == x on %d/%d random byte strings (up to %d bytes)\n", what,
           good, CASES + 1, BIG);
    cz_ids_free(&ids);
    free(buf);
}

/* GPT mode's whitespace cases (tests/golden/gpt2_whitespace.jsonl, ids from HF
 * GPT2Tokenizer): leading, trailing and repeated spaces, tabs, newlines,
 * CRLF and Unicode spaces are text; each decodes back to its bytes. */
static void test_gpt2_whitespace(const cz_tokenizer *t) {
    char *d = slurp(src_dir, "tests/golden/gpt2_whitespace.jsonl", NULL);
    if (!d) return;
    int cases = 0, good = 0, round = 0;
    uint32_t want[4096];
    for (char *p = d; *p;) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        jv v;
        jparse(p, &v);
        jv *text = jget(&v, "text"), *ids = jget(&v, "ids");
        CHECK(text && ids && text->type == 's' && ids->type == 'a', "bad line [%.80s]", p);
        if (text && ids) {
            size_t n = 0;
            for (int k = 0; k < ids->n && n < 4096; k++) want[n++] = (uint32_t)ids->items[k].num;
            good += check_encode(t, "gpt2_whitespace", text->s, text->slen, want, n);
            size_t len;
            char *dec = cz_tokenizer_decode(t, want, n, &len);
            round += dec && len == text->slen && !memcmp(dec, text->s, len);
            free(dec);
            cases++;
        }
        jfree(&v);
        if (!e) break;
        p = e + 1;
    }
    CHECK(cases >= 60, "gpt2_whitespace: only %d cases", cases);
    CHECK(round == cases, "gpt2_whitespace: decode byte-exact on %d/%d", round, cases);
    printf("  gpt2_whitespace.jsonl: %d/%d identical, decode byte-exact %d/%d\n", good, cases,
           round, cases);
    cz_free(d);
}

/* Whole documents as cloze-prep cuts them in GPT mode (the reader with
 * verbatim = 1, then cz_prep_document, as `cloze-prep shards` runs them)
 * against HF GPT2Tokenizer on the same documents cut by
 * make_goldens.py's own implementation of the rules. */
static void test_gpt2_documents(const cz_tokenizer *t) {
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/golden/gpt2_documents.txt.gz", src_dir);
    size_t glen;
    char *g = gunzip_file(path, &glen);
    CHECK(g != NULL, "cannot read %s", path);
    if (!g) return;
    uint32_t *want = malloc((1u << 20) * sizeof *want);
    cz_reader rd;
    int have = 0, docs = 0, good = 0;
    uint64_t next_doc = 0, tokens = 0;
    cz_buf raw = {0};
    cz_prep_doc pd;
    memset(&pd, 0, sizeof pd);
    cz_error err;
    for (char *p = g; p < g + glen;) {
        char *e = strchr(p, '\n');
        if (!e) e = g + glen;
        *e = 0;
        if (p[0] == 'S' && p[1] == ' ') {
            if (have) cz_reader_close(&rd);
            char rel[1024], fmt_name[32];
            cz_input_format fmt = CZ_FMT_AUTO;
            have = sscanf(p + 2, "%1023s %31s", rel, fmt_name) == 2 &&
                   cz_input_format_parse(fmt_name, &fmt) == 0;
            snprintf(path, sizeof path, "%s/%s", data_dir, rel);
            have = have && cz_reader_open(&rd, path, fmt, NULL, 1, &err) == 0;
            CHECK(have, "%s: %s", rel, err.msg);
            next_doc = 0;
        } else if (have && p[0] == 'D') {
            char *q;
            unsigned long k = strtoul(p + 2, &q, 10);
            size_t n = parse_ids_line(q, e, want, 1u << 20);
            int rc = 1;
            while (next_doc <= k && (rc = cz_reader_next(&rd, &raw, &err)) == 1) next_doc++;
            CHECK(rc == 1, "document %lu of %s missing", k, path);
            if (rc == 1 && cz_prep_document(t, raw.data, raw.len, 0, &pd, &err) == 0) {
                docs++;
                tokens += n;
                int ok = same_ids(&pd.ids, want, n) && pd.n_sent == 1 && pd.sent_len[0] == n;
                good += ok;
                if (!ok) {
                    failures++;
                    show_diff("gpt2_documents", raw.data, &pd.ids, want, n);
                }
                size_t len;
                char *dec = cz_tokenizer_decode(t, want, n, &len);
                CHECK(dec && len == raw.len && !memcmp(dec, raw.data, len),
                      "document %lu of %s does not decode to its bytes", k, path);
                free(dec);
            }
        }
        p = e + 1;
    }
    if (have) cz_reader_close(&rd);
    CHECK(docs >= 5 && good == docs, "gpt2_documents: %d/%d identical", good, docs);
    printf("  gpt2_documents.txt.gz: %d/%d documents (%llu tokens) identical, byte-exact\n", good,
           docs, (unsigned long long)tokens);
    cz_prep_doc_free(&pd);
    cz_buf_free(&raw);
    free(want), free(g);
}

/* TMP/NAME.json: the 256 byte tokens, every one spelled as \uXXXX (GPT-2's
 * bytes_to_unicode written out here again), then `extra` (JSON members and
 * the closing brace); TMP/NAME.bpe: merges with the header only. */
static void write_byte_bpe(const char *tmp, const char *name, const char *extra, char *path,
                           char *merges, size_t len) {
    uint32_t b2u[256], next = 256;
    for (uint32_t b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        b2u[b] = printable ? b : next++;
    }
    char enc[8192];
    size_t n = (size_t)snprintf(enc, sizeof enc, "{");
    for (int b = 0; b < 256; b++)
        n += (size_t)snprintf(enc + n, sizeof enc - n, "\"\\u%04X\": %d, ", b2u[b], b);
    snprintf(enc + n, sizeof enc - n, "%s", extra);
    snprintf(path, len, "%s/%s.json", tmp, name);
    snprintf(merges, len, "%s/%s.bpe", tmp, name);
    FILE *f = fopen(path, "wb");
    fputs(enc, f);
    fclose(f);
    f = fopen(merges, "wb");
    fputs("#version: 0.2\n", f);
    fclose(f);
}

/* encoder.json escapes: every byte token spelled as \uXXXX, a key with a
 * surrogate pair and one with \" \\ \/; empty merges = bytes only. */
static void test_json_escapes(const char *tmp) {
    char merges[4200], path[4200];
    write_byte_bpe(tmp, "esc", "\"\\ud83d\\ude00\": 256, \"a\\\"b\\\\c\\/\": 257 }", path, merges,
                   sizeof path);
    cz_tokenizer *t = NULL;
    cz_error err;
    if (cz_tokenizer_load_bpe(&t, path, merges, &err)) {
        CHECK(0, "escape encoder: %s", err.msg);
        return;
    }
    CHECK(cz_tokenizer_token_id(t, "\xf0\x9f\x98\x80") == 256, "surrogate pair key");
    CHECK(cz_tokenizer_token_id(t, "a\"b\\c/") == 257, "escaped quote/backslash/slash key");
    CHECK(cz_tokenizer_token_id(t, "\xc4\xa0") == 32, "\\u0120 is the space byte");
    cz_ids ids = {0};
    CHECK(cz_tokenizer_encode(t, "hi \xe2\x82\xac", 6, &ids, &err) == 0, "%s", err.msg);
    uint32_t want[] = {'h', 'i', ' ', 0xe2, 0x82, 0xac};
    CHECK(same_ids(&ids, want, 6), "no merges: one token per byte");
    cz_ids_free(&ids);
    cz_tokenizer_free(t);
}

/* An encoder.json that gives one id to two tokens is refused, naming both
 * (found by tests/fuzz/fuzz_vocab: such a vocabulary loaded, and one of
 * the two tokens then decoded as the other). */
static void test_duplicate_ids(const char *tmp) {
    char path[4200], merges[4200];
    write_byte_bpe(tmp, "dup", "\"xy\": 70}", path, merges, sizeof path);
    cz_tokenizer *t = NULL;
    cz_error err;
    CHECK(cz_tokenizer_load_bpe(&t, path, merges, &err) != 0 && strstr(err.msg, path) &&
              strstr(err.msg, "id 70 is given to two tokens") && strstr(err.msg, "\"xy\""),
          "duplicate id: %s", t ? "loaded" : err.msg);
    cz_tokenizer_free(t);
}

/* The fingerprint shards and checkpoints carry must keep its value: FNV-1a
 * 64 (the published vector: "a" -> af63dc4c8601ec8c) of vocab.txt, or of
 * the merges seeded with the encoder's; the figures below were computed by
 * an independent FNV-1a in Python over the same bytes. */
static void test_vocab_fingerprint(const cz_tokenizer *learned_bpe, const char *tmp) {
    CHECK(cz_vocab_fingerprint("a", 1, NULL, 0) == 0xaf63dc4c8601ec8cULL, "FNV-1a of \"a\"");
    CHECK(cz_vocab_fingerprint("", 0, NULL, 0) == CZ_FNV_SEED, "the empty vocabulary");
    CHECK(cz_tokenizer_fingerprint(learned_bpe) == 0x1ecbe92d82560b69ULL,
          "learned BPE fingerprint %016llx",
          (unsigned long long)cz_tokenizer_fingerprint(learned_bpe));
    static const char vocab[] = "[PAD]\n[UNK]\nhello\n##lo\n";
    char path[4200];
    snprintf(path, sizeof path, "%s/fp-vocab.txt", tmp);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(vocab, 1, sizeof vocab - 1, f) == sizeof vocab - 1, "write %s", path);
    if (f) fclose(f);
    cz_tokenizer *wp = NULL;
    cz_error err;
    CHECK(cz_tokenizer_load_wordpiece(&wp, path, NULL, &err) == 0, "%s", err.msg);
    if (!wp) return;
    CHECK(cz_tokenizer_fingerprint(wp) == 0xa8f558ee6b736a99ULL &&
              cz_vocab_fingerprint(vocab, sizeof vocab - 1, NULL, 0) == 0xa8f558ee6b736a99ULL,
          "WordPiece fingerprint %016llx", (unsigned long long)cz_tokenizer_fingerprint(wp));
    cz_tokenizer_free(wp);
}

/* Words over max_word_chars code points are one [UNK]; at the limit they
 * are split (HF BertTokenizer, max_input_chars_per_word = 100). */
static void test_max_word_chars(const cz_tokenizer *wp) {
    char word[256];
    memset(word, 'a', sizeof word);
    cz_ids ids = {0};
    cz_error err;
    CHECK(cz_tokenizer_encode(wp, word, 101, &ids, &err) == 0, "%s", err.msg);
    CHECK(ids.n == 1 && ids.ids[0] == 100, "101 chars -> [UNK] (got %zu ids)", ids.n);
    ids.n = 0;
    CHECK(cz_tokenizer_encode(wp, word, 100, &ids, &err) == 0, "%s", err.msg);
    CHECK(ids.n > 1 && ids.ids[0] != 100, "100 chars -> pieces (got %zu ids)", ids.n);
    cz_ids_free(&ids);
}

/* The heap algorithm for long BPE pieces against the per-merge scan (which
 * the goldens check) on every piece of two books, and on long pieces made
 * by dropping the spaces of a book (a run of letters is one piece). */
static void test_bpe_long_pieces(const cz_tokenizer *t) {
    size_t len;
    char *text = slurp(data_dir, "corpus/gutenberg/pg4300.txt", &len);
    if (!text) return;
    cz_ids a = {0}, b = {0};
    cz_error err;
    size_t pieces = 0, same = 0, longest = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* keep letters only: pieces of hundreds of bytes */
            size_t w = 0;
            for (size_t i = 0; i < len; i++)
                if ((text[i] | 0x20) >= 'a' && (text[i] | 0x20) <= 'z') text[w++] = text[i];
            len = w;
        }
        const unsigned char *s = (const unsigned char *)text;
        for (size_t i = 0; i < len;) {
            size_t e = cz_gpt2_piece_end(s, len, i);
            if (pass == 1 && e - i > 4000) e = i + 4000; /* the scan is quadratic */
            a.n = b.n = 0;
            int ok = cz_bpe_piece_ids(t, s + i, e - i, 0, &a, &err) == 0 &&
                     cz_bpe_piece_ids(t, s + i, e - i, 1, &b, &err) == 0;
            pieces++;
            same += ok && a.n == b.n && memcmp(a.ids, b.ids, a.n * sizeof *a.ids) == 0;
            if (e - i > longest) longest = e - i;
            i = e;
        }
    }
    CHECK(same == pieces, "long-piece BPE differs on %zu of %zu pieces", pieces - same, pieces);
    printf("  bpe heap vs scan: %zu/%zu pieces identical (longest %zu bytes)\n", same, pieces,
           longest);
    cz_ids_free(&a), cz_ids_free(&b);
    cz_free(text);
}

/* The Windows-1252 book (invalid UTF-8): BPE still round-trips byte-exactly;
 * WordPiece drops the bad bytes (as U+FFFD) without failing. */
static void test_invalid_utf8(const cz_tokenizer *bpe, const cz_tokenizer *wp) {
    size_t len;
    char *text = slurp(data_dir, "corpus/oddities/pg2641-cp1252.txt", &len);
    if (!text) return;
    cz_ids ids = {0};
    cz_error err;
    CHECK(cz_tokenizer_encode(bpe, text, len, &ids, &err) == 0, "%s", err.msg);
    char *dec = cz_tokenizer_decode(bpe, ids.ids, ids.n, NULL);
    CHECK(dec && strlen(dec) == len && memcmp(dec, text, len) == 0, "cp1252 BPE round trip");
    free(dec);
    ids.n = 0;
    CHECK(cz_tokenizer_encode(wp, text, len, &ids, &err) == 0 && ids.n > 50000,
          "cp1252 WordPiece: %zu ids", ids.n);
    cz_ids_free(&ids);
    cz_free(text);
}

/* One tokenizer shared by 4 threads gives the serial ids (cloze-prep
 * tokenizes with OpenMP threads). */
static void test_threads(const cz_tokenizer *t, const char *what) {
    text_lines tl;
    if (load_lines("corpus/wikitext-2-raw/wiki.valid.raw", &tl)) return;
    uint64_t *serial = calloc(tl.n, sizeof *serial), *par = calloc(tl.n, sizeof *par);
    for (int pass = 0; pass < 2; pass++) {
        uint64_t *dst = pass ? par : serial;
#pragma omp parallel for num_threads(4) schedule(dynamic, 16) if (pass == 1)
        for (size_t k = 0; k < tl.n; k++) {
            cz_ids ids = {0};
            cz_error err;
            if (cz_tokenizer_encode(t, tl.start[k], tl.len[k], &ids, &err) == 0)
                dst[k] = cz_fnv1a64(ids.ids, ids.n * sizeof *ids.ids, CZ_FNV_SEED) ^ ids.n;
            cz_ids_free(&ids);
        }
    }
    CHECK(memcmp(serial, par, tl.n * sizeof *serial) == 0, "%s: 4 threads differ from 1", what);
    free(serial), free(par);
    free_lines(&tl);
}

/* ---- vocabulary learning ---- */
static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static const char *learn_books[] = {"corpus/gutenberg/pg11.txt", "corpus/gutenberg/pg16.txt",
                                    "corpus/gutenberg/pg1342.txt", "corpus/gutenberg/pg98.txt"};
#define N_LEARN_BOOKS 4

/* Text for the cased vocabulary stored in tests/golden/cased_vocab.txt. */
static const char *cased_books[] = {"corpus/gutenberg/pg1342.txt", "corpus/gutenberg/pg2701.txt",
                                    "corpus/gutenberg/pg4300.txt", "corpus/gutenberg/pg345.txt"};
#define N_CASED_BOOKS 4

static void book_paths(char paths[][4096], const char **ptrs) {
    for (int k = 0; k < N_LEARN_BOOKS; k++) {
        snprintf(paths[k], 4096, "%s/%s", data_dir, learn_books[k]);
        ptrs[k] = paths[k];
    }
}

/* Tokens of a held-out book with a vocabulary learned on others: the [UNK]
 * share, tokens per byte, and (GPT-2) the byte-exact round trip. */
static void held_out_check(const cz_tokenizer *t, const char *what, double max_unk,
                           double max_tok_per_byte) {
    size_t len;
    char *text = slurp(data_dir, "corpus/gutenberg/pg5200.txt", &len);
    if (!text) return;
    cz_ids ids = {0};
    cz_error err;
    CHECK(cz_tokenizer_encode(t, text, len, &ids, &err) == 0, "%s: %s", what, err.msg);
    int32_t unk = cz_tokenizer_token_id(t, "[UNK]");
    size_t n_unk = 0;
    for (size_t k = 0; k < ids.n; k++) n_unk += unk >= 0 && ids.ids[k] == (uint32_t)unk;
    double unk_rate = ids.n ? (double)n_unk / (double)ids.n : 1;
    double tpb = (double)ids.n / (double)len;
    CHECK(unk_rate <= max_unk, "%s: [UNK] rate %.4f", what, unk_rate);
    CHECK(tpb <= max_tok_per_byte, "%s: %.3f tokens per byte", what, tpb);
    if (cz_tokenizer_kind_of(t) == CZ_TOK_BPE) {
        char *dec = cz_tokenizer_decode(t, ids.ids, ids.n, NULL);
        CHECK(dec && strlen(dec) == len && memcmp(dec, text, len) == 0,
              "%s: decode(encode(book)) differs", what);
        free(dec);
    }
    printf("  %s on pg5200: %zu tokens, %.3f tokens/byte, [UNK] rate %.5f\n", what, ids.n, tpb,
           unk_rate);
    cz_ids_free(&ids);
    cz_free(text);
}

static void test_learn_wordpiece(const char *tmp) {
    char paths[N_LEARN_BOOKS][4096], v1[4200], v2[4200];
    const char *files[N_LEARN_BOOKS];
    book_paths(paths, files);
    snprintf(v1, sizeof v1, "%s/wp1.txt", tmp);
    snprintf(v2, sizeof v2, "%s/wp2.txt", tmp);
    cz_error err;
    double t0 = cz_now();
    CHECK(cz_learn_wordpiece(files, N_LEARN_BOOKS, 6000, 1, v1, &err) == 0, "learn: %s", err.msg);
    double t1 = cz_now();
    CHECK(cz_learn_wordpiece(files, N_LEARN_BOOKS, 6000, 1, v2, &err) == 0, "learn: %s", err.msg);
    CHECK(files_equal(v1, v2), "two WordPiece learning runs differ");
    cz_tokenizer *t = NULL;
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    if (cz_tokenizer_load_wordpiece(&t, v1, &o, &err)) {
        CHECK(0, "load learned vocab: %s", err.msg);
        return;
    }
    CHECK(cz_tokenizer_vocab_size(t) == 6000, "learned vocab size %u", cz_tokenizer_vocab_size(t));
    CHECK(strcmp(cz_tokenizer_token(t, 0), "[PAD]") == 0, "[PAD] at 0");
    CHECK(strcmp(cz_tokenizer_token(t, 1), "[unused0]") == 0, "[unused0] at 1");
    CHECK(strcmp(cz_tokenizer_token(t, 99), "[unused98]") == 0, "[unused98] at 99");
    CHECK(cz_tokenizer_token_id(t, "[UNK]") == 100 && cz_tokenizer_token_id(t, "[CLS]") == 101 &&
              cz_tokenizer_token_id(t, "[SEP]") == 102 && cz_tokenizer_token_id(t, "[MASK]") == 103,
          "BERT special ids");
    CHECK(cz_tokenizer_token_id(t, "the") >= 0 && cz_tokenizer_token_id(t, "##s") >= 0,
          "common pieces learned");
    printf("  learned WordPiece 6000 from 4 books in %.2f s\n", t1 - t0);
    held_out_check(t, "learned WordPiece", 0.002, 0.30);
    cz_tokenizer_free(t);
}

static void test_learn_bpe(const char *tmp) {
    char paths[N_LEARN_BOOKS][4096], e1[4200], m1[4200], e2[4200], m2[4200];
    const char *files[N_LEARN_BOOKS];
    book_paths(paths, files);
    snprintf(e1, sizeof e1, "%s/enc1.json", tmp);
    snprintf(m1, sizeof m1, "%s/merges1.bpe", tmp);
    snprintf(e2, sizeof e2, "%s/enc2.json", tmp);
    snprintf(m2, sizeof m2, "%s/merges2.bpe", tmp);
    cz_error err;
    double t0 = cz_now();
    CHECK(cz_learn_bpe(files, N_LEARN_BOOKS, 4000, e1, m1, &err) == 0, "learn bpe: %s", err.msg);
    double t1 = cz_now();
    CHECK(cz_learn_bpe(files, N_LEARN_BOOKS, 4000, e2, m2, &err) == 0, "learn bpe: %s", err.msg);
    CHECK(files_equal(e1, e2) && files_equal(m1, m2), "two BPE learning runs differ");
    cz_tokenizer *t = NULL;
    if (cz_tokenizer_load_bpe(&t, e1, m1, &err)) {
        CHECK(0, "load learned BPE: %s", err.msg);
        return;
    }
    CHECK(cz_tokenizer_vocab_size(t) == 4000, "learned BPE size %u", cz_tokenizer_vocab_size(t));
    CHECK(cz_tokenizer_token_id(t, "<|endoftext|>") == 3999, "<|endoftext|> last");
    CHECK(cz_tokenizer_token_id(t, "!") == 0 && cz_tokenizer_token_id(t, "\xc4\xa0") == 220,
          "byte tokens in GPT-2's order");
    printf("  learned BPE 4000 from 4 books in %.2f s\n", t1 - t0);
    held_out_check(t, "learned BPE", 0, 0.30);
    cz_tokenizer_free(t);
}

int main(int argc, char **argv) {
    const char *d = getenv("CLOZE_SHARED_DATA"), *s = getenv("CLOZE_SOURCE_DIR");
    snprintf(src_dir, sizeof src_dir, "%s", s ? s : ".");
    cz_error err;
    if (argc == 1) {
        /* needs no shared data: the BPE our learner made, stored in tests/golden */
        cz_tokenizer *lb = NULL;
        char e[8192], m[8192];
        snprintf(e, sizeof e, "%s/tests/golden/learned_bpe.json", src_dir);
        snprintf(m, sizeof m, "%s/tests/golden/learned_bpe.bpe", src_dir);
        if (cz_tokenizer_load_bpe(&lb, e, m, &err)) {
            fprintf(stderr, "FAIL: %s\n", err.msg);
            return 1;
        }
        test_byte_round_trip(lb, "learned BPE");
        char tmp[] = "/tmp/cloze_tok_dup_XXXXXX";
        if (mkdtemp(tmp)) {
            test_duplicate_ids(tmp);
            test_vocab_fingerprint(lb, tmp);
            char cmd[128];
            snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
            if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
        }
        cz_tokenizer_free(lb);
    }
    if (!d || access(d, R_OK) != 0) {
        printf("skip: CLOZE_SHARED_DATA not set or not readable%s\n",
               failures ? " (and the round trip FAILED)" : " (round trip ok)");
        return failures ? 1 : 77;
    }
    snprintf(data_dir, sizeof data_dir, "%s", d);
    if (argc == 3 && strcmp(argv[1], "--write-cased-vocab") == 0) {
        /* tests/scripts/make_goldens.py: the cased vocabulary the HF golden uses */
        char paths[N_CASED_BOOKS][4096];
        const char *files[N_CASED_BOOKS];
        for (int k = 0; k < N_CASED_BOOKS; k++) {
            snprintf(paths[k], 4096, "%s/%s", data_dir, cased_books[k]);
            files[k] = paths[k];
        }
        if (cz_learn_wordpiece(files, N_CASED_BOOKS, 8000, 0, argv[2], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "--encode-hex") == 0) {
        /* tests/scripts/fuzz_vs_hf.py: one hex-encoded text per stdin line,
         * one line of ids per text on stdout. */
        cz_tokenizer *t = NULL;
        cz_tokenizer_options o;
        cz_tokenizer_options_default(&o);
        int rc = argv[2][0] == 'w' ? cz_tokenizer_load_wordpiece(&t, argv[3], &o, &err)
                 : argc >= 5       ? cz_tokenizer_load_bpe(&t, argv[3], argv[4], &err)
                                   : cz_fail(&err, "--encode-hex b ENCODER MERGES");
        if (rc) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        static char line[1 << 20], buf[1 << 19];
        cz_ids ids = {0};
        while (fgets(line, sizeof line, stdin)) {
            size_t m = 0;
            for (size_t i = 0; line[i] && line[i + 1] && line[i] != '\n'; i += 2) {
                unsigned v = 0;
                sscanf(line + i, "%2x", &v);
                buf[m++] = (char)v;
            }
            ids.n = 0;
            if (cz_tokenizer_encode(t, buf, m, &ids, &err)) fprintf(stderr, "%s\n", err.msg);
            for (size_t k = 0; k < ids.n; k++) printf(k ? " %u" : "%u", ids.ids[k]);
            putchar('\n');
        }
        cz_ids_free(&ids);
        cz_tokenizer_free(t);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "--write-learned-bpe") == 0) {
        /* tests/scripts/make_goldens.py: a BPE our learner made, for HF */
        char paths[N_CASED_BOOKS][4096];
        const char *files[N_CASED_BOOKS];
        for (int k = 0; k < N_CASED_BOOKS; k++) {
            snprintf(paths[k], 4096, "%s/%s", data_dir, cased_books[k]);
            files[k] = paths[k];
        }
        if (cz_learn_bpe(files, N_CASED_BOOKS, 3000, argv[2], argv[3], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        return 0;
    }
    char path[8192];
    cz_tokenizer *wp = NULL;
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    snprintf(path, sizeof path, "%s/vocab/bert-base-uncased/vocab.txt", data_dir);
    if (cz_tokenizer_load_wordpiece(&wp, path, &o, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    CHECK(cz_tokenizer_vocab_size(wp) == 30522, "vocab size %u", cz_tokenizer_vocab_size(wp));
    CHECK(cz_tokenizer_token_id(wp, "[UNK]") == 100 && cz_tokenizer_token_id(wp, "[CLS]") == 101 &&
              cz_tokenizer_token_id(wp, "[MASK]") == 103,
          "special ids");
    CHECK(strcmp(cz_tokenizer_token(wp, 30521), "##\xef\xbd\x9e") == 0, "last token");
    test_llama_golden(wp, "vocab/golden/llama.cpp/ggml-vocab-bert-bge.gguf.inp",
                      "vocab/golden/llama.cpp/ggml-vocab-bert-bge.gguf.out");
    test_squad_questions(wp);
    test_multilingual(wp, "vocab/golden/swift-transformers/multilingual_bge-small-en-v1.5.json", 1);
    test_paragraph(wp, "vocab/golden/swift-transformers/bert_uncased_encoded.json", 1);
    test_golden_file(wp, "wordpiece_uncased.txt.gz");
    test_max_word_chars(wp);
    cz_tokenizer_free(wp);

    /* Cased: a vocabulary our learner made (stored), tokenized by HF with
     * do_lower_case=False for the golden. */
    o.lower_case = 0;
    snprintf(path, sizeof path, "%s/tests/golden/cased_vocab.txt", src_dir);
    if (cz_tokenizer_load_wordpiece(&wp, path, &o, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    test_golden_file(wp, "wordpiece_cased.txt.gz");
    cz_tokenizer_free(wp);

    cz_tokenizer *bpe = NULL;
    char merges[8192];
    snprintf(path, sizeof path, "%s/vocab/gpt2/encoder.json", data_dir);
    snprintf(merges, sizeof merges, "%s/vocab/gpt2/vocab.bpe", data_dir);
    if (cz_tokenizer_load_bpe(&bpe, path, merges, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    CHECK(cz_tokenizer_vocab_size(bpe) == 50257, "bpe vocab size %u", cz_tokenizer_vocab_size(bpe));
    CHECK(cz_tokenizer_token_id(bpe, "<|endoftext|>") == 50256, "<|endoftext|> id");
    test_llama_golden(bpe, "vocab/golden/llama.cpp/ggml-vocab-gpt-2.gguf.inp",
                      "vocab/golden/llama.cpp/ggml-vocab-gpt-2.gguf.out");
    test_multilingual(bpe, "vocab/golden/swift-transformers/multilingual_gpt2.json", 0);
    test_paragraph(bpe, "vocab/golden/swift-transformers/gpt2_encoded_tokens.json", 0);
    test_golden_file(bpe, "gpt2.txt.gz");
    test_gpt2_whitespace(bpe);
    test_gpt2_documents(bpe);
    test_byte_round_trip(bpe, "GPT-2 BPE");
    test_bpe_long_pieces(bpe);
    o.lower_case = 1;
    snprintf(path, sizeof path, "%s/vocab/bert-base-uncased/vocab.txt", data_dir);
    if (cz_tokenizer_load_wordpiece(&wp, path, &o, &err) == 0) {
        test_invalid_utf8(bpe, wp);
        test_threads(bpe, "bpe");
        test_threads(wp, "wordpiece");
        cz_tokenizer_free(wp);
    }
    cz_tokenizer_free(bpe);

    /* A BPE our learner made (stored), tokenized by HF GPT2Tokenizer. */
    snprintf(path, sizeof path, "%s/tests/golden/learned_bpe.json", src_dir);
    snprintf(merges, sizeof merges, "%s/tests/golden/learned_bpe.bpe", src_dir);
    if (cz_tokenizer_load_bpe(&bpe, path, merges, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    test_golden_file(bpe, "learned_bpe.txt.gz");
    cz_tokenizer_free(bpe);

    char tmp[] = "/tmp/cloze_tok_XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "FAIL: mkdtemp\n");
        return 1;
    }
    test_json_escapes(tmp);
    test_learn_wordpiece(tmp);
    test_learn_bpe(tmp);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);

    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
