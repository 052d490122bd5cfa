/* The golden dump protocol: what the C side of the reference comparisons
 * (model_dump.c, head_dump.c, hf_dump.c, data_dump.c) writes and reads,
 * once. A dump is a directory of files that Python reads back
 * (the scripts in tests/reference/ and tests/hf/, test_data_reference.py):
 *   - "name v1 v2 ..." lines of integers (batch.txt: dump_ints, read back
 *     by dump_read_ints / dump_get);
 *   - "key value" lines (result.txt);
 *   - safetensors files (weights, gradients, hidden states).
 * Any error ends the program with one line, "<program>: <what>: <why>",
 * and exit status 1. Header-only, as check.h: each dump program is one
 * translation unit. */
#ifndef CLOZE_TESTS_DUMP_H
#define CLOZE_TESTS_DUMP_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/core.h"
#include "cloze/model.h"
#include "cloze/safetensors.h"

static const char *dump_program = "dump"; /* main() names its program */

static inline void dump_die(const char *what, const char *why) {
    fprintf(stderr, "%s: %s: %s\n", dump_program, what, why);
    exit(1);
}

/* err's message, or the program's end */
static inline void dump_check(int rc, const char *what, const cz_error *err) {
    if (rc) dump_die(what, err->msg);
}

/* dir/name, into path[len] */
static inline const char *dump_path(char *path, size_t len, const char *dir, const char *name) {
    if ((size_t)snprintf(path, len, "%s/%s", dir, name) >= len) dump_die(dir, "path too long");
    return path;
}

/* dir/name opened with mode, or the program's end naming the file */
static inline FILE *dump_open(const char *dir, const char *name, const char *mode) {
    char path[1200];
    FILE *f = fopen(dump_path(path, sizeof path, dir, name), mode);
    if (!f) dump_die(path, strerror(errno));
    return f;
}

static inline void dump_close(FILE *f, const char *what) {
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad) dump_die(what, "write failed");
}

/* "name v1 v2 ..." on one line */
static inline void dump_ints(FILE *f, const char *name, const int32_t *v, int n) {
    fprintf(f, "%s", name);
    for (int i = 0; i < n; i++) fprintf(f, " %d", v[i]);
    fprintf(f, "\n");
}

/* dir/config.json (the Hugging Face config of c) and
 * dir/weights.safetensors (m's parameters) */
static inline void dump_model(cz_model *m, const cz_model_config *c, const char *dir) {
    char path[1200];
    cz_error err;
    dump_check(cz_hf_config_write(dump_path(path, sizeof path, dir, "config.json"), c, &err), path,
               &err);
    dump_check(cz_model_save_safetensors(
                   m, dump_path(path, sizeof path, dir, "weights.safetensors"), &err),
               path, &err);
}

/* the gradient buffer as dir/name in safetensors, named by the parameter
 * table (the gradients have the parameters' layout) */
static inline void dump_model_grads(cz_model *m, const char *dir, const char *name) {
    int n = cz_model_num_tensors(m);
    cz_tensor_info *tl = malloc((size_t)n * sizeof *tl);
    if (!tl) dump_die(name, "out of memory");
    for (int k = 0; k < n; k++) tl[k] = *cz_model_tensor(m, k);
    char path[1200];
    cz_error err;
    dump_check(cz_safetensors_write(dump_path(path, sizeof path, dir, name), tl, n,
                                    cz_model_grads(m), NULL, 0, &err),
               path, &err);
    free(tl);
}

/* The integer lines of a file, by name */
#define DUMP_MAX_ARRAYS 16
typedef struct dump_arrays {
    struct {
        char name[32];
        int32_t *v;
        int n;
    } a[DUMP_MAX_ARRAYS];
    int n;
} dump_arrays;

static inline void dump_read_ints(dump_arrays *d, const char *path) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "r");
    if (!f) dump_die(path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        char name[32], *p = line, *end;
        int k = 0;
        if (sscanf(p, "%31s%n", name, &k) != 1) continue;
        if (d->n == DUMP_MAX_ARRAYS) dump_die(path, "more lines than DUMP_MAX_ARRAYS");
        p += k;
        int32_t *v = malloc(strlen(p) / 2 * sizeof *v + 8); /* at most one value per 2 bytes */
        if (!v) dump_die(path, "out of memory");
        int n = 0;
        for (long x = strtol(p, &end, 10); end != p; x = strtol(p, &end, 10)) {
            v[n++] = (int32_t)x;
            p = end;
        }
        memcpy(d->a[d->n].name, name, sizeof name);
        d->a[d->n].v = v;
        d->a[d->n++].n = n;
    }
    free(line);
    fclose(f);
}

/* the values of line `name`, or NULL */
static inline const int32_t *dump_get(const dump_arrays *d, const char *name) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->a[i].name, name)) return d->a[i].v;
    return NULL;
}

#endif
