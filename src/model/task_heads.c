/* The fine-tuning heads (cz_head in include/cloze/model.h; model_private.h).
 * BERT paper Sec. 4 and Fig. 4; GPT-1 Sec. 3.2-3.3. Every head ends in one
 * softmax cross-entropy over task.rows rows of task.width classes:
 *   CLASSIFY  B rows of C (one per sequence);
 *   TAG       B*T rows of C (tokens with label -1 count nothing);
 *   SPAN      2B rows of T: row s holds sequence s's start logits over its
 *             positions, row B + s its end logits (de-interleaved from the
 *             [B*T, 2] qa_outputs map); loss = (CE_start + CE_end) / 2;
 *   SIMILAR   B/2 rows of C (one per pair of sequences, states added);
 *   CHOICE    B/K rows of K: the linear map gives B scores, one per
 *             sequence, and the K consecutive scores of an example are
 *             its row.
 * Dropout on the head's input (rate hidden_dropout, as Hugging Face's task
 * models and GPT-1 Sec. 4.1 "dropout to the classifier") draws from stream
 * (seed, step, sample, L << 8 | SITE_TASK_HEAD).
 *
 * GPT's auxiliary LM loss (lm_weight > 0, GPT-1 eq. 5) is the pre-training
 * LM head's, which model.c runs before the task head's forward and backward. */
#include <math.h>
#include <string.h>

#include "model_private.h"

/* ---- parameters and buffers ---- */

void model_build_task_head(cz_model *m) {
    const cz_model_config *c = &m->cfg;
    int h = c->hidden, C = c->num_labels;
    switch (c->head) {
    case CZ_HEAD_CLASSIFY:
        if (c->arch == CZ_ARCH_BERT) {
            m->pooler = model_add_lin(m, "bert.pooler.dense", h, h, 0);
            m->task.map = model_add_lin(m, "classifier", h, C, 0);
        } else { /* W_y: no bias (GPT-1 eq. 3; Hugging Face's score) */
            m->task.map =
                (lin){model_add_tensor(m, "score.weight", C, h, KIND_WEIGHT), NO_BIAS, h, C, 0};
        }
        break;
    case CZ_HEAD_SPAN:
        m->task.map = model_add_lin(m, "qa_outputs", h, 2, 0);
        break;
    case CZ_HEAD_TAG:
        m->task.map = model_add_lin(m, "classifier", h, C, 0);
        break;
    case CZ_HEAD_SIMILAR: /* GPT only (model_config.c) */
        m->task.map =
            (lin){model_add_tensor(m, "score.weight", C, h, KIND_WEIGHT), NO_BIAS, h, C, 0};
        break;
    case CZ_HEAD_CHOICE: /* one score per candidate */
        if (c->arch == CZ_ARCH_BERT) {
            m->pooler = model_add_lin(m, "bert.pooler.dense", h, h, 0);
            m->task.map = model_add_lin(m, "classifier", h, 1, 0);
        } else {
            m->task.map =
                (lin){model_add_tensor(m, "score.weight", 1, h, KIND_WEIGHT), NO_BIAS, h, 1, 0};
        }
        break;
    default:
        break; /* NONE: no parameters */
    }
}

/* A fine-tuning head's buffers (none for the pre-training heads). */
int model_alloc_task_head(cz_model *m, cz_error *err) {
    const cz_model_config *cfg = &m->cfg;
    if (cfg->head < CZ_HEAD_CLASSIFY) return 0;
    int H = cfg->hidden, B = m->max_b;
    size_t N = (size_t)B * m->max_t;
    /* CLASSIFY: B rows of C; TAG: N rows of C; SPAN: N rows of 2, whose
     * cross-entropy runs over 2B rows of T (start and end per sequence) */
    size_t width = cfg->num_labels > 2 ? (size_t)cfg->num_labels : 2;
    TAKE(m->task.drop, N * H);
    TAKE(m->task.dinput, N * H);
    TAKE(m->task.logits, N * width);
    TAKE(m->task.probs, N * width);
    TAKE(m->task.dlogits, N * width);
    TAKE(m->task.loss, N + 2 * (size_t)B);
    TAKE(m->task.label, N + 2 * (size_t)B);
    TAKE(m->task.argmax, N + 2 * (size_t)B);
    TAKE(m->task.scale, N + 2 * (size_t)B);
    if (cfg->arch != CZ_ARCH_BERT) {
        TAKE(m->cls, (size_t)B * H);
        TAKE(m->dcls, (size_t)B * H);
    }
    return 0;
}

/* ---- batches, forward, backward ---- */

/* Sequences per example: SIMILAR's two orderings, CHOICE's K candidates. */
static int task_head_group(const cz_model_config *c) {
    return c->head == CZ_HEAD_SIMILAR ? 2 : c->head == CZ_HEAD_CHOICE ? c->num_labels : 1;
}

int model_check_task_batch(const cz_model *m, const cz_batch *b, cz_error *err) {
    const cz_model_config *c = &m->cfg;
    int B = b->batch, T = b->seq, C = c->num_labels;
    if (c->head == CZ_HEAD_CLASSIFY || c->head == CZ_HEAD_SIMILAR || c->head == CZ_HEAD_CHOICE) {
        int group = task_head_group(c);
        if (c->arch == CZ_ARCH_GPT && !b->cls_index)
            return cz_fail(err, "model: GPT classification batch lacks cls_index");
        if (c->lm_weight > 0 && !b->targets)
            return cz_fail(err, "model: lm_weight > 0 needs the batch's LM targets");
        if (B % group)
            return cz_fail(err, "model: a batch of %d sequences is not whole examples of %d", B,
                           group);
        for (int s = 0; s < B; s++) {
            if (b->cls_index && (b->cls_index[s] < 0 || b->cls_index[s] >= T))
                return cz_fail(err, "model: cls_index %d of sequence %d outside [0,%d)",
                               b->cls_index[s], s, T);
            if (b->labels && s % group == 0 && (b->labels[s] < 0 || b->labels[s] >= C))
                return cz_fail(err, "model: label %d of sequence %d outside [0,%d)", b->labels[s],
                               s, C);
            /* an example's sequences are consecutive and carry its label */
            if (b->labels && s % group && b->labels[s] != b->labels[s - s % group])
                return cz_fail(err,
                               "model: sequence %d has label %d, its example's first sequence %d "
                               "has %d (an example is %d consecutive sequences)",
                               s, b->labels[s], s - s % group, b->labels[s - s % group], group);
        }
    } else if (c->head == CZ_HEAD_SPAN && b->start_positions) {
        if (!b->end_positions) return cz_fail(err, "model: span batch lacks end_positions");
        for (int s = 0; s < B; s++)
            if (b->start_positions[s] < 0 || b->start_positions[s] >= T ||
                b->end_positions[s] < 0 || b->end_positions[s] >= T)
                return cz_fail(err, "model: span [%d, %d] of sequence %d outside [0,%d)",
                               b->start_positions[s], b->end_positions[s], s, T);
    } else if (c->head == CZ_HEAD_TAG && b->token_labels) {
        for (int i = 0; i < B * T; i++)
            if (b->token_labels[i] < -1 || b->token_labels[i] >= C)
                return cz_fail(err, "model: token label %d at %d outside [-1,%d)",
                               b->token_labels[i], i, C);
    }
    return 0;
}

/* The head's input: BERT CLASSIFY / CHOICE pooled [CLS] (into m->pooled),
 * GPT CLASSIFY / CHOICE the extract token's state (into m->cls), SIMILAR
 * the sum of a pair's two extract states (GPT-1 Sec. 3.3, in place into
 * the first B/2 rows of m->cls), TAG the last layer; then dropout into
 * head_drop, one stream per row keyed by the row's first sequence. Returns
 * the rows of head input. */
static int task_head_input(cz_model *m, const cz_batch *b) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, T = b->seq, B = b->batch, L = c->layers;
    const float *xf = m->x[L];
    if (c->head == CZ_HEAD_TAG) {
        PHASE(elementwise,
              model_dropout_rows(b, c->hidden_dropout, L, SITE_TASK_HEAD, m->task.drop, xf, H));
        return B * T;
    }
    for (int s = 0; s < B; s++) {
        int t = c->arch == CZ_ARCH_GPT ? b->cls_index[s] : 0;
        memcpy(m->cls + (size_t)s * H, xf + ((size_t)s * T + t) * H, H * sizeof(float));
    }
    const float *in = m->cls;
    int rows = B;
    if (c->arch == CZ_ARCH_BERT) {
        model_lin_forward(m, &m->pooler, m->cls, H, B, m->pooled, H);
        for (size_t i = 0; i < (size_t)B * H; i++) m->pooled[i] = tanhf(m->pooled[i]);
        in = m->pooled;
    }
    if (c->head == CZ_HEAD_SIMILAR) { /* row e reads rows 2e, 2e + 1 >= e: in place is safe */
        rows = B / 2;
        for (int e = 0; e < rows; e++)
            for (int j = 0; j < H; j++)
                m->cls[(size_t)e * H + j] =
                    m->cls[(size_t)2 * e * H + j] + m->cls[(size_t)(2 * e + 1) * H + j];
    }
    PHASE(elementwise, model_dropout_groups(b, c->hidden_dropout, L, SITE_TASK_HEAD, m->task.drop,
                                            in, H, rows, B / rows));
    return rows;
}

void model_task_head_forward(cz_model *m, const cz_batch *b, cz_losses *out) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, T = b->seq, B = b->batch, C = c->num_labels;
    const int32_t *labels = NULL;
    if (c->head == CZ_HEAD_NONE) return;
    if (c->head == CZ_HEAD_SPAN) {
        model_lin_forward(m, &m->task.map, m->x[c->layers], H, B * T, m->task.logits, 2);
        m->task.rows = 2 * B;
        m->task.width = T;
        for (int s = 0; s < B; s++)
            for (int t = 0; t < T; t++)
                for (int k = 0; k < 2; k++)
                    m->task.probs[((size_t)k * B + s) * T + t] =
                        m->task.logits[((size_t)s * T + t) * 2 + k];
        if (b->start_positions)
            for (int s = 0; s < B; s++) {
                m->task.label[s] = b->start_positions[s];
                m->task.label[B + s] = b->end_positions[s];
            }
        labels = b->start_positions ? m->task.label : NULL;
    } else {
        int rows = task_head_input(m, b), group = task_head_group(c);
        int choice = c->head == CZ_HEAD_CHOICE; /* one score per sequence, K to a row */
        model_lin_forward(m, &m->task.map, m->task.drop, H, rows, m->task.logits, choice ? 1 : C);
        m->task.rows = choice ? B / C : rows;
        m->task.width = C;
        memcpy(m->task.probs, m->task.logits, (size_t)m->task.rows * C * sizeof(float));
        labels = c->head == CZ_HEAD_TAG ? b->token_labels : b->labels;
        if (labels && group > 1) { /* example e's label sits at its first sequence */
            for (int e = 0; e < B / group; e++) m->task.label[e] = labels[(size_t)e * group];
            labels = m->task.label;
        }
    }
    int rows = m->task.rows, width = m->task.width;
    if (!labels) { /* forward only: logits for predictions */
        memset(m->task.scale, 0, (size_t)rows * sizeof *m->task.scale);
        out->loss = c->lm_weight > 0 ? c->lm_weight * out->lm_loss : 0.0;
        return;
    }
    if (labels != m->task.label) memcpy(m->task.label, labels, (size_t)rows * sizeof *labels);
    PHASE(loss,
          cz_xent_forward(m->task.probs, m->task.loss, m->task.argmax, m->task.label, rows, width));
    double sum = 0;
    long count = 0, correct = 0;
    for (int r = 0; r < rows; r++)
        if (m->task.label[r] >= 0) {
            sum += m->task.loss[r];
            count++;
        }
    if (c->head == CZ_HEAD_SPAN) { /* the mean of two means over B */
        for (int s = 0; s < B; s++)
            correct += m->task.argmax[s] == m->task.label[s] &&
                       m->task.argmax[B + s] == m->task.label[B + s];
        out->task_loss = sum / (2.0 * B);
        out->task_count = B;
        for (int r = 0; r < rows; r++) m->task.scale[r] = 1.0f / (2.0f * (float)B);
    } else {
        for (int r = 0; r < rows; r++)
            correct += m->task.label[r] >= 0 && m->task.argmax[r] == m->task.label[r];
        out->task_loss = count ? sum / (double)count : 0.0;
        out->task_count = count;
        for (int r = 0; r < rows; r++) m->task.scale[r] = count ? 1.0f / (float)count : 0.0f;
    }
    out->task_correct = correct;
    /* GPT-1 eq. 5: L3 = L2 + lambda L1 */
    out->loss = out->task_loss + (c->lm_weight > 0 ? c->lm_weight * out->lm_loss : 0.0);
}

/* Leaves d(loss)/d(last layer) in m->dy, as the pre-training heads do:
 * SPAN and TAG write it; the heads that read one state per sequence add
 * theirs to what model.c left there (the auxiliary LM head's, or zeros). */
void model_task_head_backward(cz_model *m, const cz_batch *b, float grad_scale) {
    const cz_model_config *c = &m->cfg;
    int H = c->hidden, T = b->seq, B = b->batch, C = c->num_labels, L = c->layers;
    int n = B * T, rows = m->task.rows;
    const float *xf = m->x[L];
    if (c->head == CZ_HEAD_NONE) return;
    for (int r = 0; r < rows; r++) m->task.scale[r] *= grad_scale;
    PHASE(loss, cz_xent_backward(m->task.probs, m->task.label, m->task.scale, rows, m->task.width));
    if (c->head == CZ_HEAD_SPAN) {
        for (int s = 0; s < B; s++)
            for (int t = 0; t < T; t++)
                for (int k = 0; k < 2; k++)
                    m->task.dlogits[((size_t)s * T + t) * 2 + k] =
                        m->task.probs[((size_t)k * B + s) * T + t];
        model_lin_backward(m, &m->task.map, m->task.dlogits, 2, xf, H, n, m->dy, H, 0.0f);
        return;
    }
    /* CHOICE: the [B/K, K] gradient is that of B scores of width 1 */
    int choice = c->head == CZ_HEAD_CHOICE, in_rows = choice ? B : rows;
    model_lin_backward(m, &m->task.map, m->task.probs, choice ? 1 : C, m->task.drop, H, in_rows,
                       m->task.dinput, H, 0.0f);
    if (c->head == CZ_HEAD_TAG) {
        PHASE(elementwise, model_dropout_rows(b, c->hidden_dropout, L, SITE_TASK_HEAD, m->dy,
                                              m->task.dinput, H));
        return;
    }
    PHASE(elementwise, model_dropout_groups(b, c->hidden_dropout, L, SITE_TASK_HEAD, m->dcls,
                                            m->task.dinput, H, in_rows, B / in_rows));
    if (c->arch == CZ_ARCH_BERT) {
        for (size_t i = 0; i < (size_t)B * H; i++) /* tanh' = 1 - tanh^2 */
            m->dcls[i] *= 1.0f - m->pooled[i] * m->pooled[i];
        model_lin_backward(m, &m->pooler, m->dcls, H, m->cls, H, B, m->task.dinput, H, 0.0f);
        memcpy(m->dcls, m->task.dinput, (size_t)B * H * sizeof(float));
    }
    int per = B / in_rows; /* SIMILAR: both orderings get their pair's gradient */
    for (int s = 0; s < B; s++) {
        int t = c->arch == CZ_ARCH_GPT ? b->cls_index[s] : 0;
        float *d = m->dy + ((size_t)s * T + t) * H;
        for (int j = 0; j < H; j++) d[j] += m->dcls[(size_t)(s / per) * H + j];
    }
}

const float *cz_model_head_logits(const cz_model *m) {
    return m->cfg.head >= CZ_HEAD_CLASSIFY ? m->task.logits : NULL;
}

/* ---- FLOPs ---- */

/* The linear maps of model_task_head_forward, 2 FLOPs per multiply-add,
 * per sequence; lm, the auxiliary LM head's, counted for the heads that
 * read the extract token (CLASSIFY, SIMILAR, CHOICE). */
double model_task_head_flops(const cz_model_config *c, int seq, double lm) {
    double H = c->hidden, T = seq, C = c->num_labels;
    switch (c->head) {
    case CZ_HEAD_CLASSIFY:
        return (c->arch == CZ_ARCH_BERT ? 2.0 * H * H : 0.0) + 2.0 * H * C + lm;
    case CZ_HEAD_SIMILAR: /* per sequence: half a pair's classifier */
        return H * C + lm;
    case CZ_HEAD_CHOICE: /* per sequence (one candidate): one score */
        return (c->arch == CZ_ARCH_BERT ? 2.0 * H * H : 0.0) + 2.0 * H + lm;
    case CZ_HEAD_SPAN:
        return 4.0 * T * H;
    case CZ_HEAD_TAG:
        return 2.0 * T * H * C;
    default:
        return 0.0; /* NONE */
    }
}
