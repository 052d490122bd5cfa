/* model_dump <bert|gpt|gpt2>[-mup] <dir>: the C side of the PyTorch comparisons
 * (tests/reference/model_reference.py; gpt2, the pre-LN layout with a padded
 * vocabulary: tests/reference/gpt2_reference.py against transformers'
 * GPT2LMHeadModel; -mup, the same models under µP at hidden 128 on base
 * width 32: tests/reference/mup_reference.py against the mup package).
 * Builds a small model, writes
 *   dir/config.json          Hugging Face config (cz_hf_config_write)
 *   dir/weights.safetensors  the initial weights
 *   dir/batch.txt            the batch, one "name v1 v2 ..." line per array
 *   dir/grads.safetensors    d(loss)/d(params) at the initial weights
 *   dir/result.txt           "loss/mlm/nsp/lm <value>" and "adamw <step> <loss>"
 *   dir/mup.txt              -mup: "base_width", "output_mult", "attn_scale"
 *                            and per tensor "tensor <name> <matrix_like>
 *                            <lr_mult> <wd_mult> <rms of its initial values>
 *                            <numel>" (cz_model_tensor_mup)
 * then runs 10 AdamW steps on the same batch (dropout off), logging the loss
 * before each step and after the last; each tensor's learning rate and weight
 * decay times its µP multipliers (1 under the standard parametrization). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "test_model_fixture.h"

/* AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: decoupled decay
 * p *= 1 - lr*wd (weights only), then p -= lr * m_hat / (sqrt(v_hat) + eps). */
typedef struct adamw {
    double lr, b1, b2, eps, wd;
    double *m, *v;
    long t;
} adamw;

/* the rms of each tensor's values, and the µP facts of mup.txt */
static void write_mup(const char *path, cz_model *m) {
    FILE *f = fopen(path, "w");
    if (!f) exit(1);
    const cz_model_config *c = cz_model_get_config(m);
    fprintf(f, "base_width %d\noutput_mult %.10g\nattn_scale %.10g\n", c->mup_base_width,
            (double)cz_model_output_mult(m), (double)cz_model_attn_scale(c));
    for (int k = 0; k < cz_model_num_tensors(m); k++) {
        const cz_tensor_info *t = cz_model_tensor(m, k);
        cz_tensor_mup u;
        cz_model_tensor_mup(m, k, &u);
        double ss = 0;
        for (size_t i = 0; i < t->numel; i++) {
            double x = cz_model_params(m)[t->offset + i];
            ss += x * x;
        }
        fprintf(f, "tensor %s %d %.10g %.10g %.10g %zu\n", t->name, u.matrix_like, u.lr_mult,
                u.wd_mult, sqrt(ss / (double)t->numel), t->numel);
    }
    fclose(f);
}

static void adamw_step(adamw *o, cz_model *model) {
    o->t++;
    double c1 = 1 - pow(o->b1, (double)o->t), c2 = 1 - pow(o->b2, (double)o->t);
    float *p = cz_model_params(model), *g = cz_model_grads(model);
    for (int k = 0; k < cz_model_num_tensors(model); k++) {
        const cz_tensor_info *t = cz_model_tensor(model, k);
        cz_tensor_mup u;
        cz_model_tensor_mup(model, k, &u);
        double wd = t->no_decay ? 0.0 : o->wd * u.wd_mult, lr = o->lr * u.lr_mult;
        for (size_t i = t->offset; i < t->offset + t->numel; i++) {
            o->m[i] = o->b1 * o->m[i] + (1 - o->b1) * g[i];
            o->v[i] = o->b2 * o->v[i] + (1 - o->b2) * (double)g[i] * g[i];
            double w = p[i] * (1 - lr * wd);
            w -= lr * (o->m[i] / c1) / (sqrt(o->v[i] / c2) + o->eps);
            p[i] = (float)w;
        }
    }
}

int main(int argc, char **argv) {
    char arch[16] = "";
    int mup = 0;
    if (argc == 3) {
        snprintf(arch, sizeof arch, "%s", argv[1]);
        char *dash = strstr(arch, "-mup");
        if (dash && !dash[4]) {
            *dash = 0;
            mup = 1;
        }
    }
    if (argc != 3 || (strcmp(arch, "bert") && strcmp(arch, "gpt") && strcmp(arch, "gpt2"))) {
        fprintf(stderr, "usage: model_dump <bert|gpt|gpt2>[-mup] <dir>\n");
        return 2;
    }
    int bert = !strcmp(arch, "bert");
    const char *dir = argv[2];
    dump_program = "model_dump";
    const int B = 3, T = 32, P = 5;
    cz_model_config c = bert ? tiny_config(CZ_ARCH_BERT, 30522, 128, 2, 2, 64)
                             : tiny_config(CZ_ARCH_GPT, 5000, 128, 4, 4, 64);
    if (!strcmp(arch, "gpt2")) { /* GPT-2's layout, 5000 -> 5056 rows */
        c.layout = CZ_LAYOUT_PRE_LN;
        c.vocab_pad_to = 64;
    }
    if (mup) { /* w = 128 / 32 = 4 */
        c.parametrization = CZ_PARAM_MUP;
        c.mup_base_width = 32;
    }
    cz_error err;
    cz_gemm_ctx *gemm = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    dump_check(!gemm, "gemm", &err);
    cz_model *m;
    dump_check(cz_model_create(&m, &c, B, T, P, gemm, &err), "create", &err);
    cz_model_init_weights(m, 2024);
    char path[1024];
    if (mup) {
        snprintf(path, sizeof path, "%s/mup.txt", dir);
        write_mup(path, m);
    }
    /* LayerNorm and bias parameters away from 1 / 0, so that their paths count */
    perturb_no_decay(m, 6, 2, 0.05f);
    static test_batch tb;
    make_batch(&tb, &c, B, T, P, 5, NULL, 77);

    dump_model(m, &c, dir);
    FILE *f = dump_open(dir, "batch.txt", "w");
    fprintf(f, "shape %d %d %d\n", B, T, P);
    dump_ints(f, "tokens", tb.tokens, B * T);
    int32_t mask[4096];
    for (int i = 0; i < B * T; i++) mask[i] = tb.mask[i];
    dump_ints(f, "attn_mask", mask, B * T);
    if (bert) {
        dump_ints(f, "segments", tb.segments, B * T);
        dump_ints(f, "mlm_positions", tb.mlm_pos, B * P);
        dump_ints(f, "mlm_labels", tb.mlm_lab, B * P);
        int32_t w[1024];
        for (int i = 0; i < B * P; i++) w[i] = (int32_t)tb.mlm_w[i];
        dump_ints(f, "mlm_weights", w, B * P);
        dump_ints(f, "nsp_labels", tb.nsp, B);
    } else {
        dump_ints(f, "targets", tb.targets, B * T);
    }
    dump_close(f, "batch.txt");

    cz_losses l;
    cz_model_zero_grads(m);
    dump_check(cz_model_forward(m, &tb.b, &l, &err), "forward", &err);
    cz_model_backward(m, &tb.b, 1.0f);
    dump_model_grads(m, dir, "grads.safetensors");

    f = dump_open(dir, "result.txt", "w");
    fprintf(f, "loss %.10g\nmlm %.10g\nnsp %.10g\nlm %.10g\n", l.loss, l.mlm_loss, l.nsp_loss,
            l.lm_loss);
    size_t np = cz_model_num_params(m);
    adamw o = {1e-3, 0.9, 0.999, 1e-6, 0.01, calloc(np, sizeof(double)), calloc(np, sizeof(double)),
               0};
    for (int step = 0; step <= 10; step++) {
        cz_model_zero_grads(m);
        dump_check(cz_model_forward(m, &tb.b, &l, &err), "forward", &err);
        fprintf(f, "adamw %d %.10g\n", step, l.loss);
        if (step == 10) break;
        cz_model_backward(m, &tb.b, 1.0f);
        adamw_step(&o, m);
    }
    dump_close(f, "result.txt");
    free(o.m);
    free(o.v);
    cz_model_free(m);
    cz_gemm_free(gemm);
    return 0;
}
