/* The one CHECK of cloze's C tests: a failed check prints where and why and
 * is counted; the test's main() returns non-zero when `failures` > 0. Each
 * test is a single translation unit, so the counter can live here. */
#ifndef CLOZE_TESTS_CHECK_H
#define CLOZE_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures = 0;
static int check_rank = -1; /* MPI tests (mpi_main.h): the rank, named in each failure */

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (check_rank >= 0)                                                                   \
                fprintf(stderr, "FAIL rank %d %s:%d: ", check_rank, __FILE__, __LINE__);           \
            else                                                                                   \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The end of a test's main(): removes its scratch directory (NULL: none)
 * and turns the failure count into the exit status. */
static inline int check_finish(const char *scratch_dir) {
    if (scratch_dir && scratch_dir[0]) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", scratch_dir);
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}

#endif
