/* The checkpoint reader (src/ckpt/checkpoint.c) and what reads a
 * checkpoint's vocabulary (src/ckpt/hf.c). The first input byte picks what
 * the rest is: even, a whole file (LZ4 frame and all); odd, the container
 * inside the frame, which the harness wraps into a valid LZ4 frame with its
 * content size and checksum, so that the container parser sees the fuzzed
 * bytes instead of liblz4 rejecting nearly every input (and, bit 1, with
 * each blob's checksum made right). Properties: read,
 * verify and scan agree on whether the file is good, and a good file's blobs
 * are what scan reports. */
#include "fuzz.h"

#include <lz4frame.h>

#include "cloze/ckpt.h"
#include "cloze/hf.h"

typedef struct scan_ctx {
    const cz_ckpt *c;
    int n;
} scan_ctx;

static void on_blob(void *ctx, const char *name, size_t size, const void *data) {
    scan_ctx *s = ctx;
    if (s->c) {
        FUZZ_CHECK(s->n < cz_ckpt_count(s->c) && !strcmp(cz_ckpt_name(s->c, s->n), name),
                   "scan blob %d '%s' is not read's", s->n, name);
        size_t got;
        const void *d = cz_ckpt_get(s->c, name, &got);
        FUZZ_CHECK(d && (got == size || cz_ckpt_get(s->c, name, NULL) != d),
                   "scan size of '%s' differs", name);
        if (data && got == size && cz_ckpt_get(s->c, name, NULL) == d)
            FUZZ_CHECK(!memcmp(d, data, size), "scan data of '%s' differs", name);
    }
    s->n++;
}

/* Bit 1 of the first byte (with bit 0): each blob's checksum in the
 * container is recomputed first, so that mutations of sizes and names are
 * not all caught by the checksum. */
static void fix_blob_checksums(uint8_t *c, size_t n) {
    if (n < 16) return;
    uint32_t count;
    memcpy(&count, c + 8, 4);
    size_t at = 16;
    for (uint32_t i = 0; i < count && at + 4 <= n; i++) {
        uint32_t nl;
        memcpy(&nl, c + at, 4);
        if (nl > 255 || at + 4 + nl + 16 > n) return;
        uint64_t sz;
        memcpy(&sz, c + at + 4 + nl, 8);
        size_t d = at + 4 + nl + 16;
        if (sz > n - d) return;
        uint64_t h = cz_fnv1a64(c + d, (size_t)sz, CZ_FNV_SEED);
        memcpy(c + at + 4 + nl + 8, &h, 8);
        at = d + (size_t)sz;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *path;
    if (data[0] & 1) {
        uint8_t *content = malloc(size);
        memcpy(content, data + 1, size - 1);
        if (data[0] & 2) fix_blob_checksums(content, size - 1);
        LZ4F_preferences_t prefs;
        memset(&prefs, 0, sizeof prefs);
        prefs.frameInfo.contentSize = size - 1;
        prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
        size_t cap = LZ4F_compressFrameBound(size - 1, &prefs);
        void *frame = malloc(cap);
        size_t n = LZ4F_compressFrame(frame, cap, content, size - 1, &prefs);
        FUZZ_CHECK(!LZ4F_isError(n), "lz4: %s", LZ4F_getErrorName(n));
        path = fuzz_file("ckpt-00000001.lz4", frame, n);
        free(frame);
        free(content);
    } else {
        path = fuzz_file("ckpt-00000001.lz4", data + 1, size - 1);
    }
    cz_error err;
    cz_ckpt *c = NULL;
    int read_ok = cz_ckpt_read(path, &c, &err) == 0;
    int verify_ok = cz_ckpt_verify(path, &err) == 0;
    scan_ctx s = {c, 0};
    int scan_ok = cz_ckpt_scan(path, on_blob, &s, &err) == 0;
    FUZZ_CHECK(read_ok == verify_ok && read_ok == scan_ok, "read %d, verify %d, scan %d disagree",
               read_ok, verify_ok, scan_ok);
    if (c) {
        FUZZ_CHECK(s.n == cz_ckpt_count(c), "scan saw %d blobs, read %d", s.n, cz_ckpt_count(c));
        for (int i = 0; i < cz_ckpt_count(c); i++) {
            size_t n;
            const void *d = cz_ckpt_get(c, cz_ckpt_name(c, i), &n);
            FUZZ_CHECK(d != NULL, "blob %d not found by its name", i);
        }
        cz_hf_vocab v;
        if (cz_hf_vocab_from_ckpt(&v, c, &err) == 1) {
            uint32_t vs;
            uint64_t fp;
            cz_hf_vocab_identity(&v, &vs, &fp, &err);
        }
        cz_ckpt_free(c);
    }
    return 0;
}
