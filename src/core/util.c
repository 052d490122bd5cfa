#include "cloze/core.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double cz_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *cz_format_duration(double s, char *buf, size_t len) {
    if (s < 0 || s != s) s = 0;
    if (s < 60) {
        snprintf(buf, len, "%.1fs", s);
    } else if (s < 3600) {
        snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    } else {
        long t = (long)s;
        snprintf(buf, len, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
    }
    return buf;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

double cz_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void *cz_alloc(size_t bytes, cz_error *err) {
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    if (posix_memalign(&p, 64, rounded) != 0) {
        cz_fail(err, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, rounded);
    return p;
}

void cz_free(void *p) {
    free(p);
}

int cz_write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int cz_note_earlier_kept(cz_error *err, const char *path) {
    size_t n = err ? strlen(err->msg) : 0;
    if (err && access(path, F_OK) == 0)
        snprintf(err->msg + n, sizeof err->msg - n, " (earlier file kept)");
    return -1;
}

int cz_write_file_atomic(const char *path, const void *data, size_t len, cz_error *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return cz_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
    if (cz_write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        cz_fail(err, "%s: write failed: %s", path, strerror(e));
        return cz_note_earlier_kept(err, path);
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return cz_fail(err, "%s: cannot rename into place: %s", path, strerror(e));
    }
    cz_fsync_dir_of(path); /* make the rename itself durable */
    return 0;
}

void cz_fsync_dir_of(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int cz_read_file(const char *path, void **data, size_t *len, cz_error *err) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return cz_fail(err, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = cz_alloc(n + 1, err);
    if (!buf) {
        fclose(f);
        return cz_fail_prefix(err, "%s", path);
    }
    if (n && fread(buf, 1, n, f) != n) {
        fclose(f);
        cz_free(buf);
        return cz_fail(err, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

uint64_t cz_fnv1a64(const void *data, size_t len, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int cz_make_dirs(const char *path, cz_error *err) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return cz_fail(err, "%.64s...: directory path longer than %zu bytes", path, sizeof buf - 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return cz_fail(err, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return cz_fail(err, "%s: cannot create directory: %s", buf, strerror(errno));
    return 0;
}

int cz_buf_append(cz_buf *b, const char *s, size_t n, cz_error *err) {
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->len + n + 1) c *= 2;
        char *d = realloc(b->data, c);
        if (!d) return cz_fail(err, "out of memory (%zu bytes of text)", c);
        b->data = d;
        b->cap = c;
    }
    if (n) memcpy(b->data + b->len, s, n); /* s may be an empty buffer's NULL */
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int cz_grow(const cz_grow_item *items, int count, size_t n, uint32_t *cap, uint32_t first,
            const char *what, const char *unit, cz_error *err) {
    if (n < *cap) return 0;
    uint32_t c = *cap ? 2 * *cap : first;
    if (c <= *cap) return cz_fail(err, "%s: more than %u %s", what, *cap, unit);
    for (int i = 0; i < count; i++) {
        void **array = (void **)items[i].array;
        void *grown = realloc(*array, (size_t)c * items[i].elem);
        if (!grown) return cz_fail(err, "%s: out of memory for %u %s", what, c, unit);
        *array = grown;
    }
    *cap = c;
    return 0;
}

void cz_buf_free(cz_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}
