/* Finite differences through the whole model (BERT, GPT-1 and GPT-2's pre-LN layout, the
 * latter also with an untied LM head (model.lm_head), tiny configs,
 * dropout off), the grad-ready hook's ranges, the word embedding's rows
 * handed over apart (rows hook), and the rank-layout
 * independence of dropout: with dropout on, a batch of 2 gives the same
 * gradients as the two sequences run as two batches of 1. */
#include <omp.h>

#include "test_model_fixture.h"

typedef struct hook_log {
    size_t next;
    int calls;
    int ok;
    size_t last_off, last_count;      /* the last range */
    int rows_calls, rows_before_last; /* rows hook: calls, before the last range */
    cz_grad_rows rows;
} hook_log;

static void hook(void *ctx, size_t offset, size_t count) {
    hook_log *h = ctx;
    if (offset != h->next || count == 0) h->ok = 0;
    h->next = offset + count;
    h->last_off = offset;
    h->last_count = count;
    h->calls++;
}

static void rows_hook(void *ctx, const cz_grad_rows *r) {
    hook_log *h = ctx;
    h->rows = *r;
    h->rows_calls++;
}

/* Without a rows hook, ranges come in buffer order from the heads up, and
 * the word embedding (offset 0) last, as the lookup adds to it at the end.
 * With one, ranges are contiguous from 0 and the lookup's rows are handed
 * over once, before the last range: those rows are the batch's distinct
 * tokens in ascending order, and buffer + rows is the plain gradient (up
 * to rounding in those rows: (decoder + lookup) is summed in another order;
 * every other float bit-identical). */
static void rows_handover(cz_model *m, const cz_model_config *c, const char *label) {
    static test_batch tb;
    make_batch(&tb, c, 2, 8, 3, 2, NULL, 5);
    tb.b.train = 1;
    size_t np = cz_model_num_params(m), V = (size_t)cz_model_vocab_rows(c), H = (size_t)c->hidden;
    float *plain = malloc(np * sizeof *plain);
    cz_losses l;
    cz_error err;
    hook_log hl = {0, 0, 1, 0, 0, 0, 0, {0}};
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
    cz_model_set_grad_hook(m, hook, &hl);
    hl.next = V * H; /* the heads' range starts after the word embedding */
    cz_model_backward(m, &tb.b, 1.0f);
    /* contiguous from the heads to the end of the buffer, then [0, V*H) */
    CHECK(!hl.ok && hl.last_off == 0 && hl.last_count == V * H && hl.calls >= c->layers + 2);
    memcpy(plain, cz_model_grads(m), np * sizeof *plain);

    hook_log hr = {0, 0, 1, 0, 0, 0, 0, {0}};
    cz_model_set_grad_rows_hook(m, rows_hook, &hr);
    cz_model_set_grad_hook(m, hook, &hr);
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
    cz_model_backward(m, &tb.b, 1.0f);
    cz_model_set_grad_hook(m, NULL, NULL);
    cz_model_set_grad_rows_hook(m, NULL, NULL);
    CHECK(hr.ok && hr.next == np && hr.rows_calls == 1);
    const cz_grad_rows *r = &hr.rows;
    CHECK(r->offset == 0 && r->width == H && r->height == V);
    /* the rows: exactly the distinct tokens of the batch, ascending */
    char seen[4096] = {0};
    size_t distinct = 0;
    for (int i = 0; i < tb.b.batch * tb.b.seq; i++)
        if (!seen[tb.b.tokens[i]]++) distinct++;
    CHECK(r->n == distinct);
    for (size_t i = 0; i < r->n; i++)
        CHECK(seen[r->rows[i]] && (i == 0 || r->rows[i] > r->rows[i - 1]));
    float *g = cz_model_grads(m);
    char *in_rows = calloc(np, 1);
    double worst = 0;
    for (size_t i = 0; i < r->n; i++)
        for (size_t j = 0; j < H; j++) {
            size_t at = r->offset + (size_t)r->rows[i] * H + j;
            float sum = g[at] + r->vals[i * H + j];
            worst = fmax(worst, fabs(sum - plain[at]) / (fabs(plain[at]) + 1e-6));
            in_rows[at] = 1;
        }
    size_t other_diff = 0;
    for (size_t i = 0; i < np; i++) other_diff += !in_rows[i] && g[i] != plain[i];
    printf("%s: rows hook: %zu rows; buffer + rows vs plain: worst rel %.2e, %zu other floats "
           "differ (must be 0)\n",
           label, r->n, worst, other_diff);
    CHECK(worst < 1e-5 && other_diff == 0);
    free(in_rows);
    free(plain);
}

/* Batch of 2 vs two batches of 1, dropout on. Both sequences have the same
 * number of loss terms (P-1 MLM slots; GPT: same target count since both
 * get the same padding), so the mean over the batch is the average of the
 * per-sequence means and grad(batch) = 0.5 grad(a) + 0.5 grad(b). */
static void layout_independence(cz_model *m, const cz_model_config *c, const char *label) {
    const int T = 8, P = 3;
    size_t np = cz_model_num_params(m);
    uint64_t ids[2] = {7, 9}; /* both odd: both padded identically */
    static test_batch both, one_a, one_b;
    make_batch(&both, c, 2, T, P, 2, ids, 42);
    make_batch(&one_a, c, 1, T, P, 2, ids, 42);
    make_batch(&one_b, c, 1, T, P, 2, ids + 1, 42);
    both.b.train = one_a.b.train = one_b.b.train = 1;
    cz_losses l2, la, lb;
    cz_error err;
    float *g = cz_model_grads(m);
    float *g2 = malloc(np * sizeof *g2), *g0 = malloc(np * sizeof *g0);

    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &both.b, &l2, &err) == 0);
    cz_model_backward(m, &both.b, 1.0f);
    memcpy(g2, g, np * sizeof *g);

    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &one_a.b, &la, &err) == 0);
    cz_model_backward(m, &one_a.b, 0.5f);
    CHECK(cz_model_forward(m, &one_b.b, &lb, &err) == 0);
    cz_model_backward(m, &one_b.b, 0.5f);
    double rel = max_abs_diff(g, g2, np) / max_abs(g2, np);
    double lrel = fabs(0.5 * (la.loss + lb.loss) - l2.loss) / l2.loss;
    printf("%s: dropout on, batch of 2 vs 2 x 1: loss rel diff %.2e, grad rel diff %.2e\n", label,
           lrel, rel);
    CHECK(lrel < 1e-6);
    CHECK(rel < 1e-5);

    /* not vacuous: dropout changes the gradients, and another step changes the mask */
    both.b.train = 0;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &both.b, &l2, &err) == 0);
    cz_model_backward(m, &both.b, 1.0f);
    memcpy(g0, g, np * sizeof *g);
    CHECK(max_abs_diff(g0, g2, np) / max_abs(g2, np) > 1e-2);
    both.b.train = 1;
    both.b.step++;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &both.b, &l2, &err) == 0);
    cz_model_backward(m, &both.b, 1.0f);
    CHECK(max_abs_diff(g, g2, np) / max_abs(g2, np) > 1e-2);
    free(g2);
    free(g0);
}

/* Gradients are bit-identical whatever the thread count (reductions run in a
 * fixed order; dropout masks are keyed by indices, not threads). */
static void thread_independence(cz_model *m, const cz_model_config *c, const char *label) {
    static test_batch tb;
    uint64_t ids[3] = {4, 1, 6};
    make_batch(&tb, c, 2, 8, 3, 2, ids, 8);
    tb.b.train = 1;
    size_t np = cz_model_num_params(m);
    float *g1 = malloc(np * sizeof *g1);
    cz_losses l;
    cz_error err;
    int threads[2] = {1, 3};
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(threads[k]);
        cz_model_zero_grads(m);
        CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
        cz_model_backward(m, &tb.b, 1.0f);
        if (k == 0) memcpy(g1, cz_model_grads(m), np * sizeof *g1);
    }
    CHECK(memcmp(g1, cz_model_grads(m), np * sizeof *g1) == 0);
    printf("%s: gradients bit-identical with 1 and 3 threads\n", label);
    free(g1);
}

/* A batch smaller than planned (T = 6 < 8, B = 1 < 2) gives exactly what a
 * model planned for that size gives: no stride depends on the plan. */
static void smaller_batch(cz_model *m, const cz_model_config *c, const cz_gemm_ctx *gemm,
                          const char *label) {
    cz_model *m2;
    cz_error err;
    CHECK(cz_model_create(&m2, c, 1, 6, 3, gemm, &err) == 0);
    size_t np = cz_model_num_params(m);
    memcpy(cz_model_params(m2), cz_model_params(m), np * sizeof(float));
    static test_batch tb;
    make_batch(&tb, c, 1, 6, 3, 2, NULL, 12);
    tb.b.train = 1;
    cz_losses l1, l2;
    cz_model_zero_grads(m);
    cz_model_zero_grads(m2);
    CHECK(cz_model_forward(m, &tb.b, &l1, &err) == 0);
    cz_model_backward(m, &tb.b, 1.0f);
    CHECK(cz_model_forward(m2, &tb.b, &l2, &err) == 0);
    cz_model_backward(m2, &tb.b, 1.0f);
    CHECK(l1.loss == l2.loss);
    CHECK(memcmp(cz_model_grads(m), cz_model_grads(m2), np * sizeof(float)) == 0);
    /* and a batch larger than planned is refused */
    make_batch(&tb, c, 1, 7, 3, 2, NULL, 12);
    CHECK(cz_model_forward(m2, &tb.b, &l2, &err) == -1);
    printf("%s: smaller batch than planned: identical; larger: \"%s\"\n", label, err.msg);
    cz_model_free(m2);
}

/* The FLOPs formula against a count from the model's own tensor table:
 * 2 T numel for every 2-D weight inside the layers (and BERT's MLM transform
 * and pooler per use), plus the attention products and the decoder. */
static void flops_check(cz_model *m, const cz_model_config *c, int T, int P) {
    double layer_weights = 0;
    for (int k = 0; k < cz_model_num_tensors(m); k++) {
        const cz_tensor_info *t = cz_model_tensor(m, k);
        if (t->ndim == 2 && (strstr(t->name, ".layer.") || strstr(t->name, ".h.")))
            layer_weights += (double)t->numel;
    }
    double H = c->hidden, V = cz_model_vocab_rows(c); /* GPT: the product runs over the padding */
    double want = 2.0 * T * layer_weights + c->layers * 2.0 * (2.0 * T * T * H);
    if (c->arch == CZ_ARCH_BERT)
        want += 2.0 * P * (H * H + V * H) + 2.0 * (H * H + 2 * H);
    else
        want += 2.0 * T * V * H;
    double got = cz_model_forward_flops(c, T, P);
    CHECK(fabs(got - want) <= 1e-9 * want);
}

/* GPT-2's layout (pre_ln): the tensors and their order (the final
 * LayerNorm with the heads, finished first), the residual projections'
 * scaled initialisation, the padding rows of the word embedding (0, never
 * in the softmax: their gradient is exactly 0, the loss does not move when
 * they change). */
static void pre_ln_checks(cz_model *m, const cz_model_config *c, const cz_batch *b) {
    const cz_tensor_info *wte = cz_model_find_tensor(m, "transformer.wte.weight");
    const cz_tensor_info *lnf = cz_model_find_tensor(m, "transformer.ln_f.weight");
    const cz_tensor_info *top = cz_model_find_tensor(m, "transformer.h.1.ln_1.weight");
    CHECK(wte && lnf && top && cz_model_find_tensor(m, "transformer.wpe.weight"));
    CHECK(!cz_model_find_tensor(m, "transformer.tokens_embed.weight"));
    int rows = cz_model_vocab_rows(c), H = c->hidden, V = c->vocab_size;
    CHECK(rows > V && rows % c->vocab_pad_to == 0 && wte->shape[0] == rows);
    /* buffer order: word embedding, ln_f, the last layer ... */
    CHECK(wte->offset == 0 && lnf->offset == (size_t)rows * H && lnf->offset < top->offset);
    /* init: c_proj std init_range / sqrt(2L), c_fc init_range (sample std within 25 %) */
    cz_model *fresh;
    cz_error err;
    CHECK(cz_model_create(&fresh, c, 1, 8, 1, NULL, &err) == 0);
    cz_model_init_weights(fresh, 3);
    const char *names[3] = {"transformer.h.0.attn.c_proj.weight",
                            "transformer.h.1.mlp.c_proj.weight", "transformer.h.0.mlp.c_fc.weight"};
    /* a 2-std truncated normal has std 0.880 sigma */
    double want[3] = {0.880 * c->init_range / 2.0, 0.880 * c->init_range / 2.0,
                      0.880 * c->init_range};
    /* µP: these matrix-like tensors at 1/sqrt(width / base) of that */
    for (int k = 0; k < 3; k++)
        want[k] /= sqrt((double)c->hidden / (c->parametrization ? c->mup_base_width : c->hidden));
    for (int k = 0; k < 3; k++) {
        const cz_tensor_info *t = cz_model_find_tensor(fresh, names[k]);
        double ss = 0;
        for (size_t i = 0; i < t->numel; i++) {
            double v = cz_model_params(fresh)[t->offset + i];
            ss += v * v;
        }
        double sd = sqrt(ss / (double)t->numel);
        printf("pre_ln: %s init std %.4f (want %.4f)\n", names[k], sd, want[k]);
        CHECK(fabs(sd - want[k]) < 0.25 * want[k]);
        CHECK(!t->no_decay);
    }
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++)
        CHECK(cz_model_params(fresh)[i] == 0.0f);
    cz_model_free(fresh);
    /* padding rows: gradient exactly 0; setting them changes no loss bit */
    cz_losses l0, l1;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, b, &l0, &err) == 0);
    cz_model_backward(m, b, 1.0f);
    float *w = cz_model_params(m), *g = cz_model_grads(m);
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++) CHECK(g[i] == 0.0f);
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++) w[i] = 5.0f;
    CHECK(cz_model_forward(m, b, &l1, &err) == 0);
    CHECK(l0.loss == l1.loss);
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++) w[i] = 0.0f;
    printf("pre_ln: %d padding rows: gradient 0, loss unchanged when they change\n", rows - V);
}

/* model.lm_head = untied: lm_head.weight [padded rows, H] in the heads'
 * range, after the word embedding; its padding rows start at 0 and get
 * exactly 0 gradient; the word embedding then gets only the lookup's
 * gradient (the rows of the batch's tokens). */
static void untied_checks(cz_model *m, const cz_model_config *c, const cz_batch *b) {
    const cz_tensor_info *wte = cz_model_find_tensor(m, "transformer.wte.weight");
    const cz_tensor_info *head = cz_model_find_tensor(m, "lm_head.weight");
    int rows = cz_model_vocab_rows(c), H = c->hidden, V = c->vocab_size;
    CHECK(wte && head && head->shape[0] == rows && head->shape[1] == H);
    CHECK(wte->offset == 0 && head->offset == (size_t)rows * H);
    cz_model *fresh;
    cz_error err;
    CHECK(cz_model_create(&fresh, c, 1, 8, 1, NULL, &err) == 0);
    cz_model_init_weights(fresh, 3);
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++)
        CHECK(cz_model_params(fresh)[head->offset + i] == 0.0f);
    cz_model_free(fresh);
    cz_losses l;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, b, &l, &err) == 0);
    cz_model_backward(m, b, 1.0f);
    const float *g = cz_model_grads(m);
    for (size_t i = (size_t)V * H; i < (size_t)rows * H; i++) CHECK(g[head->offset + i] == 0.0f);
    int used[64] = {0};
    for (int i = 0; i < b->batch * b->seq; i++) used[b->tokens[i]] = 1;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < H && !used[r]; j++) CHECK(g[(size_t)r * H + j] == 0.0f);
    printf("untied: lm_head [%d, %d] apart from the word embedding; padding rows 0 and without "
           "gradient; the word embedding's gradient only in the batch's rows\n",
           rows, H);
}

/* µP (model.parametrization = mup) at its base width is the standard model,
 * bit for bit: every multiplier is 1 (w = 1, sqrt(d0)/d = 1/sqrt(d)). Away
 * from it, the readout and attention multipliers change the loss, and
 * init_weights' matrix-like tensors shrink by 1/sqrt(w). */
static void mup_base_is_standard(cz_arch arch, int layout, const cz_gemm_ctx *gemm) {
    const int T = 8, P = 3, B = 2;
    cz_model_config c = tiny_config(arch, 50, 16, 2, 2, 16);
    c.layout = layout;
    cz_model_config u = c;
    u.parametrization = CZ_PARAM_MUP;
    u.mup_base_width = 16;
    cz_model *m, *mu;
    cz_error err;
    CHECK(cz_model_create(&m, &c, B, T, P, gemm, &err) == 0);
    CHECK(cz_model_create(&mu, &u, B, T, P, gemm, &err) == 0);
    cz_model_init_weights(m, 11);
    cz_model_init_weights(mu, 11);
    size_t np = cz_model_num_params(m);
    CHECK(!memcmp(cz_model_params(m), cz_model_params(mu), np * sizeof(float)));
    static test_batch tb;
    make_batch(&tb, &c, B, T, P, 2, NULL, 3);
    cz_losses l0, l1;
    cz_model_zero_grads(m);
    cz_model_zero_grads(mu);
    CHECK(cz_model_forward(m, &tb.b, &l0, &err) == 0 &&
          cz_model_forward(mu, &tb.b, &l1, &err) == 0);
    cz_model_backward(m, &tb.b, 1.0f);
    cz_model_backward(mu, &tb.b, 1.0f);
    CHECK(l0.loss == l1.loss);
    CHECK(!memcmp(cz_model_grads(m), cz_model_grads(mu), np * sizeof(float)));
    int matrix = 0;
    for (int k = 0; k < cz_model_num_tensors(mu); k++) {
        cz_tensor_mup t;
        cz_model_tensor_mup(mu, k, &t);
        matrix += t.matrix_like;
        CHECK(t.lr_mult == 1.0 && t.wd_mult == 1.0);
    }
    CHECK(matrix == 4 * c.layers + (arch == CZ_ARCH_BERT ? 2 + 2 * c.layers : 0));
    cz_model_free(mu);
    /* base 8: w = 2 */
    u.mup_base_width = 8;
    CHECK(cz_model_create(&mu, &u, B, T, P, gemm, &err) == 0);
    cz_model_init_weights(mu, 11);
    CHECK(cz_model_forward(mu, &tb.b, &l1, &err) == 0);
    CHECK(l1.loss != l0.loss && cz_model_output_mult(mu) == 0.5f);
    for (int k = 0; k < cz_model_num_tensors(mu); k++) {
        cz_tensor_mup t;
        cz_model_tensor_mup(mu, k, &t);
        const cz_tensor_info *ti = cz_model_tensor(mu, k);
        const float *a = cz_model_params(m) + ti->offset, *b = cz_model_params(mu) + ti->offset;
        /* the same normals, scaled: 1/sqrt(2) for matrix-like tensors */
        double want = t.matrix_like ? 1.0 / sqrt(2.0) : 1.0;
        for (size_t i = 0; i < ti->numel; i++)
            CHECK(fabs(b[i] - want * a[i]) <= 1e-6 * fabs(a[i]) + 1e-12);
        CHECK(t.lr_mult == (t.matrix_like ? 0.5 : 1.0) && t.wd_mult == (t.matrix_like ? 2.0 : 1.0));
    }
    printf("mup %s: at the base width the standard model's bits; at 2x: lr / 2, wd x 2, std / "
           "sqrt(2) for the %d matrix-like tensors\n",
           arch == CZ_ARCH_BERT         ? "bert"
           : layout == CZ_LAYOUT_PRE_LN ? "gpt pre_ln"
                                        : "gpt",
           matrix);
    cz_model_free(mu);
    cz_model_free(m);
}

static void run(cz_arch arch, int layout, int untied, int mup_base, const char *label,
                const cz_gemm_ctx *gemm) {
    const int T = 8, P = 3, B = 2;
    cz_model_config c = tiny_config(arch, 50, 16, 2, 2, 16);
    c.layout = layout;
    c.untied_head = untied;
    if (mup_base) { /* µP at width 2x its base: every multiplier in play */
        c.parametrization = CZ_PARAM_MUP;
        c.mup_base_width = mup_base;
    }
    if (layout == CZ_LAYOUT_PRE_LN) c.vocab_pad_to = 16; /* 50 -> 64 rows */
    c.init_range = 0.2f; /* large weights: the nonlinearities are exercised */
    cz_model *m;
    cz_error err;
    CHECK(cz_model_create(&m, &c, B, T, P, gemm, &err) == 0);
    cz_model_init_weights(m, 11);
    /* non-trivial LayerNorm and bias parameters */
    perturb_no_decay(m, 5, 1, 0.1f);
    static test_batch tb;
    make_batch(&tb, &c, B, T, P, 2, NULL, 3);

    gradcheck(m, &tb.b, label);
    if (layout == CZ_LAYOUT_PRE_LN && !untied) pre_ln_checks(m, &c, &tb.b);
    if (untied) untied_checks(m, &c, &tb.b);
    /* ranges come contiguous from offset 0 up when the rows go apart: the
     * order the model declares to the gradient sync (cz_model_grad_order) */
    CHECK(cz_model_grad_order(m) == CZ_GRAD_ASCENDING);
    rows_handover(m, &c, label);
    layout_independence(m, &c, label);
    thread_independence(m, &c, label);
    smaller_batch(m, &c, gemm, label);
    flops_check(m, &c, T, P);
    cz_model_free(m);
}

int main(void) {
    cz_error err;
    cz_gemm_ctx *gemm = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    CHECK(gemm);
    run(CZ_ARCH_BERT, CZ_LAYOUT_POST_LN, 0, 0, "bert", gemm);
    run(CZ_ARCH_GPT, CZ_LAYOUT_POST_LN, 0, 0, "gpt", gemm);
    run(CZ_ARCH_GPT, CZ_LAYOUT_PRE_LN, 0, 0, "gpt pre_ln", gemm);
    run(CZ_ARCH_GPT, CZ_LAYOUT_PRE_LN, 1, 0, "gpt pre_ln untied", gemm);
    /* µP (model.parametrization = mup), hidden 16 on base 8 */
    run(CZ_ARCH_BERT, CZ_LAYOUT_POST_LN, 0, 8, "bert mup", gemm);
    run(CZ_ARCH_GPT, CZ_LAYOUT_POST_LN, 0, 8, "gpt mup", gemm);
    run(CZ_ARCH_GPT, CZ_LAYOUT_PRE_LN, 0, 8, "gpt pre_ln mup", gemm);
    mup_base_is_standard(CZ_ARCH_BERT, CZ_LAYOUT_POST_LN, gemm);
    mup_base_is_standard(CZ_ARCH_GPT, CZ_LAYOUT_POST_LN, gemm);
    mup_base_is_standard(CZ_ARCH_GPT, CZ_LAYOUT_PRE_LN, gemm);
    /* deep models (BERT-large depth) get their memory planned too */
    cz_model_config deep = tiny_config(CZ_ARCH_BERT, 30, 8, 24, 2, 16);
    cz_model *m;
    CHECK(cz_model_create(&m, &deep, 2, 8, 2, gemm, &err) == 0);
    CHECK(cz_model_num_tensors(m) == 24 * 16 + 14);
    cz_model_free(m);
    cz_gemm_free(gemm);
    printf("ok\n");
    return 0;
}
