/* The one CHECK of cloze's C tests: a failed check prints where and why and
 * is counted; the test's main() returns non-zero when `failures` > 0. Each
 * test is a single translation unit, so the counter can live here. */
#ifndef CLOZE_TESTS_CHECK_H
#define CLOZE_TESTS_CHECK_H

#include <stdio.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
