/* core: Philox known-answer vectors (Random123's kat_vectors), the
 * statistical sanity of the derived draws, and atomic file writes. */
#include "cloze/core.h"
#include "cloze/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static void kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                const uint32_t expect[4]) {
    cz_rng_stream s = {{k0, k1}, ((uint64_t)c3 << 32) | c2};
    uint32_t out[4];
    cz_philox4x32(&s, ((uint64_t)c1 << 32) | c0, out);
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == expect[i], "philox word %d: got %08x want %08x", i, out[i], expect[i]);
}

static void test_philox_kat(void) {
    const uint32_t e0[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    kat(0, 0, 0, 0, 0, 0, e0);
    const uint32_t e1[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, e1);
    const uint32_t e2[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, e2);
}

static void test_distributions(void) {
    cz_rng_stream s = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 3);
    const int n = 200000;
    double sum = 0, sumsq = 0, nsum = 0, nsumsq = 0;
    long below_counts[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = cz_rng_uniform(&s, (uint64_t)i);
        CHECK(u >= 0 && u < 1, "uniform out of range: %g", u);
        sum += u;
        sumsq += u * u;
        double z = cz_rng_normal(&s, (uint64_t)i);
        nsum += z;
        nsumsq += z * z;
        below_counts[cz_rng_below(&s, (uint64_t)(2 * i), 10)]++;
    }
    double mean = sum / n, var = sumsq / n - mean * mean;
    CHECK(fabs(mean - 0.5) < 0.005, "uniform mean %g", mean);
    CHECK(fabs(var - 1.0 / 12) < 0.002, "uniform variance %g", var);
    CHECK(fabs(nsum / n) < 0.01, "normal mean %g", nsum / n);
    CHECK(fabs(nsumsq / n - 1) < 0.02, "normal variance %g", nsumsq / n);
    for (int b = 0; b < 10; b++)
        CHECK(labs(below_counts[b] - n / 10) < n / 100, "below(10) bucket %d has %ld", b,
              below_counts[b]);
    /* different stream names give different numbers; same names the same */
    cz_rng_stream s2 = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 4);
    cz_rng_stream s3 = cz_rng_stream_make(1234, CZ_RNG_TEST, 1, 2, 3);
    CHECK(cz_rng_u32(&s, 7) != cz_rng_u32(&s2, 7), "streams (..,3) and (..,4) collide");
    CHECK(cz_rng_u32(&s, 7) == cz_rng_u32(&s3, 7), "same stream, different numbers");
}

static void test_atomic_write(void) {
    char dir[] = "/tmp/cloze-core-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/file.bin", dir);
    cz_error err;
    CHECK(cz_write_file_atomic(path, "first", 5, &err) == 0, "%s", err.msg);
    /* a write into a directory that does not exist fails and says where */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/file.bin", dir);
    CHECK(cz_write_file_atomic(bad, "x", 1, &err) != 0, "write into missing dir succeeded");
    CHECK(strstr(err.msg, "missing/file.bin") != NULL, "error does not name file: %s", err.msg);
    void *data;
    size_t len;
    CHECK(cz_read_file(path, &data, &len, &err) == 0 && len == 5 && !memcmp(data, "first", 5),
          "read back");
    cz_free(data);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_philox_kat();
    test_distributions();
    test_atomic_write();
    char buf[32];
    CHECK(strcmp(cz_format_duration(3723, buf, sizeof buf), "1h02m03s") == 0, "%s", buf);
    printf("%s\n", failures ? "test_core: FAILED" : "test_core: ok");
    return failures ? 1 : 0;
}
