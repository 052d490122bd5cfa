/* prep_input: file lists and the per-format document readers. */
#define _GNU_SOURCE /* memmem */
#include "cloze/prep.h"

#include "cloze/json.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const FORMAT_NAMES[CZ_FMT_COUNT] = {"auto",  "text",      "wikitext",
                                                       "jsonl", "gutenberg", "wikiextractor"};

int cz_input_format_parse(const char *s, cz_input_format *f) {
    for (int i = 0; i < CZ_FMT_COUNT; i++)
        if (!strcmp(s, FORMAT_NAMES[i])) {
            *f = (cz_input_format)i;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------- file list */

static int push_path(cz_file_list *l, const char *path, cz_error *err) {
    if (l->n == l->cap) {
        int c = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->paths, (size_t)c * sizeof *p);
        if (!p) return cz_fail(err, "out of memory (file list)");
        l->paths = p;
        l->cap = c;
    }
    l->paths[l->n] = strdup(path);
    if (!l->paths[l->n]) return cz_fail(err, "out of memory (file list)");
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files below a directory in name order, hidden entries skipped, so that the
 * document order (and thus the shards) does not depend on readdir's order. */
int cz_file_list_add(cz_file_list *l, const char *path, cz_error *err) {
    struct stat st;
    if (stat(path, &st) != 0) return cz_fail(err, "%s: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode)) {
        l->total_bytes += (uint64_t)st.st_size;
        return push_path(l, path, err);
    }
    if (!S_ISDIR(st.st_mode)) return cz_fail(err, "%s: not a file or directory", path);
    DIR *d = opendir(path);
    if (!d) return cz_fail(err, "%s: cannot open directory: %s", path, strerror(errno));
    cz_file_list sub = {0};
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char child[2048];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        rc = push_path(&sub, child, err);
    }
    closedir(d);
    if (sub.n) qsort(sub.paths, (size_t)sub.n, sizeof *sub.paths, cmp_str);
    for (int i = 0; rc == 0 && i < sub.n; i++) rc = cz_file_list_add(l, sub.paths[i], err);
    cz_file_list_free(&sub);
    return rc;
}

void cz_file_list_free(cz_file_list *l) {
    for (int i = 0; i < l->n; i++) free(l->paths[i]);
    free(l->paths);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ reader */

#define PEEK_BYTES 65536
#define MAX_LINE_BYTES (64u << 20)

/* Binary data: more than 1% NUL bytes, or more than 10% of bytes that are
 * neither text controls nor part of valid UTF-8 (with a floor of a few
 * bytes, so that a short Windows-1252 line is still text). Text in a
 * legacy 8-bit encoding (Windows-1252) stays well below that. */
static int looks_binary(const unsigned char *p, size_t n, size_t *where) {
    size_t nul = 0, bad = 0, first_nul = n, first_bad = n;
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (c == 0) {
            if (!nul++) first_nul = i;
        } else if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') || c >= 0xF8) {
            if (!bad++) first_bad = i;
        } else if (c >= 0x80) {
            size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
            size_t k = 1;
            while (len && k < len && i + k < n && (p[i + k] & 0xC0) == 0x80) k++;
            if (len == 0 || (k < len && i + k < n)) {
                if (!bad++) first_bad = i;
            } else {
                i += len - 1;
            }
        }
    }
    if (nul * 100 > n && nul >= 4) {
        *where = first_nul;
        return 1;
    }
    if (bad * 10 > n && bad >= 16) {
        *where = first_bad;
        return 1;
    }
    return 0;
}

/* WikiExtractor's two output forms, by the file's first line: "<doc id=..."
 * (its default) or a JSON object with its "url", "title" and "text" fields
 * (--json). Its files are named wiki_00, wiki_01, ... without an extension,
 * so the content decides. */
static const char *first_line(const char *peek, size_t n, size_t *len) {
    size_t i = 0;
    while (i < n && (peek[i] == '\n' || peek[i] == '\r' || peek[i] == ' ')) i++;
    const char *nl = memchr(peek + i, '\n', n - i);
    *len = nl ? (size_t)(nl - (peek + i)) : n - i;
    return peek + i;
}

static int is_wiki_doc_open(const char *s, size_t n) {
    return n >= 5 && !memcmp(s, "<doc", 4) && (s[4] == ' ' || s[4] == '>');
}

static int is_wiki_json(const char *peek, size_t n) {
    size_t len;
    const char *l = first_line(peek, n, &len);
    return len > 0 && l[0] == '{' && memmem(l, len, "\"url\":", 6) &&
           memmem(l, len, "\"title\":", 8) && memmem(l, len, "\"text\":", 7);
}

static cz_input_format detect(const char *path, const char *peek, size_t n) {
    size_t len;
    const char *l = first_line(peek, n, &len);
    if (is_wiki_doc_open(l, len)) return CZ_FMT_WIKIEXTRACTOR;
    if (is_wiki_json(peek, n)) return CZ_FMT_JSONL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base);
    if ((bl > 6 && !strcmp(base + bl - 6, ".jsonl")) || (bl > 5 && !strcmp(base + bl - 5, ".json")))
        return CZ_FMT_JSONL;
    if (!strncmp(base, "wiki.", 5) || (bl > 4 && !strcmp(base + bl - 4, ".raw")))
        return CZ_FMT_WIKITEXT;
    if (memmem(peek, n, "*** START OF", 12) || memmem(peek, n, "***START OF", 11))
        return CZ_FMT_GUTENBERG;
    return CZ_FMT_TEXT;
}

int cz_reader_open(cz_reader *r, const char *path, cz_input_format fmt, const char *jsonl_field,
                   int verbatim, cz_error *err) {
    memset(r, 0, sizeof *r);
    r->verbatim = verbatim;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->jsonl_field = jsonl_field ? jsonl_field : "text";
    r->f = fopen(path, "rb");
    if (!r->f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    char *peek = malloc(PEEK_BYTES);
    if (!peek) {
        cz_reader_close(r);
        return cz_fail(err, "%s: out of memory", path);
    }
    size_t n = fread(peek, 1, PEEK_BYTES, r->f);
    size_t where = 0;
    if (looks_binary((const unsigned char *)peek, n, &where)) {
        free(peek);
        cz_reader_close(r);
        return cz_fail(err, "%s: offset %zu: binary data (NUL or non-text bytes), not a text file",
                       path, where);
    }
    r->fmt = fmt == CZ_FMT_AUTO ? detect(path, peek, n) : fmt;
    r->wiki_json = is_wiki_json(peek, n);
    /* --format wikiextractor names the tool's output in either form */
    if (r->fmt == CZ_FMT_WIKIEXTRACTOR && r->wiki_json) r->fmt = CZ_FMT_JSONL;
    r->passages = r->fmt == CZ_FMT_WIKIEXTRACTOR || (r->fmt == CZ_FMT_JSONL && r->wiki_json);
    /* Gutenberg files with a licence header: the body starts after the
     * START marker; files without markers are all body. */
    r->in_body = !(memmem(peek, n, "*** START OF", 12) || memmem(peek, n, "***START OF", 11));
    free(peek);
    rewind(r->f);
    return 0;
}

void cz_reader_set_passages(cz_reader *r, cz_passages p) {
    if (p != CZ_PASSAGES_AUTO) r->passages = p == CZ_PASSAGES_ON;
}

void cz_reader_close(cz_reader *r) {
    if (r->f) fclose(r->f);
    free(r->line);
    cz_buf_free(&r->pend);
    cz_buf_free(&r->scratch);
    r->f = NULL;
    r->line = NULL;
}

/* Next line without its "\n" / "\r\n"; returns its length, -1 at end, -2 on
 * error. */
static long next_line(cz_reader *r, cz_error *err) {
    ssize_t n = getline(&r->line, &r->line_cap, r->f);
    if (n < 0) {
        if (ferror(r->f)) {
            cz_fail(err, "%s: offset %llu: read error: %s", r->path, (unsigned long long)r->offset,
                    strerror(errno));
            return -2;
        }
        return -1;
    }
    if ((size_t)n > MAX_LINE_BYTES) {
        cz_fail(err, "%s: line %llu (offset %llu): longer than %u bytes", r->path,
                (unsigned long long)r->line_no + 1, (unsigned long long)r->offset, MAX_LINE_BYTES);
        return -2;
    }
    r->offset += (uint64_t)n;
    r->line_no++;
    /* getline stops after the first '\n': what is stripped is '\r's and
     * that '\n', so the terminator can be put back exactly (verbatim) */
    r->eol_nl = n > 0 && r->line[n - 1] == '\n';
    if (r->eol_nl) r->line[--n] = 0;
    r->eol_cr = 0;
    while (n > 0 && r->line[n - 1] == '\r') r->line[--n] = 0, r->eol_cr++;
    r->line_len = (long)n;
    return (long)n;
}

static int is_blank(const char *s, long n) {
    for (long i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\f' && s[i] != '\r') return 0;
    return 1;
}

/* ---- text passages (cloze/prep.h, docs/formats.md "Text passages") ---- */

static int has_markup(const char *s, size_t n) {
    static const char *const left[] = {"{{", "}}", "[[", "]]", "{|", "|}", "<ref", "&nbsp;"};
    for (size_t k = 0; k < sizeof left / sizeof *left; k++)
        if (memmem(s, n, left[k], strlen(left[k]))) return 1;
    return 0;
}

/* n without the closing quotes and brackets that may follow a sentence's
 * end: " ' ) ] and the UTF-8 right quotes U+2019, U+201D and U+00BB. */
static size_t strip_closers(const char *s, size_t n) {
    for (;;) {
        if (n && (s[n - 1] == '"' || s[n - 1] == '\'' || s[n - 1] == ')' || s[n - 1] == ']')) {
            n--;
        } else if (n >= 3 && !memcmp(s + n - 3, "\xE2\x80", 2) &&
                   (s[n - 1] == '\x99' || s[n - 1] == '\x9D')) {
            n -= 3;
        } else if (n >= 2 && !memcmp(s + n - 2, "\xC2\xBB", 2)) {
            n -= 2;
        } else {
            return n;
        }
    }
}

int cz_is_passage(const char *s, size_t n) {
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    if (n == 0 || !s[0] || strchr(" \t*#;:|!{}=<", s[0]) || has_markup(s, n)) return 0;
    size_t e = strip_closers(s, n);
    if (e == 0 || (s[e - 1] != '.' && s[e - 1] != '!' && s[e - 1] != '?')) return 0;
    int words = 0, sentences = 1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' || s[i] == '\t' || (i > 0 && s[i - 1] != ' ' && s[i - 1] != '\t')) continue;
        words++;
        if (i == 0) continue;
        /* a word after one that ends a sentence starts another sentence */
        size_t w = i;
        while (w > 0 && (s[w - 1] == ' ' || s[w - 1] == '\t')) w--;
        size_t c = strip_closers(s, w);
        if (c > 0 && (s[c - 1] == '.' || s[c - 1] == '!' || s[c - 1] == '?')) sentences++;
    }
    return words >= (sentences > 1 ? CZ_PASSAGE_MIN_WORDS : CZ_PASSAGE_MIN_WORDS_ONE);
}

/* WikiExtractor's heading mark: corpus_tools/wikiextract.py has it write a
 * section heading as "## Title." (its compact()'s mark_headers), a line
 * the passage rule drops by its first character. With passages off the
 * heading is kept as WikiExtractor writes it unmarked ("Title."). */
static const char HEADING_MARK[] = "## ";
#define HEADING_MARK_LEN 3

static int heading_marked(const char *s, long n) {
    return n >= HEADING_MARK_LEN && !memcmp(s, HEADING_MARK, HEADING_MARK_LEN);
}

/* The marks off every line of a WikiExtractor JSON text, in place; each
 * counted in *marked. */
static size_t strip_heading_marks(char *s, size_t n, uint64_t *marked) {
    size_t o = 0;
    int at_start = 1;
    for (size_t i = 0; i < n; i++) {
        if (at_start && heading_marked(s + i, (long)(n - i))) {
            i += HEADING_MARK_LEN;
            (*marked)++;
        }
        if (i >= n) break;
        at_start = s[i] == '\n';
        s[o++] = s[i];
    }
    return o;
}

/* With passages on, a line that is no passage is dropped, and counted. */
static int dropped(cz_reader *r, const char *s, long n) {
    if (!r->passages || cz_is_passage(s, (size_t)n)) return 0;
    r->lines_dropped++;
    return 1;
}

/* WikiText headings: " = Title = " (an article) and " = = Section = = ". */
static int wikitext_heading_level(const char *s, long n) {
    if (n < 5 || s[0] != ' ' || s[1] != '=' || s[2] != ' ') return 0;
    if (s[n - 1] != ' ' || s[n - 2] != '=' || s[n - 3] != ' ') return 0;
    return s[3] == '=' ? 2 : 1;
}

/* ---- a minimal JSON reader: finds one top-level string field ---- */

/* JSON whitespace from s[i]; the line has no '\n' (next_line strips it). */
static size_t json_ws(const char *s, size_t i, size_t n) {
    return (size_t)(cz_json_ws(s + i, s + n) - s);
}

/* The string at s[*i] == '"', decoded into o when o != NULL; on success *i
 * moves past it. Returns 0, -1 when malformed, -2 when out of memory (err
 * filled). A lone surrogate becomes U+FFFD: text is what we want from a
 * corpus, and one U+FFFD per bad unit is what normalisation does with
 * invalid UTF-8 too. */
static int json_string(const char *s, size_t *i, size_t n, cz_buf *o, cz_error *err) {
    const char *p = s + *i;
    int rc = cz_json_string(&p, s + n, CZ_JSON_LONE_SURROGATE_FFFD | CZ_JSON_RAW_CONTROL, o, err);
    if (rc == 0) *i = (size_t)(p - s);
    return rc;
}

/* Skips any JSON value; returns the index after it, 0 when malformed. */
static size_t json_skip(const char *s, size_t i, size_t n) {
    if (i >= n) return 0;
    if (s[i] == '"') return json_string(s, &i, n, NULL, NULL) ? 0 : i;
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            if (s[i] == '"') {
                if (json_string(s, &i, n, NULL, NULL)) return 0;
                continue;
            }
            if (s[i] == '{' || s[i] == '[') depth++;
            if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return 0;
    }
    size_t j = i;
    while (j < n && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ') j++;
    return j > i ? j : 0;
}

/* 1 = field found (decoded into o), 0 = absent, -1 = malformed at *col,
 * -2 = out of memory (err filled). */
static int json_field(const char *s, size_t n, const char *field, cz_buf *o, size_t *col,
                      cz_error *err) {
    size_t i = json_ws(s, 0, n);
    if (i >= n || s[i] != '{') return *col = i, -1;
    i = json_ws(s, i + 1, n);
    if (i < n && s[i] == '}') return 0;
    cz_buf key = {0};
    while (i < n) {
        if (s[i] != '"') break;
        key.len = 0;
        size_t j = i;
        int rc = json_string(s, &j, n, &key, err);
        if (rc == -2) {
            cz_buf_free(&key);
            return -2;
        }
        if (rc) break;
        i = json_ws(s, j, n);
        if (i >= n || s[i] != ':') break;
        i = json_ws(s, i + 1, n);
        int match = key.len == strlen(field) && !memcmp(key.data, field, key.len);
        if (match && i < n && s[i] == '"') {
            j = i;
            rc = json_string(s, &j, n, o, err);
            cz_buf_free(&key);
            if (rc == -2) return -2;
            if (rc) return *col = i, -1;
            return 1;
        }
        j = json_skip(s, i, n);
        if (!j) break;
        i = json_ws(s, j, n);
        if (i < n && s[i] == '}') {
            cz_buf_free(&key);
            return 0;
        }
        if (i >= n || s[i] != ',') break;
        i = json_ws(s, i + 1, n);
    }
    cz_buf_free(&key);
    *col = i;
    return -1;
}

/* ---- per-format document assembly ---- */

/* Verbatim documents (see cloze/prep.h): r->pend collects the terminators
 * and blank lines after the last text line; they join the document only
 * when another text line follows. */
static int pend_eol(cz_reader *r, cz_error *err) {
    for (int k = 0; k < r->eol_cr; k++)
        if (cz_buf_append(&r->pend, "\r", 1, err) != 0) return -1;
    return r->eol_nl ? cz_buf_append(&r->pend, "\n", 1, err) : 0;
}

static int verbatim_text(cz_reader *r, cz_buf *doc, const char *s, long n, cz_error *err) {
    if (doc->len && r->pend.len && cz_buf_append(doc, r->pend.data, r->pend.len, err) != 0)
        return -1;
    r->pend.len = 0;
    if (cz_buf_append(doc, s, (size_t)n, err) != 0) return -1;
    return pend_eol(r, err);
}

static int verbatim_blank(cz_reader *r, cz_buf *doc, const char *s, long n, cz_error *err) {
    if (!doc->len) return 0; /* before the document: a separator */
    if (cz_buf_append(&r->pend, s, (size_t)n, err) != 0) return -1;
    return pend_eol(r, err);
}

static int add_paragraph_line(cz_buf *doc, const char *s, long n, cz_error *err) {
    if (cz_buf_append(doc, s, (size_t)n, err) != 0) return -1;
    return cz_buf_append(doc, "\n", 1, err);
}

static int next_text(cz_reader *r, cz_buf *doc, cz_error *err) {
    long n;
    while ((n = next_line(r, err)) >= 0) {
        if (is_blank(r->line, n)) {
            if (doc->len) return 1;
            continue;
        }
        if (dropped(r, r->line, n)) continue;
        if ((r->verbatim ? verbatim_text(r, doc, r->line, n, err)
                         : add_paragraph_line(doc, r->line, n, err)) != 0)
            return -1;
        if (doc->len > CZ_MAX_DOC_BYTES) return 1;
    }
    return n == -2 ? -1 : doc->len > 0;
}

static int next_wikitext(cz_reader *r, cz_buf *doc, cz_error *err) {
    long n;
    if (r->pending_title) { /* verbatim: the title that ended the last article */
        r->pending_title = 0;
        if (verbatim_text(r, doc, r->line, r->line_len, err) != 0) return -1;
    }
    while ((n = next_line(r, err)) >= 0) {
        int level = wikitext_heading_level(r->line, n);
        if (level == 1 && doc->len) { /* the next article begins */
            r->pending_title = r->verbatim;
            return 1;
        }
        if (!is_blank(r->line, n) && dropped(r, r->line, n)) continue;
        if (r->verbatim) { /* headings and blank lines are text */
            if ((is_blank(r->line, n) ? verbatim_blank : verbatim_text)(r, doc, r->line, n, err))
                return -1;
            if (doc->len > CZ_MAX_DOC_BYTES) return 1;
            continue;
        }
        if (level || is_blank(r->line, n)) continue;
        if (add_paragraph_line(doc, r->line, n, err) != 0) return -1;
        if (doc->len > CZ_MAX_DOC_BYTES) return 1;
    }
    return n == -2 ? -1 : doc->len > 0;
}

/* Keeps the passages among doc's lines, each then ending in '\n' (as the
 * line-per-paragraph readers write them), so that WikiExtractor's JSON and
 * <doc> forms of one article give the same document. */
static int keep_passages(cz_reader *r, cz_buf *doc, cz_error *err) {
    r->scratch.len = 0;
    if (cz_buf_append(&r->scratch, doc->data, doc->len, err) != 0) return -1;
    doc->len = 0;
    const char *p = r->scratch.data, *end = p + r->scratch.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        r->headings_marked += heading_marked(p, (long)len);
        if (!is_blank(p, (long)len) && !dropped(r, p, (long)len) &&
            add_paragraph_line(doc, p, (long)len, err) != 0)
            return -1;
        p += len + 1;
    }
    return 0;
}

static int next_jsonl(cz_reader *r, cz_buf *doc, cz_error *err) {
    long n;
    while ((n = next_line(r, err)) >= 0) {
        if (is_blank(r->line, n)) continue;
        size_t col = 0;
        int rc = json_field(r->line, (size_t)n, r->jsonl_field, doc, &col, err);
        if (rc == -2)
            return cz_fail_prefix(err, "%s: line %llu", r->path, (unsigned long long)r->line_no);
        if (rc < 0)
            return cz_fail(err, "%s: line %llu column %zu (offset %llu): malformed JSON", r->path,
                           (unsigned long long)r->line_no, col + 1,
                           (unsigned long long)(r->offset - (uint64_t)n - 1 + col));
        if (rc == 0)
            return cz_fail(err, "%s: line %llu: no string field \"%s\"", r->path,
                           (unsigned long long)r->line_no, r->jsonl_field);
        if (r->passages && keep_passages(r, doc, err) != 0) return -1;
        if (!r->passages && r->wiki_json)
            doc->len = strip_heading_marks(doc->data, doc->len, &r->headings_marked);
        if (doc->len) return 1;
    }
    return n == -2 ? -1 : 0;
}

static int has_marker(const char *s, const char *what) {
    const char *p = strstr(s, "***");
    return p && strstr(p, what) != NULL;
}

/* A book: lines are joined with spaces into paragraphs, a blank line ends a
 * paragraph, the file (or the text between the markers) is one document. */
static int next_gutenberg(cz_reader *r, cz_buf *doc, cz_error *err) {
    long n;
    if (r->done) return 0;
    while ((n = next_line(r, err)) >= 0) {
        if (has_marker(r->line, "START OF")) {
            r->in_body = 1;
            doc->len = 0;
            r->pend.len = 0;
            continue;
        }
        if (has_marker(r->line, "END OF") && r->in_body) {
            r->done = 1;
            break;
        }
        if (!r->in_body) continue;
        if (r->verbatim) { /* the lines as they are, hard wraps included */
            if ((is_blank(r->line, n) ? verbatim_blank : verbatim_text)(r, doc, r->line, n, err))
                return -1;
            if (doc->len > CZ_MAX_DOC_BYTES) return 1;
            continue;
        }
        if (is_blank(r->line, n)) {
            if (doc->len && doc->data[doc->len - 1] != '\n') {
                if (cz_buf_append(doc, "\n", 1, err) != 0) return -1;
                if (doc->len > CZ_MAX_DOC_BYTES) return 1;
            }
            continue;
        }
        if (doc->len && doc->data[doc->len - 1] != '\n' && cz_buf_append(doc, " ", 1, err) != 0)
            return -1;
        if (cz_buf_append(doc, r->line, (size_t)n, err) != 0) return -1;
    }
    if (n == -2) return -1;
    r->done = 1;
    return doc->len > 0;
}

/* WikiExtractor's attribute NAME="value" of a <doc ...> line into out. The
 * title is the last attribute: its value runs to the line's final "> so
 * that a title holding a '"' stays whole. */
static void doc_attr(const char *s, size_t n, const char *name, char *out, size_t cap) {
    char key[16];
    snprintf(key, sizeof key, " %s=\"", name);
    out[0] = 0;
    const char *v = memmem(s, n, key, strlen(key));
    if (!v) return;
    v += strlen(key);
    const char *end = s + n;
    const char *q = !strcmp(name, "title") && n >= 2 && !memcmp(end - 2, "\">", 2)
                        ? end - 2
                        : memchr(v, '"', (size_t)(end - v));
    size_t len = q && q >= v ? (size_t)(q - v) : 0;
    if (len >= cap) len = cap - 1;
    memcpy(out, v, len);
    out[len] = 0;
}

static int is_doc_close(const char *s, long n) {
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return n == 6 && !memcmp(s, "</doc>", 6);
}

/* WikiExtractor's default output: each <doc id=.. url=.. title=..> ..
 * </doc> is one document; its first line (the title) is dropped, the rest
 * are paragraphs, one a line. A <doc> that holds only its title (a
 * redirect, an empty article) gives no document. */
static int next_wikiextractor(cz_reader *r, cz_buf *doc, cz_error *err) {
    long n;
    while ((n = next_line(r, err)) >= 0) {
        const char *s = r->line;
        if (!r->in_doc) {
            if (is_blank(s, n)) continue;
            if (!is_wiki_doc_open(s, (size_t)n))
                return cz_fail(err,
                               "%s: line %llu (offset %llu): text outside <doc> ... </doc> (not "
                               "WikiExtractor output? see --format)",
                               r->path, (unsigned long long)r->line_no,
                               (unsigned long long)(r->offset - (uint64_t)n - 1));
            doc_attr(s, (size_t)n, "id", r->doc_id, sizeof r->doc_id);
            doc_attr(s, (size_t)n, "title", r->doc_title, sizeof r->doc_title);
            r->in_doc = 2;
            r->doc_line = r->line_no;
            continue;
        }
        if (is_doc_close(s, n)) {
            r->in_doc = 0;
            if (doc->len) return 1;
            continue;
        }
        if (is_wiki_doc_open(s, (size_t)n))
            return cz_fail(err,
                           "%s: line %llu: <doc> inside document id=%s \"%s\" of line %llu, "
                           "whose </doc> is missing",
                           r->path, (unsigned long long)r->line_no, r->doc_id, r->doc_title,
                           (unsigned long long)r->doc_line);
        if (is_blank(s, n)) {
            if (r->verbatim && r->in_doc == 1 && verbatim_blank(r, doc, s, n, err) != 0) return -1;
            continue;
        }
        if (r->in_doc == 2) { /* the title line */
            r->in_doc = 1;
            continue;
        }
        r->headings_marked += heading_marked(s, n);
        if (!r->passages && heading_marked(s, n)) {
            s += HEADING_MARK_LEN;
            n -= HEADING_MARK_LEN;
        }
        if (dropped(r, s, n)) continue;
        if ((r->verbatim ? verbatim_text(r, doc, s, n, err) : add_paragraph_line(doc, s, n, err)) !=
            0)
            return -1;
        if (doc->len > CZ_MAX_DOC_BYTES) return 1;
    }
    if (n == -2) return -1;
    if (r->in_doc)
        return cz_fail(err,
                       "%s: end of file inside document id=%s \"%s\" of line %llu, whose </doc> "
                       "is missing",
                       r->path, r->doc_id, r->doc_title, (unsigned long long)r->doc_line);
    return 0;
}

int cz_reader_next(cz_reader *r, cz_buf *doc, cz_error *err) {
    doc->len = 0;
    r->pend.len = 0; /* what trailed the last document is not part of the next */
    switch (r->fmt) {
    case CZ_FMT_WIKITEXT:
        return next_wikitext(r, doc, err);
    case CZ_FMT_JSONL:
        return next_jsonl(r, doc, err);
    case CZ_FMT_GUTENBERG:
        return next_gutenberg(r, doc, err);
    case CZ_FMT_WIKIEXTRACTOR:
        return next_wikiextractor(r, doc, err);
    default:
        return next_text(r, doc, err);
    }
}
