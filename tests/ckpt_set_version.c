/* Test helper: copies a cloze-train checkpoint with the run-state version
 * (the first 8 bytes of its "state" blob, src/train/run_state.c) replaced,
 * so that tests can show how a checkpoint of another version is refused.
 * Usage: ckpt_set_version IN OUT VERSION */
#include "cloze/ckpt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IN OUT VERSION\n", argv[0]);
        return 2;
    }
    cz_error err;
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(argv[1], &c, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int n = cz_ckpt_count(c);
    cz_blob *blobs = calloc((size_t)n, sizeof *blobs);
    uint64_t version = strtoull(argv[3], NULL, 10);
    void *state = NULL;
    for (int i = 0; i < n && blobs; i++) {
        blobs[i].name = cz_ckpt_name(c, i);
        blobs[i].data = cz_ckpt_get(c, blobs[i].name, &blobs[i].size);
        if (!strcmp(blobs[i].name, CZ_BLOB_STATE) && blobs[i].size >= sizeof version) {
            state = malloc(blobs[i].size);
            memcpy(state, blobs[i].data, blobs[i].size);
            memcpy(state, &version, sizeof version); /* little-endian host */
            blobs[i].data = state;
        }
    }
    int rc = blobs && state ? cz_ckpt_write(argv[2], blobs, n, &err) : -1;
    if (rc != 0) fprintf(stderr, "%s\n", state ? err.msg : "no state blob");
    free(state);
    free(blobs);
    cz_ckpt_free(c);
    return rc == 0 ? 0 : 1;
}
