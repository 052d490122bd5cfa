/* Task files into examples (include/cloze/finetune.h, "tasks"):
 *   TSV    GLUE's files as download_glue_data.py writes them: tab-separated,
 *          no quoting (BERT's run_classifier reads them with quotechar
 *          None), an optional header naming the columns, a UTF-8 BOM
 *          allowed (MRPC has one);
 *   SQuAD  v1.1 JSON: data[].paragraphs[].{context, qas[].{id, question,
 *          answers[].{text, answer_start}}}; contexts split into words at
 *          whitespace as BERT's run_squad does;
 *   CoNLL  one "token<TAB>tag" (or space-separated, tag last) per line,
 *          sentences separated by whitespace-only lines, -DOCSTART- lines
 *          skipped;
 *   choice JSON lines, one multiple-choice example per line:
 *          {"context": "...", "question": "..." (optional), "endings":
 *          ["...", ...], "label": k}: GPT-1 Sec. 3.3's [z; q; $; a_k] (RACE,
 *          Story Cloze), BERT Sec. 4.4's SWAG; blank lines skipped. */
#include <stdlib.h>
#include <string.h>

#include "cloze/finetune.h"
#include "cloze/json.h"
#include "cloze/text.h"

/* ---- presets ---- */

static void set_labels(cz_ft_task *t, const char *const *names, int n) {
    t->n_labels = n;
    for (int i = 0; i < n; i++) snprintf(t->labels[i], sizeof t->labels[i], "%s", names[i]);
}

int cz_ft_task_preset(cz_ft_task *t, const char *name, cz_error *err) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    static const char *const binary[] = {"0", "1"};
    static const char *const rte[] = {"entailment", "not_entailment"};
    t->kind = CZ_FT_CLASSIFY;
    t->metric = CZ_FT_ACCURACY;
    t->header = 1;
    if (!strcmp(name, "sst2") || !strcmp(name, "sst-2")) {
        snprintf(t->text_a, sizeof t->text_a, "sentence");
        snprintf(t->label, sizeof t->label, "label");
        set_labels(t, binary, 2);
    } else if (!strcmp(name, "mrpc")) {
        snprintf(t->text_a, sizeof t->text_a, "#1 String");
        snprintf(t->text_b, sizeof t->text_b, "#2 String");
        snprintf(t->label, sizeof t->label, "Quality");
        set_labels(t, binary, 2);
        t->metric = CZ_FT_F1;
    } else if (!strcmp(name, "rte")) {
        snprintf(t->text_a, sizeof t->text_a, "sentence1");
        snprintf(t->text_b, sizeof t->text_b, "sentence2");
        snprintf(t->label, sizeof t->label, "label");
        set_labels(t, rte, 2);
    } else if (!strcmp(name, "cola")) { /* no header: source, label, mark, sentence */
        t->header = 0;
        snprintf(t->text_a, sizeof t->text_a, "3");
        snprintf(t->label, sizeof t->label, "1");
        set_labels(t, binary, 2);
        t->metric = CZ_FT_MCC;
    } else if (!strcmp(name, "lines")) { /* one text per line, no labels (features) */
        t->header = 0;
        snprintf(t->text_a, sizeof t->text_a, "0");
    } else if (!strcmp(name, "tsv")) {
        snprintf(t->text_a, sizeof t->text_a, "sentence");
        snprintf(t->label, sizeof t->label, "label");
    } else if (!strcmp(name, "squad")) {
        t->kind = CZ_FT_SPAN;
        t->metric = CZ_FT_SQUAD;
        t->header = 0;
    } else if (!strcmp(name, "conll") || !strcmp(name, "wnut17")) {
        t->kind = CZ_FT_TAG;
        t->metric = CZ_FT_ENTITY_F1;
        t->header = 0;
    } else if (!strcmp(name, "choice")) {
        t->kind = CZ_FT_CHOICE;
        t->header = 0;
    } else {
        return cz_fail(err,
                       "task \"%s\": one of sst2, mrpc, rte, cola, tsv (any TSV with named "
                       "columns), squad, conll (wnut17), choice (multiple-choice JSON lines), "
                       "lines (features)",
                       name);
    }
    return 0;
}

void cz_ft_task_columns(cz_ft_task *t, const char *text_a, const char *text_b, const char *label,
                        int no_header) {
    if (text_a && text_a[0]) snprintf(t->text_a, sizeof t->text_a, "%s", text_a);
    if (text_b && text_b[0]) snprintf(t->text_b, sizeof t->text_b, "%s", text_b);
    if (label && label[0]) {
        snprintf(t->label, sizeof t->label, "%s", label);
        if (strcmp(t->name, "tsv")) t->n_labels = 0; /* other columns: collect the labels */
    }
    if (no_header) t->header = 0;
}

/* ---- shared ---- */

/* The class of label s, a TSV label or a CoNLL tag ("what") on line lineno;
 * with collect a new one joins the task's labels. A label is at most 31
 * bytes (cz_ft_task.labels): a longer one stored cut would match no line,
 * its own included, and every line would add another copy. */
static int label_index(cz_ft_task *t, const char *s, int collect, const char *what,
                       const char *path, int lineno, cz_error *err) {
    for (int i = 0; i < t->n_labels; i++)
        if (!strcmp(t->labels[i], s)) return i;
    size_t len = strlen(s);
    if (collect && len >= sizeof t->labels[0])
        return cz_fail(err, "%s:%d: %s \"%.24s...\" is %zu bytes long: at most %zu", path, lineno,
                       what, s, len, sizeof t->labels[0] - 1);
    if (collect && t->n_labels == CZ_FT_MAX_LABELS)
        return cz_fail(err, "%s:%d: %s \"%s\": more than %d different %ss", path, lineno, what, s,
                       CZ_FT_MAX_LABELS, what);
    if (!collect)
        return cz_fail(err, "%s:%d: %s \"%s\" is not one of the task's %d %ss", path, lineno, what,
                       s, t->n_labels, what);
    snprintf(t->labels[t->n_labels], sizeof t->labels[0], "%s", s);
    return t->n_labels++;
}

/* Collected labels come in file order; sort them (CoNLL: "O" first) and
 * renumber the examples, so that the class order does not depend on which
 * label happens to come first. */
static int label_cmp(const void *a, const void *b) {
    const char *x = a, *y = b;
    if (!strcmp(x, "O")) return strcmp(y, "O") ? -1 : 0;
    if (!strcmp(y, "O")) return 1;
    return strcmp(x, y);
}

static void sort_labels(cz_ft_task *t, cz_ft_dataset *d) {
    if (!t->n_labels) return; /* no label column (lines): every label is 0, map would be unset */
    char old[CZ_FT_MAX_LABELS][32];
    memcpy(old, t->labels, sizeof old);
    qsort(t->labels, (size_t)t->n_labels, sizeof t->labels[0], label_cmp);
    int map[CZ_FT_MAX_LABELS];
    for (int i = 0; i < t->n_labels; i++)
        for (int k = 0; k < t->n_labels; k++)
            if (!strcmp(old[i], t->labels[k])) map[i] = k;
    for (int e = 0; e < d->n; e++) {
        cz_ft_example *x = &d->ex[e];
        if (d->kind == CZ_FT_CLASSIFY) x->label = map[x->label];
        for (int w = 0; w < x->n_words && x->tags; w++) x->tags[w] = map[x->tags[w]];
    }
}

static cz_ft_example *push_example(cz_ft_dataset *d, int *cap, cz_error *err) {
    if (d->n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        cz_ft_example *e = realloc(d->ex, (size_t)*cap * sizeof *e);
        if (!e) {
            cz_fail(err, "%s: out of memory", d->path);
            return NULL;
        }
        d->ex = e;
    }
    cz_ft_example *x = &d->ex[d->n++];
    memset(x, 0, sizeof *x);
    return x;
}

static void example_free(cz_ft_example *x);

void cz_ft_dataset_truncate(cz_ft_dataset *d, int n) {
    for (int i = n; i < d->n; i++) example_free(&d->ex[i]);
    if (n < d->n) d->n = n;
}

void cz_ft_dataset_free(cz_ft_dataset *d) {
    for (int i = 0; i < d->n; i++) example_free(&d->ex[i]);
    free(d->ex);
    memset(d, 0, sizeof *d);
}

static void example_free(cz_ft_example *x) {
    free(x->a);
    free(x->b);
    for (int w = 0; w < x->n_words && x->words; w++) free(x->words[w]);
    free(x->words);
    free(x->tags);
    free(x->id);
    free(x->question);
    free(x->context);
    for (int k = 0; k < x->n_answers; k++) free(x->answers[k].text);
    free(x->answers);
    free(x->word_start);
    free(x->word_end);
}

/* The line at *p, cut at its '\n' (in place); *p moves past it. */
static char *next_line(char **p) {
    char *line = *p, *nl = strchr(line, '\n');
    *p = nl ? nl + 1 : line + strlen(line);
    if (nl) *nl = 0;
    return line;
}

/* ---- TSV ---- */

#define MAX_FIELDS 64

/* Splits a line in place at tabs. */
static int split_tabs(char *line, char **f) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == '\t' && n < MAX_FIELDS) {
            *p = 0;
            f[n++] = p + 1;
        }
    return n;
}

/* A column: its header name, or a 0-based index when there is no header
 * (or the name is all digits). */
static int column_of(const char *spec, char **hdr, int n_hdr, const char *path, cz_error *err) {
    if (!spec[0]) return -1;
    for (int i = 0; hdr && i < n_hdr; i++)
        if (!strcmp(hdr[i], spec)) return i;
    char *end;
    long v = strtol(spec, &end, 10);
    if (!*end && v >= 0 && v < MAX_FIELDS) return (int)v;
    cz_fail(err, "%s: no column \"%s\" in the header", path, spec);
    return -2;
}

static int read_tsv(cz_ft_dataset *d, cz_ft_task *t, char *text, int collect, int may_lack,
                    cz_error *err) {
    int cap = 0, lineno = 0;
    int ca = -1, cb = -1, cl = -1;
    char *hdr_f[MAX_FIELDS];
    int n_hdr = 0;
    char *p = text;
    if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
        p += 3; /* UTF-8 BOM */
    int have_cols = 0;
    while (*p) {
        char *line = next_line(&p);
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = 0;
        if (!len) continue;
        char *f[MAX_FIELDS];
        int nf = split_tabs(line, f);
        if (t->header && !n_hdr) {
            memcpy(hdr_f, f, sizeof(char *) * (size_t)nf);
            n_hdr = nf;
            continue;
        }
        if (!have_cols) {
            ca = column_of(t->text_a, n_hdr ? hdr_f : NULL, n_hdr, d->path, err);
            cb = column_of(t->text_b, n_hdr ? hdr_f : NULL, n_hdr, d->path, err);
            cl = column_of(t->label, n_hdr ? hdr_f : NULL, n_hdr, d->path, err);
            /* a test file without its label column (GLUE's test TSVs):
             * predictions only */
            if (may_lack && t->label[0] && (cl == -2 || cl >= nf)) cl = -1, d->labelled = 0;
            if (ca < -1 || cb < -1 || cl < -1) return -1;
            if (ca < 0) return cz_fail(err, "%s: the task names no text column", d->path);
            have_cols = 1;
        }
        int need = ca > cb ? ca : cb;
        if (cl > need) need = cl;
        if (nf <= need)
            return cz_fail(err, "%s:%d: %d fields, the task's columns need %d", d->path, lineno, nf,
                           need + 1);
        cz_ft_example *x = push_example(d, &cap, err);
        if (!x) return -1;
        x->a = strdup(f[ca]);
        x->b = cb >= 0 ? strdup(f[cb]) : NULL;
        if (!x->a || (cb >= 0 && !x->b)) return cz_fail(err, "%s: out of memory", d->path);
        x->label = cl < 0 ? 0 : label_index(t, f[cl], collect, "label", d->path, lineno, err);
        if (x->label < 0) return -1;
    }
    if (!d->n) return cz_fail(err, "%s: no examples", d->path);
    return 0;
}

/* ---- CoNLL ---- */

static int is_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

typedef struct words_buf {
    char **words;
    int *tags;
    int n, cap;
} words_buf;

static int flush_sentence(cz_ft_dataset *d, int *cap, words_buf *w, cz_error *err) {
    if (!w->n) return 0;
    cz_ft_example *x = push_example(d, cap, err);
    if (!x) return -1;
    x->n_words = w->n;
    x->words = w->words;
    x->tags = w->tags;
    memset(w, 0, sizeof *w);
    return 0;
}

static int read_conll(cz_ft_dataset *d, cz_ft_task *t, char *text, int collect, int may_lack,
                      cz_error *err) {
    int cap = 0, lineno = 0, tagged = -1; /* whether lines carry a tag: the first line's */
    words_buf w = {0};
    char *p = text;
    int rc = 0;
    while (*p && rc == 0) {
        char *line = next_line(&p);
        lineno++;
        if (is_blank(line)) {
            rc = flush_sentence(d, &cap, &w, err);
            continue;
        }
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = 0;
        if (!strncmp(line, "-DOCSTART-", 10)) continue;
        /* a CR inside a line is a file with CR line ends, read as one line
         * whose first word is tagged with the last tag: say so */
        if (strchr(line, '\r')) {
            rc = cz_fail(err,
                         "%s:%d: a carriage return inside the line (line ends must be LF or CRLF)",
                         d->path, lineno);
            break;
        }
        char *sep = strrchr(line, '\t');
        if (!sep) sep = strrchr(line, ' ');
        /* a file of tokens alone (a test file): predictions only */
        if (tagged < 0) tagged = sep || !may_lack;
        if (!tagged && sep) {
            rc = cz_fail(err, "%s:%d: a tag column, but the first token line had none", d->path,
                         lineno);
            break;
        }
        /* the token is the first column: a line that starts blank has none */
        if ((tagged && !sep) || line[0] == ' ' || line[0] == '\t') {
            rc = cz_fail(err, "%s:%d: expected \"token<TAB>tag\"", d->path, lineno);
            break;
        }
        char *tag = sep ? sep + 1 : NULL;
        if (sep) *sep = 0;
        char *tok_end = strpbrk(line, " \t"); /* token = the first column */
        if (tok_end) *tok_end = 0;
        int k = tag ? label_index(t, tag, collect, "tag", d->path, lineno, err) : 0;
        if (k < 0) {
            rc = -1;
            break;
        }
        if (w.n == w.cap) {
            w.cap = w.cap ? 2 * w.cap : 32;
            char **nw = realloc(w.words, (size_t)w.cap * sizeof *nw);
            int *nt = nw ? realloc(w.tags, (size_t)w.cap * sizeof *nt) : NULL;
            if (nw) w.words = nw;
            if (nt) w.tags = nt;
            if (!nw || !nt) {
                rc = cz_fail(err, "%s: out of memory", d->path);
                break;
            }
        }
        if (!(w.words[w.n] = strdup(line))) {
            rc = cz_fail(err, "%s: out of memory", d->path);
            break;
        }
        w.tags[w.n++] = k;
    }
    if (rc == 0) rc = flush_sentence(d, &cap, &w, err);
    if (!tagged) d->labelled = 0;
    for (int i = 0; i < w.n; i++) free(w.words[i]);
    free(w.words);
    free(w.tags);
    if (rc == 0 && !d->n) rc = cz_fail(err, "%s: no sentences", d->path);
    return rc;
}

/* ---- SQuAD ---- */

/* BERT run_squad's is_whitespace: space, \t, \r, \n and U+202F. */
static int ws_len(const char *s) {
    if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') return 1;
    if ((unsigned char)s[0] == 0xE2 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] == 0xAF)
        return 3;
    return 0;
}

static int split_words(cz_ft_example *x, cz_error *err) {
    const char *c = x->context;
    size_t n = strlen(c);
    int cap = 64, nw = 0;
    x->word_start = malloc((size_t)cap * sizeof(int));
    x->word_end = malloc((size_t)cap * sizeof(int));
    if (!x->word_start || !x->word_end) return cz_fail(err, "out of memory");
    size_t i = 0;
    while (i < n) {
        int w = ws_len(c + i);
        if (w) {
            i += (size_t)w;
            continue;
        }
        size_t s = i;
        while (i < n && !ws_len(c + i)) i++;
        if (nw == cap) {
            cap *= 2;
            int *a = realloc(x->word_start, (size_t)cap * sizeof(int));
            if (a) x->word_start = a;
            int *b = a ? realloc(x->word_end, (size_t)cap * sizeof(int)) : NULL;
            if (b) x->word_end = b;
            if (!a || !b) return cz_fail(err, "out of memory");
        }
        x->word_start[nw] = (int)s;
        x->word_end[nw++] = (int)i;
    }
    x->n_words = nw;
    return 0;
}

/* SQuAD's answer_start counts characters (Python str); the context is
 * UTF-8 here, so convert to a byte offset. */
static int char_to_byte(const char *s, long chars) {
    long k = 0;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (u[i] && k < chars) {
        i++;
        while ((u[i] & 0xC0) == 0x80) i++;
        k++;
    }
    return k == chars ? (int)i : -1;
}

static int read_squad(cz_ft_dataset *d, char *text, size_t len, int may_lack, cz_error *err) {
    cz_json *root = NULL;
    if (cz_json_parse(text, len, &root, err)) return cz_fail_prefix(err, "%s", d->path);
    int cap = 0, rc = 0;
    const cz_json *data = cz_json_get(root, "data");
    if (!data || data->type != CZ_JSON_ARRAY) {
        cz_json_free(root);
        return cz_fail(err, "%s: no \"data\" array (not SQuAD v1.1 JSON)", d->path);
    }
    for (const cz_json *art = data->child; art && rc == 0; art = art->next) {
        const cz_json *paras = cz_json_get(art, "paragraphs");
        for (const cz_json *p = paras ? paras->child : NULL; p && rc == 0; p = p->next) {
            const char *ctx = cz_json_get_string(p, "context");
            const cz_json *qas = cz_json_get(p, "qas");
            if (!ctx || !qas) {
                rc = cz_fail(err, "%s: byte %zu: a paragraph without context or qas", d->path,
                             p->offset);
                break;
            }
            for (const cz_json *q = qas->child; q && rc == 0; q = q->next) {
                const char *id = cz_json_get_string(q, "id"),
                           *qt = cz_json_get_string(q, "question");
                const cz_json *ans = cz_json_get(q, "answers");
                if (!id || !qt || (!may_lack && !ans) || (ans && ans->type != CZ_JSON_ARRAY)) {
                    rc = cz_fail(err, "%s: byte %zu: a question without id, question or answers",
                                 d->path, q->offset);
                    break;
                }
                cz_ft_example *x = push_example(d, &cap, err);
                if (!x) {
                    rc = -1;
                    break;
                }
                x->id = strdup(id);
                x->question = strdup(qt);
                x->context = strdup(ctx);
                x->answers = calloc((size_t)(ans ? ans->count : 0) + 1, sizeof *x->answers);
                if (!x->id || !x->question || !x->context || !x->answers) {
                    rc = cz_fail(err, "%s: out of memory", d->path);
                    break;
                }
                for (const cz_json *a = ans ? ans->child : NULL; a; a = a->next) {
                    const char *at = cz_json_get_string(a, "text");
                    double st = cz_json_get_number(a, "answer_start", -1);
                    /* a character index: whole and within the context (a
                     * double past long's range does not convert) */
                    int b = at && st >= 0 && st <= (double)strlen(ctx) && st == (double)(long)st
                                ? char_to_byte(ctx, (long)st)
                                : -1;
                    if (b < 0 || strncmp(ctx + b, at, strlen(at))) {
                        /* the id up to a line break, for a one-line message */
                        rc = cz_fail(err,
                                     "%s: byte %zu: question %.*s: answer_start %g does not point "
                                     "at the answer text in its context",
                                     d->path, a->offset, (int)strcspn(id, "\r\n"), id, st);
                        break;
                    }
                    if (!(x->answers[x->n_answers].text = strdup(at))) {
                        rc = cz_fail(err, "%s: out of memory", d->path);
                        break;
                    }
                    x->answers[x->n_answers++].start = b;
                }
                if (rc == 0 && split_words(x, err)) rc = cz_fail_prefix(err, "%s", d->path);
                if (may_lack && !x->n_answers) d->labelled = 0; /* predictions only */
            }
        }
    }
    cz_json_free(root);
    if (rc == 0 && !d->n) rc = cz_fail(err, "%s: no questions", d->path);
    return rc;
}

/* ---- multiple choice ---- */

static char *join_text(const char *a, const char *b) {
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *s = malloc(la + lb + 2);
    if (!s) return NULL;
    memcpy(s, a, la);
    if (b && lb) {
        s[la] = ' ';
        memcpy(s + la + 1, b, lb + 1);
    } else {
        s[la] = 0;
    }
    return s;
}

/* One example per line. K, the number of endings, is the first line's
 * (or t->n_labels when already set, as for a dev file after its training
 * file); every line must have K. */
static int read_choice(cz_ft_dataset *d, cz_ft_task *t, char *text, int may_lack, cz_error *err) {
    int cap = 0, lineno = 0, rc = 0;
    int K = t->n_labels;
    char *p = text;
    while (*p && rc == 0) {
        char *line = next_line(&p);
        lineno++;
        if (is_blank(line)) continue;
        cz_json *v = NULL;
        if (cz_json_parse(line, strlen(line), &v, err)) {
            rc = cz_fail_prefix(err, "%s:%d", d->path, lineno);
            break;
        }
        const char *ctx = cz_json_get_string(v, "context"), *q = cz_json_get_string(v, "question");
        const cz_json *ends = cz_json_get(v, "endings"), *lab = cz_json_get(v, "label");
        int k = ends && ends->type == CZ_JSON_ARRAY ? ends->count : 0;
        if (!ctx || !ends || ends->type != CZ_JSON_ARRAY) {
            rc = cz_fail(err,
                         "%s:%d: expected {\"context\": string, \"endings\": [strings], "
                         "\"label\": index}",
                         d->path, lineno);
        } else if (k < 2 || k > CZ_FT_MAX_LABELS || (K && k != K)) {
            rc = K ? cz_fail(err, "%s:%d: %d endings, the task's examples have %d", d->path, lineno,
                             k, K)
                   : cz_fail(err, "%s:%d: %d endings: need 2 to %d", d->path, lineno, k,
                             CZ_FT_MAX_LABELS);
        } else if (!lab && may_lack) {
            d->labelled = 0; /* predictions only */
        } else if (!lab || lab->type != CZ_JSON_NUMBER || lab->number < 0 || lab->number >= k ||
                   lab->number != (int)lab->number) { /* in range before the cast to int */
            rc = cz_fail(err, "%s:%d: \"label\" must be an ending's index in [0, %d)", d->path,
                         lineno, k);
        }
        cz_ft_example *x = rc ? NULL : push_example(d, &cap, err);
        if (!rc && !x) rc = -1;
        if (x) {
            K = k;
            x->label = lab ? (int)lab->number : 0;
            x->a = join_text(ctx, q);
            x->words = calloc((size_t)k, sizeof *x->words);
            if (x->words) x->n_words = k;
            int i = 0;
            for (const cz_json *e = ends->child; e && x->words && rc == 0; e = e->next, i++) {
                if (e->type != CZ_JSON_STRING)
                    rc = cz_fail(err, "%s:%d: ending %d is not a string", d->path, lineno, i + 1);
                else if (!(x->words[i] = strdup(e->string)))
                    rc = cz_fail(err, "%s: out of memory", d->path);
            }
            if (rc == 0 && (!x->a || !x->words)) rc = cz_fail(err, "%s: out of memory", d->path);
        }
        cz_json_free(v);
    }
    if (rc == 0 && !d->n) rc = cz_fail(err, "%s: no examples", d->path);
    if (rc == 0 && !t->n_labels) { /* the classes are the endings' positions */
        t->n_labels = K;
        for (int i = 0; i < K; i++) snprintf(t->labels[i], sizeof t->labels[i], "%d", i);
    }
    return rc;
}

int cz_ft_read(cz_ft_dataset *d, cz_ft_task *t, const char *path, int flags, cz_error *err) {
    memset(d, 0, sizeof *d);
    d->kind = t->kind;
    d->labelled = 1;
    int collect = flags & CZ_FT_COLLECT, may_lack = (flags & CZ_FT_MAY_LACK_LABELS) != 0;
    snprintf(d->path, sizeof d->path, "%s", path);
    void *text;
    size_t len;
    if (cz_read_file(path, &text, &len, err)) return -1;
    if (memchr(text, 0, len))
        return cz_free(text), cz_fail(err, "%s: contains a NUL byte: not a text file", path);
    /* task files are small and curated (GLUE, SQuAD, CoNLL are UTF-8): an
     * invalid byte is a wrong file or encoding, not noise to replace */
    size_t bad = cz_utf8_invalid_at(text, len);
    if (bad < len) {
        const char *t0 = text;
        int line = 1;
        for (size_t i = 0; i < bad; i++) line += t0[i] == '\n';
        cz_free(text);
        return cz_fail(err, "%s:%d: invalid UTF-8 at byte offset %zu (task files must be UTF-8)",
                       path, line, bad);
    }
    int was_empty = t->n_labels == 0;
    int rc = t->kind == CZ_FT_SPAN     ? read_squad(d, text, len, may_lack, err)
             : t->kind == CZ_FT_TAG    ? read_conll(d, t, text, collect && was_empty, may_lack, err)
             : t->kind == CZ_FT_CHOICE ? read_choice(d, t, text, may_lack, err)
                                       : read_tsv(d, t, text, collect && was_empty, may_lack, err);
    cz_free(text);
    if (rc == 0 && t->kind != CZ_FT_SPAN && t->kind != CZ_FT_CHOICE && collect && was_empty)
        sort_labels(t, d);
    if (rc == 0 && t->kind != CZ_FT_SPAN && (t->label[0] || t->kind == CZ_FT_TAG) &&
        t->n_labels < 2)
        rc = cz_fail(err, "%s: %d label(s): classification needs at least 2", path, t->n_labels);
    if (rc) cz_ft_dataset_free(d);
    return rc;
}
