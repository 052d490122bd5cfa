/* ckpt: named blobs in one standard LZ4 frame (format in include/cloze/ckpt.h).
 *
 * Writing streams: the container is fed to LZ4F_compressUpdate in pieces of
 * CKPT_IO bytes straight from the caller's blobs, so memory stays at one
 * compressed piece however big the model. Reading streams the other way,
 * decompressing straight into the destination blob. */
#include "cloze/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <lz4.h>
#include <lz4frame.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_IO (1u << 20)
_Static_assert(CKPT_IO == CZ_CKPT_SHUFFLE_CHUNK, "a read piece is one shuffle chunk");
#define CKPT_READ (1u << 16) /* compressed bytes read at a time */

/* ---------------- writing ---------------- */

typedef struct writer {
    const char *path, *tmp;
    int fd;
    LZ4F_cctx *cctx;
    char *out;
    size_t out_cap;
    unsigned char *planes; /* CZ_CKPT_SHUFFLE_CHUNK bytes, for CZ_CKPT_SHUFFLE4 */
    char *probe;           /* LZ4_compressBound(CZ_CKPT_SHUFFLE_CHUNK) bytes */
} writer;

/* ---------------- the byte-shuffle filter ---------------- */

/* One chunk of n bytes: q = n / 4 words into four planes, the tail as is
 * (format in include/cloze/ckpt.h). */
static void shuffle4(unsigned char *dst, const unsigned char *src, size_t n) {
    size_t q = n / 4;
    for (size_t i = 0; i < q; i++) {
        dst[i] = src[4 * i];
        dst[q + i] = src[4 * i + 1];
        dst[2 * q + i] = src[4 * i + 2];
        dst[3 * q + i] = src[4 * i + 3];
    }
    memcpy(dst + 4 * q, src + 4 * q, n - 4 * q);
}

static void unshuffle4(unsigned char *dst, const unsigned char *src, size_t n) {
    size_t q = n / 4;
    for (size_t i = 0; i < q; i++) {
        dst[4 * i] = src[i];
        dst[4 * i + 1] = src[q + i];
        dst[4 * i + 2] = src[2 * q + i];
        dst[4 * i + 3] = src[3 * q + i];
    }
    memcpy(dst + 4 * q, src + 4 * q, n - 4 * q);
}

static int emit(writer *w, size_t n, cz_error *err) {
    if (cz_write_all(w->fd, w->out, n) != 0)
        return cz_fail(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

static int feed(writer *w, const void *data, size_t len, cz_error *err) {
    const char *p = data;
    while (len > 0) {
        size_t piece = len < CKPT_IO ? len : CKPT_IO;
        size_t n = LZ4F_compressUpdate(w->cctx, w->out, w->out_cap, p, piece, NULL);
        if (LZ4F_isError(n))
            return cz_fail(err, "%s: lz4 compression: %s", w->path, LZ4F_getErrorName(n));
        if (n && emit(w, n, err) != 0) return -1;
        p += piece;
        len -= piece;
    }
    return 0;
}

static void put_u32(unsigned char *b, uint32_t x) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(x >> (8 * i));
}
static void put_u64(unsigned char *b, uint64_t x) {
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(x >> (8 * i));
}
static uint32_t get_u32(const unsigned char *b) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) x |= (uint32_t)b[i] << (8 * i);
    return x;
}
static uint64_t get_u64(const unsigned char *b) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

/* The filter of one blob, by measurement: its first chunk compressed plain
 * and shuffled with LZ4's block compressor (a millisecond per MiB);
 * shuffled when that saves at least 1%. */
static int choose_filter(writer *w, const cz_blob *b) {
    if (b->size < CZ_CKPT_PROBE_MIN || b->size % 4 != 0) return CZ_CKPT_PLAIN;
    int len = (int)(b->size < CZ_CKPT_SHUFFLE_CHUNK ? b->size : CZ_CKPT_SHUFFLE_CHUNK);
    int cap = LZ4_compressBound(len);
    shuffle4(w->planes, b->data, (size_t)len);
    int plain = LZ4_compress_default(b->data, w->probe, len, cap);
    int shuffled = LZ4_compress_default((const char *)w->planes, w->probe, len, cap);
    return plain > 0 && shuffled > 0 && shuffled < plain - plain / 100 ? CZ_CKPT_SHUFFLE4
                                                                       : CZ_CKPT_PLAIN;
}

static int write_frame(writer *w, const cz_blob *blobs, int n, cz_error *err) {
    uint64_t total = 16;
    for (int i = 0; i < n; i++) total += 4 + strlen(blobs[i].name) + 24 + blobs[i].size;
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max4MB;
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    /* a checksum per block too: damage is reported at the block it hit
     * (within CKPT_READ bytes), not only at the end of the frame */
    prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
    prefs.frameInfo.contentSize = total;
    size_t e = LZ4F_createCompressionContext(&w->cctx, LZ4F_VERSION);
    if (LZ4F_isError(e)) return cz_fail(err, "%s: lz4: %s", w->path, LZ4F_getErrorName(e));
    w->out_cap = LZ4F_compressBound(CKPT_IO, &prefs) + LZ4F_HEADER_SIZE_MAX;
    w->out = malloc(w->out_cap);
    if (!w->out) return cz_fail(err, "%s: out of memory", w->path);
    size_t h = LZ4F_compressBegin(w->cctx, w->out, w->out_cap, &prefs);
    if (LZ4F_isError(h)) return cz_fail(err, "%s: lz4: %s", w->path, LZ4F_getErrorName(h));
    if (emit(w, h, err) != 0) return -1;
    unsigned char head[16];
    memcpy(head, CZ_CKPT_MAGIC, 8);
    put_u32(head + 8, (uint32_t)n);
    put_u32(head + 12, 0);
    if (feed(w, head, 16, err) != 0) return -1;
    for (int i = 0; i < n; i++) {
        unsigned char bh[4 + CZ_CKPT_NAME_MAX + 24];
        const cz_blob *b = &blobs[i];
        size_t nl = strlen(b->name);
        put_u32(bh, (uint32_t)nl);
        memcpy(bh + 4, b->name, nl);
        put_u64(bh + 4 + nl, b->size);
        put_u64(bh + 12 + nl, cz_fnv1a64(b->data, b->size, CZ_FNV_SEED));
        int filter = choose_filter(w, b);
        put_u32(bh + 20 + nl, (uint32_t)filter);
        put_u32(bh + 24 + nl, 0);
        if (feed(w, bh, 28 + nl, err) != 0) return -1;
        if (filter != CZ_CKPT_SHUFFLE4) {
            if (feed(w, b->data, b->size, err) != 0) return -1;
            continue;
        }
        for (size_t off = 0; off < b->size; off += CZ_CKPT_SHUFFLE_CHUNK) {
            size_t len =
                b->size - off < CZ_CKPT_SHUFFLE_CHUNK ? b->size - off : CZ_CKPT_SHUFFLE_CHUNK;
            shuffle4(w->planes, (const unsigned char *)b->data + off, len);
            if (feed(w, w->planes, len, err) != 0) return -1;
        }
    }
    size_t t = LZ4F_compressEnd(w->cctx, w->out, w->out_cap, NULL);
    if (LZ4F_isError(t)) return cz_fail(err, "%s: lz4: %s", w->path, LZ4F_getErrorName(t));
    return emit(w, t, err);
}

int cz_ckpt_write(const char *path, const cz_blob *blobs, int n, cz_error *err) {
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(blobs[i].name);
        if (nl == 0 || nl > CZ_CKPT_NAME_MAX)
            return cz_fail(err, "%s: blob %d: name length %zu not in 1..%d", path, i, nl,
                           CZ_CKPT_NAME_MAX);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    writer w = {path,
                tmp,
                -1,
                NULL,
                NULL,
                0,
                malloc(CZ_CKPT_SHUFFLE_CHUNK),
                malloc((size_t)LZ4_compressBound(CZ_CKPT_SHUFFLE_CHUNK))};
    if (!w.planes || !w.probe) {
        free(w.planes);
        free(w.probe);
        return cz_fail(err, "%s: out of memory", path);
    }
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w.fd < 0) {
        free(w.planes);
        free(w.probe);
        cz_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
        return cz_note_earlier_kept(err, path);
    }
    int rc = write_frame(&w, blobs, n, err);
    if (rc == 0 && fsync(w.fd) != 0)
        rc = cz_fail(err, "%s: fsync failed: %s", path, strerror(errno));
    if (close(w.fd) != 0 && rc == 0)
        rc = cz_fail(err, "%s: close failed: %s", path, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = cz_fail(err, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc != 0) {
        unlink(tmp);
        cz_note_earlier_kept(err, path);
    } else {
        cz_fsync_dir_of(path);
    }
    LZ4F_freeCompressionContext(w.cctx);
    free(w.out);
    free(w.planes);
    free(w.probe);
    return rc;
}

/* ---------------- the background writer ---------------- */

#define WRITER_MAX_BLOBS 64

struct cz_ckpt_writer {
    pthread_t thread;
    int background; /* 1: a thread writes a snapshot; 0: start writes the caller's buffers */
    int running;    /* a thread to join */
    int verbose;    /* log each finished write */
    int rc;         /* result of the last write */
    cz_error err;   /* its error */
    char path[4096], prune_dir[4096];
    int keep_last, n;
    cz_blob blobs[WRITER_MAX_BLOBS];
    char names[WRITER_MAX_BLOBS][CZ_CKPT_NAME_MAX + 1];
    void *data[WRITER_MAX_BLOBS]; /* the snapshot, owned until the write ends */
};

static void writer_release(cz_ckpt_writer *w) {
    for (int i = 0; i < WRITER_MAX_BLOBS; i++) {
        cz_free(w->data[i]);
        w->data[i] = NULL;
    }
}

/* The snapshot is freed as soon as it is on disk: between checkpoints the
 * writer holds no memory. */
static void *writer_main(void *arg) {
    cz_ckpt_writer *w = arg;
    double t0 = cz_now();
    w->rc = cz_ckpt_write(w->path, w->blobs, w->n, &w->err);
    writer_release(w);
    if (w->rc == 0 && w->prune_dir[0]) w->rc = cz_ckpt_prune(w->prune_dir, w->keep_last, &w->err);
    if (w->rc == 0 && w->verbose)
        cz_info("checkpoint %s written in %.2fs (%s)", w->path, cz_now() - t0,
                w->background ? "in the background" : "inline: training waited");
    return NULL;
}

cz_ckpt_writer *cz_ckpt_writer_create(int verbose, int background, cz_error *err) {
    cz_ckpt_writer *w = cz_alloc(sizeof(cz_ckpt_writer), err);
    if (w) {
        w->verbose = verbose;
        w->background = background;
    }
    return w;
}

int cz_ckpt_writer_wait(cz_ckpt_writer *w, cz_error *err) {
    if (w->running) {
        pthread_join(w->thread, NULL);
        w->running = 0;
    }
    if (w->rc != 0) {
        *err = w->err;
        w->rc = 0; /* reported once */
        return -1;
    }
    return 0;
}

int cz_ckpt_writer_start(cz_ckpt_writer *w, const char *path, const cz_blob *blobs, int n,
                         const int *take, const char *prune_dir, int keep_last, cz_error *err) {
    int rc = cz_ckpt_writer_wait(w, err);
    if (rc == 0 && n > WRITER_MAX_BLOBS)
        rc = cz_fail(err, "%s: %d blobs, the writer holds %d", path, n, WRITER_MAX_BLOBS);
    for (int i = 0; i < n; i++) {
        const void *data = NULL;
        if (take && take[i]) { /* ours now, whatever happens */
            data = w->data[i] = (void *)blobs[i].data;
        } else if (!w->background) { /* written before start returns: no copy */
            data = blobs[i].data;
        } else if (rc == 0) {
            if (!(w->data[i] = cz_alloc(blobs[i].size + 1, err)))
                rc = cz_fail_prefix(err, "%s: snapshot of blob '%s'", path, blobs[i].name);
            else
                memcpy(w->data[i], blobs[i].data, blobs[i].size);
            data = w->data[i];
        }
        snprintf(w->names[i], sizeof w->names[i], "%s", blobs[i].name);
        w->blobs[i] = (cz_blob){w->names[i], data, blobs[i].size};
    }
    if (rc == 0) {
        w->n = n;
        snprintf(w->path, sizeof w->path, "%s", path);
        snprintf(w->prune_dir, sizeof w->prune_dir, "%s", prune_dir ? prune_dir : "");
        w->keep_last = keep_last;
        w->rc = 0;
        if (!w->background) {
            writer_main(w); /* frees what it took over */
            return cz_ckpt_writer_wait(w, err);
        }
        if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
            rc = cz_fail(err, "%s: cannot start the checkpoint writer thread", path);
        else
            w->running = 1;
    }
    if (rc != 0) writer_release(w);
    return rc;
}

void cz_ckpt_writer_free(cz_ckpt_writer *w) {
    if (!w) return;
    cz_error err;
    if (cz_ckpt_writer_wait(w, &err) != 0) cz_warn("%s", err.msg);
    writer_release(w);
    cz_free(w);
}

/* ---------------- reading ---------------- */

typedef struct reader {
    const char *path;
    FILE *f;
    LZ4F_dctx *dctx;
    unsigned char *in;
    size_t in_pos, in_len;
    uint64_t in_off;  /* compressed bytes consumed (file offset) */
    uint64_t out_off; /* container bytes produced */
    int frame_done;
} reader;

/* Decompresses exactly len container bytes into dst. */
static int rd(reader *r, void *dst, size_t len, const char *what, cz_error *err) {
    unsigned char *d = dst;
    size_t got = 0;
    while (got < len) {
        if (r->frame_done)
            return cz_fail(err, "%s: container offset %llu: %s: frame ends early", r->path,
                           (unsigned long long)r->out_off, what);
        if (r->in_pos == r->in_len) {
            r->in_len = fread(r->in, 1, CKPT_READ, r->f);
            r->in_pos = 0;
            if (r->in_len == 0)
                return cz_fail(
                    err, "%s: truncated at compressed offset %llu (container offset %llu, in %s)",
                    r->path, (unsigned long long)r->in_off, (unsigned long long)r->out_off, what);
        }
        size_t dst_size = len - got, src_size = r->in_len - r->in_pos;
        size_t h = LZ4F_decompress(r->dctx, d + got, &dst_size, r->in + r->in_pos, &src_size, NULL);
        if (LZ4F_isError(h))
            return cz_fail(err,
                           "%s: compressed offset %llu (container offset %llu, in %s): lz4: %s",
                           r->path, (unsigned long long)r->in_off, (unsigned long long)r->out_off,
                           what, LZ4F_getErrorName(h));
        r->in_pos += src_size;
        r->in_off += src_size;
        got += dst_size;
        r->out_off += dst_size;
        if (h == 0) r->frame_done = 1;
    }
    return 0;
}

/* After the container: the frame must end (content checksum checked by
 * liblz4) with nothing behind it. */
static int rd_finish(reader *r, cz_error *err) {
    unsigned char extra;
    while (!r->frame_done) {
        if (r->in_pos == r->in_len) {
            r->in_len = fread(r->in, 1, CKPT_READ, r->f);
            r->in_pos = 0;
            if (r->in_len == 0)
                return cz_fail(
                    err, "%s: truncated at compressed offset %llu (frame end/checksum missing)",
                    r->path, (unsigned long long)r->in_off);
        }
        size_t dst_size = 1, src_size = r->in_len - r->in_pos;
        size_t h = LZ4F_decompress(r->dctx, &extra, &dst_size, r->in + r->in_pos, &src_size, NULL);
        if (LZ4F_isError(h))
            return cz_fail(err, "%s: compressed offset %llu (frame end): lz4: %s", r->path,
                           (unsigned long long)r->in_off, LZ4F_getErrorName(h));
        if (dst_size)
            return cz_fail(err, "%s: container offset %llu: data after the last blob", r->path,
                           (unsigned long long)r->out_off);
        r->in_pos += src_size;
        r->in_off += src_size;
        if (h == 0) r->frame_done = 1;
    }
    if (r->in_pos != r->in_len || fread(&extra, 1, 1, r->f) == 1)
        return cz_fail(err, "%s: compressed offset %llu: bytes after the LZ4 frame", r->path,
                       (unsigned long long)r->in_off);
    return 0;
}

/* The most container bytes the file can hold, read before the first blob:
 * the frame's content size (cz_ckpt_write records it), else what LZ4's
 * compression ratio allows (at most 255:1, the format's longest match per
 * byte). A corrupt blob size beyond it is refused before any allocation, so
 * that a damaged file gets an error, not a 20 GB allocation. Consumes the
 * frame header when it parses; otherwise leaves the bytes for rd to report. */
static uint64_t content_limit(reader *r) {
    struct stat st;
    uint64_t file = fstat(fileno(r->f), &st) == 0 ? (uint64_t)st.st_size : 0;
    uint64_t limit = file < (UINT64_MAX - 65536) / 256 ? 256 * file + 65536 : UINT64_MAX;
    r->in_len = fread(r->in, 1, CKPT_READ, r->f);
    r->in_pos = 0;
    LZ4F_frameInfo_t fi;
    size_t n = r->in_len;
    if (n && !LZ4F_isError(LZ4F_getFrameInfo(r->dctx, &fi, r->in, &n))) {
        r->in_pos = n;
        r->in_off = n;
        if (fi.contentSize) limit = fi.contentSize;
    }
    return limit;
}

struct cz_ckpt {
    int n;
    char **names;
    void **data;
    size_t *sizes;
};

/* A blob's name and where its header starts, to find names given twice
 * (found by tests/fuzz/fuzz_checkpoint: a file whose "adam_m" read as a
 * second "adam_v" loaded, and lookups by name saw only the first). */
typedef struct seen_blob {
    char name[CZ_CKPT_NAME_MAX + 1];
    uint64_t at;
} seen_blob;

static int by_name(const void *a, const void *b) {
    const seen_blob *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Sorted by name, then offset: a repeated name is refused, naming both. */
static int check_unique(const char *path, seen_blob *seen, int n, cz_error *err) {
    if (n < 2) return 0; /* also: qsort must not be handed a NULL table */
    qsort(seen, (size_t)n, sizeof *seen, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(seen[i - 1].name, seen[i].name))
            return cz_fail(err,
                           "%s: container offset %llu: blob '%s' appears twice (first at "
                           "container offset %llu)",
                           path, (unsigned long long)seen[i].at, seen[i].name,
                           (unsigned long long)seen[i - 1].at);
    return 0;
}

/* One parse of a checkpoint file: the reader, its buffers, the blobs seen
 * so far, and what the header said. */
typedef struct parser {
    reader r;
    cz_ckpt *keep;          /* NULL: blobs are hashed in pieces, not kept */
    unsigned char *scratch; /* CKPT_IO bytes: compressed-side pieces */
    unsigned char *plain;   /* CKPT_IO bytes: unshuffled pieces (not kept) */
    seen_blob *seen;
    int seen_cap;
    int v2;         /* CZ_CKPT_MAGIC: each blob header carries a filter */
    int n;          /* blobs the header announces */
    uint64_t limit; /* content_limit */
} parser;

/* What a blob's header says: its name, payload size, checksum, filter and
 * the container offset where its payload starts. */
typedef struct blob_head {
    char name[CZ_CKPT_NAME_MAX + 1];
    uint64_t size, want, data_at;
    uint32_t filter;
} blob_head;

static void parser_free(parser *p) {
    free(p->seen);
    if (p->r.dctx) LZ4F_freeDecompressionContext(p->r.dctx);
    if (p->r.f) fclose(p->r.f);
    free(p->r.in);
    free(p->scratch);
    free(p->plain);
}

/* Opens the file and reads the container header (magic, blob count); a
 * directory, an empty file or another format is refused here. */
static int parse_open(parser *p, const char *path, cz_error *err) {
    p->r.path = path;
    p->r.f = fopen(path, "rb");
    if (!p->r.f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(p->r.f), &st) == 0 && (S_ISDIR(st.st_mode) || st.st_size == 0))
        return cz_fail(err, "%s: %s, not a checkpoint", path,
                       S_ISDIR(st.st_mode) ? "a directory" : "an empty file (0 bytes)");
    p->r.in = malloc(CKPT_IO);
    p->scratch = malloc(CKPT_IO);
    p->plain = p->keep ? NULL : malloc(CKPT_IO);
    if (!p->r.in || !p->scratch || (!p->keep && !p->plain))
        return cz_fail(err, "%s: out of memory", path);
    size_t e = LZ4F_createDecompressionContext(&p->r.dctx, LZ4F_VERSION);
    if (LZ4F_isError(e)) return cz_fail(err, "%s: lz4: %s", path, LZ4F_getErrorName(e));
    p->limit = content_limit(&p->r);
    static const unsigned char lz4_magic[4] = {0x04, 0x22, 0x4d, 0x18};
    if (p->r.in_off == 0 && p->r.in_len >= 4 && memcmp(p->r.in, lz4_magic, 4) != 0)
        return cz_fail(err, "%s: compressed offset 0: no LZ4 frame magic (not a cloze checkpoint)",
                       path);
    unsigned char head[16];
    if (rd(&p->r, head, 16, "header", err) != 0) return -1;
    p->v2 = memcmp(head, CZ_CKPT_MAGIC, 8) == 0;
    if (!p->v2 && memcmp(head, CZ_CKPT_MAGIC_V1, 8) != 0)
        return cz_fail(err, "%s: container offset 0: bad magic (not a cloze checkpoint)", path);
    p->n = (int)get_u32(head + 8);
    if (p->n < 0 || p->n > 1000000)
        return cz_fail(err, "%s: container offset 8: blob count %d is implausible", path, p->n);
    if (p->keep) {
        p->keep->names = calloc((size_t)p->n + 1, sizeof(char *));
        p->keep->data = calloc((size_t)p->n + 1, sizeof(void *));
        p->keep->sizes = calloc((size_t)p->n + 1, sizeof(size_t));
        if (!p->keep->names || !p->keep->data || !p->keep->sizes)
            return cz_fail(err, "%s: out of memory", path);
    }
    return 0;
}

/* Blob i's header into h, noted in p->seen (grown as blobs come: each
 * takes bytes of the file, so a forged count costs no memory). A size
 * beyond the content is refused before anything is allocated for it. */
static int read_blob_head(parser *p, int i, blob_head *h, cz_error *err) {
    const char *path = p->r.path;
    unsigned char b[24];
    uint64_t at = p->r.out_off;
    if (i == p->seen_cap) {
        p->seen_cap = p->seen_cap ? 2 * p->seen_cap : 16;
        seen_blob *grown = realloc(p->seen, (size_t)p->seen_cap * sizeof *p->seen);
        if (!grown) return cz_fail(err, "%s: out of memory", path);
        p->seen = grown;
    }
    if (rd(&p->r, b, 4, "blob header", err) != 0) return -1;
    uint32_t nl = get_u32(b);
    if (nl == 0 || nl > CZ_CKPT_NAME_MAX)
        return cz_fail(err, "%s: container offset %llu: blob %d: name length %u is invalid", path,
                       (unsigned long long)at, i, nl);
    if (rd(&p->r, h->name, nl, "blob name", err) != 0 || rd(&p->r, b, 16, "blob header", err) != 0)
        return -1;
    h->name[nl] = 0;
    memcpy(p->seen[i].name, h->name, nl + 1);
    p->seen[i].at = at;
    h->size = get_u64(b), h->want = get_u64(b + 8);
    h->filter = CZ_CKPT_PLAIN;
    if (p->v2) {
        uint64_t filter_at = p->r.out_off;
        if (rd(&p->r, b + 16, 8, "blob header", err) != 0) return -1;
        h->filter = get_u32(b + 16);
        if ((h->filter != CZ_CKPT_PLAIN && h->filter != CZ_CKPT_SHUFFLE4) || get_u32(b + 20) != 0 ||
            (h->filter == CZ_CKPT_SHUFFLE4 && h->size % 4 != 0))
            return cz_fail(err, "%s: container offset %llu: blob '%s': unknown filter %u", path,
                           (unsigned long long)filter_at, h->name, h->filter);
    }
    h->data_at = p->r.out_off;
    if (h->size > p->limit || h->size > p->limit - h->data_at)
        return cz_fail(err,
                       "%s: container offset %llu: blob '%s': size %llu runs past the %llu-byte "
                       "content",
                       path, (unsigned long long)(h->data_at - 16), h->name,
                       (unsigned long long)h->size, (unsigned long long)p->limit);
    return 0;
}

/* Blob i's payload kept whole in p->keep (unshuffled a chunk at a time
 * through scratch); *hash: its checksum. */
static int keep_blob(parser *p, int i, const blob_head *h, const char *what, uint64_t *hash,
                     cz_error *err) {
    unsigned char *dst = cz_alloc(h->size + 1, err);
    if (!dst)
        return cz_fail_prefix(err, "%s: blob '%s' (%llu bytes)", p->r.path, h->name,
                              (unsigned long long)h->size);
    p->keep->data[i] = dst;
    p->keep->sizes[i] = h->size;
    p->keep->names[i] = strdup(h->name);
    p->keep->n = i + 1;
    if (h->filter != CZ_CKPT_SHUFFLE4) {
        if (rd(&p->r, dst, h->size, what, err) != 0) return -1;
    } else {
        for (uint64_t off = 0; off < h->size; off += CZ_CKPT_SHUFFLE_CHUNK) {
            size_t len = h->size - off < CZ_CKPT_SHUFFLE_CHUNK ? (size_t)(h->size - off)
                                                               : CZ_CKPT_SHUFFLE_CHUNK;
            if (rd(&p->r, p->scratch, len, what, err) != 0) return -1;
            unshuffle4(dst + off, p->scratch, len);
        }
    }
    *hash = cz_fnv1a64(dst, h->size, *hash);
    return 0;
}

/* Blob payload hashed in pieces of CKPT_IO (the filter's chunks); a small
 * one (CZ_CKPT_SMALL) is also handed whole to fn. *hash: its checksum. */
static int hash_blob(parser *p, const blob_head *h, const char *what, cz_ckpt_blob_fn fn, void *ctx,
                     uint64_t *hash, cz_error *err) {
    void *small = h->size <= CZ_CKPT_SMALL ? malloc(h->size + 1) : NULL;
    for (uint64_t left = h->size; left > 0;) {
        size_t piece = left < CKPT_IO ? (size_t)left : CKPT_IO;
        if (rd(&p->r, p->scratch, piece, what, err) != 0) {
            free(small);
            return -1;
        }
        const unsigned char *data = p->scratch;
        if (h->filter == CZ_CKPT_SHUFFLE4) {
            unshuffle4(p->plain, p->scratch, piece);
            data = p->plain;
        }
        if (small) memcpy((char *)small + (h->size - left), data, piece);
        *hash = cz_fnv1a64(data, piece, *hash);
        left -= piece;
    }
    if (fn) fn(ctx, h->name, h->size, small);
    free(small);
    return 0;
}

/* Blob i: its header, its payload (kept or hashed) and its checksum. */
static int read_blob(parser *p, int i, cz_ckpt_blob_fn fn, void *ctx, cz_error *err) {
    blob_head h;
    if (read_blob_head(p, i, &h, err) != 0) return -1;
    char what[CZ_CKPT_NAME_MAX + 16];
    snprintf(what, sizeof what, "blob '%s'", h.name);
    uint64_t hash = CZ_FNV_SEED;
    if ((p->keep ? keep_blob(p, i, &h, what, &hash, err)
                 : hash_blob(p, &h, what, fn, ctx, &hash, err)) != 0)
        return -1;
    if (hash != h.want)
        return cz_fail(err, "%s: container offset %llu: blob '%s': checksum mismatch", p->r.path,
                       (unsigned long long)h.data_at, h.name);
    return 0;
}

/* Parses the whole file. keep != NULL: blobs are kept there; else each blob
 * is hashed in pieces and (if small) handed to fn. */
static int parse(const char *path, cz_ckpt *keep, cz_ckpt_blob_fn fn, void *ctx, cz_error *err) {
    parser p;
    memset(&p, 0, sizeof p);
    p.keep = keep;
    int rc = parse_open(&p, path, err);
    for (int i = 0; rc == 0 && i < p.n; i++) rc = read_blob(&p, i, fn, ctx, err);
    if (rc == 0) rc = check_unique(path, p.seen, p.n, err);
    if (rc == 0) rc = rd_finish(&p.r, err);
    parser_free(&p);
    return rc;
}

int cz_ckpt_read(const char *path, cz_ckpt **out, cz_error *err) {
    *out = NULL;
    cz_ckpt *c = calloc(1, sizeof *c);
    if (!c) return cz_fail(err, "%s: out of memory", path);
    if (parse(path, c, NULL, NULL, err) != 0) {
        cz_ckpt_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void cz_ckpt_free(cz_ckpt *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->names[i]);
        cz_free(c->data[i]);
    }
    free(c->names);
    free(c->data);
    free(c->sizes);
    free(c);
}

int cz_ckpt_count(const cz_ckpt *c) {
    return c->n;
}
const char *cz_ckpt_name(const cz_ckpt *c, int i) {
    return c->names[i];
}

const void *cz_ckpt_get(const cz_ckpt *c, const char *name, size_t *size) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0) {
            if (size) *size = c->sizes[i];
            return c->data[i];
        }
    return NULL;
}

int cz_ckpt_get_exact(const cz_ckpt *c, const char *name, void *dst, size_t size, cz_error *err) {
    size_t have;
    const void *p = cz_ckpt_get(c, name, &have);
    if (!p) return cz_fail(err, "checkpoint: blob '%s' is missing", name);
    if (have != size)
        return cz_fail(err, "checkpoint: blob '%s' has %zu bytes, expected %zu", name, have, size);
    memcpy(dst, p, size);
    return 0;
}

int cz_ckpt_verify(const char *path, cz_error *err) {
    return parse(path, NULL, NULL, NULL, err);
}

int cz_ckpt_scan(const char *path, cz_ckpt_blob_fn fn, void *ctx, cz_error *err) {
    return parse(path, NULL, fn, ctx, err);
}

/* ---------------- run directories ---------------- */

void cz_ckpt_path(char *buf, size_t len, const char *run_dir, long step) {
    snprintf(buf, len, "%s/ckpt-%08ld.lz4", run_dir, step);
}

/* "ckpt-" at least 8 digits ".lz4", nothing else (tmp files do not match). */
static int parse_name(const char *name, long *step) {
    if (strncmp(name, "ckpt-", 5) != 0) return 0;
    const char *p = name + 5;
    size_t digits = strspn(p, "0123456789");
    if (digits < 8 || digits > 18 || strcmp(p + digits, ".lz4") != 0) return 0;
    *step = strtol(p, NULL, 10);
    return 1;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int cz_ckpt_list(const char *run_dir, long **steps, int *n, cz_error *err) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(run_dir);
    if (!d) return cz_fail(err, "%s: cannot open run directory: %s", run_dir, strerror(errno));
    int cap = 16;
    long *s = malloc((size_t)cap * sizeof *s);
    struct dirent *e;
    while (s && (e = readdir(d)) != NULL) {
        long step;
        if (!parse_name(e->d_name, &step)) continue;
        if (*n == cap) {
            cap *= 2;
            long *t = realloc(s, (size_t)cap * sizeof *s);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
        }
        s[(*n)++] = step;
    }
    closedir(d);
    if (!s) return cz_fail(err, "%s: out of memory listing checkpoints", run_dir);
    qsort(s, (size_t)*n, sizeof *s, cmp_long);
    *steps = s;
    return 0;
}

int cz_ckpt_find_latest(const char *run_dir, char *path, size_t len, long *step, cz_error *err) {
    long *steps;
    int n;
    if (cz_ckpt_list(run_dir, &steps, &n, err) != 0) return -1;
    int found = 0;
    for (int i = n - 1; i >= 0 && !found; i--) {
        cz_ckpt_path(path, len, run_dir, steps[i]);
        cz_error e;
        if (cz_ckpt_verify(path, &e) == 0) {
            *step = steps[i];
            found = 1;
        } else {
            cz_warn("skipping bad checkpoint: %s", e.msg);
        }
    }
    free(steps);
    return found;
}

/* "ckpt-<step>.lz4.tmp.<pid>" (what cz_ckpt_write writes before its
 * rename) left by a writer that is not this process and is not alive: a
 * job killed during a write, whose leftover would otherwise stay forever
 * (a model's size each time). The caller holds the run directory's lock,
 * so no other job writes there; a pid alive on this host is left alone all
 * the same. */
static void remove_dead_tmps(const char *run_dir) {
    DIR *d = opendir(run_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *t = strstr(e->d_name, ".lz4.tmp.");
        if (!t || strncmp(e->d_name, "ckpt-", 5) != 0) continue;
        char *end;
        long pid = strtol(t + 9, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", run_dir, e->d_name);
        if (unlink(p) == 0)
            cz_info("removed %s: a partial checkpoint that writer %ld left when it died", p, pid);
    }
    closedir(d);
}

/* Keeps the keep_last newest checkpoints that verify and removes those
 * older than them. Unreadable ones do not count towards keep_last (after a
 * resume past a corrupt newest file, counting it deleted the good file the
 * run resumed from) and are not removed while newer than the oldest kept
 * good one (they may be looked at); with no good checkpoint nothing goes.
 * Costs a verify (a full read) of keep_last files and of any unreadable
 * ones newer than they are. */
int cz_ckpt_prune(const char *run_dir, int keep_last, cz_error *err) {
    if (keep_last < 1)
        return cz_fail(err, "checkpoint prune: keep_last = %d, need >= 1", keep_last);
    remove_dead_tmps(run_dir);
    long *steps;
    int n;
    if (cz_ckpt_list(run_dir, &steps, &n, err) != 0) return -1;
    int rc = 0, good = 0, first_old = n - 1;
    for (; first_old >= 0 && good < keep_last; first_old--) {
        char p[4096];
        cz_ckpt_path(p, sizeof p, run_dir, steps[first_old]);
        cz_error e;
        if (cz_ckpt_verify(p, &e) == 0)
            good++;
        else
            cz_warn("pruning: not counted towards train.keep_last, kept: %s", e.msg);
    }
    if (good < keep_last) first_old = -1;
    for (int i = 0; i <= first_old; i++) {
        char p[4096];
        cz_ckpt_path(p, sizeof p, run_dir, steps[i]);
        if (unlink(p) != 0 && errno != ENOENT) {
            rc = cz_fail(err, "%s: cannot delete: %s", p, strerror(errno));
            break;
        }
    }
    free(steps);
    return rc;
}
