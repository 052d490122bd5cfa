/* Test helper: copies a cloze-train checkpoint with the run-state version
 * (the first 8 bytes of its "state" blob, src/train/run_state.c) replaced,
 * so that tests can show how a checkpoint of another version is refused or
 * read. With --old-layout it also writes params, adam_m and adam_v in the
 * layout of run-state versions 1 and 2 (the tied word embedding after the
 * layers, just before the position embeddings) and drops the "layout"
 * blob: a checkpoint as an older cloze wrote it.
 * Usage: ckpt_set_version IN OUT VERSION [--old-layout] */
#include "cloze/ckpt.h"
#include "cloze/config.h"
#include "cloze/model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* today: [word embedding: vh][heads and layers: e][rest] -> [e][vh][rest] */
static float *old_layout(const void *data, size_t size, size_t vh, size_t e) {
    float *out = malloc(size);
    if (!out || size < (vh + e) * sizeof(float)) {
        free(out);
        return NULL;
    }
    const float *in = data;
    memcpy(out, in + vh, e * sizeof(float));
    memcpy(out + e, in, vh * sizeof(float));
    memcpy(out + e + vh, in + e + vh, size - (e + vh) * sizeof(float));
    return out;
}

/* vh and e of the checkpoint's model: e + vh is where the position
 * embeddings start */
static int model_sizes(const cz_ckpt *c, size_t *vh, size_t *e, cz_error *err) {
    size_t n = 0;
    const char *text = cz_ckpt_get(c, CZ_BLOB_CONFIG, &n);
    char *t = text ? strndup(text, n) : NULL;
    cz_config cfg;
    cz_model *m = NULL;
    int rc = t && cz_config_from_string(&cfg, t, "checkpoint", err) == 0 &&
                     cz_model_create(&m, &cfg.model, 1, 1, 1, NULL, err) == 0
                 ? 0
                 : -1;
    free(t);
    if (rc != 0) return -1;
    const cz_tensor_info *pos = cz_model_find_tensor(
        m, cfg.model.arch == CZ_ARCH_BERT ? "bert.embeddings.position_embeddings.weight"
                                          : "transformer.positions_embed.weight");
    *vh = (size_t)cfg.model.vocab_size * cfg.model.hidden;
    *e = pos ? pos->offset - *vh : 0;
    cz_model_free(m);
    return pos ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "--old-layout"))) {
        fprintf(stderr, "usage: %s IN OUT VERSION [--old-layout]\n", argv[0]);
        return 2;
    }
    int old = argc == 5;
    cz_error err;
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(argv[1], &c, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t vh = 0, e = 0;
    if (old && model_sizes(c, &vh, &e, &err) != 0) {
        fprintf(stderr, "%s: model: %s\n", argv[1], err.msg);
        return 1;
    }
    int n = cz_ckpt_count(c), nb = 0, bad = 0;
    cz_blob *blobs = calloc((size_t)n, sizeof *blobs);
    void **owned = calloc((size_t)n, sizeof *owned);
    uint64_t version = strtoull(argv[3], NULL, 10);
    int state = 0;
    for (int i = 0; i < n && blobs && owned; i++) {
        cz_blob b = {cz_ckpt_name(c, i), NULL, 0};
        b.data = cz_ckpt_get(c, b.name, &b.size);
        if (old && !strcmp(b.name, CZ_BLOB_LAYOUT)) continue;
        if (!strcmp(b.name, CZ_BLOB_STATE) && b.size >= sizeof version) {
            char *s = malloc(b.size);
            if (!s) return 1;
            memcpy(s, b.data, b.size);
            memcpy(s, &version, sizeof version); /* little-endian host */
            b.data = owned[i] = s;
            state = 1;
        } else if (old && (!strcmp(b.name, CZ_BLOB_PARAMS) || !strcmp(b.name, CZ_BLOB_ADAM_M) ||
                           !strcmp(b.name, CZ_BLOB_ADAM_V))) {
            b.data = owned[i] = old_layout(b.data, b.size, vh, e);
            bad |= !b.data;
        }
        blobs[nb++] = b;
    }
    int rc = blobs && state && !bad ? cz_ckpt_write(argv[2], blobs, nb, &err) : -1;
    if (rc != 0) fprintf(stderr, "%s\n", state && !bad ? err.msg : "no state blob, or bad sizes");
    for (int i = 0; i < n && owned; i++) free(owned[i]);
    free(owned);
    free(blobs);
    cz_ckpt_free(c);
    return rc == 0 ? 0 : 1;
}
