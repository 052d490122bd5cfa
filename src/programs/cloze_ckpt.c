/* cloze-ckpt: look into checkpoint files.
 *   cloze-ckpt info FILE     blobs, sizes, step (when a "step" blob exists)
 *   cloze-ckpt verify FILE   full decompression + checksums; exit 0 ok, 1 bad
 *   cloze-ckpt dump-blob FILE NAME   one blob's raw bytes on stdout */
#include "cloze/ckpt.h"

#include <string.h>
#include <sys/stat.h>

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: cloze-ckpt info FILE     list blobs, sizes and the step\n"
        "       cloze-ckpt verify FILE   check every checksum (exit 0 = good, 1 = bad)\n"
        "       cloze-ckpt dump-blob FILE NAME   write one blob's raw bytes to stdout\n"
        "                                        (params: the flat fp32 parameter buffer)\n"
        "       cloze-ckpt --help\n"
        "FILE is a ckpt-<step>.lz4 written by cloze-train (an LZ4 frame: `lz4 -d` opens it).\n");
}

typedef struct info_ctx {
    int count;
    unsigned long long total;
    long long step;
    int has_step;
} info_ctx;

static void on_blob(void *p, const char *name, size_t size, const void *data) {
    info_ctx *c = p;
    printf("  %-40s %14zu bytes\n", name, size);
    c->count++;
    c->total += size;
    /* the train loop stores "step" as a little-endian int64 (or int32) */
    if (data && strcmp(name, "step") == 0 && (size == 8 || size == 4)) {
        const unsigned char *b = data;
        unsigned long long v = 0;
        for (size_t i = 0; i < size; i++) v |= (unsigned long long)b[i] << (8 * i);
        c->step = size == 8 ? (long long)v : (long long)(int)(unsigned)v;
        c->has_step = 1;
    }
}

static int dump_blob(const char *path, const char *name) {
    cz_error err;
    cz_ckpt *c = NULL;
    if (cz_ckpt_read(path, &c, &err) != 0) {
        fprintf(stderr, "cloze-ckpt: %s\n", err.msg);
        return 1;
    }
    size_t size = 0;
    const void *data = cz_ckpt_get(c, name, &size);
    int rc = 0;
    if (!data) {
        fprintf(stderr, "cloze-ckpt: %s: no blob named '%s' (cloze-ckpt info lists them)\n", path,
                name);
        rc = 1;
    } else if (fwrite(data, 1, size, stdout) != size || fflush(stdout) != 0) {
        fprintf(stderr, "cloze-ckpt: writing blob '%s' to stdout failed\n", name);
        rc = 1;
    }
    cz_ckpt_free(c);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "dump-blob") == 0) return dump_blob(argv[2], argv[3]);
    if (argc != 3 || (strcmp(argv[1], "info") != 0 && strcmp(argv[1], "verify") != 0)) {
        usage(stderr);
        return 2;
    }
    cz_log_setup(0, CZ_LOG_WARN);
    const char *path = argv[2];
    cz_error err;
    if (strcmp(argv[1], "verify") == 0) {
        if (cz_ckpt_verify(path, &err) != 0) {
            fprintf(stderr, "cloze-ckpt: %s\n", err.msg);
            return 1;
        }
        printf("%s: ok\n", path);
        return 0;
    }
    info_ctx c = {0, 0, 0, 0};
    printf("%s:\n", path);
    if (cz_ckpt_scan(path, on_blob, &c, &err) != 0) {
        fprintf(stderr, "cloze-ckpt: %s\n", err.msg);
        return 1;
    }
    struct stat st;
    long long file_size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    printf("blobs %d, %llu bytes uncompressed, %lld bytes on disk", c.count, c.total, file_size);
    if (file_size > 0) printf(" (ratio %.3f)", (double)c.total / (double)file_size);
    printf("\n");
    if (c.has_step) printf("step %lld\n", c.step);
    return 0;
}
