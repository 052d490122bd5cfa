/* hf_dump CKPT BATCH OUTDIR: the C side of the Hugging Face comparisons
 * (tests/hf/test_hf_interop.py). Loads the model of a cloze checkpoint
 * (its config and params blobs: one written by cloze-train or by cloze-ckpt
 * import-hf), runs one forward pass (dropout off) on the batch in BATCH
 * ("name v1 v2 ..." lines: shape B T P, tokens, segments, attn_mask,
 * mlm_positions, mlm_labels, mlm_weights, nsp_labels, targets) and writes
 *   OUTDIR/hidden.safetensors   hidden.0 .. hidden.L, each [B*T, H]
 *   OUTDIR/result.txt           "loss/mlm/nsp/lm <value>" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/ckpt.h"
#include "cloze/config.h"
#include "cloze/safetensors.h"
#include "dump.h"

static dump_arrays batch;

static const int32_t *get(const char *name) {
    return dump_get(&batch, name);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hf_dump CKPT BATCH OUTDIR\n");
        return 2;
    }
    dump_program = "hf_dump";
    cz_log_setup(0, CZ_LOG_WARN);
    cz_error err;
    cz_ckpt *c;
    dump_check(cz_ckpt_read(argv[1], &c, &err), argv[1], &err);
    size_t n = 0;
    const char *text = cz_ckpt_get(c, CZ_BLOB_CONFIG, &n);
    char *t = text ? strndup(text, n) : NULL;
    cz_config cfg;
    if (!t) dump_die(argv[1], "no config blob");
    dump_check(cz_config_from_string(&cfg, t, argv[1], &err), "config", &err);
    free(t);
    dump_read_ints(&batch, argv[2]);
    const int32_t *shape = get("shape");
    if (!shape) dump_die(argv[2], "no shape line");
    int B = shape[0], T = shape[1], P = shape[2];
    int bert = cfg.model.arch == CZ_ARCH_BERT;
    cz_model *m;
    dump_check(cz_model_create(&m, &cfg.model, B, T, bert ? P : 0, NULL, &err), "model", &err);
    dump_check(cz_ckpt_get_exact(c, "params", cz_model_params(m), cz_model_num_params(m) * 4, &err),
               "params", &err);
    cz_ckpt_free(c);

    int N = B * T;
    uint8_t *mask = malloc((size_t)N);
    float *w = malloc((size_t)(B * P + 1) * sizeof *w);
    const int32_t *am = get("attn_mask"), *mw = get("mlm_weights");
    for (int i = 0; i < N; i++) mask[i] = am ? (uint8_t)am[i] : 1;
    for (int i = 0; i < B * P; i++) w[i] = mw ? (float)mw[i] : 1.0f;
    cz_batch b;
    memset(&b, 0, sizeof b);
    b.batch = B;
    b.seq = T;
    b.tokens = get("tokens");
    b.attn_mask = mask;
    if (bert) {
        b.segments = get("segments");
        b.max_pred = P;
        b.mlm_positions = get("mlm_positions");
        b.mlm_labels = get("mlm_labels");
        b.mlm_weights = w;
        b.nsp_labels = get("nsp_labels");
    } else {
        b.targets = get("targets");
    }
    cz_losses l;
    dump_check(cz_model_forward(m, &b, &l, &err), "forward", &err);

    const cz_model_config *mc = cz_model_get_config(m);
    int L = mc->layers, H = mc->hidden;
    cz_tensor_info *ti = calloc((size_t)L + 1, sizeof *ti);
    float *all = malloc((size_t)(L + 1) * N * H * sizeof *all);
    for (int k = 0; k <= L; k++) {
        snprintf(ti[k].name, sizeof ti[k].name, "hidden.%d", k);
        ti[k].offset = (size_t)k * N * H;
        ti[k].numel = (size_t)N * H;
        ti[k].ndim = 2;
        ti[k].shape[0] = N;
        ti[k].shape[1] = H;
        memcpy(all + ti[k].offset, cz_model_hidden_states(m, k), ti[k].numel * sizeof *all);
    }
    char path[1200];
    dump_check(cz_safetensors_write(dump_path(path, sizeof path, argv[3], "hidden.safetensors"), ti,
                                    L + 1, all, NULL, 0, &err),
               path, &err);
    FILE *f = dump_open(argv[3], "result.txt", "w");
    fprintf(f, "loss %.9g\nmlm %.9g\nnsp %.9g\nlm %.9g\n", l.loss, l.mlm_loss, l.nsp_loss,
            l.lm_loss);
    dump_close(f, "result.txt");
    free(ti);
    free(all);
    free(mask);
    free(w);
    cz_model_free(m);
    return 0;
}
