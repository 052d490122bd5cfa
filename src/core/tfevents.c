/* TensorBoard event files of scalars: TFRecord framing with masked CRC-32C
 * and the few Event fields a scalar needs (the format: tfevents.h). */
#include "cloze/tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* CRC-32C bit by bit (reflected: the low bit first). A step's event is a
 * few hundred bytes, so a table buys nothing here. */
uint32_t cz_crc32c(const void *data, size_t n) {
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* TensorFlow's mask (crc32c.h): a CRC stored inside data whose own CRC is
 * computed later would otherwise make that CRC degenerate. */
uint32_t cz_crc32c_masked(const void *data, size_t n) {
    uint32_t c = cz_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protocol buffer encoding into a fixed buffer ---- */

typedef struct pb {
    uint8_t *p;
    size_t len, cap;
    int overflow;
} pb;

static void pb_byte(pb *b, uint8_t v) {
    if (b->len < b->cap)
        b->p[b->len++] = v;
    else
        b->overflow = 1;
}

static void pb_varint(pb *b, uint64_t v) {
    while (v >= 0x80) {
        pb_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pb_byte(b, (uint8_t)v);
}

static void pb_fixed(pb *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) pb_byte(b, (uint8_t)(v >> (8 * i)));
}

static void pb_bytes(pb *b, int field, const void *s, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    for (size_t i = 0; i < n; i++) pb_byte(b, ((const uint8_t *)s)[i]);
}

/* Event's common head: wall_time (1, fixed64 double) and step (2, varint;
 * int64 as two's complement, as protobuf does). */
static void pb_event_head(pb *b, long step) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    uint64_t bits;
    memcpy(&bits, &t, 8);
    pb_varint(b, 1 << 3 | 1);
    pb_fixed(b, bits, 8);
    if (step != 0) {
        pb_varint(b, 2 << 3 | 0);
        pb_varint(b, (uint64_t)(int64_t)step);
    }
}

/* ---- records ---- */

static int write_record(cz_tfevents *w, const uint8_t *data, size_t n, cz_error *err) {
    if (!w->f) return 0;
    uint8_t head[12];
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t hc = cz_crc32c_masked(head, 8), dc = cz_crc32c_masked(data, n);
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(hc >> (8 * i));
    uint8_t tail[4] = {(uint8_t)dc, (uint8_t)(dc >> 8), (uint8_t)(dc >> 16), (uint8_t)(dc >> 24)};
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, 4, w->f) != 4 || fflush(w->f) != 0) {
        cz_fail(err, "%s: cannot write: %s", w->path, strerror(errno));
        fclose(w->f);
        w->f = NULL;
        return -1;
    }
    return 0;
}

int cz_tfevents_scalars(cz_tfevents *w, long step, const cz_scalar *v, int n, cz_error *err) {
    if (!w->f || n <= 0) return 0;
    /* the summary's values first (its length prefixes it), then the event */
    size_t cap = 64;
    for (int i = 0; i < n; i++) cap += strlen(v[i].tag) + 32;
    uint8_t *mem = malloc(2 * cap);
    if (!mem) return cz_fail(err, "%s: out of memory for an event", w->path);
    pb sum = {mem, 0, cap, 0}, ev = {mem + cap, 0, cap, 0};
    for (int i = 0; i < n; i++) {
        uint8_t vb[512];
        pb val = {vb, 0, sizeof vb, 0};
        pb_bytes(&val, 1, v[i].tag, strlen(v[i].tag));
        float f = (float)v[i].value;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        pb_varint(&val, 2 << 3 | 5);
        pb_fixed(&val, bits, 4);
        if (val.overflow) continue; /* a tag of hundreds of bytes: not ours */
        pb_bytes(&sum, 1, vb, val.len);
    }
    pb_event_head(&ev, step);
    pb_bytes(&ev, 5, sum.p, sum.len);
    int rc = sum.overflow || ev.overflow
                 ? cz_fail(err, "%s: event of step %ld too large", w->path, step)
                 : write_record(w, ev.p, ev.len, err);
    free(mem);
    return rc;
}

/* ---- reading ---- */

static uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int rd_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *i < n; s += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* An Event's step and whether it holds a summary; -1 when it does not parse. */
static int parse_event(const uint8_t *p, size_t n, long *step, int *summary) {
    size_t i = 0;
    *step = 0;
    *summary = 0;
    while (i < n) {
        uint64_t key, v;
        if (rd_varint(p, n, &i, &key)) return -1;
        switch (key & 7) {
        case 0:
            if (rd_varint(p, n, &i, &v)) return -1;
            if (key >> 3 == 2) *step = (long)(int64_t)v;
            break;
        case 1:
        case 5:
            if (n - i < ((key & 7) == 1 ? 8u : 4u)) return -1;
            i += (key & 7) == 1 ? 8 : 4;
            break;
        case 2:
            if (rd_varint(p, n, &i, &v) || v > n - i) return -1;
            i += v;
            if (key >> 3 == 5) *summary = 1;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

long cz_tfevents_read(const char *path, cz_tfevents_record_fn fn, void *ctx, long *bad_offset,
                      cz_error *err) {
    *bad_offset = -1;
    FILE *f = fopen(path, "rb");
    if (!f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    long size = fstat(fileno(f), &st) == 0 ? (long)st.st_size : 0;
    long off = 0, records = 0;
    uint8_t *data = NULL;
    for (;;) {
        uint8_t head[12], tail[4];
        size_t got = fread(head, 1, 12, f);
        if (got == 0 && feof(f)) break;
        int bad = got != 12 || (uint32_t)le(head + 8, 4) != cz_crc32c_masked(head, 8);
        uint64_t n = bad ? 0 : le(head, 8);
        /* a length beyond the file is a partial record (or a damaged one) */
        if (!bad && n > (uint64_t)(size - off - 16)) bad = 1;
        if (!bad) {
            uint8_t *d = realloc(data, n + 1);
            if (!d) {
                free(data);
                fclose(f);
                return cz_fail(err, "%s: out of memory for a record of %llu bytes", path,
                               (unsigned long long)n);
            }
            data = d;
            bad = fread(data, 1, n, f) != n || fread(tail, 1, 4, f) != 4 ||
                  (uint32_t)le(tail, 4) != cz_crc32c_masked(data, n);
        }
        long step;
        int summary;
        if (!bad && parse_event(data, n, &step, &summary) != 0) bad = 1;
        if (bad) {
            *bad_offset = off;
            break;
        }
        if (fn) fn(ctx, off, step, summary, data, n);
        records++;
        off += 16 + (long)n;
    }
    free(data);
    fclose(f);
    return records;
}

/* ---- opening a directory's new file ---- */

typedef struct cut_scan {
    long keep_below;
    long cut;      /* offset of the first record to drop; -1: none */
    long kept_sum; /* summaries before it */
} cut_scan;

static void find_cut(void *ctx, long offset, long step, int summary, const uint8_t *data,
                     size_t len) {
    (void)data, (void)len;
    cut_scan *c = ctx;
    if (c->cut >= 0 || !summary) return; /* file_version and SessionLog records stay */
    if (step >= c->keep_below)
        c->cut = offset;
    else
        c->kept_sum++;
}

static int is_events_name(const char *name) {
    return !strncmp(name, "events.out.tfevents.", 20);
}

/* An earlier file cut to what the new attempt does not write again. */
static int repair(const char *path, long keep_below, cz_error *err) {
    cut_scan c = {keep_below, -1, 0};
    long bad;
    if (cz_tfevents_read(path, find_cut, &c, &bad, err) < 0) return -1;
    if (c.kept_sum == 0) {
        if (unlink(path) != 0) return cz_fail(err, "%s: cannot remove: %s", path, strerror(errno));
        if (bad >= 0 && c.cut < 0)
            cz_warn("%s: damaged or partial record at byte %ld and nothing before it to keep; "
                    "file removed",
                    path, bad);
        return 0;
    }
    long at = c.cut >= 0 && (bad < 0 || c.cut < bad) ? c.cut : bad;
    if (at < 0) return 0;
    if (truncate(path, (off_t)at) != 0)
        return cz_fail(err, "%s: cannot cut at byte %ld: %s", path, at, strerror(errno));
    if (at == bad)
        cz_warn("%s: damaged or partial record at byte %ld (a job stopped while writing?); "
                "cut there, the run goes on",
                path, bad);
    return 0;
}

int cz_tfevents_open(cz_tfevents *w, const char *dir, long keep_below, int resumed, cz_error *err) {
    memset(w, 0, sizeof *w);
    DIR *d = opendir(dir);
    if (!d) return cz_fail(err, "%s: cannot list: %s", dir, strerror(errno));
    long long newest = -1;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!is_events_name(e->d_name)) continue;
        long long t = strtoll(e->d_name + 20, NULL, 10);
        if (t > newest) newest = t;
        char path[CZ_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = repair(path, keep_below, err);
    }
    closedir(d);
    if (rc) return -1;
    /* the name sorts after every earlier file's: readers take them in name
     * order, and an attempt's steps must follow the earlier ones */
    long long now = (long long)time(NULL);
    if (now <= newest) now = newest + 1;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    for (char *h = host; *h; h++)
        if (!(*h == '-' || *h == '.' || *h == '_' || (*h >= '0' && *h <= '9') ||
              (*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z')))
            *h = '_';
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%.64s.cloze", dir, now, host);
    w->f = fopen(w->path, "wb");
    if (!w->f) return cz_fail(err, "%s: cannot create: %s", w->path, strerror(errno));
    uint8_t mem[128];
    pb ev = {mem, 0, sizeof mem, 0};
    pb_event_head(&ev, 0);
    pb_bytes(&ev, 3, "brain.Event:2", 13);
    if (write_record(w, ev.p, ev.len, err)) return -1;
    if (resumed) {
        uint8_t sl[2] = {1 << 3 | 0, 1}; /* SessionLog { status: START } */
        ev.len = 0;
        pb_event_head(&ev, keep_below);
        pb_bytes(&ev, 6, sl, 2);
        if (write_record(w, ev.p, ev.len, err)) return -1;
    }
    return 0;
}

void cz_tfevents_close(cz_tfevents *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
}
