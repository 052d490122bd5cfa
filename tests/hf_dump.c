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

static void die(const char *what, const cz_error *err) {
    fprintf(stderr, "hf_dump: %s: %s\n", what, err->msg);
    exit(1);
}

typedef struct array {
    char name[32];
    int32_t *v;
    int n;
} array;

static array arrays[16];
static int n_arrays;

static void read_batch(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0 && n_arrays < 16) {
        array *a = &arrays[n_arrays++];
        char *p = line;
        int k = 0;
        if (sscanf(p, "%31s%n", a->name, &k) != 1) continue;
        p += k;
        a->v = malloc(strlen(p) / 2 * sizeof *a->v + 8);
        char *end;
        for (long x = strtol(p, &end, 10); end != p; x = strtol(p, &end, 10)) {
            a->v[a->n++] = (int32_t)x;
            p = end;
        }
    }
    free(line);
    fclose(f);
}

static const int32_t *get(const char *name) {
    for (int i = 0; i < n_arrays; i++)
        if (!strcmp(arrays[i].name, name)) return arrays[i].v;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hf_dump CKPT BATCH OUTDIR\n");
        return 2;
    }
    cz_log_setup(0, CZ_LOG_WARN);
    cz_error err;
    cz_ckpt *c;
    if (cz_ckpt_read(argv[1], &c, &err)) die(argv[1], &err);
    size_t n = 0;
    const char *text = cz_ckpt_get(c, CZ_BLOB_CONFIG, &n);
    char *t = text ? strndup(text, n) : NULL;
    cz_config cfg;
    if (!t || cz_config_from_string(&cfg, t, argv[1], &err)) die("config", &err);
    free(t);
    read_batch(argv[2]);
    const int32_t *shape = get("shape");
    if (!shape) {
        fprintf(stderr, "hf_dump: %s: no shape line\n", argv[2]);
        return 1;
    }
    int B = shape[0], T = shape[1], P = shape[2];
    int bert = cfg.model.arch == CZ_ARCH_BERT;
    cz_model *m;
    if (cz_model_create(&m, &cfg.model, B, T, bert ? P : 0, NULL, &err)) die("model", &err);
    if (cz_ckpt_get_exact(c, "params", cz_model_params(m), cz_model_num_params(m) * 4, &err))
        die("params", &err);
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
    if (cz_model_forward(m, &b, &l, &err)) die("forward", &err);

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
    snprintf(path, sizeof path, "%s/hidden.safetensors", argv[3]);
    if (cz_safetensors_write(path, ti, L + 1, all, NULL, 0, &err)) die(path, &err);
    snprintf(path, sizeof path, "%s/result.txt", argv[3]);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    fprintf(f, "loss %.9g\nmlm %.9g\nnsp %.9g\nlm %.9g\n", l.loss, l.mlm_loss, l.nsp_loss,
            l.lm_loss);
    fclose(f);
    free(ti);
    free(all);
    free(mask);
    free(w);
    cz_model_free(m);
    return 0;
}
