/* fuzz: what every libFuzzer harness of tests/fuzz/ shares.
 *
 * A harness defines LLVMFuzzerTestOneInput (and may define
 * LLVMFuzzerInitialize). Built two ways: with clang's libFuzzer and
 * ASan/UBSan by tests/fuzz/run.sh (CMake project tests/fuzz), and with the
 * project's compiler against driver.c, which runs given files through the
 * harness once: the seeds and the crashers found so far are regression tests
 * of ctest (tests/fuzz.cmake). A property a harness checks beyond "no crash"
 * fails through FUZZ_CHECK, which aborts, so libFuzzer keeps the input. */
#ifndef CLOZE_FUZZ_H
#define CLOZE_FUZZ_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz property failed %s:%d: ", __FILE__, __LINE__);                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A scratch directory of this process (below $CLOZE_FUZZ_TMP, else in
 * /dev/shm when there is one, so that the readers that take a path cost no
 * disk writes), made once and removed at exit with the files in it. */
static char fuzz_scratch[256];
static char fuzz_names[8][64];
static int fuzz_n_names;

static inline void fuzz_cleanup(void) {
    char p[512];
    for (int i = 0; i < fuzz_n_names; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_scratch, fuzz_names[i]);
        unlink(p);
    }
    rmdir(fuzz_scratch);
}

static inline const char *fuzz_dir(void) {
    if (!fuzz_scratch[0]) {
        const char *base = getenv("CLOZE_FUZZ_TMP");
        if (!base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_scratch, sizeof fuzz_scratch, "%s/cloze-fuzz-XXXXXX", base);
        if (!mkdtemp(fuzz_scratch)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
    }
    return fuzz_scratch;
}

/* Writes data to <fuzz_dir>/<name> (replacing it) and returns the path. */
static inline const char *fuzz_file(const char *name, const void *data, size_t size) {
    static char path[4][512];
    static int next;
    char *p = path[next++ & 3];
    snprintf(p, 512, "%s/%s", fuzz_dir(), name);
    int known = 0;
    for (int i = 0; i < fuzz_n_names; i++) known |= !strcmp(fuzz_names[i], name);
    if (!known && fuzz_n_names < 8) snprintf(fuzz_names[fuzz_n_names++], 64, "%s", name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(p);
        abort();
    }
    const uint8_t *d = data;
    while (size > 0) {
        ssize_t n = write(fd, d, size);
        if (n <= 0) {
            perror(p);
            abort();
        }
        d += n, size -= (size_t)n;
    }
    close(fd);
    return p;
}

/* Where the committed test files live (tests/golden vocabularies). */
#ifndef CLOZE_SOURCE_DIR
#define CLOZE_SOURCE_DIR "."
#endif

#endif
