/* Test helper: copies a checkpoint (cloze-train's or import-hf's) with one
 * float of its "params" blob set to NaN, as a diverged or corrupted
 * training would leave it, so that tests can show how model.init_from
 * refuses it (test_hf_import_faults).
 * Usage: ckpt_poison IN OUT INDEX */
#include "cloze/ckpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IN OUT INDEX\n", argv[0]);
        return 2;
    }
    cz_error err;
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(argv[1], &c, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t k = strtoull(argv[3], NULL, 10);
    int n = cz_ckpt_count(c), done = 0;
    cz_blob *blobs = calloc((size_t)n, sizeof *blobs);
    float *params = NULL;
    for (int i = 0; i < n && blobs; i++) {
        cz_blob b = {cz_ckpt_name(c, i), NULL, 0};
        b.data = cz_ckpt_get(c, b.name, &b.size);
        if (!strcmp(b.name, CZ_BLOB_PARAMS) && (k + 1) * sizeof(float) <= b.size) {
            params = malloc(b.size);
            if (!params) return 1;
            memcpy(params, b.data, b.size);
            params[k] = NAN;
            b.data = params;
            done = 1;
        }
        blobs[i] = b;
    }
    int rc = blobs && done ? cz_ckpt_write(argv[2], blobs, n, &err) : -1;
    if (rc != 0) fprintf(stderr, "%s\n", done ? err.msg : "no params blob holding that index");
    free(params);
    free(blobs);
    cz_ckpt_free(c);
    return rc == 0 ? 0 : 1;
}
