/* Examples into model inputs (include/cloze/finetune.h, "features").
 * Text goes through cloze-prep's normalisation (docs/formats.md: BERT mode
 * for WordPiece, bytes as they are for BPE), as the pre-training corpus
 * did, then the model's tokenizer.
 *
 * Classification (BERT Sec. 4.1 / Fig. 4a-b): [CLS] A [SEP] B [SEP],
 * segments 0 then 1; when the pair is too long, a token is dropped from the
 * end of the longer text until it fits (run_classifier's
 * _truncate_seq_pair). GPT (GPT-1 Sec. 3.3, Fig. 1): <s> A $ B <e> with
 * three added tokens, the classifier reading the state at <e>, and the
 * auxiliary LM loss on next tokens; for similarity tasks also <s> B $ A
 * <e> (Sec. 3.3: "no inherent ordering"), the two rows of an example next
 * to each other. Multiple choice (GPT-1 Sec. 3.3; BERT Sec. 4.4): one such
 * pair row per ending, (context, ending k), K rows per example.
 * Span (Sec. 4.2; run_squad.py): the question cut to max_query pieces;
 * windows of the context's pieces, each at most max_seq - |q| - 3 long,
 * starting doc_stride pieces apart; [CLS] q [SEP] window [SEP]; the answer
 * span in pieces, tightened to the pieces of the answer text
 * (_improve_answer_span), or [CLS] when a training window misses it.
 * Tag (Sec. 4.3, Sec. 5.3): [CLS] pieces [SEP], each word's tag on its first
 * piece. */
#include <stdlib.h>
#include <string.h>

#include "cloze/finetune.h"
#include "cloze/text.h"

void cz_ft_features_free(cz_ft_features *f) {
    free(f->tokens);
    free(f->segments);
    free(f->mask);
    free(f->label);
    free(f->cls_index);
    free(f->targets);
    free(f->start);
    free(f->end);
    free(f->token_label);
    free(f->example);
    free(f->word_of);
    free(f->max_context);
    free(f->first_piece);
    free(f->word_base);
    memset(f, 0, sizeof *f);
}

/* Grows every per-feature array to hold `need` features. */
static int reserve(cz_ft_features *f, int *cap, int need, cz_error *err) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    size_t T = (size_t)f->T;
#define GROW(ptr, per)                                                                             \
    do {                                                                                           \
        void *p_ = realloc((ptr), (size_t)nc * (per) * sizeof *(ptr));                             \
        if (!p_) return cz_fail(err, "out of memory for %d features", nc);                         \
        (ptr) = p_;                                                                                \
    } while (0)
    GROW(f->tokens, T);
    GROW(f->segments, T);
    GROW(f->mask, T);
    GROW(f->label, 1);
    GROW(f->cls_index, 1);
    GROW(f->targets, T);
    GROW(f->start, 1);
    GROW(f->end, 1);
    GROW(f->token_label, T);
    GROW(f->example, 1);
    GROW(f->word_of, T);
    GROW(f->max_context, T);
#undef GROW
    *cap = nc;
    return 0;
}

/* Text -> ids (appended), through cloze-prep's BERT-mode normalisation
 * when the tokenizer is WordPiece; GPT's byte-level BPE gets the bytes as
 * they are, as cloze-prep's GPT mode gives them to it (docs/formats.md). */
static int encode(const struct cz_tokenizer *tok, const char *text, cz_buf *norm, cz_ids *out,
                  cz_error *err) {
    if (cz_tokenizer_kind_of(tok) == CZ_TOK_BPE)
        return cz_tokenizer_encode(tok, text, strlen(text), out, err);
    norm->len = 0;
    cz_norm_stats ns = {0, 0};
    if (cz_normalize(text, strlen(text), 0, norm, &ns, err)) return -1;
    return cz_tokenizer_encode(tok, norm->data ? norm->data : "", norm->len, out, err);
}

/* A fresh feature row: padding everywhere, no labels. */
static int new_row(cz_ft_features *f, int *cap, int example, const cz_ft_feature_config *c,
                   cz_error *err) {
    if (reserve(f, cap, f->n + 1, err)) return -1;
    int i = f->n++;
    size_t T = (size_t)f->T, o = (size_t)i * T;
    for (size_t t = 0; t < T; t++) {
        f->tokens[o + t] = c->pad;
        f->segments[o + t] = 0;
        f->mask[o + t] = 0;
        f->targets[o + t] = -1;
        f->token_label[o + t] = -1;
        f->word_of[o + t] = -1;
        f->max_context[o + t] = 0;
    }
    f->label[i] = f->cls_index[i] = f->start[i] = f->end[i] = 0;
    f->example[i] = example;
    return i;
}

static void put(cz_ft_features *f, int row, int *len, int32_t id, int seg) {
    size_t o = (size_t)row * f->T + (size_t)*len;
    f->tokens[o] = id;
    f->segments[o] = seg;
    f->mask[o] = 1;
    (*len)++;
}

/* ---- classification, similarity, multiple choice ---- */

/* One row of the pair layout: BERT [CLS] a [SEP] (b [SEP]), segments 0 / 1;
 * GPT <s> a ($ b) <e> with the extract position and the next-token targets
 * of the auxiliary LM loss. na, nb: the pieces kept (pair_room). */
static int put_pair(cz_ft_features *f, int *cap, int e, const cz_ft_feature_config *c,
                    const cz_ids *a, size_t na, const cz_ids *b, size_t nb, int pair, int label,
                    cz_error *err) {
    int row = new_row(f, cap, e, c, err);
    if (row < 0) return -1;
    int len = 0;
    put(f, row, &len, c->gpt ? c->start : c->cls, 0);
    for (size_t i = 0; i < na; i++) put(f, row, &len, (int32_t)a->ids[i], 0);
    if (pair) {
        put(f, row, &len, c->gpt ? c->delim : c->sep, 0);
        for (size_t i = 0; i < nb; i++) put(f, row, &len, (int32_t)b->ids[i], c->gpt ? 0 : 1);
    }
    put(f, row, &len, c->gpt ? c->extract : c->sep, pair && !c->gpt ? 1 : 0);
    f->label[row] = label;
    if (c->gpt) {
        f->cls_index[row] = len - 1;
        size_t o = (size_t)row * f->T;
        for (int t = 0; t + 1 < len; t++) f->targets[o + t] = f->tokens[o + t + 1];
    }
    return 0;
}

/* The pieces of a and b that fit beside the special tokens: the longer
 * text loses its last piece until the pair fits (_truncate_seq_pair).
 * sym: on a tie both lose one, so that the pieces kept do not depend on
 * which text comes first (similarity: no inherent order). Returns 1 when
 * something was cut. */
static int pair_room(const cz_ft_features *f, int pair, int sym, size_t *na, size_t *nb) {
    int room = f->T - (pair ? 3 : 2);
    if (*na + *nb <= (size_t)room) return 0;
    while (*na + *nb > (size_t)room) {
        if (*na > *nb) {
            (*na)--;
        } else if (*nb > *na || !sym) {
            (*nb)--;
        } else {
            (*na)--;
            (*nb)--;
        }
    }
    return 1;
}

static int featurize_classify(cz_ft_features *f, const cz_ft_dataset *d,
                              const struct cz_tokenizer *tok, const cz_ft_feature_config *c,
                              cz_error *err) {
    int cap = 0;
    cz_buf norm = {0};
    cz_ids a = {0}, b = {0};
    int rc = 0, choice = d->kind == CZ_FT_CHOICE;
    f->group = choice ? (d->n ? d->ex[0].n_words : 1) : c->similarity ? 2 : 1;
    for (int e = 0; e < d->n && rc == 0; e++) {
        const cz_ft_example *x = &d->ex[e];
        a.n = 0;
        if (encode(tok, x->a, &norm, &a, err)) {
            rc = cz_fail_prefix(err, "%s: example %d", d->path, e + 1);
            break;
        }
        if (choice) { /* one sequence per ending: (context, ending k) */
            if (x->n_words != f->group) {
                rc = cz_fail(err, "%s: example %d has %d endings, not %d", d->path, e + 1,
                             x->n_words, f->group);
                break;
            }
            int cut = 0;
            for (int k = 0; k < x->n_words && rc == 0; k++) {
                b.n = 0;
                if (encode(tok, x->words[k], &norm, &b, err)) {
                    rc = cz_fail_prefix(err, "%s: example %d, ending %d", d->path, e + 1, k + 1);
                    break;
                }
                size_t na = a.n, nb = b.n;
                cut |= pair_room(f, 1, 0, &na, &nb);
                rc = put_pair(f, &cap, e, c, &a, na, &b, nb, 1, x->label, err);
            }
            f->truncated += cut;
            continue;
        }
        b.n = 0;
        if (x->b && encode(tok, x->b, &norm, &b, err)) {
            rc = cz_fail_prefix(err, "%s: example %d", d->path, e + 1);
            break;
        }
        if (c->similarity && !x->b) {
            rc = cz_fail(err, "%s: example %d: similarity needs text pairs", d->path, e + 1);
            break;
        }
        size_t na = a.n, nb = b.n;
        f->truncated += pair_room(f, x->b != NULL, c->similarity, &na, &nb);
        rc = put_pair(f, &cap, e, c, &a, na, &b, nb, x->b != NULL, x->label, err);
        /* GPT-1 Sec. 3.3: no inherent order, so the other ordering too */
        if (rc == 0 && c->similarity)
            rc = put_pair(f, &cap, e, c, &b, nb, &a, na, 1, x->label, err);
    }
    cz_buf_free(&norm);
    cz_ids_free(&a);
    cz_ids_free(&b);
    return rc;
}

/* ---- tagging ---- */

static int featurize_tag(cz_ft_features *f, const cz_ft_dataset *d, const struct cz_tokenizer *tok,
                         const cz_ft_feature_config *c, cz_error *err) {
    int cap = 0, total = 0;
    for (int e = 0; e < d->n; e++) total += d->ex[e].n_words;
    f->first_piece = malloc((size_t)(total + 1) * sizeof *f->first_piece);
    f->word_base = malloc((size_t)(d->n + 1) * sizeof *f->word_base);
    if (!f->first_piece || !f->word_base) return cz_fail(err, "out of memory");
    cz_buf norm = {0};
    cz_ids p = {0};
    int rc = 0, base = 0;
    for (int e = 0; e < d->n && rc == 0; e++) {
        const cz_ft_example *x = &d->ex[e];
        f->word_base[e] = base;
        int row = new_row(f, &cap, e, c, err);
        if (row < 0) {
            rc = -1;
            break;
        }
        int len = 0, cut = 0;
        put(f, row, &len, c->cls, 0);
        for (int w = 0; w < x->n_words; w++) {
            p.n = 0;
            if (encode(tok, x->words[w], &norm, &p, err)) {
                rc = cz_fail_prefix(err, "%s: sentence %d, word %d", d->path, e + 1, w + 1);
                break;
            }
            f->first_piece[base + w] = -1;
            if (cut) f->words_lost++;
            if (cut || !p.n) continue; /* cut off, or nothing left after normalisation: O */
            /* The sequence is cut at max_seq pieces as a tokenizer's truncation
             * cuts it (transformers' truncation=True): a word that does not fit
             * keeps the pieces that do, and every later word is cut, never
             * skipped over for a shorter one. Room is kept for [SEP]. */
            int room = f->T - 1 - len;
            if ((int)p.n > room) cut = 1;
            if (room <= 0) {
                f->words_lost++;
                continue;
            }
            f->first_piece[base + w] = len;
            f->token_label[(size_t)row * f->T + (size_t)len] = x->tags[w];
            for (size_t i = 0; i < p.n && (int)i < room; i++)
                put(f, row, &len, (int32_t)p.ids[i], 0);
        }
        put(f, row, &len, c->sep, 0);
        f->truncated += cut;
        base += x->n_words;
    }
    cz_buf_free(&norm);
    cz_ids_free(&p);
    return rc;
}

/* ---- span question answering ---- */

/* BERT's _check_is_max_context: of the windows holding piece `pos`, the one
 * where it has the most context, min(left, right) + 0.01 * window length. */
static int best_window(const int *ws, const int *wl, int n, int pos) {
    double best = -1;
    int k = -1;
    for (int i = 0; i < n; i++) {
        if (pos < ws[i] || pos >= ws[i] + wl[i]) continue;
        int left = pos - ws[i], right = ws[i] + wl[i] - 1 - pos;
        double score = (left < right ? left : right) + 0.01 * wl[i];
        if (score > best) {
            best = score;
            k = i;
        }
    }
    return k;
}

/* featurize_span's working buffers, reused from example to example: the
 * question's and context's pieces, each piece's word and each word's
 * first piece, and the windows (start piece, length) over the context. */
typedef struct span_work {
    cz_buf norm;
    cz_ids q, doc, ans;
    int *piece_word, *word_piece, *ws, *wl;
    size_t pw_cap, wp_cap, w_cap;
    int nwin;
} span_work;

static void span_work_free(span_work *s) {
    cz_buf_free(&s->norm);
    cz_ids_free(&s->q);
    cz_ids_free(&s->doc);
    cz_ids_free(&s->ans);
    free(s->piece_word);
    free(s->word_piece);
    free(s->ws);
    free(s->wl);
}

/* The context's pieces, word by word, into s->doc, with s->piece_word[i]
 * (the word of piece i) and s->word_piece[w] (word w's first piece; one
 * past the end at n_words). */
static int encode_context(span_work *s, const struct cz_tokenizer *tok, const cz_ft_dataset *d,
                          const cz_ft_example *x, cz_error *err) {
    if ((size_t)x->n_words + 1 > s->wp_cap) {
        s->wp_cap = (size_t)x->n_words + 1;
        free(s->word_piece);
        s->word_piece = malloc(s->wp_cap * sizeof *s->word_piece);
        if (!s->word_piece) return cz_fail(err, "out of memory");
    }
    for (int w = 0; w < x->n_words; w++) {
        s->word_piece[w] = (int)s->doc.n;
        char word[1024];
        int wlen = x->word_end[w] - x->word_start[w];
        if (wlen > (int)sizeof word - 1) wlen = (int)sizeof word - 1;
        memcpy(word, x->context + x->word_start[w], (size_t)wlen);
        word[wlen] = 0;
        size_t before = s->doc.n;
        if (encode(tok, word, &s->norm, &s->doc, err))
            return cz_fail_prefix(err, "%s: question %s: context word %d", d->path, x->id, w);
        if (s->doc.n > s->pw_cap) {
            s->pw_cap = 2 * s->doc.n + 64;
            int *np = realloc(s->piece_word, s->pw_cap * sizeof *np);
            if (!np) return cz_fail(err, "out of memory");
            s->piece_word = np;
        }
        for (size_t i = before; i < s->doc.n; i++) s->piece_word[i] = w;
    }
    s->word_piece[x->n_words] = (int)s->doc.n;
    return 0;
}

/* The (first) answer's pieces [*a_start, *a_end] in the context: the
 * pieces of the words it overlaps, tightened to the answer's own pieces
 * where they occur there; -1, -1 when there is no answer. */
static void answer_pieces(span_work *s, const struct cz_tokenizer *tok, const cz_ft_example *x,
                          int *a_start, int *a_end, cz_error *err) {
    *a_start = *a_end = -1;
    if (x->n_answers <= 0) return;
    int b0 = x->answers[0].start, b1 = b0 + (int)strlen(x->answers[0].text);
    int w0 = -1, w1 = -1;
    for (int w = 0; w < x->n_words; w++) {
        if (w0 < 0 && x->word_end[w] > b0) w0 = w;
        if (x->word_start[w] < b1) w1 = w;
    }
    if (w0 < 0 || w1 < w0) return;
    *a_start = s->word_piece[w0];
    *a_end = s->word_piece[w1 + 1] - 1;
    s->ans.n = 0;
    /* (a failed encoding keeps the words' pieces; err is only scratch here) */
    if (encode(tok, x->answers[0].text, &s->norm, &s->ans, err) == 0 && s->ans.n > 0)
        for (int a = *a_start; a <= *a_end; a++) {
            int done = 0;
            for (int t = *a_end; t >= a; t--)
                if ((size_t)(t - a + 1) == s->ans.n &&
                    !memcmp(s->doc.ids + a, s->ans.ids, s->ans.n * sizeof *s->ans.ids)) {
                    *a_start = a;
                    *a_end = t;
                    done = 1;
                    break;
                }
            if (done) break;
        }
    if (*a_end < *a_start) *a_start = *a_end = -1;
}

/* Windows of at most `room` context pieces, each starting doc_stride
 * pieces after the last (or where it ended), until the context's end:
 * s->ws, s->wl, s->nwin. */
static int plan_windows(span_work *s, int room, int doc_stride, cz_error *err) {
    s->nwin = 0;
    for (int s0 = 0;;) {
        if ((size_t)s->nwin + 1 > s->w_cap) {
            s->w_cap = s->w_cap ? 2 * s->w_cap : 16;
            int *a = realloc(s->ws, s->w_cap * sizeof *a);
            if (a) s->ws = a;
            int *b = a ? realloc(s->wl, s->w_cap * sizeof *b) : NULL;
            if (b) s->wl = b;
            if (!a || !b) return cz_fail(err, "out of memory");
        }
        int len = (int)s->doc.n - s0 < room ? (int)s->doc.n - s0 : room;
        s->ws[s->nwin] = s0;
        s->wl[s->nwin++] = len;
        if (s0 + len >= (int)s->doc.n) return 0;
        s0 += len < doc_stride ? len : doc_stride;
    }
}

/* One row per window of example e: [CLS] question [SEP] window [SEP],
 * with the answer's positions where the window holds it. */
static int put_windows(cz_ft_features *f, int *cap, int e, const cz_ft_feature_config *c,
                       const span_work *s, int a_start, int a_end, cz_error *err) {
    const int *ws = s->ws, *wl = s->wl;
    for (int k = 0; k < s->nwin; k++) {
        int row = new_row(f, cap, e, c, err);
        if (row < 0) return -1;
        int len = 0;
        size_t o = (size_t)row * f->T;
        put(f, row, &len, c->cls, 0);
        for (size_t i = 0; i < s->q.n; i++) put(f, row, &len, (int32_t)s->q.ids[i], 0);
        put(f, row, &len, c->sep, 0);
        int off = len;
        for (int i = 0; i < wl[k]; i++) {
            int pos = ws[k] + i;
            f->word_of[o + (size_t)len] = s->piece_word[pos];
            f->max_context[o + (size_t)len] = best_window(ws, wl, s->nwin, pos) == k;
            put(f, row, &len, (int32_t)s->doc.ids[pos], 1);
        }
        put(f, row, &len, c->sep, 1);
        if (a_start >= ws[k] && a_end < ws[k] + wl[k] && a_start >= 0) {
            f->start[row] = a_start - ws[k] + off;
            f->end[row] = a_end - ws[k] + off;
        } /* else [CLS] (0, 0): the answer is not in this window */
    }
    return 0;
}

/* Example e: its question (cut to max_query), its context in windows, and
 * one row per window. */
static int featurize_span_example(cz_ft_features *f, int *cap, const cz_ft_dataset *d, int e,
                                  const struct cz_tokenizer *tok, const cz_ft_feature_config *c,
                                  span_work *s, cz_error *err) {
    const cz_ft_example *x = &d->ex[e];
    s->q.n = s->doc.n = 0;
    if (encode(tok, x->question, &s->norm, &s->q, err))
        return cz_fail_prefix(err, "%s: question %s", d->path, x->id);
    if (s->q.n > (size_t)c->max_query) {
        s->q.n = (size_t)c->max_query;
        f->truncated++; /* SPAN: questions cut to max_query */
    }
    if (encode_context(s, tok, d, x, err)) return -1;
    int a_start, a_end;
    answer_pieces(s, tok, x, &a_start, &a_end, err);
    int room = f->T - (int)s->q.n - 3;
    if (room < 1)
        return cz_fail(err,
                       "max_seq %d leaves no room for the context after a %zu-piece "
                       "question: raise max_seq or lower max_query",
                       f->T, s->q.n);
    if (plan_windows(s, room, c->doc_stride, err)) return -1;
    int in_window = 0;
    for (int k = 0; k < s->nwin; k++)
        in_window |= a_start >= s->ws[k] && a_end < s->ws[k] + s->wl[k] && a_start >= 0;
    if (x->n_answers > 0 && !in_window) f->answers_lost++;
    return put_windows(f, cap, e, c, s, a_start, a_end, err);
}

static int featurize_span(cz_ft_features *f, const cz_ft_dataset *d, const struct cz_tokenizer *tok,
                          const cz_ft_feature_config *c, cz_error *err) {
    int cap = 0, rc = 0;
    span_work s;
    memset(&s, 0, sizeof s);
    for (int e = 0; e < d->n && rc == 0; e++)
        rc = featurize_span_example(f, &cap, d, e, tok, c, &s, err);
    span_work_free(&s);
    return rc;
}

int cz_ft_featurize(cz_ft_features *f, const cz_ft_dataset *d, const struct cz_tokenizer *tok,
                    const cz_ft_feature_config *c, cz_error *err) {
    memset(f, 0, sizeof *f);
    f->T = c->max_seq;
    if (c->max_seq < 4) return cz_fail(err, "max_seq %d: too short", c->max_seq);
    f->group = 1;
    if (c->gpt && d->kind != CZ_FT_CLASSIFY && d->kind != CZ_FT_CHOICE)
        return cz_fail(err, "GPT fine-tuning classifies (GPT-1 Sec. 3.3); span and tag tasks "
                            "need a BERT model");
    if (c->similarity && (!c->gpt || d->kind != CZ_FT_CLASSIFY))
        return cz_fail(err, "similarity (both orderings, GPT-1 Sec. 3.3) is for GPT models on "
                            "pair classification");
    int rc = d->kind == CZ_FT_CLASSIFY || d->kind == CZ_FT_CHOICE
                 ? featurize_classify(f, d, tok, c, err)
             : d->kind == CZ_FT_TAG ? featurize_tag(f, d, tok, c, err)
                                    : featurize_span(f, d, tok, c, err);
    if (rc) cz_ft_features_free(f);
    return rc;
}

void cz_ft_truncation_text(const cz_ft_features *f, const cz_ft_dataset *d, int max_query,
                           char *buf, size_t cap) {
    if (d->kind == CZ_FT_SPAN) {
        if (!f->truncated && !f->answers_lost) {
            snprintf(buf, cap, "nothing cut");
            return;
        }
        snprintf(buf, cap, "%d of %d questions cut to %d tokens; %d answer(s) in no window whole",
                 f->truncated, d->n, max_query, f->answers_lost);
        return;
    }
    if (!f->truncated) {
        snprintf(buf, cap, "nothing cut");
        return;
    }
    if (d->kind != CZ_FT_TAG) {
        snprintf(buf, cap, "%d of %d examples cut to %d tokens", f->truncated, d->n, f->T);
        return;
    }
    long words = 0;
    for (int e = 0; e < d->n; e++) words += d->ex[e].n_words;
    snprintf(buf, cap, "%d of %d sentences cut to %d tokens: %d of %ld words (%.1f%%) lost",
             f->truncated, d->n, f->T, f->words_lost, words,
             words ? 100.0 * f->words_lost / (double)words : 0.0);
}
