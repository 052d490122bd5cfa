/* shard: reader, streaming writer and manifest of the token-shard format
 * described in include/cloze/shard.h and docs/formats.md. */
#include "cloze/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shard files are little-endian and are mapped as they are; big-endian hosts need byte swaps"
#endif

#define SECTION_ALIGN 64u

static uint64_t align_up(uint64_t x) {
    return (x + SECTION_ALIGN - 1) & ~(uint64_t)(SECTION_ALIGN - 1);
}

uint64_t cz_shard_header_checksum(const cz_shard_header *h) {
    return cz_fnv1a64(h, offsetof(cz_shard_header, header_checksum), CZ_FNV_SEED);
}

/* ------------------------------------------------------------------ reader */

/* Checks one boundary table: starts at 0, never decreases, ends at `last`.
 * Errors give the byte offset of the bad entry in the file. */
static int check_table(const cz_shard *s, const uint64_t *t, uint64_t n, uint64_t last,
                       uint64_t file_off, const char *what, cz_error *err) {
    if (t[0] != 0)
        return cz_fail(err, "%s: %s table at offset %llu: first entry is %llu, want 0", s->path,
                       what, (unsigned long long)file_off, (unsigned long long)t[0]);
    for (uint64_t i = 1; i <= n; i++) {
        if (t[i] < t[i - 1])
            return cz_fail(
                err, "%s: %s table entry %llu at offset %llu: %llu is below the previous %llu",
                s->path, what, (unsigned long long)i, (unsigned long long)(file_off + 8 * i),
                (unsigned long long)t[i], (unsigned long long)t[i - 1]);
    }
    if (t[n] != last)
        return cz_fail(err, "%s: %s table last entry at offset %llu: %llu, want %llu", s->path,
                       what, (unsigned long long)(file_off + 8 * n), (unsigned long long)t[n],
                       (unsigned long long)last);
    return 0;
}

/* One section [off, end) of a shard: it starts at or after `min_start` (the
 * header or the previous section), on a SECTION_ALIGN boundary, and ends
 * inside the file. */
static int check_section(const char *p, const char *field, size_t field_offset, uint64_t off,
                         uint64_t end, uint64_t min_start, uint64_t actual_size, cz_error *err) {
    if (off < min_start || off % SECTION_ALIGN || off > actual_size || end > actual_size)
        return cz_fail(err,
                       "%s: %s field (offset %zu): section [%llu, %llu) is misplaced or outside "
                       "the %llu-byte file",
                       p, field, field_offset, (unsigned long long)off, (unsigned long long)end,
                       (unsigned long long)actual_size);
    return 0;
}
static int check_header(const cz_shard *s, uint64_t actual_size, cz_error *err) {
    const cz_shard_header *h = &s->hdr;
    const char *p = s->path;
    if (memcmp(h->magic, CZ_SHARD_MAGIC, 8) != 0)
        return cz_fail(err, "%s: offset 0: bad magic (not a cloze shard)", p);
    if (h->version != CZ_SHARD_VERSION)
        return cz_fail(err, "%s: version field (offset %zu): %u, this build reads %u", p,
                       offsetof(cz_shard_header, version), h->version, CZ_SHARD_VERSION);
    if (h->header_checksum != cz_shard_header_checksum(h))
        return cz_fail(
            err, "%s: header_checksum field (offset %zu): header bytes [0, %zu) are corrupt", p,
            offsetof(cz_shard_header, header_checksum), offsetof(cz_shard_header, header_checksum));
    if (h->token_width != 2 && h->token_width != 4)
        return cz_fail(err, "%s: token_width field (offset %zu): %u, want 2 or 4", p,
                       offsetof(cz_shard_header, token_width), h->token_width);
    if (h->token_width == 2 && h->vocab_size > 65536)
        return cz_fail(err, "%s: vocab_size field (offset %zu): %u does not fit 2-byte tokens", p,
                       offsetof(cz_shard_header, vocab_size), h->vocab_size);
    if (h->file_size != actual_size)
        return cz_fail(err,
                       "%s: file_size field (offset %zu) says %llu bytes, the file has %llu "
                       "(truncated or appended to)",
                       p, offsetof(cz_shard_header, file_size), (unsigned long long)h->file_size,
                       (unsigned long long)actual_size);
    /* Each section must lie after the previous one and inside the file. The
     * counts are bounded by the file size first so that the products below
     * cannot overflow. */
    if (h->n_tokens > actual_size || h->n_sentences > actual_size / 8 ||
        h->n_documents > actual_size / 8)
        return cz_fail(
            err,
            "%s: n_tokens/n_sentences/n_documents fields (offset %zu): counts larger than the file",
            p, offsetof(cz_shard_header, n_tokens));
    uint64_t tok_end = h->tokens_offset + h->n_tokens * h->token_width;
    uint64_t sent_end = h->sentences_offset + (h->n_sentences + 1) * 8;
    uint64_t doc_end = h->documents_offset + (h->n_documents + 1) * 8;
    if (check_section(p, "tokens_offset", offsetof(cz_shard_header, tokens_offset),
                      h->tokens_offset, tok_end, CZ_SHARD_HEADER_SIZE, actual_size, err) != 0 ||
        check_section(p, "sentences_offset", offsetof(cz_shard_header, sentences_offset),
                      h->sentences_offset, sent_end, tok_end, actual_size, err) != 0 ||
        check_section(p, "documents_offset", offsetof(cz_shard_header, documents_offset),
                      h->documents_offset, doc_end, sent_end, actual_size, err) != 0)
        return -1;
    return 0;
}

/* Ids first: an id out of range is reported at its own offset, which the
 * checksum (over the whole payload) cannot do. */
int cz_shard_verify_payload(const cz_shard *s, cz_error *err) {
    const cz_shard_header *h = &s->hdr;
    for (uint64_t i = 0; i < h->n_tokens; i++) {
        uint32_t id = cz_shard_token(s, i);
        if (id >= h->vocab_size)
            return cz_fail(err, "%s: token %llu at offset %llu: id %u >= vocab_size %u", s->path,
                           (unsigned long long)i,
                           (unsigned long long)(h->tokens_offset + i * h->token_width), id,
                           h->vocab_size);
    }
    uint64_t sum =
        cz_fnv1a64(s->map + CZ_SHARD_HEADER_SIZE, s->map_len - CZ_SHARD_HEADER_SIZE, CZ_FNV_SEED);
    if (sum != h->payload_checksum)
        return cz_fail(
            err,
            "%s: payload bytes [%u, %llu) do not match payload_checksum (offset %zu): corrupt "
            "data; rebuild or restore the shard set (cloze-prep verify MANIFEST checks them all)",
            s->path, CZ_SHARD_HEADER_SIZE, (unsigned long long)s->map_len,
            offsetof(cz_shard_header, payload_checksum));
    return 0;
}

int cz_shard_open(cz_shard *s, const char *path, int verify, cz_error *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cz_fail(err, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size < CZ_SHARD_HEADER_SIZE) {
        close(fd);
        return cz_fail(err, "%s: offset %lld: file ends inside the %u-byte header (truncated)",
                       path, (long long)st.st_size, CZ_SHARD_HEADER_SIZE);
    }
    s->ino = (uint64_t)st.st_ino;
    s->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    s->ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return cz_fail(err, "%s: mmap failed: %s", path, strerror(errno));
    s->map = map;
    s->map_len = (size_t)st.st_size;
    memcpy(&s->hdr, s->map, sizeof s->hdr);
    if (check_header(s, s->map_len, err) != 0) goto fail;
    s->tokens = s->map + s->hdr.tokens_offset;
    s->sent_start = (const uint64_t *)(s->map + s->hdr.sentences_offset);
    s->doc_start = (const uint64_t *)(s->map + s->hdr.documents_offset);
    if (check_table(s, s->sent_start, s->hdr.n_sentences, s->hdr.n_tokens, s->hdr.sentences_offset,
                    "sentence", err) != 0)
        goto fail;
    if (check_table(s, s->doc_start, s->hdr.n_documents, s->hdr.n_sentences,
                    s->hdr.documents_offset, "document", err) != 0)
        goto fail;
    if (verify && cz_shard_verify_payload(s, err) != 0) goto fail;
    return 0;
fail:
    cz_shard_close(s);
    return -1;
}

void cz_shard_close(cz_shard *s) {
    if (s->map) munmap((void *)s->map, s->map_len);
    s->map = NULL;
    s->map_len = 0;
    s->tokens = NULL;
    s->sent_start = s->doc_start = NULL;
}

/* ------------------------------------------------------------------ writer */

#define WRITE_BUF_BYTES (1u << 20)

struct cz_shard_writer {
    char path[1024];
    char tmp[1100];
    int fd;
    uint32_t vocab_size, token_width;
    uint64_t fingerprint;
    uint64_t n_tokens;
    uint64_t file_pos;    /* bytes written (or buffered) so far */
    uint64_t payload_sum; /* FNV-1a state over everything after the header */
    uint8_t *buf;         /* pending bytes, flushed when full */
    size_t buf_len;
    uint64_t *sent_start; /* token index of each sentence start, plus the end */
    uint64_t n_sent, cap_sent;
    uint64_t *doc_start; /* sentence index of each document start, plus the end */
    uint64_t n_doc, cap_doc;
};

static int flush_buf(cz_shard_writer *w, cz_error *err) {
    size_t off = 0;
    while (off < w->buf_len) {
        ssize_t n = write(w->fd, w->buf + off, w->buf_len - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cz_fail(err, "%s: write failed at offset %llu: %s", w->tmp,
                           (unsigned long long)(w->file_pos - w->buf_len + off), strerror(errno));
        }
        off += (size_t)n;
    }
    w->buf_len = 0;
    return 0;
}

/* Appends payload bytes: checksummed here so the file is never read back. */
static int put(cz_shard_writer *w, const void *data, size_t len, cz_error *err) {
    const uint8_t *p = data;
    w->payload_sum = cz_fnv1a64(p, len, w->payload_sum);
    while (len > 0) {
        size_t room = WRITE_BUF_BYTES - w->buf_len;
        size_t n = len < room ? len : room;
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        w->file_pos += n;
        p += n;
        len -= n;
        if (w->buf_len == WRITE_BUF_BYTES && flush_buf(w, err) != 0) return -1;
    }
    return 0;
}

static int pad_to_section(cz_shard_writer *w, cz_error *err) {
    static const uint8_t zeros[SECTION_ALIGN];
    uint64_t pad = align_up(w->file_pos) - w->file_pos;
    return pad ? put(w, zeros, (size_t)pad, err) : 0;
}

static int grow(uint64_t **a, uint64_t *cap, uint64_t need, cz_error *err) {
    if (need <= *cap) return 0;
    uint64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    uint64_t *n = realloc(*a, c * sizeof **a);
    if (!n)
        return cz_fail(err, "out of memory growing a shard boundary table to %llu entries",
                       (unsigned long long)c);
    *a = n;
    *cap = c;
    return 0;
}

int cz_shard_writer_open(cz_shard_writer **out, const char *path, uint32_t vocab_size,
                         uint64_t vocab_fingerprint, cz_error *err) {
    *out = NULL;
    if (vocab_size == 0) return cz_fail(err, "%s: vocab_size is 0", path);
    cz_shard_writer *w = calloc(1, sizeof *w);
    if (!w) return cz_fail(err, "%s: out of memory", path);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", path, (long)getpid());
    w->vocab_size = vocab_size;
    w->token_width = vocab_size <= 65536 ? 2 : 4;
    w->fingerprint = vocab_fingerprint;
    w->payload_sum = CZ_FNV_SEED;
    w->buf = malloc(WRITE_BUF_BYTES);
    if (!w->buf || grow(&w->sent_start, &w->cap_sent, 1, err) != 0 ||
        grow(&w->doc_start, &w->cap_doc, 1, err) != 0) {
        free(w->buf);
        free(w->sent_start);
        free(w->doc_start);
        free(w);
        return cz_fail(err, "%s: out of memory", path);
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) {
        cz_fail(err, "%s: cannot create: %s", w->tmp, strerror(errno));
        free(w->buf);
        free(w->sent_start);
        free(w->doc_start);
        free(w);
        return -1;
    }
    /* The header is written last, in place, once the sizes are known. */
    if (lseek(w->fd, CZ_SHARD_HEADER_SIZE, SEEK_SET) < 0) {
        int e = errno;
        cz_shard_writer_abort(w);
        return cz_fail(err, "%s: seek failed: %s", path, strerror(e));
    }
    w->file_pos = CZ_SHARD_HEADER_SIZE;
    *out = w;
    return 0;
}

int cz_shard_writer_add_document(cz_shard_writer *w, const uint32_t *tokens,
                                 const uint32_t *sent_len, size_t n_sentences, cz_error *err) {
    uint64_t total = 0, nonempty = 0;
    for (size_t i = 0; i < n_sentences; i++) {
        total += sent_len[i];
        nonempty += sent_len[i] > 0;
    }
    if (total == 0) return 0;
    for (uint64_t i = 0; i < total; i++)
        if (tokens[i] >= w->vocab_size)
            return cz_fail(err, "%s: token id %u >= vocab_size %u (document %llu)", w->path,
                           tokens[i], w->vocab_size, (unsigned long long)w->n_doc);
    if (grow(&w->sent_start, &w->cap_sent, w->n_sent + nonempty + 1, err) != 0 ||
        grow(&w->doc_start, &w->cap_doc, w->n_doc + 2, err) != 0)
        return -1;
    w->doc_start[w->n_doc++] = w->n_sent;
    /* Empty sentences would make zero-length spans; they carry nothing. */
    uint64_t pos = w->n_tokens;
    for (size_t i = 0; i < n_sentences; i++) {
        if (sent_len[i] == 0) continue;
        w->sent_start[w->n_sent++] = pos;
        pos += sent_len[i];
    }
    if (w->token_width == 4) {
        if (put(w, tokens, (size_t)total * 4, err) != 0) return -1;
    } else {
        uint16_t chunk[2048];
        for (uint64_t i = 0; i < total;) {
            size_t n = 0;
            while (n < 2048 && i < total) chunk[n++] = (uint16_t)tokens[i++];
            if (put(w, chunk, n * 2, err) != 0) return -1;
        }
    }
    w->n_tokens += total;
    return 0;
}

static void writer_free(cz_shard_writer *w) {
    free(w->buf);
    free(w->sent_start);
    free(w->doc_start);
    free(w);
}

void cz_shard_writer_abort(cz_shard_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    writer_free(w);
}

int cz_shard_writer_finish(cz_shard_writer *w, cz_shard_header *out_hdr, cz_error *err) {
    cz_shard_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CZ_SHARD_MAGIC, 8);
    h.version = CZ_SHARD_VERSION;
    h.token_width = w->token_width;
    h.vocab_fingerprint = w->fingerprint;
    h.vocab_size = w->vocab_size;
    h.n_tokens = w->n_tokens;
    h.n_sentences = w->n_sent;
    h.n_documents = w->n_doc;
    h.tokens_offset = CZ_SHARD_HEADER_SIZE;
    w->sent_start[w->n_sent] = w->n_tokens;
    w->doc_start[w->n_doc] = w->n_sent;
    if (pad_to_section(w, err) != 0) goto fail;
    h.sentences_offset = w->file_pos;
    if (put(w, w->sent_start, (size_t)(w->n_sent + 1) * 8, err) != 0) goto fail;
    if (pad_to_section(w, err) != 0) goto fail;
    h.documents_offset = w->file_pos;
    if (put(w, w->doc_start, (size_t)(w->n_doc + 1) * 8, err) != 0) goto fail;
    if (flush_buf(w, err) != 0) goto fail;
    h.file_size = w->file_pos;
    h.payload_checksum = w->payload_sum;
    h.header_checksum = cz_shard_header_checksum(&h);
    if (pwrite(w->fd, &h, sizeof h, 0) != (ssize_t)sizeof h || fsync(w->fd) != 0) {
        cz_fail(err, "%s: writing header / fsync failed: %s", w->tmp, strerror(errno));
        goto fail;
    }
    int rc = close(w->fd);
    w->fd = -1;
    if (rc != 0 || rename(w->tmp, w->path) != 0) {
        cz_fail(err, "%s: cannot rename into place: %s", w->path, strerror(errno));
        goto fail;
    }
    cz_fsync_dir_of(w->path); /* make the rename durable */
    if (out_hdr) *out_hdr = h;
    writer_free(w);
    return 0;
fail:
    cz_fail_prefix(err, "shard writer");
    cz_shard_writer_abort(w);
    return -1;
}

/* ---------------------------------------------------------------- manifest */

/* Directory part of a path, "." when it has none. */
static void dir_of(const char *path, char *dir, size_t len) {
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
}

/* The one rule for paths a manifest records: absolute as they are, relative
 * to the manifest's directory. */
static void resolve(const char *manifest_path, const char *recorded, char *out, size_t len) {
    if (recorded[0] == '/') {
        snprintf(out, len, "%s", recorded);
        return;
    }
    char dir[1024];
    dir_of(manifest_path, dir, sizeof dir);
    snprintf(out, len, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", recorded);
}

void cz_manifest_resolve(const cz_manifest *m, const char *recorded, char *out, size_t len) {
    resolve(m->path, recorded, out, len);
}

static int32_t *special_slot(cz_manifest *m, const char *name) {
    if (!strcmp(name, "cls")) return &m->cls_id;
    if (!strcmp(name, "sep")) return &m->sep_id;
    if (!strcmp(name, "mask")) return &m->mask_id;
    if (!strcmp(name, "pad")) return &m->pad_id;
    if (!strcmp(name, "unk")) return &m->unk_id;
    if (!strcmp(name, "eot")) return &m->eot_id;
    return NULL;
}

static int parse_line(cz_manifest *m, char *line, int lineno, int *cap, cz_error *err) {
    const char *p = m->path;
    char word[32];
    int used = 0;
    if (sscanf(line, "%31s%n", word, &used) != 1) return 0; /* blank line */
    if (!strcmp(word, "vocab")) {
        unsigned long long fp;
        unsigned vs;
        int n = 0;
        if (sscanf(line, " vocab %15s %u %llx %n", m->vocab_kind, &vs, &fp, &n) != 3 || !n)
            return cz_fail(err, "%s:%d: want 'vocab <kind> <size> <fingerprint> <path>'", p,
                           lineno);
        if (strcmp(m->vocab_kind, "wordpiece") && strcmp(m->vocab_kind, "bpe"))
            return cz_fail(err, "%s:%d: vocab kind '%s', want wordpiece or bpe", p, lineno,
                           m->vocab_kind);
        m->vocab_size = vs;
        m->vocab_fingerprint = fp;
        snprintf(m->vocab_path, sizeof m->vocab_path, "%s", line + n);
    } else if (!strcmp(word, "vocab_file") || !strcmp(word, "vocab_given")) {
        /* the vocabulary files (optional: older manifests lack them) */
        int given = word[6] == 'g', n = 0;
        char role[16] = "", hex[80] = "";
        int ok = given ? sscanf(line, " vocab_given %15s %n", role, &n) == 1
                       : sscanf(line, " vocab_file %15s %79s %n", role, hex, &n) == 2;
        int k = !strcmp(role, "vocab")    ? CZ_VOCAB_FILE_VOCAB
                : !strcmp(role, "merges") ? CZ_VOCAB_FILE_MERGES
                                          : -1;
        if (!ok || !n || k < 0 || !line[n] ||
            (!given && (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)))
            return cz_fail(err, "%s:%d: want '%s <vocab|merges> %s<path>'", p, lineno, word,
                           given ? "" : "<sha256 hex> ");
        cz_manifest_file *f = &m->vocab_files[k];
        if (given) {
            snprintf(f->given, sizeof f->given, "%s", line + n);
        } else {
            snprintf(f->sha256, sizeof f->sha256, "%s", hex);
            snprintf(f->path, sizeof f->path, "%s", line + n);
        }
    } else if (!strcmp(word, "special")) {
        char name[16];
        int id;
        if (sscanf(line, " special %15s %d", name, &id) != 2 || id < 0)
            return cz_fail(err, "%s:%d: want 'special <name> <id>'", p, lineno);
        int32_t *slot = special_slot(m, name);
        if (!slot) return cz_fail(err, "%s:%d: unknown special token '%s'", p, lineno, name);
        *slot = id;
    } else if (!strcmp(word, "shard")) {
        if (m->n_shards >= CZ_MANIFEST_MAX_SHARDS)
            return cz_fail(err, "%s:%d: more than %d shards", p, lineno, CZ_MANIFEST_MAX_SHARDS);
        if (m->n_shards == *cap) {
            int nc = *cap ? 2 * *cap : 64;
            cz_manifest_shard *ns = cz_alloc((size_t)nc * sizeof *ns, err);
            if (!ns) return cz_fail_prefix(err, "%s:%d", p, lineno);
            if (m->shards) memcpy(ns, m->shards, (size_t)m->n_shards * sizeof *ns);
            cz_free(m->shards);
            m->shards = ns;
            *cap = nc;
        }
        cz_manifest_shard *s = &m->shards[m->n_shards];
        char rel[1024];
        unsigned long long t, se, d, sum;
        if (sscanf(line, " shard %1023s %llu %llu %llu %llx", rel, &t, &se, &d, &sum) != 5)
            return cz_fail(
                err, "%s:%d: want 'shard <path> <n_tokens> <n_sentences> <n_documents> <checksum>'",
                p, lineno);
        resolve(m->path, rel, s->path, sizeof s->path);
        s->n_tokens = t;
        s->n_sentences = se;
        s->n_documents = d;
        s->payload_checksum = sum;
        m->n_shards++;
    } else {
        return cz_fail(err, "%s:%d: unknown record '%s'", p, lineno, word);
    }
    return 0;
}

int cz_manifest_load(cz_manifest *m, const char *path, cz_error *err) {
    memset(m, 0, sizeof *m);
    m->cls_id = m->sep_id = m->mask_id = m->pad_id = m->unk_id = m->eot_id = -1;
    snprintf(m->path, sizeof m->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return cz_fail(err, "%s: cannot open: %s", path, strerror(errno));
    char line[4096];
    int lineno = 0, cap = 0, have_vocab = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n && line[n - 1] != '\n' && !feof(f)) {
            fclose(f);
            cz_manifest_free(m);
            return cz_fail(err, "%s:%d: line too long", path, lineno);
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (lineno == 1) {
            if (strcmp(line, "cloze-manifest 1") != 0) {
                fclose(f);
                cz_manifest_free(m);
                return cz_fail(err, "%s:1: not a cloze manifest (want 'cloze-manifest 1')", path);
            }
            continue;
        }
        have_vocab |= !strncmp(line, "vocab ", 6);
        if (parse_line(m, line, lineno, &cap, err) != 0) {
            fclose(f);
            cz_manifest_free(m);
            return -1;
        }
    }
    fclose(f);
    if (lineno == 0) return cz_fail(err, "%s: empty file", path);
    if (!have_vocab) {
        cz_manifest_free(m);
        return cz_fail(err, "%s: no 'vocab' line", path);
    }
    return 0;
}

int cz_manifest_write(const cz_manifest *m, const char *path, cz_error *err) {
    char dir[1024];
    dir_of(path, dir, sizeof dir);
    size_t dlen = strlen(dir);
    /* the vocab lines hold up to 5 paths of 1 KiB, a shard line one of 2 KiB */
    size_t cap = 16384 + (size_t)m->n_shards * 2300, len = 0;
    char *buf = malloc(cap);
    if (!buf) return cz_fail(err, "%s: out of memory", path);
#define APPEND(...) len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__)
    APPEND("cloze-manifest 1\n");
    APPEND("vocab %s %u %016llx %s\n", m->vocab_kind, m->vocab_size,
           (unsigned long long)m->vocab_fingerprint, m->vocab_path);
    for (int k = 0; k < CZ_VOCAB_FILES; k++) {
        const cz_manifest_file *f = &m->vocab_files[k];
        const char *role = k == CZ_VOCAB_FILE_VOCAB ? "vocab" : "merges";
        if (f->sha256[0]) APPEND("vocab_file %s %s %s\n", role, f->sha256, f->path);
        if (f->sha256[0] && f->given[0]) APPEND("vocab_given %s %s\n", role, f->given);
    }
    const char *names[6] = {"cls", "sep", "mask", "pad", "unk", "eot"};
    const int32_t ids[6] = {m->cls_id, m->sep_id, m->mask_id, m->pad_id, m->unk_id, m->eot_id};
    for (int i = 0; i < 6; i++)
        if (ids[i] >= 0) APPEND("special %s %d\n", names[i], ids[i]);
    for (int i = 0; i < m->n_shards; i++) {
        const cz_manifest_shard *s = &m->shards[i];
        const char *rel = s->path;
        char absbuf[2100];
        /* Relative to the manifest when below it, so the directory can move. */
        if (strcmp(dir, ".") == 0 && rel[0] != '/') {
            if (!strncmp(rel, "./", 2)) rel += 2;
        } else if (!strncmp(rel, dir, dlen) && rel[dlen] == '/') {
            rel += dlen + 1;
        } else if (rel[0] != '/') {
            /* relative to the working directory, not to the manifest */
            char cwd[1024];
            if (!getcwd(cwd, sizeof cwd)) {
                free(buf);
                return cz_fail(err, "%s: getcwd failed: %s", path, strerror(errno));
            }
            snprintf(absbuf, sizeof absbuf, "%s/%s", cwd, rel);
            rel = absbuf;
        }
        if (strpbrk(rel, " \t\n")) {
            free(buf);
            return cz_fail(err, "%s: shard path '%s' contains whitespace", path, s->path);
        }
        APPEND("shard %s %llu %llu %llu %016llx\n", rel, (unsigned long long)s->n_tokens,
               (unsigned long long)s->n_sentences, (unsigned long long)s->n_documents,
               (unsigned long long)s->payload_checksum);
    }
#undef APPEND
    int rc = cz_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

void cz_manifest_free(cz_manifest *m) {
    cz_free(m->shards);
    m->shards = NULL;
    m->n_shards = 0;
}

/* ------------------------------------------------- verification cache */

typedef struct verified_entry {
    uint64_t ino, size, mtime_ns, ctime_ns, checksum;
    int used; /* checked by this process: only those lines are written back */
    char path[1024];
} verified_entry;

struct cz_verified {
    char path[1100]; /* <manifest>.verified */
    verified_entry *e;
    int n, cap, dirty;
    int hashed; /* shards verified now */
    uint64_t hashed_bytes;
    double hashed_seconds;
};

#define VERIFIED_HEAD "cloze-verified 1"

static verified_entry *verified_find(cz_verified *v, const char *path, int hint) {
    if (hint >= 0 && hint < v->n && !strcmp(v->e[hint].path, path)) return &v->e[hint];
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->e[i].path, path)) return &v->e[i];
    return NULL;
}

static verified_entry *verified_add(cz_verified *v, cz_error *err) {
    if (v->n == v->cap) {
        int nc = v->cap ? 2 * v->cap : 64;
        verified_entry *ne = cz_alloc((size_t)nc * sizeof *ne, err);
        if (!ne) return NULL;
        if (v->e) memcpy(ne, v->e, (size_t)v->n * sizeof *ne);
        cz_free(v->e);
        v->e = ne;
        v->cap = nc;
    }
    return &v->e[v->n++];
}

cz_verified *cz_verified_load(const char *manifest_path, cz_error *err) {
    cz_verified *v = cz_alloc(sizeof *v, err);
    if (!v) return NULL;
    snprintf(v->path, sizeof v->path, "%s.verified", manifest_path);
    FILE *f = fopen(v->path, "r");
    if (!f) return v; /* no cache yet */
    char line[1200];
    int ok =
        fgets(line, sizeof line, f) && !strncmp(line, VERIFIED_HEAD "\n", sizeof VERIFIED_HEAD);
    while (ok && fgets(line, sizeof line, f)) {
        verified_entry x;
        unsigned long long ino, size, mt, ct, sum;
        int n = 0;
        size_t len = strcspn(line, "\n");
        line[len] = 0;
        if (sscanf(line, "%llu %llu %llu %llu %llx %n", &ino, &size, &mt, &ct, &sum, &n) != 5 ||
            !n || !line[n] || strlen(line + n) >= sizeof x.path)
            continue; /* a damaged line: that shard is verified again */
        x = (verified_entry){ino, size, mt, ct, sum, 0, ""};
        snprintf(x.path, sizeof x.path, "%s", line + n);
        verified_entry *slot = verified_find(v, x.path, -1);
        if (!slot && !(slot = verified_add(v, err))) {
            fclose(f);
            cz_verified_close(v);
            return NULL;
        }
        *slot = x;
    }
    fclose(f);
    return v;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int cz_verified_check(cz_verified *v, const cz_shard *s, int hint, cz_error *err) {
    verified_entry *e = verified_find(v, s->path, hint);
    if (e && e->ino == s->ino && e->size == s->map_len && e->mtime_ns == s->mtime_ns &&
        e->ctime_ns == s->ctime_ns && e->checksum == s->hdr.payload_checksum) {
        e->used = 1;
        return 0;
    }
    double t0 = now_seconds();
    if (cz_shard_verify_payload(s, err) != 0) return -1;
    v->hashed++;
    v->hashed_bytes += s->map_len;
    v->hashed_seconds += now_seconds() - t0;
    if (!e && !(e = verified_add(v, err))) return -1;
    *e = (verified_entry){s->ino, s->map_len, s->mtime_ns, s->ctime_ns, s->hdr.payload_checksum,
                          1,      ""};
    snprintf(e->path, sizeof e->path, "%s", s->path);
    v->dirty = 1;
    return 0;
}

void cz_verified_flush(cz_verified *v) {
    if (v->hashed)
        cz_info("verified the payloads of %d shard(s) (%.1f MB in %.2f s); recorded in %s",
                v->hashed, (double)v->hashed_bytes / 1e6, v->hashed_seconds, v->path);
    if (v->dirty) {
        size_t cap = sizeof VERIFIED_HEAD + 1 + (size_t)v->n * (sizeof v->e->path + 100), len = 0;
        char *buf = malloc(cap);
        cz_error err;
        if (!buf) {
            cz_warn("%s: out of memory: the shards are verified again at the next start", v->path);
        } else {
            len += (size_t)snprintf(buf, cap, VERIFIED_HEAD "\n");
            /* lines of shards this process did not open (an older set the
             * manifest no longer lists) are dropped */
            for (int i = 0; i < v->n; i++) {
                const verified_entry *x = &v->e[i];
                if (!x->used) continue;
                len += (size_t)snprintf(buf + len, cap - len, "%llu %llu %llu %llu %016llx %s\n",
                                        (unsigned long long)x->ino, (unsigned long long)x->size,
                                        (unsigned long long)x->mtime_ns,
                                        (unsigned long long)x->ctime_ns,
                                        (unsigned long long)x->checksum, x->path);
            }
            if (cz_write_file_atomic(v->path, buf, len, &err) != 0)
                cz_warn("%s (the shards are verified again at the next start)", err.msg);
            free(buf);
        }
    }
    v->dirty = v->hashed = 0;
    v->hashed_bytes = 0;
    v->hashed_seconds = 0;
}

void cz_verified_close(cz_verified *v) {
    if (!v) return;
    cz_verified_flush(v);
    cz_free(v->e);
    cz_free(v);
}
