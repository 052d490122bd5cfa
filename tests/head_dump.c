/* head_dump <bert|gpt|gpt-similar|gpt-choice|bert-choice> <dir>: the C side
 * of the PyTorch reference for the classification heads
 * (tests/reference/head_reference.py). A small model with the CLASSIFY head
 * (BERT: pooler + classifier over 3 classes; GPT: the extract token's state
 * into score, plus 0.5 x the LM loss), SIMILAR (GPT: 3 pairs of orderings,
 * states added, 2 classes) or CHOICE (3 candidates per example, 2
 * examples), dropout off; writes config.json, weights.safetensors,
 * batch.txt (tokens, attn_mask, segments, labels, cls_index, targets),
 * grads.safetensors (d loss / d params) and result.txt ("loss/task/lm/group
 * <value>"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "test_model_fixture.h"

int main(int argc, char **argv) {
    const char *modes[] = {"bert", "gpt", "gpt-similar", "gpt-choice", "bert-choice"};
    int mode = -1;
    for (int i = 0; argc == 3 && i < 5; i++)
        if (!strcmp(argv[1], modes[i])) mode = i;
    if (mode < 0) {
        fprintf(stderr, "usage: head_dump <bert|gpt|gpt-similar|gpt-choice|bert-choice> <dir>\n");
        return 2;
    }
    int bert = mode == 0 || mode == 4;
    const char *dir = argv[2];
    dump_program = "head_dump";
    const int B = mode >= 2 ? 6 : 4, T = 24;
    cz_model_config c = bert ? tiny_config(CZ_ARCH_BERT, 3000, 64, 2, 4, 64)
                             : tiny_config(CZ_ARCH_GPT, 2000, 64, 2, 4, 64);
    c.head = mode == 2 ? CZ_HEAD_SIMILAR : mode >= 3 ? CZ_HEAD_CHOICE : CZ_HEAD_CLASSIFY;
    c.num_labels = mode >= 3 ? 3 : bert ? 3 : 2;
    c.lm_weight = bert ? 0.0f : 0.5f;
    int group = mode == 2 ? 2 : mode >= 3 ? 3 : 1; /* sequences per example */
    cz_error err;
    cz_gemm_ctx *gemm = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    dump_check(!gemm, "gemm", &err);
    cz_model *m;
    dump_check(cz_model_create(&m, &c, B, T, 0, gemm, &err), "create", &err);
    cz_model_init_weights(m, 77);
    perturb_no_decay(m, 8, 1, 0.05f);
    static test_batch tb;
    make_batch(&tb, &c, B, T, 0, 5, NULL, 31);
    int32_t labels[8], cls[8];
    for (int s = 0; s < B; s++) {
        /* an example's label sits on each of its sequences */
        labels[s] = ((s / group) * 2 + 1) % c.num_labels;
        cls[s] = (s % 2) ? T - 5 - 1 : T - 1; /* the last real token (odd rows are padded) */
    }
    cz_batch *b = &tb.b;
    b->max_pred = 0;
    b->mlm_positions = b->mlm_labels = b->nsp_labels = NULL;
    b->mlm_weights = NULL;
    b->labels = labels;
    if (!bert) b->cls_index = cls;

    dump_model(m, &c, dir);
    FILE *f = dump_open(dir, "batch.txt", "w");
    fprintf(f, "shape %d %d 0\n", B, T);
    dump_ints(f, "tokens", tb.tokens, B * T);
    int32_t mask[4096];
    for (int i = 0; i < B * T; i++) mask[i] = tb.mask[i];
    dump_ints(f, "attn_mask", mask, B * T);
    dump_ints(f, "labels", labels, B);
    if (bert)
        dump_ints(f, "segments", tb.segments, B * T);
    else {
        dump_ints(f, "cls_index", cls, B);
        dump_ints(f, "targets", tb.targets, B * T);
    }
    dump_close(f, "batch.txt");

    cz_losses l;
    cz_model_zero_grads(m);
    dump_check(cz_model_forward(m, b, &l, &err), "forward", &err);
    cz_model_backward(m, b, 1.0f);
    dump_model_grads(m, dir, "grads.safetensors");
    f = dump_open(dir, "result.txt", "w");
    fprintf(f, "loss %.10g\ntask %.10g\nlm %.10g\ngroup %d\n", l.loss, l.task_loss, l.lm_loss,
            group);
    dump_close(f, "result.txt");
    cz_model_free(m);
    cz_gemm_free(gemm);
    return 0;
}
