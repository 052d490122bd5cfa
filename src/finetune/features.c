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

static int featurize_span(cz_ft_features *f, const cz_ft_dataset *d, const struct cz_tokenizer *tok,
                          const cz_ft_feature_config *c, cz_error *err) {
    int cap = 0, rc = 0;
    cz_buf norm = {0};
    cz_ids q = {0}, doc = {0}, ans = {0};
    int *piece_word = NULL, *word_piece = NULL, *ws = NULL, *wl = NULL;
    size_t pw_cap = 0, wp_cap = 0, w_cap = 0;
    for (int e = 0; e < d->n && rc == 0; e++) {
        const cz_ft_example *x = &d->ex[e];
        q.n = doc.n = 0;
        if (encode(tok, x->question, &norm, &q, err)) {
            rc = cz_fail_prefix(err, "%s: question %s", d->path, x->id);
            break;
        }
        if (q.n > (size_t)c->max_query) {
            q.n = (size_t)c->max_query;
            f->truncated++; /* SPAN: questions cut to max_query */
        }
        /* the context's pieces, word by word */
        if ((size_t)x->n_words + 1 > wp_cap) {
            wp_cap = (size_t)x->n_words + 1;
            free(word_piece);
            word_piece = malloc(wp_cap * sizeof *word_piece);
            if (!word_piece) {
                rc = cz_fail(err, "out of memory");
                break;
            }
        }
        for (int w = 0; w < x->n_words && rc == 0; w++) {
            word_piece[w] = (int)doc.n;
            char word[1024];
            int wlen = x->word_end[w] - x->word_start[w];
            if (wlen > (int)sizeof word - 1) wlen = (int)sizeof word - 1;
            memcpy(word, x->context + x->word_start[w], (size_t)wlen);
            word[wlen] = 0;
            size_t before = doc.n;
            if (encode(tok, word, &norm, &doc, err)) {
                rc = cz_fail_prefix(err, "%s: question %s: context word %d", d->path, x->id, w);
                break;
            }
            if (doc.n > pw_cap) {
                pw_cap = 2 * doc.n + 64;
                int *np = realloc(piece_word, pw_cap * sizeof *np);
                if (!np) {
                    rc = cz_fail(err, "out of memory");
                    break;
                }
                piece_word = np;
            }
            for (size_t i = before; i < doc.n; i++) piece_word[i] = w;
        }
        if (rc) break;
        word_piece[x->n_words] = (int)doc.n;
        /* the (first) answer in pieces, tightened to the answer's own pieces */
        int a_start = -1, a_end = -1;
        if (x->n_answers > 0) {
            int b0 = x->answers[0].start, b1 = b0 + (int)strlen(x->answers[0].text);
            int w0 = -1, w1 = -1;
            for (int w = 0; w < x->n_words; w++) {
                if (w0 < 0 && x->word_end[w] > b0) w0 = w;
                if (x->word_start[w] < b1) w1 = w;
            }
            if (w0 >= 0 && w1 >= w0) {
                a_start = word_piece[w0];
                a_end = word_piece[w1 + 1] - 1;
                ans.n = 0;
                if (encode(tok, x->answers[0].text, &norm, &ans, err) == 0 && ans.n > 0)
                    for (int s = a_start; s <= a_end; s++) {
                        int done = 0;
                        for (int t = a_end; t >= s; t--)
                            if ((size_t)(t - s + 1) == ans.n &&
                                !memcmp(doc.ids + s, ans.ids, ans.n * sizeof *ans.ids)) {
                                a_start = s;
                                a_end = t;
                                done = 1;
                                break;
                            }
                        if (done) break;
                    }
                if (a_end < a_start) a_start = a_end = -1;
            }
        }
        /* windows */
        int room = f->T - (int)q.n - 3;
        if (room < 1) {
            rc = cz_fail(err,
                         "max_seq %d leaves no room for the context after a %zu-piece "
                         "question: raise max_seq or lower max_query",
                         f->T, q.n);
            break;
        }
        int nwin = 0;
        for (int s0 = 0;;) {
            if ((size_t)nwin + 1 > w_cap) {
                w_cap = w_cap ? 2 * w_cap : 16;
                int *a = realloc(ws, w_cap * sizeof *a);
                if (a) ws = a;
                int *b = a ? realloc(wl, w_cap * sizeof *b) : NULL;
                if (b) wl = b;
                if (!a || !b) {
                    rc = cz_fail(err, "out of memory");
                    break;
                }
            }
            int len = (int)doc.n - s0 < room ? (int)doc.n - s0 : room;
            ws[nwin] = s0;
            wl[nwin++] = len;
            if (s0 + len >= (int)doc.n) break;
            s0 += len < c->doc_stride ? len : c->doc_stride;
        }
        if (rc) break;
        int in_window = 0;
        for (int k = 0; k < nwin; k++)
            in_window |= a_start >= ws[k] && a_end < ws[k] + wl[k] && a_start >= 0;
        if (x->n_answers > 0 && !in_window) f->answers_lost++;
        for (int k = 0; k < nwin && rc == 0; k++) {
            int row = new_row(f, &cap, e, c, err);
            if (row < 0) {
                rc = -1;
                break;
            }
            int len = 0;
            size_t o = (size_t)row * f->T;
            put(f, row, &len, c->cls, 0);
            for (size_t i = 0; i < q.n; i++) put(f, row, &len, (int32_t)q.ids[i], 0);
            put(f, row, &len, c->sep, 0);
            int off = len;
            for (int i = 0; i < wl[k]; i++) {
                int pos = ws[k] + i;
                f->word_of[o + (size_t)len] = piece_word[pos];
                f->max_context[o + (size_t)len] = best_window(ws, wl, nwin, pos) == k;
                put(f, row, &len, (int32_t)doc.ids[pos], 1);
            }
            put(f, row, &len, c->sep, 1);
            if (a_start >= ws[k] && a_end < ws[k] + wl[k] && a_start >= 0) {
                f->start[row] = a_start - ws[k] + off;
                f->end[row] = a_end - ws[k] + off;
            } /* else [CLS] (0, 0): the answer is not in this window */
        }
    }
    cz_buf_free(&norm);
    cz_ids_free(&q);
    cz_ids_free(&doc);
    cz_ids_free(&ans);
    free(piece_word);
    free(word_piece);
    free(ws);
    free(wl);
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
