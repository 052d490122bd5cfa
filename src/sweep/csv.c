/* sweep: results.csv as text (RFC 4180: fields separated by commas, a
 * field holding a comma, quote or line break in double quotes with its
 * quotes doubled). The one writer (results.c) and the one reader (report.c,
 * and anyone's results.csv merged or edited by hand) of the file. */
#include "sweep_internal.h"

#include <stdlib.h>
#include <string.h>

void cz_sweep_csv_field(FILE *f, const char *text, int first) {
    if (!first) fputc(',', f);
    if (!strpbrk(text, ",\"\n\r")) {
        fputs(text, f);
        return;
    }
    fputc('"', f);
    for (const char *c = text; *c; c++) {
        if (*c == '"') fputc('"', f);
        fputc(*c == '\n' || *c == '\r' ? ' ' : *c, f);
    }
    fputc('"', f);
}

void cz_sweep_csv_free(cz_sweep_csv *c) {
    for (int r = 0; r < c->nrow; r++) {
        for (int k = 0; k < c->ncol; k++) free(c->cell[r][k]);
        free(c->cell[r]);
    }
    for (int k = 0; k < c->ncol; k++) free(c->head[k]);
    free(c->cell);
    free(c->head);
    memset(c, 0, sizeof *c);
}

static void free_fields(char **f, int n) {
    for (int k = 0; k < n; k++) free(f[k]);
    free(f);
}

/* A field being read: grows by doubling. */
typedef struct field {
    char *buf;
    size_t len, cap;
} field;

static int field_put(field *f, char ch) {
    if (f->len + 2 > f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        char *b = realloc(f->buf, cap);
        if (!b) return -1;
        f->buf = b;
        f->cap = cap;
    }
    f->buf[f->len++] = ch;
    f->buf[f->len] = 0;
    return 0;
}

/* A record being read: its fields. */
typedef struct record {
    char **f;
    int n, cap;
} record;

static int record_put(record *r, field *f) {
    if (!f->buf && field_put(f, 0) != 0) return -1; /* an empty field: "" */
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        char **g = realloc(r->f, sizeof *g * (size_t)cap);
        if (!g) return -1;
        r->f = g;
        r->cap = cap;
    }
    r->f[r->n++] = f->buf;
    memset(f, 0, sizeof *f);
    return 0;
}

/* One record from *p, *line counting the line breaks passed. 0; -1 with
 * err (name:line: what) for an unterminated quote or when memory runs out. */
static int read_record(const char **p, int *line, const char *name, record *r, cz_error *err) {
    const char *s = *p;
    int start = *line;
    memset(r, 0, sizeof *r);
    field f = {0};
    for (;;) {
        int bad = 0;
        if (*s == '"') {
            s++;
            while (*s && !(*s == '"' && s[1] != '"') && !bad) {
                if (*s == '"') s++; /* a doubled quote: one quote */
                if (*s == '\n') (*line)++;
                bad = field_put(&f, *s++);
            }
            if (!*s && !bad) {
                free(f.buf);
                free_fields(r->f, r->n);
                return cz_fail(err, "%s:%d: a quoted field is not closed", name, start);
            }
            if (*s == '"') s++;
        }
        while (*s && *s != ',' && *s != '\n' && *s != '\r' && !bad) bad = field_put(&f, *s++);
        if (bad || record_put(r, &f) != 0) {
            free(f.buf);
            free_fields(r->f, r->n);
            return cz_fail(err, "%s:%d: out of memory", name, start);
        }
        if (*s == ',') {
            s++;
            continue;
        }
        break;
    }
    /* the line break: \n, \r\n; blank lines after it are skipped */
    while (*s == '\r' || *s == '\n') (*line) += *s++ == '\n';
    *p = s;
    return 0;
}

int cz_sweep_csv_parse(const char *text, const char *name, cz_sweep_csv *c, cz_error *err) {
    memset(c, 0, sizeof *c);
    if (!*text) return cz_fail(err, "%s: empty (no header)", name);
    const char *p = text;
    int line = 1, cap = 0;
    record r;
    if (read_record(&p, &line, name, &r, err) != 0) return -1;
    c->head = r.f;
    c->ncol = r.n;
    while (*p) {
        int at = line;
        if (read_record(&p, &line, name, &r, err) != 0) {
            cz_sweep_csv_free(c);
            return -1;
        }
        if (r.n != c->ncol) {
            free_fields(r.f, r.n);
            int ncol = c->ncol;
            cz_sweep_csv_free(c);
            return cz_fail(err, "%s:%d: %d fields, the header has %d", name, at, r.n, ncol);
        }
        if (c->nrow == cap) {
            int ncap = cap ? 2 * cap : 64;
            char ***g = realloc(c->cell, sizeof *g * (size_t)ncap);
            if (!g) {
                free_fields(r.f, r.n);
                cz_sweep_csv_free(c);
                return cz_fail(err, "%s:%d: out of memory", name, at);
            }
            c->cell = g;
            cap = ncap;
        }
        c->cell[c->nrow++] = r.f;
    }
    return 0;
}

int cz_sweep_csv_read(const char *path, cz_sweep_csv *c, cz_error *err) {
    memset(c, 0, sizeof *c);
    void *data;
    size_t len;
    if (cz_read_file(path, &data, &len, err) != 0) return -1;
    int rc = cz_sweep_csv_parse(data, path, c, err);
    cz_free(data);
    return rc;
}

int cz_sweep_csv_col(const cz_sweep_csv *c, const char *name) {
    for (int k = 0; k < c->ncol; k++)
        if (!strcmp(c->head[k], name)) return k;
    return -1;
}
