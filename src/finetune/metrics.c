/* Task metrics (include/cloze/finetune.h, "metrics" and "predictions").
 *   accuracy, F1 of class 1, Matthews correlation (GLUE's figures);
 *   SQuAD v1.1: exact match and token F1 after the official normalisation
 *     (evaluate-v1.1.py: lower-case, drop string.punctuation, drop the
 *     articles a/an/the as words, collapse whitespace), max over the gold
 *     answers, averaged over questions;
 *   conlleval's chunk precision, recall and F1 over (type, begin, end);
 *     a sentence starts and ends as if tagged O. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/finetune.h"
#include "cloze/text.h"

void cz_ft_classify_scores(const int *gold, const int *pred, long n, cz_ft_scores *s) {
    memset(s, 0, sizeof *s);
    s->n = n;
    double tp = 0, fp = 0, fn = 0, tn = 0, right = 0;
    for (long i = 0; i < n; i++) {
        right += gold[i] == pred[i];
        int g = gold[i] == 1, p = pred[i] == 1;
        tp += g && p;
        fp += !g && p;
        fn += g && !p;
        tn += !g && !p;
    }
    s->accuracy = n ? right / (double)n : 0.0;
    s->f1 = tp > 0 ? 2 * tp / (2 * tp + fp + fn) : 0.0;
    /* MCC = (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), 0 when a
     * factor is 0 (sklearn's convention) */
    double den = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn);
    s->mcc = den > 0 ? (tp * tn - fp * fn) / sqrt(den) : 0.0;
}

/* ---- SQuAD ---- */

static int is_punct(unsigned char c) { /* Python's string.punctuation */
    return c < 128 && ispunct(c);
}

char *cz_ft_squad_normalize(const char *s) {
    size_t n = strlen(s);
    char *a = malloc(n + 1), *out = malloc(n + 1);
    if (!a || !out) {
        free(a);
        free(out);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { /* lower-case (ASCII, as str.lower on ASCII), no punctuation */
        unsigned char c = (unsigned char)s[i];
        if (is_punct(c)) continue;
        a[k++] = (char)(c < 128 ? tolower(c) : c);
    }
    a[k] = 0;
    /* words at whitespace (Python's str.split(): ASCII whitespace here),
     * articles dropped, joined by one space */
    size_t o = 0;
    char *p = a;
    while (*p) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p) break;
        char *w = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        size_t wl = (size_t)(p - w);
        if ((wl == 1 && w[0] == 'a') || (wl == 2 && !strncmp(w, "an", 2)) ||
            (wl == 3 && !strncmp(w, "the", 3)))
            continue;
        if (o) out[o++] = ' ';
        memcpy(out + o, w, wl);
        o += wl;
    }
    out[o] = 0;
    free(a);
    return out;
}

/* Token F1 of two normalised strings (bags of whitespace words). */
static double token_f1(const char *p, const char *g) {
    char *pc = strdup(p), *gc = strdup(g);
    char *pw[4096], *gw[4096];
    int np = 0, ng = 0;
    for (char *t = strtok(pc, " "); t && np < 4096; t = strtok(NULL, " ")) pw[np++] = t;
    for (char *t = strtok(gc, " "); t && ng < 4096; t = strtok(NULL, " ")) gw[ng++] = t;
    int common = 0;
    char used[4096] = {0};
    for (int i = 0; i < np; i++)
        for (int j = 0; j < ng; j++)
            if (!used[j] && !strcmp(pw[i], gw[j])) {
                used[j] = 1;
                common++;
                break;
            }
    free(pc);
    free(gc);
    if (!common) return 0.0;
    double prec = (double)common / np, rec = (double)common / ng;
    return 2 * prec * rec / (prec + rec);
}

void cz_ft_squad_score(const char *pred, char *const *gold, int n_gold, double *em, double *f1) {
    *em = *f1 = 0;
    char *p = cz_ft_squad_normalize(pred);
    for (int i = 0; i < n_gold && p; i++) {
        char *g = cz_ft_squad_normalize(gold[i]);
        if (!g) break;
        if (!strcmp(p, g)) *em = 1;
        double f = token_f1(p, g);
        if (f > *f1) *f1 = f;
        free(g);
    }
    free(p);
}

/* ---- conlleval ---- */

/* A tag's prefix and type as conlleval splits "B-person": prefix 'B',
 * type "person"; "O" is prefix 'O'; a tag without a dash keeps its type
 * empty (prefix '?', which no rule below names). */
static void split_tag(const char *name, char *prefix, const char **type) {
    const char *dash = strchr(name, '-');
    if (!strcmp(name, "O")) {
        *prefix = 'O';
        *type = "";
    } else if (dash == name + 1) {
        *prefix = name[0];
        *type = name + 2;
    } else {
        *prefix = '?';
        *type = "";
    }
}

/* conlleval.pl's endOfChunk and startOfChunk, rule for rule (B, I, E, O). */
static int chunk_ends(char pt, const char *ptype, char t, const char *type) {
    return (pt == 'B' && (t == 'B' || t == 'O')) || (pt == 'I' && (t == 'B' || t == 'O')) ||
           (pt == 'E' && (t == 'E' || t == 'I' || t == 'O')) ||
           (pt != 'O' && pt != '.' && strcmp(ptype, type) != 0);
}

static int chunk_starts(char pt, const char *ptype, char t, const char *type) {
    return (t == 'B' && (pt == 'B' || pt == 'I' || pt == 'O')) ||
           (pt == 'O' && (t == 'I' || t == 'E')) || (pt == 'E' && (t == 'E' || t == 'I')) ||
           (t != 'O' && t != '.' && strcmp(ptype, type) != 0);
}

typedef struct chunk {
    int begin, end;
    const char *type;
} chunk;

/* Chunks of one tag sequence, appended to out. */
static int chunks_of(const int *tags, int n, char (*names)[32], chunk *out) {
    int k = 0, open = -1;
    char pt = 'O';
    const char *ptype = "";
    for (int i = 0; i <= n; i++) {
        char t = 'O';
        const char *type = "";
        if (i < n) split_tag(names[tags[i]], &t, &type);
        if (open >= 0 && chunk_ends(pt, ptype, t, type)) {
            out[k++] = (chunk){open, i - 1, ptype};
            open = -1;
        }
        if (i < n && chunk_starts(pt, ptype, t, type)) open = i;
        pt = t;
        ptype = type;
    }
    return k;
}

void cz_ft_entity_scores(const int *gold, const int *pred, const int *sentence_len, int n_sentences,
                         char (*names)[32], cz_ft_scores *s) {
    memset(s, 0, sizeof *s);
    long n_gold = 0, n_pred = 0, correct = 0, off = 0;
    int cap = 0;
    for (int i = 0; i < n_sentences; i++)
        if (sentence_len[i] > cap) cap = sentence_len[i];
    chunk *g = malloc((size_t)(cap + 1) * sizeof *g), *p = malloc((size_t)(cap + 1) * sizeof *p);
    for (int i = 0; i < n_sentences && g && p; i++) {
        int L = sentence_len[i];
        int ng = chunks_of(gold + off, L, names, g), np = chunks_of(pred + off, L, names, p);
        for (int a = 0; a < ng; a++)
            for (int b = 0; b < np; b++)
                if (g[a].begin == p[b].begin && g[a].end == p[b].end &&
                    !strcmp(g[a].type, p[b].type))
                    correct++;
        n_gold += ng;
        n_pred += np;
        off += L;
    }
    s->n = n_sentences;
    free(g);
    free(p);
    s->precision = n_pred ? 100.0 * (double)correct / (double)n_pred : 0.0;
    s->recall = n_gold ? 100.0 * (double)correct / (double)n_gold : 0.0;
    s->entity_f1 = s->precision + s->recall > 0
                       ? 2 * s->precision * s->recall / (s->precision + s->recall)
                       : 0.0;
}

/* ---- SQuAD predictions ---- */

/* The predicted pieces' text (WordPiece: "##" joins) projected onto the
 * original words: both with spaces removed and ASCII lower-cased, the
 * pieces found inside the words, the characters in between kept (BERT's
 * get_final_text). Falls back to the whole words. */
static char *final_text(const char *orig, size_t olen, const char *pieces) {
    char *o_ns = malloc(olen + 1), *p_ns = malloc(strlen(pieces) + 1);
    size_t *map = malloc((olen + 1) * sizeof *map);
    char *out = NULL;
    if (o_ns && p_ns && map) {
        size_t k = 0;
        for (size_t i = 0; i < olen; i++)
            if (!isspace((unsigned char)orig[i])) {
                map[k] = i;
                o_ns[k++] = (char)tolower((unsigned char)orig[i]);
            }
        o_ns[k] = 0;
        size_t q = 0;
        for (const char *s = pieces; *s; s++)
            if (!isspace((unsigned char)*s)) p_ns[q++] = (char)tolower((unsigned char)*s);
        p_ns[q] = 0;
        const char *hit = q ? strstr(o_ns, p_ns) : NULL;
        if (hit) {
            size_t a = map[hit - o_ns], b = map[hit - o_ns + q - 1] + 1;
            out = strndup(orig + a, b - a);
        }
    }
    if (!out) out = strndup(orig, olen);
    free(o_ns);
    free(p_ns);
    free(map);
    return out;
}

typedef struct cand {
    float logit;
    int t;
} cand;

static int cand_desc(const void *a, const void *b) {
    float x = ((const cand *)a)->logit, y = ((const cand *)b)->logit;
    return x < y ? 1 : x > y ? -1 : ((const cand *)a)->t - ((const cand *)b)->t;
}

char *cz_ft_squad_answer(const cz_ft_features *f, const cz_ft_dataset *d,
                         const struct cz_tokenizer *tok, int example, const float *logits,
                         int first_feature, int n_features, int max_answer, int n_best) {
    const cz_ft_example *x = &d->ex[example];
    int T = f->T;
    double best = -INFINITY;
    int bf = -1, bs = -1, be = -1;
    cand *cs = malloc((size_t)T * sizeof *cs), *ce = malloc((size_t)T * sizeof *ce);
    if (!cs || !ce) {
        free(cs);
        free(ce);
        return strdup("");
    }
    if (n_best > T) n_best = T;
    for (int k = 0; k < n_features; k++) {
        int row = first_feature + k;
        const float *z = logits + (size_t)k * T * 2;
        const int32_t *wo = f->word_of + (size_t)row * T;
        const uint8_t *mc = f->max_context + (size_t)row * T;
        for (int t = 0; t < T; t++) {
            cs[t] = (cand){z[2 * t], t};
            ce[t] = (cand){z[2 * t + 1], t};
        }
        qsort(cs, (size_t)T, sizeof *cs, cand_desc);
        qsort(ce, (size_t)T, sizeof *ce, cand_desc);
        for (int i = 0; i < n_best; i++)
            for (int j = 0; j < n_best; j++) {
                int s = cs[i].t, e = ce[j].t;
                if (wo[s] < 0 || wo[e] < 0 || !mc[s] || e < s || e - s + 1 > max_answer) continue;
                double score = (double)cs[i].logit + (double)ce[j].logit;
                if (score > best) {
                    best = score;
                    bf = row;
                    bs = s;
                    be = e;
                }
            }
    }
    free(cs);
    free(ce);
    if (bf < 0) return strdup("");
    const int32_t *wo = f->word_of + (size_t)bf * T;
    const int32_t *ids = f->tokens + (size_t)bf * T;
    size_t cap = 16;
    for (int t = bs; t <= be; t++) cap += strlen(cz_tokenizer_token(tok, (uint32_t)ids[t])) + 1;
    char *pieces = malloc(cap);
    if (!pieces) return strdup("");
    size_t n = 0;
    for (int t = bs; t <= be; t++) {
        const char *p = cz_tokenizer_token(tok, (uint32_t)ids[t]);
        if (p[0] == '#' && p[1] == '#')
            p += 2;
        else if (n)
            pieces[n++] = ' ';
        size_t l = strlen(p);
        memcpy(pieces + n, p, l);
        n += l;
    }
    pieces[n] = 0;
    int a = x->word_start[wo[bs]], b = x->word_end[wo[be]];
    char *out = final_text(x->context + a, (size_t)(b - a), pieces);
    free(pieces);
    return out;
}
