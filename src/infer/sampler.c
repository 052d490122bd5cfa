/* infer: the next token from a row of logits (infer.h, "the sampler"). */
#include <math.h>
#include <stdlib.h>

#include "cloze/infer.h"

int cz_sampler_init(cz_sampler *s, int v, cz_error *err) {
    s->v = v;
    s->top = cz_alloc(2 * (size_t)v * sizeof *s->top, err);
    return s->top ? 0 : -1;
}

void cz_sampler_free(cz_sampler *s) {
    cz_free(s->top);
    s->top = NULL;
}

/* More probable first, the lower id first among equals: a total order, so
 * the kept set does not depend on the sort's algorithm. */
static int before(const cz_prob_id *a, const cz_prob_id *b) {
    return a->p > b->p || (a->p == b->p && a->id < b->id);
}
static int by_prob(const void *a, const void *b) {
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* The k first of the v entries of all (in the order above) into top[0..k),
 * sorted: a heap of the best k seen, its root the worst of them (v log k),
 * then sorted. */
static void top_k_sorted(const cz_prob_id *all, int v, int k, cz_prob_id *top) {
    int n = 0;
    for (int t = 0; t < v; t++) {
        cz_prob_id x = all[t];
        if (n == k && !before(&x, &top[0])) continue;
        int i;
        if (n < k) { /* sift up */
            i = n++;
            while (i > 0 && before(&top[(i - 1) / 2], &x)) {
                top[i] = top[(i - 1) / 2];
                i = (i - 1) / 2;
            }
        } else { /* replace the root, sift down */
            i = 0;
            for (;;) {
                int c = 2 * i + 1;
                if (c >= n) break;
                if (c + 1 < n && before(&top[c], &top[c + 1])) c++;
                if (!before(&x, &top[c])) break;
                top[i] = top[c];
                i = c;
            }
        }
        top[i] = x;
    }
    qsort(top, (size_t)n, sizeof *top, by_prob);
}

int32_t cz_sample_token(cz_sampler *s, const float *logits, const cz_sample_params *p, double u,
                        int *kept) {
    int v = s->v;
    if (p->temperature <= 0.0f || p->top_k == 1) {
        int32_t best = 0;
        for (int32_t t = 1; t < v; t++)
            if (logits[t] > logits[best]) best = t;
        if (kept) *kept = 1;
        return best;
    }
    /* p_t = exp((z_t - max z) / T) / sum: the shift keeps exp in range */
    float zmax = logits[0];
    for (int t = 1; t < v; t++) zmax = logits[t] > zmax ? logits[t] : zmax;
    cz_prob_id *top = s->top;
    double sum = 0;
    for (int t = 0; t < v; t++) {
        top[t].p = expf((logits[t] - zmax) / p->temperature);
        top[t].id = t;
        sum += top[t].p;
    }
    for (int t = 0; t < v; t++) top[t].p = (float)(top[t].p / sum);
    int n = v, nucleus = p->top_p > 0.0f && p->top_p < 1.0f;
    if (p->top_k > 0 && p->top_k < v) {
        /* the heap in the second half, then moved to the front */
        n = p->top_k;
        top_k_sorted(top, v, n, top + v);
        for (int i = 0; i < n; i++) top[i] = top[v + i];
    } else if (nucleus) {
        qsort(top, (size_t)v, sizeof *top, by_prob);
    }
    if (nucleus) {
        /* the smallest prefix whose mass reaches top_p of what top-k left
         * (HF's TopPLogitsWarper runs after TopKLogitsWarper, on the
         * renormalised distribution) */
        double mass = 0, c = 0;
        for (int i = 0; i < n; i++) mass += top[i].p;
        int keep = 0;
        while (keep < n) {
            c += top[keep++].p;
            if (c >= p->top_p * mass) break;
        }
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += top[i].p;
    double target = u * total, c = 0;
    int32_t pick = top[n - 1].id; /* u * total rounded past the last sum */
    for (int i = 0; i < n; i++) {
        c += top[i].p;
        if (target < c) {
            pick = top[i].id;
            break;
        }
    }
    if (kept) *kept = n;
    return pick;
}
