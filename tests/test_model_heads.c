/* The fine-tuning heads (cz_head): BERT's [CLS] classifier, span start/end
 * and per-token tagger, GPT's last-token classifier with and without the
 * auxiliary LM loss (also on GPT-2's pre-LN layout, whose heads read the
 * final LayerNorm's output). For each: finite differences through the whole model
 * (dropout off and on),
 * the loss against a direct recomputation from the exposed logits, the
 * forward-only path (no labels) giving the same logits, dropout on the head
 * independent of the batch layout, and bad labels refused by name. */
#include "test_model_fixture.h"

typedef struct head_case {
    const char *label;
    cz_arch arch;
    int head, num_labels;
    float lm_weight;
    int layout; /* GPT-2's pre-LN layout, with 8 padding rows of the vocabulary */
} head_case;

typedef struct head_labels {
    int32_t labels[64], start[64], end[64], cls[64], tags[4096];
} head_labels;

/* Labels that are a function of the sample id (like make_batch's tokens). */
static void add_labels(test_batch *tb, head_labels *hl, const head_case *hc, int B, int T,
                       int pad) {
    cz_batch *b = &tb->b;
    uint64_t C = hc->num_labels > 0 ? (uint64_t)hc->num_labels : 2;
    for (int s = 0; s < B; s++) {
        uint64_t id = tb->ids[s];
        int len = (id % 2) ? T - pad : T;
        hl->labels[s] = (int32_t)(id % C);
        hl->start[s] = 1 + (int32_t)(id % 3);
        hl->end[s] = hl->start[s] + (int32_t)(id % 2);
        hl->cls[s] = len - 1;
        for (int t = 0; t < T; t++) /* -1: padding, [CLS], and every third token */
            hl->tags[s * T + t] =
                (t >= len || t == 0 || t % 3 == 2) ? -1 : (int32_t)((id * 7 + (uint64_t)t) % C);
    }
    b->max_pred = 0;
    b->mlm_positions = b->mlm_labels = b->nsp_labels = NULL;
    b->mlm_weights = NULL;
    if (hc->arch == CZ_ARCH_GPT && hc->lm_weight == 0) b->targets = NULL;
    if (hc->head == CZ_HEAD_CLASSIFY) b->labels = hl->labels;
    if (hc->head == CZ_HEAD_CLASSIFY && hc->arch == CZ_ARCH_GPT) b->cls_index = hl->cls;
    if (hc->head == CZ_HEAD_SPAN) {
        b->start_positions = hl->start;
        b->end_positions = hl->end;
    }
    if (hc->head == CZ_HEAD_TAG) b->token_labels = hl->tags;
}

static double log_softmax_at(const float *z, int n, int stride, int k) {
    double mx = z[0];
    for (int i = 1; i < n; i++)
        if (z[(size_t)i * stride] > mx) mx = z[(size_t)i * stride];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp(z[(size_t)i * stride] - mx);
    return z[(size_t)k * stride] - mx - log(s);
}

/* The head's cross-entropy recomputed in double from the raw logits. */
static double loss_from_logits(const cz_model *m, const head_case *hc, const head_labels *hl, int B,
                               int T) {
    const float *z = cz_model_head_logits(m);
    int C = hc->num_labels;
    double sum = 0;
    long count = 0;
    if (hc->head == CZ_HEAD_CLASSIFY) {
        for (int s = 0; s < B; s++) sum -= log_softmax_at(z + s * C, C, 1, hl->labels[s]);
        return sum / B;
    }
    if (hc->head == CZ_HEAD_SPAN) {
        for (int s = 0; s < B; s++) {
            sum -= log_softmax_at(z + (size_t)s * T * 2, T, 2, hl->start[s]);
            sum -= log_softmax_at(z + (size_t)s * T * 2 + 1, T, 2, hl->end[s]);
        }
        return sum / (2.0 * B);
    }
    for (int i = 0; i < B * T; i++)
        if (hl->tags[i] >= 0) {
            sum -= log_softmax_at(z + (size_t)i * C, C, 1, hl->tags[i]);
            count++;
        }
    return sum / (double)count;
}

static void run_case(const head_case *hc) {
    const int B = 2, T = 8, pad = 2;
    cz_model_config c = tiny_config(hc->arch, 40, 16, 2, 2, 16);
    c.layout = hc->layout;
    c.vocab_pad_to = hc->layout == CZ_LAYOUT_PRE_LN ? 16 : 0;
    c.head = hc->head;
    c.num_labels = hc->num_labels;
    c.lm_weight = hc->lm_weight;
    cz_model *m;
    cz_error err;
    CHECK(cz_model_create(&m, &c, B, T, 0, NULL, &err) == 0);
    cz_model_init_weights(m, 3);
    perturb_no_decay(m, 3, 0, 0.2f);
    size_t np = cz_model_num_params(m);
    static test_batch tb;
    static head_labels hl;
    uint64_t ids[2] = {5, 8};
    make_batch(&tb, &c, B, T, 0, pad, ids, 11);
    add_labels(&tb, &hl, hc, B, T, pad);

    /* 1. finite differences over every tensor, heads included; then with
     * dropout on (its masks are fixed by (seed, step, sample), so the loss
     * is still a smooth function of the weights) */
    gradcheck(m, &tb.b, hc->label);
    tb.b.train = 1;
    gradcheck(m, &tb.b, "  with dropout");
    tb.b.train = 0;

    /* 2. the loss is the cross-entropy of the exposed logits (+ lambda LM) */
    cz_losses l;
    CHECK(cz_model_forward(m, &tb.b, &l, &err) == 0);
    double want = loss_from_logits(m, hc, &hl, B, T);
    CHECK(fabs(l.task_loss - want) < 1e-5 * fabs(want) + 1e-7);
    CHECK(fabs(l.loss - (l.task_loss + hc->lm_weight * l.lm_loss)) < 1e-9);
    CHECK(hc->lm_weight == 0 || l.lm_count > 0);
    CHECK(l.task_count > 0);
    size_t nl = hc->head == CZ_HEAD_CLASSIFY ? (size_t)B * hc->num_labels
                : hc->head == CZ_HEAD_SPAN   ? (size_t)B * T * 2
                                             : (size_t)B * T * hc->num_labels;
    float *z = malloc(nl * sizeof *z);
    memcpy(z, cz_model_head_logits(m), nl * sizeof *z);

    /* 3. forward only (no labels): the same logits, no task loss */
    cz_batch nb = tb.b;
    nb.labels = nb.start_positions = nb.end_positions = nb.token_labels = NULL;
    cz_losses l0;
    CHECK(cz_model_forward(m, &nb, &l0, &err) == 0);
    CHECK(memcmp(z, cz_model_head_logits(m), nl * sizeof *z) == 0);
    CHECK(l0.task_loss == 0 && l0.task_count == 0);

    /* 4. dropout on: a batch of 2 equals the two sequences as batches of 1
     * (both odd ids: the same padding, so the same counts per sequence) */
    uint64_t odd[2] = {7, 9};
    static test_batch both, one_a, one_b;
    static head_labels hb, ha, hbb;
    make_batch(&both, &c, 2, T, 0, pad, odd, 42);
    add_labels(&both, &hb, hc, 2, T, pad);
    make_batch(&one_a, &c, 1, T, 0, pad, odd, 42);
    add_labels(&one_a, &ha, hc, 1, T, pad);
    make_batch(&one_b, &c, 1, T, 0, pad, odd + 1, 42);
    add_labels(&one_b, &hbb, hc, 1, T, pad);
    both.b.train = one_a.b.train = one_b.b.train = 1;
    float *g2 = malloc(np * sizeof *g2), *gd = malloc(np * sizeof *gd);
    cz_losses l2, la, lb;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &both.b, &l2, &err) == 0);
    cz_model_backward(m, &both.b, 1.0f);
    memcpy(g2, cz_model_grads(m), np * sizeof *g2);
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &one_a.b, &la, &err) == 0);
    cz_model_backward(m, &one_a.b, 0.5f);
    CHECK(cz_model_forward(m, &one_b.b, &lb, &err) == 0);
    cz_model_backward(m, &one_b.b, 0.5f);
    double rel = max_abs_diff(cz_model_grads(m), g2, np) / max_abs(g2, np);
    CHECK(fabs(0.5 * (la.loss + lb.loss) - l2.loss) < 1e-6 * l2.loss);
    CHECK(rel < 1e-5);
    /* not vacuous: the head's dropout changes the gradients */
    both.b.train = 0;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, &both.b, &l2, &err) == 0);
    cz_model_backward(m, &both.b, 1.0f);
    memcpy(gd, cz_model_grads(m), np * sizeof *gd);
    CHECK(max_abs_diff(gd, g2, np) / max_abs(g2, np) > 1e-2);
    printf("%s: logits reproduce the loss; dropout on, 2 vs 2 x 1: grad rel diff %.2e\n", hc->label,
           rel);

    /* 5. bad labels are refused with the field named */
    if (hc->head == CZ_HEAD_CLASSIFY) hl.labels[1] = hc->num_labels;
    if (hc->head == CZ_HEAD_SPAN) hl.end[1] = T;
    if (hc->head == CZ_HEAD_TAG) hl.tags[3] = hc->num_labels;
    CHECK(cz_model_forward(m, &tb.b, &l, &err) == -1);
    printf("  bad label: %s\n", err.msg);
    CHECK(strstr(err.msg, hc->head == CZ_HEAD_SPAN ? "span" : "label") != NULL);
    free(z);
    free(g2);
    free(gd);
    cz_model_free(m);
}

/* SIMILAR (GPT-1's two orderings, states added) and CHOICE (K candidates,
 * softmax over their scores): B = 4 sequences of 2 examples. Finite
 * differences with dropout off and on (the head's dropout acts on the
 * pair's summed row, keyed by its first sequence); the loss recomputed
 * from the exposed [examples, C] logits; an odd batch refused. */
static void run_group_case(const char *label, cz_arch arch, int head, int C, float lm, int layout) {
    const int B = 4, T = 8, pad = 2, group = head == CZ_HEAD_SIMILAR ? 2 : C;
    cz_model_config c = tiny_config(arch, 40, 16, 2, 2, 16);
    c.layout = layout;
    c.vocab_pad_to = layout == CZ_LAYOUT_PRE_LN ? 16 : 0;
    c.head = head;
    c.num_labels = C;
    c.lm_weight = lm;
    cz_model *m;
    cz_error err;
    CHECK(cz_model_create(&m, &c, B, T, 0, NULL, &err) == 0);
    cz_model_init_weights(m, 4);
    perturb_no_decay(m, 4, 0, 0.2f);
    static test_batch tb;
    uint64_t ids[4] = {4, 5, 6, 7};
    make_batch(&tb, &c, B, T, 0, pad, ids, 13);
    int32_t labels[4], cls[4];
    for (int s = 0; s < B; s++) {
        labels[s] = (s / group + 1) % C; /* each sequence carries its example's label */
        cls[s] = (ids[s] % 2) ? T - pad - 1 : T - 1;
    }
    cz_batch *b = &tb.b;
    b->max_pred = 0;
    b->mlm_positions = b->mlm_labels = b->nsp_labels = NULL;
    b->mlm_weights = NULL;
    if (lm == 0) b->targets = NULL;
    b->labels = labels;
    if (arch == CZ_ARCH_GPT) b->cls_index = cls;
    gradcheck(m, b, label);
    b->train = 1;
    gradcheck(m, b, "  with dropout");
    b->train = 0;
    cz_losses l;
    CHECK(cz_model_forward(m, b, &l, &err) == 0);
    const float *z = cz_model_head_logits(m);
    double want = 0;
    for (int e = 0; e < B / group; e++) want -= log_softmax_at(z + e * C, C, 1, labels[e * group]);
    want /= B / group;
    CHECK(fabs(l.task_loss - want) < 1e-5 * want && l.task_count == B / group);
    CHECK(fabs(l.loss - (l.task_loss + lm * l.lm_loss)) < 1e-9);
    cz_batch odd = *b;
    odd.batch = 3;
    CHECK(cz_model_forward(m, &odd, &l, &err) == -1 && strstr(err.msg, "whole examples"));
    printf("%s: logits [%d, %d] reproduce the loss; %s\n", label, B / group, C, err.msg);
    cz_model_free(m);
}

int main(void) {
    run_group_case("GPT similarity + 0.5 LM", CZ_ARCH_GPT, CZ_HEAD_SIMILAR, 3, 0.5f, 0);
    run_group_case("GPT multiple choice + 0.5 LM", CZ_ARCH_GPT, CZ_HEAD_CHOICE, 2, 0.5f, 0);
    run_group_case("GPT pre-LN multiple choice + 0.5 LM", CZ_ARCH_GPT, CZ_HEAD_CHOICE, 2, 0.5f,
                   CZ_LAYOUT_PRE_LN);
    run_group_case("BERT multiple choice", CZ_ARCH_BERT, CZ_HEAD_CHOICE, 2, 0.0f, 0);
    const head_case cases[] = {
        {"BERT classify", CZ_ARCH_BERT, CZ_HEAD_CLASSIFY, 3, 0.0f, 0},
        {"BERT span", CZ_ARCH_BERT, CZ_HEAD_SPAN, 0, 0.0f, 0},
        {"BERT tag", CZ_ARCH_BERT, CZ_HEAD_TAG, 5, 0.0f, 0},
        {"GPT classify", CZ_ARCH_GPT, CZ_HEAD_CLASSIFY, 2, 0.0f, 0},
        {"GPT classify + 0.5 LM", CZ_ARCH_GPT, CZ_HEAD_CLASSIFY, 3, 0.5f, 0},
        {"GPT pre-LN classify + 0.5 LM", CZ_ARCH_GPT, CZ_HEAD_CLASSIFY, 3, 0.5f, CZ_LAYOUT_PRE_LN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);

    /* the heads' tensor names, and configurations that make no sense */
    cz_error err;
    cz_model *m;
    cz_model_config c = tiny_config(CZ_ARCH_BERT, 40, 16, 1, 2, 16);
    c.head = CZ_HEAD_CLASSIFY;
    c.num_labels = 2;
    CHECK(cz_model_create(&m, &c, 1, 8, 0, NULL, &err) == 0);
    CHECK(cz_model_find_tensor(m, "classifier.weight") &&
          cz_model_find_tensor(m, "bert.pooler.dense.bias"));
    CHECK(!cz_model_find_tensor(m, "cls.seq_relationship.weight"));
    cz_model_free(m);
    c.head = CZ_HEAD_NONE;
    CHECK(cz_model_create(&m, &c, 1, 8, 0, NULL, &err) == 0);
    CHECK(cz_model_head_logits(m) == NULL && cz_model_hidden_states(m, 1) != NULL &&
          cz_model_hidden_states(m, 2) == NULL);
    cz_model_free(m);
    c.head = CZ_HEAD_TAG;
    c.num_labels = 1;
    CHECK(cz_model_create(&m, &c, 1, 8, 0, NULL, &err) == -1 && strstr(err.msg, "num_labels"));
    c = tiny_config(CZ_ARCH_GPT, 40, 16, 1, 2, 16);
    c.head = CZ_HEAD_SPAN;
    CHECK(cz_model_create(&m, &c, 1, 8, 0, NULL, &err) == -1 && strstr(err.msg, "BERT"));
    c.head = CZ_HEAD_CLASSIFY;
    c.num_labels = 2;
    CHECK(cz_model_create(&m, &c, 1, 8, 0, NULL, &err) == 0);
    CHECK(cz_model_find_tensor(m, "score.weight") && !cz_model_find_tensor(m, "score.bias"));
    cz_model_free(m);
    c = tiny_config(CZ_ARCH_BERT, 40, 16, 1, 2, 16);
    c.head = CZ_HEAD_SIMILAR;
    c.num_labels = 2;
    CHECK(cz_model_create(&m, &c, 2, 8, 0, NULL, &err) == -1 && strstr(err.msg, "GPT-1"));
    printf("ok\n");
    return 0;
}
