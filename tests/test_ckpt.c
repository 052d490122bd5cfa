/* ckpt: round trip, the real `lz4 -d` opens our files, truncated and
 * corrupted files are detected with file + offset, a failed write keeps the
 * earlier checkpoint, find-latest skips a bad newest file, prune keeps
 * keep_last, and the cloze-ckpt program's verify/info. */
#include "cloze/ckpt.h"
#include "cloze/rng.h"

#include <lz4frame.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

enum { NP = 300007 }; /* 1.2 MB: two shuffle chunks */
static float params[NP];
static int64_t step_value = 10;
static const char config_text[] = "model: { layers = 2; };";

static void make_blobs(cz_blob b[4]) {
    cz_rng_stream s = cz_rng_stream_make(7, CZ_RNG_TEST, 0, 0, 0);
    /* half smooth (compressible) half random, like trained weights are not */
    for (int i = 0; i < NP; i++)
        params[i] = i < NP / 2 ? (float)(i % 100) : (float)cz_rng_normal(&s, (uint64_t)i);
    b[0] = (cz_blob){"step", &step_value, sizeof step_value};
    b[1] = (cz_blob){"params", params, sizeof params};
    b[2] = (cz_blob){"config", config_text, sizeof config_text};
    b[3] = (cz_blob){"empty", "", 0};
}

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static int copy_prefix(const char *src, const char *dst, long len, long flip_at) {
    void *data;
    size_t n;
    cz_error err;
    if (cz_read_file(src, &data, &n, &err) != 0) return -1;
    if (flip_at >= 0 && flip_at < (long)n) ((unsigned char *)data)[flip_at] ^= 0x5a;
    FILE *f = fopen(dst, "wb");
    fwrite(data, 1, len < 0 ? n : (size_t)len, f);
    fclose(f);
    cz_free(data);
    return 0;
}

static void test_round_trip(const char *path) {
    cz_blob b[4];
    make_blobs(b);
    cz_error err;
    CHECK(cz_ckpt_write(path, b, 4, &err) == 0, "write: %s", err.msg);
    CHECK(cz_ckpt_verify(path, &err) == 0, "verify: %s", err.msg);
    cz_ckpt *c = NULL;
    CHECK(cz_ckpt_read(path, &c, &err) == 0, "read: %s", err.msg);
    if (!c) return;
    CHECK(cz_ckpt_count(c) == 4, "count %d", cz_ckpt_count(c));
    for (int i = 0; i < 4; i++) {
        size_t size = 1;
        const void *p = cz_ckpt_get(c, b[i].name, &size);
        CHECK(p && size == b[i].size && memcmp(p, b[i].data, size) == 0, "blob %s differs",
              b[i].name);
        CHECK(strcmp(cz_ckpt_name(c, i), b[i].name) == 0, "order of blob %d", i);
    }
    CHECK(cz_ckpt_get(c, "nope", NULL) == NULL, "absent blob found");
    int64_t st = 0;
    CHECK(cz_ckpt_get_exact(c, "params", &st, sizeof st, &err) != 0 && strstr(err.msg, "params"),
          "size mismatch not reported");
    cz_ckpt_free(c);
    CHECK(file_size(path) < (long)sizeof params, "no compression: %ld", file_size(path));
}

/* The stock lz4 tool decompresses the file; we parse the result here,
 * independently of checkpoint.c, and find our blobs in it. */
static void test_lz4_tool(const char *path) {
    if (access("/usr/bin/lz4", X_OK) != 0) {
        fprintf(stderr, "skip: no /usr/bin/lz4\n");
        return;
    }
    char out[512], cmd[1200];
    snprintf(out, sizeof out, "%s/plain.bin", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/lz4 -d -q -f '%s' '%s'", path, out);
    CHECK(system(cmd) == 0, "lz4 -d failed on %s", path);
    void *data;
    size_t n;
    cz_error err;
    if (cz_read_file(out, &data, &n, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    const unsigned char *p = data;
    CHECK(n > 16 && memcmp(p, "CLZCKPT2", 8) == 0, "magic after lz4 -d");
    uint32_t count;
    memcpy(&count, p + 8, 4);
    CHECK(count == 4, "count %u", count);
    size_t off = 16;
    int found_params = 0;
    for (uint32_t i = 0; i < count && off < n; i++) {
        uint32_t nl;
        uint64_t size;
        memcpy(&nl, p + off, 4);
        char name[256] = {0};
        memcpy(name, p + off + 4, nl);
        memcpy(&size, p + off + 4 + nl, 8);
        uint32_t filter;
        memcpy(&filter, p + off + 4 + nl + 16, 4);
        off += 4 + nl + 24;
        if (strcmp(name, "params") == 0 && size == sizeof params && filter == 0) {
            found_params = memcmp(p + off, params, size) == 0;
        } else if (strcmp(name, "params") == 0 && size == sizeof params && filter == 1) {
            /* undo the filter as docs/checkpoints.md says: per 1 MiB chunk,
             * byte j of word i is at plane j, position i */
            unsigned char *plain = malloc(size);
            for (size_t c = 0; c < size; c += 1u << 20) {
                size_t len = size - c < (1u << 20) ? size - c : (1u << 20), q = len / 4;
                for (size_t i = 0; i < q; i++)
                    for (int j = 0; j < 4; j++) plain[c + 4 * i + j] = p[off + c + j * q + i];
            }
            found_params = memcmp(plain, params, size) == 0;
            /* and the stored planes are not the plain bytes */
            CHECK(memcmp(p + off, params, size) != 0, "params stored unshuffled");
            free(plain);
        }
        off += size;
    }
    CHECK(found_params, "params blob not found intact in lz4 -d output");
    CHECK(off == n, "container length %zu vs %zu", off, n);
    cz_free(data);
}

static void test_damage(const char *path) {
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.lz4", dir);
    long len = file_size(path);
    long cuts[] = {3, 10, len / 2, len - 5, len - 1};
    cz_error err;
    for (int i = 0; i < 5; i++) {
        copy_prefix(path, bad, cuts[i], -1);
        int rc = cz_ckpt_verify(bad, &err);
        CHECK(rc != 0, "truncated to %ld bytes not detected", cuts[i]);
        CHECK(rc != 0 && strstr(err.msg, bad) && strstr(err.msg, "offset"),
              "message lacks file/offset: %s", err.msg);
    }
    long flips[] = {4, 20, len / 3, len / 2, len - 6, len - 2};
    for (int i = 0; i < 6; i++) {
        copy_prefix(path, bad, -1, flips[i]);
        int rc = cz_ckpt_verify(bad, &err);
        CHECK(rc != 0, "byte %ld flipped not detected", flips[i]);
        CHECK(rc != 0 && strstr(err.msg, bad) && strstr(err.msg, "offset"),
              "message lacks file/offset: %s", err.msg);
    }
    /* garbage after the frame */
    copy_prefix(path, bad, -1, -1);
    FILE *f = fopen(bad, "ab");
    fputs("junk", f);
    fclose(f);
    CHECK(cz_ckpt_verify(bad, &err) != 0, "trailing bytes not detected");
}

/* DIR/NAME: a valid LZ4 frame (with or without its content size) around a
 * container of one blob 'x' whose size and checksum fields are given, and
 * n bytes of data. */
static void one_blob_file(const char *name, uint64_t size, uint64_t sum, const void *data, size_t n,
                          int content_size, char *path, size_t len) {
    unsigned char c[16 + 4 + 1 + 16 + 64];
    memcpy(c, "CLZCKPT1", 8);
    uint32_t one = 1, zero = 0, nl = 1;
    memcpy(c + 8, &one, 4);
    memcpy(c + 12, &zero, 4);
    memcpy(c + 16, &nl, 4);
    c[20] = 'x';
    memcpy(c + 21, &size, 8);
    memcpy(c + 29, &sum, 8);
    memcpy(c + 37, data, n);
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.contentSize = content_size ? 37 + n : 0;
    char buf[1024];
    size_t z = LZ4F_compressFrame(buf, sizeof buf, c, 37 + n, &prefs);
    CHECK(!LZ4F_isError(z), "compressFrame");
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, z, f);
    fclose(f);
}

/* A container whose blob checksum is wrong but whose LZ4 frame is valid:
 * only our per-blob checksum can catch it, and it names the blob. */
static void test_blob_checksum(void) {
    char path[512];
    one_blob_file("sum.lz4", 3, cz_fnv1a64("abc", 3, CZ_FNV_SEED) ^ 1, "abc", 3, 0, path,
                  sizeof path);
    cz_error err;
    CHECK(cz_ckpt_verify(path, &err) != 0 && strstr(err.msg, "'x'") &&
              strstr(err.msg, "checksum") && strstr(err.msg, "offset 37"),
          "blob checksum: %s", err.msg);
}

/* A failed write says "(earlier file kept)" only when there was one: the
 * tmp file's name taken by a directory makes cz_ckpt_write fail before
 * writing, with and without a file already at the path. */
static void test_failed_write_note(void) {
    char path[512], tmp[600];
    cz_blob b = {"x", "abc", 3};
    cz_error err;
    for (int earlier = 0; earlier < 2; earlier++) {
        snprintf(path, sizeof path, "%s/note-%d.lz4", dir, earlier);
        if (earlier) CHECK(cz_ckpt_write(path, &b, 1, &err) == 0, "write: %s", err.msg);
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
        CHECK(mkdir(tmp, 0755) == 0, "mkdir %s", tmp);
        CHECK(cz_ckpt_write(path, &b, 1, &err) != 0, "write over a directory succeeded");
        CHECK(!strstr(err.msg, "earlier file kept") == !earlier, "earlier %d: %s", earlier,
              err.msg);
        rmdir(tmp);
    }
}

/* Two blobs of one name (found by tests/fuzz/fuzz_checkpoint: a flipped
 * byte turned "adam_m" into a second "adam_v", the file loaded, and lookups
 * by name saw only the first): read, verify and scan refuse it, naming the
 * blob and both offsets. */
static void test_duplicate_name(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/dup.lz4", dir);
    cz_blob b[3] = {{"adam_v", "abc", 3}, {"step", "s", 1}, {"adam_v", "xyz", 3}};
    cz_error err;
    CHECK(cz_ckpt_write(path, b, 3, &err) == 0, "write: %s", err.msg);
    cz_ckpt *ck = NULL;
    CHECK(cz_ckpt_read(path, &ck, &err) != 0 && strstr(err.msg, "'adam_v' appears twice") &&
              strstr(err.msg, "first at container offset 16") && !ck,
          "read: %s", err.msg);
    CHECK(cz_ckpt_verify(path, &err) != 0 && strstr(err.msg, "appears twice"), "verify: %s",
          err.msg);
    CHECK(cz_ckpt_scan(path, NULL, NULL, &err) != 0 && strstr(err.msg, "appears twice"), "scan: %s",
          err.msg);
}

/* A blob size the file cannot hold (a corrupt size field in a valid LZ4
 * frame) is an error naming the blob and the offset of its size field,
 * found before anything is allocated: without the bound, 2^62 failed as
 * "out of memory", a size near 20 GB was allocated and zeroed (found by
 * tests/fuzz/fuzz_checkpoint), and 2^64 - 1 wrapped to a 64-byte buffer the
 * blob then overflowed. With and without the frame's content size (then the
 * bound is LZ4's 255:1 ratio over the file size). */
static void test_blob_size(void) {
    /* (no size a machine could allocate: a regression must fail fast) */
    const uint64_t sizes[] = {1ULL << 62, 1ULL << 40, UINT64_MAX - 1, UINT64_MAX};
    char z[40], path[512];
    memset(z, 'z', sizeof z);
    for (int with_size = 0; with_size < 2; with_size++) {
        for (int k = 0; k < 4; k++) {
            one_blob_file("size.lz4", sizes[k], 0, z, sizeof z, with_size, path, sizeof path);
            cz_error err;
            cz_ckpt *ck = NULL;
            CHECK(cz_ckpt_read(path, &ck, &err) != 0 && strstr(err.msg, "'x'") &&
                      strstr(err.msg, "runs past") && strstr(err.msg, "offset 21"),
                  "read, blob size %llu: %s", (unsigned long long)sizes[k], err.msg);
            cz_ckpt_free(ck);
            CHECK(cz_ckpt_verify(path, &err) != 0 && strstr(err.msg, "runs past"),
                  "verify, blob size %llu: %s", (unsigned long long)sizes[k], err.msg);
        }
    }
}

/* A version-1 container (no filter fields), as the code before the filter
 * wrote it, built here independently: it still reads, verifies and scans,
 * bit for bit. */
static void count_blob(void *ctx, const char *name, size_t size, const void *data) {
    (void)name, (void)size, (void)data;
    ++*(int *)ctx;
}

static void test_version1(void) {
    cz_blob b[4];
    make_blobs(b);
    size_t cap = 16 + sizeof params + 4 * (4 + 16 + 16) + 64, n = 16;
    unsigned char *c = malloc(cap);
    memcpy(c, "CLZCKPT1", 8);
    uint32_t four = 4, zero = 0;
    memcpy(c + 8, &four, 4);
    memcpy(c + 12, &zero, 4);
    for (int i = 0; i < 4; i++) {
        uint32_t nl = (uint32_t)strlen(b[i].name);
        uint64_t size = b[i].size, h = cz_fnv1a64(b[i].data, b[i].size, CZ_FNV_SEED);
        memcpy(c + n, &nl, 4);
        memcpy(c + n + 4, b[i].name, nl);
        memcpy(c + n + 4 + nl, &size, 8);
        memcpy(c + n + 12 + nl, &h, 8);
        memcpy(c + n + 20 + nl, b[i].data, size);
        n += 20 + nl + size;
    }
    size_t bound = LZ4F_compressFrameBound(n, NULL);
    char *frame = malloc(bound), path[512];
    size_t fn = LZ4F_compressFrame(frame, bound, c, n, NULL);
    CHECK(!LZ4F_isError(fn), "compressFrame");
    snprintf(path, sizeof path, "%s/v1.lz4", dir);
    FILE *f = fopen(path, "wb");
    fwrite(frame, 1, fn, f);
    fclose(f);
    free(frame);
    free(c);
    cz_error err;
    cz_ckpt *k = NULL;
    CHECK(cz_ckpt_verify(path, &err) == 0, "v1 verify: %s", err.msg);
    int blobs = 0;
    CHECK(cz_ckpt_scan(path, count_blob, &blobs, &err) == 0 && blobs == 4, "v1 scan: %d", blobs);
    CHECK(cz_ckpt_read(path, &k, &err) == 0, "v1 read: %s", err.msg);
    if (!k) return;
    for (int i = 0; i < 4; i++) {
        size_t size = 1;
        const void *p = cz_ckpt_get(k, b[i].name, &size);
        CHECK(p && size == b[i].size && memcmp(p, b[i].data, size) == 0, "v1 blob %s differs",
              b[i].name);
    }
    cz_ckpt_free(k);
}

/* The filter must make fp32 smaller than LZ4 alone does: a float blob of
 * normally distributed values (as initial weights are) against the same
 * container without the filter, compressed here by liblz4 directly; and
 * text stays plain (filter 0) because shuffling does not pay there. */
static void test_shuffle_compresses(void) {
    cz_rng_stream s = cz_rng_stream_make(11, CZ_RNG_TEST, 0, 0, 0);
    for (int i = 0; i < NP; i++) params[i] = 0.02f * (float)cz_rng_normal(&s, (uint64_t)i);
    char text[8192];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "model: { layers = 12; };\n"[i % 26];
    char shuf[512];
    snprintf(shuf, sizeof shuf, "%s/shuf.lz4", dir);
    cz_blob b[2] = {{"params", params, sizeof params}, {"text", text, sizeof text}};
    cz_error err;
    CHECK(cz_ckpt_write(shuf, b, 2, &err) == 0, "%s", err.msg);
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max4MB;
    size_t bound = LZ4F_compressFrameBound(sizeof params, &prefs);
    char *frame = malloc(bound);
    size_t plain = LZ4F_compressFrame(frame, bound, params, sizeof params, &prefs);
    free(frame);
    long shuffled = file_size(shuf);
    CHECK(!LZ4F_isError(plain) && shuffled < (long)(0.95 * (double)plain),
          "shuffled file %ld bytes, plain LZ4 %zu: the filter saves under 5%%", shuffled, plain);
    cz_ckpt *k = NULL;
    CHECK(cz_ckpt_read(shuf, &k, &err) == 0, "%s", err.msg);
    size_t size = 0;
    const void *got = k ? cz_ckpt_get(k, "params", &size) : NULL;
    CHECK(got && size == sizeof params && memcmp(got, params, size) == 0, "shuffled round trip");
    got = k ? cz_ckpt_get(k, "text", &size) : NULL;
    CHECK(got && size == sizeof text && memcmp(got, text, size) == 0, "text round trip");
    cz_ckpt_free(k);
    /* the filters as stored: params 1, text 0 */
    char out[600], cmd[1400];
    snprintf(out, sizeof out, "%s/shuf.bin", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/lz4 -d -q -f '%s' '%s'", shuf, out);
    void *data;
    size_t n;
    if (access("/usr/bin/lz4", X_OK) == 0 && system(cmd) == 0 &&
        cz_read_file(out, &data, &n, &err) == 0) {
        const unsigned char *p = data;
        uint32_t f1, f2;
        memcpy(&f1, p + 16 + 4 + 6 + 16, 4);
        memcpy(&f2, p + 16 + 4 + 6 + 24 + sizeof params + 4 + 4 + 16, 4);
        CHECK(f1 == 1 && f2 == 0, "filters stored: params %u (want 1), text %u (want 0)", f1, f2);
        cz_free(data);
    }
}

/* The background writer writes a snapshot: the caller's buffers change
 * right after start and the file still holds what they held; writes come
 * one at a time, and a failed one is reported by the next wait or start. */
static void test_writer(void) {
    cz_error err;
    cz_ckpt_writer *w = cz_ckpt_writer_create(0, 1, &err);
    CHECK(w != NULL, "%s", err.msg);
    if (!w) return;
    char a[512], b[512], bad[600];
    snprintf(a, sizeof a, "%s/async-a.lz4", dir);
    snprintf(b, sizeof b, "%s/async-b.lz4", dir);
    snprintf(bad, sizeof bad, "%s/missing/async.lz4", dir);
    for (int i = 0; i < NP; i++) params[i] = (float)i;
    float *owned = cz_alloc(sizeof params, &err);
    memcpy(owned, params, sizeof params);
    cz_blob bl[2] = {{"params", params, sizeof params}, {"moment", owned, sizeof params}};
    int take[2] = {0, 1};
    CHECK(cz_ckpt_writer_start(w, a, bl, 2, take, NULL, 1, &err) == 0, "start: %s", err.msg);
    params[7] = -1.0f; /* after start: not in the file */
    bl[1] = (cz_blob){"moment", params, sizeof params};
    CHECK(cz_ckpt_writer_start(w, b, bl, 2, NULL, NULL, 1, &err) == 0, "second start: %s", err.msg);
    CHECK(cz_ckpt_writer_wait(w, &err) == 0, "wait: %s", err.msg);
    cz_ckpt *k = NULL;
    CHECK(cz_ckpt_read(a, &k, &err) == 0, "read a: %s", err.msg);
    const float *p = k ? cz_ckpt_get(k, "params", NULL) : NULL;
    const float *q = k ? cz_ckpt_get(k, "moment", NULL) : NULL;
    CHECK(p && q && p[7] == 7.0f && q[7] == 7.0f && p[NP - 1] == (float)(NP - 1),
          "a holds the snapshot");
    cz_ckpt_free(k);
    CHECK(cz_ckpt_read(b, &k, &err) == 0, "read b: %s", err.msg);
    p = k ? cz_ckpt_get(k, "params", NULL) : NULL;
    CHECK(p && p[7] == -1.0f, "b holds the second snapshot");
    cz_ckpt_free(k);
    CHECK(cz_ckpt_writer_start(w, bad, bl, 1, NULL, NULL, 1, &err) == 0, "start: %s", err.msg);
    CHECK(cz_ckpt_writer_start(w, b, bl, 1, NULL, NULL, 1, &err) != 0 && strstr(err.msg, bad),
          "failed write not reported by the next start: %s", err.msg);
    CHECK(cz_ckpt_writer_wait(w, &err) == 0, "reported twice: %s", err.msg);
    cz_ckpt_writer_free(w);

    /* inline (background = 0): on disk when start returns, from the
     * caller's buffers, the same bytes; a failure is start's own result */
    cz_ckpt_writer *in = cz_ckpt_writer_create(0, 0, &err);
    CHECK(in != NULL, "%s", err.msg);
    if (!in) return;
    char c[512];
    snprintf(c, sizeof c, "%s/inline-b.lz4", dir);
    owned = cz_alloc(sizeof params, &err);
    memcpy(owned, params, sizeof params);
    cz_blob bi[2] = {{"params", params, sizeof params}, {"moment", owned, sizeof params}};
    CHECK(cz_ckpt_writer_start(in, c, bi, 2, take, NULL, 1, &err) == 0, "inline: %s", err.msg);
    CHECK(access(c, F_OK) == 0, "inline: not written when start returned");
    void *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK(cz_read_file(b, &x, &nx, &err) == 0 && cz_read_file(c, &y, &ny, &err) == 0 && nx == ny &&
              memcmp(x, y, nx) == 0,
          "inline and background writes of the same blobs differ");
    cz_free(x);
    cz_free(y);
    CHECK(cz_ckpt_writer_start(in, bad, bi, 1, NULL, NULL, 1, &err) != 0 && strstr(err.msg, bad),
          "inline: a failed write must fail start: %s", err.msg);
    CHECK(cz_ckpt_writer_wait(in, &err) == 0, "inline: reported twice: %s", err.msg);
    cz_ckpt_writer_free(in);
}

static int count_tmp_files(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.tmp\\.' > /dev/null", dir);
    return system(cmd) == 0; /* grep exit 0: found */
}

static void test_failed_write_keeps_old(const char *path) {
    /* RLIMIT_FSIZE makes the disk "full" even for root (read-only dirs are
     * not, for root). A 4 MiB random blob cannot be compressed under 1 MiB. */
    size_t nbig = 1 << 20;
    float *big = malloc(nbig * sizeof(float));
    cz_rng_stream s = cz_rng_stream_make(9, CZ_RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < nbig; i++) big[i] = (float)cz_rng_normal(&s, i);
    cz_blob b = {"params", big, nbig * sizeof(float)};
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1 << 20;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    cz_error err;
    int rc = cz_ckpt_write(path, &b, 1, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(rc != 0 && strstr(err.msg, path), "write past the size limit succeeded or unnamed: %s",
          err.msg);
    CHECK(cz_ckpt_verify(path, &err) == 0, "earlier file damaged: %s", err.msg);
    cz_ckpt *c;
    if (cz_ckpt_read(path, &c, &err) == 0) {
        size_t size;
        CHECK(cz_ckpt_get(c, "params", &size) && size == sizeof params, "earlier content lost");
        cz_ckpt_free(c);
    }
    CHECK(!count_tmp_files(), "tmp file left behind");
    /* a directory that does not exist */
    char nowhere[512];
    snprintf(nowhere, sizeof nowhere, "%s/no/such/ckpt.lz4", dir);
    CHECK(cz_ckpt_write(nowhere, &b, 1, &err) != 0 && strstr(err.msg, "no/such"), "bad dir: %s",
          err.msg);
    free(big);
}

static void test_run_dir(void) {
    char run[400], p[600];
    snprintf(run, sizeof run, "%s/run", dir);
    mkdir(run, 0755);
    cz_error err;
    long steps[] = {10, 20, 30, 40};
    for (int i = 0; i < 4; i++) {
        int64_t st = steps[i];
        cz_blob b[2] = {{"step", &st, sizeof st}, {"params", params, 4000}};
        cz_ckpt_path(p, sizeof p, run, steps[i]);
        CHECK(cz_ckpt_write(p, b, 2, &err) == 0, "%s", err.msg);
    }
    /* names that are not checkpoints are ignored */
    snprintf(p, sizeof p, "%s/ckpt-00000050.lz4.tmp.123", run);
    FILE *f = fopen(p, "w");
    fclose(f);
    snprintf(p, sizeof p, "%s/ckpt-12.lz4", run);
    f = fopen(p, "w");
    fclose(f);
    long *list;
    int n;
    CHECK(cz_ckpt_list(run, &list, &n, &err) == 0 && n == 4 && list[0] == 10 && list[3] == 40,
          "list: n=%d", n);
    free(list);
    /* newest corrupted: skipped with a warning */
    char newest[600], found[600];
    cz_ckpt_path(newest, sizeof newest, run, 40);
    copy_prefix(newest, newest, file_size(newest) - 3, -1);
    long step = -1;
    CHECK(cz_ckpt_find_latest(run, found, sizeof found, &step, &err) == 1 && step == 30,
          "find latest: step %ld", step);
    /* pruning counts the good ones only: 20 and 30 kept, and 40, corrupt,
     * kept as newer than they are (counting it deleted 20, so that one bad
     * file more left no good one) */
    CHECK(cz_ckpt_prune(run, 2, &err) == 0, "%s", err.msg);
    CHECK(cz_ckpt_list(run, &list, &n, &err) == 0 && n == 3 && list[0] == 20 && list[1] == 30 &&
              list[2] == 40,
          "prune kept n=%d", n);
    free(list);
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    mkdir(empty, 0755);
    CHECK(cz_ckpt_find_latest(empty, found, sizeof found, &step, &err) == 0, "empty run dir");
}

static int run_cmd(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_program(const char *good) {
    const char *bd = getenv("CLOZE_BUILD_DIR");
    if (!bd) return;
    char cmd[1200], bad[512], out[512];
    snprintf(bad, sizeof bad, "%s/bad.lz4", dir);
    snprintf(out, sizeof out, "%s/info.txt", dir);
    copy_prefix(good, bad, file_size(good) / 2, -1);
    snprintf(cmd, sizeof cmd, "%s/cloze-ckpt verify '%s' > /dev/null", bd, good);
    CHECK(run_cmd(cmd) == 0, "cloze-ckpt verify good");
    snprintf(cmd, sizeof cmd, "%s/cloze-ckpt verify '%s' 2> /dev/null", bd, bad);
    CHECK(run_cmd(cmd) == 1, "cloze-ckpt verify bad");
    snprintf(cmd, sizeof cmd, "%s/cloze-ckpt info '%s' > '%s'", bd, good, out);
    CHECK(run_cmd(cmd) == 0, "cloze-ckpt info");
    void *txt;
    size_t n;
    cz_error err;
    if (cz_read_file(out, &txt, &n, &err) == 0) {
        CHECK(strstr(txt, "step 10") && strstr(txt, "params") && strstr(txt, "1200028 bytes"),
              "info output:\n%s", (char *)txt);
        cz_free(txt);
    }
    snprintf(cmd, sizeof cmd, "%s/cloze-ckpt --help > /dev/null", bd);
    CHECK(run_cmd(cmd) == 0, "--help");
}

int main(void) {
    cz_log_setup(0, CZ_LOG_WARN);
    snprintf(dir, sizeof dir, "/tmp/cloze_test_ckpt.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/ckpt-00000010.lz4", dir);
    test_round_trip(path);
    test_lz4_tool(path);
    test_damage(path);
    test_blob_checksum();
    test_blob_size();
    test_duplicate_name();
    test_failed_write_note();
    test_version1();
    test_failed_write_keeps_old(path);
    test_run_dir();
    test_program(path);
    test_writer();
    test_shuffle_compresses(); /* last: it rewrites params[] */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) return 1;
    printf("ok\n");
    return 0;
}
