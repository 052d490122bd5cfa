/* shard: the binary token-shard format, the one home of its layout, shared by
 * the writer (corpus_tools/, cloze-prep) and the reader (src/data).
 *
 * A shard file (little-endian):
 *   [0, 128)           cz_shard_header
 *   tokens_offset      n_tokens token ids, token_width bytes each (2 or 4)
 *   sentences_offset   n_sentences + 1 u64: token index where each sentence
 *                      starts; the last entry is n_tokens
 *   documents_offset   n_documents + 1 u64: sentence index where each document
 *                      starts; the last entry is n_sentences
 * Sections start on 64-byte boundaries. payload_checksum is FNV-1a 64 over
 * every byte after the header; header_checksum over the header's first 120
 * bytes. Full description: docs/formats.md.
 *
 * A manifest is a text file, one record per line:
 *   cloze-manifest 1
 *   vocab <kind wordpiece|bpe> <vocab_size> <fingerprint hex> <vocab path>
 *   vocab_file <role vocab|merges> <sha256 hex> <absolute path>
 *   vocab_given <role> <the path as given to cloze-prep>
 *   special <name> <id>          (cls sep mask pad unk eot, those that exist)
 *   shard <path relative to the manifest> <n_tokens> <n_sentences> <n_documents> <payload checksum
 * hex>
 */
#ifndef CLOZE_SHARD_H
#define CLOZE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

#define CZ_SHARD_MAGIC "CLZSHARD"
#define CZ_SHARD_VERSION 1u
#define CZ_SHARD_HEADER_SIZE 128u

typedef struct cz_shard_header {
    char magic[8];              /* "CLZSHARD" */
    uint32_t version;           /* CZ_SHARD_VERSION */
    uint32_t token_width;       /* 2 (vocab <= 65536) or 4 */
    uint64_t vocab_fingerprint; /* FNV-1a 64 of the vocabulary file bytes */
    uint32_t vocab_size;
    uint32_t flags; /* reserved, 0 */
    uint64_t n_tokens;
    uint64_t n_sentences;
    uint64_t n_documents;
    uint64_t tokens_offset;
    uint64_t sentences_offset;
    uint64_t documents_offset;
    uint64_t file_size;
    uint64_t payload_checksum;
    uint8_t reserved[24];
    uint64_t header_checksum; /* over bytes [0, 120) */
} cz_shard_header;

_Static_assert(sizeof(cz_shard_header) == CZ_SHARD_HEADER_SIZE, "shard header is 128 bytes");

/* A shard opened read-only through mmap: nothing is copied. */
typedef struct cz_shard {
    char path[1024];
    cz_shard_header hdr;
    const uint8_t *map;
    size_t map_len;
    const void *tokens;         /* uint16_t* or uint32_t* per token_width */
    const uint64_t *sent_start; /* [n_sentences + 1] */
    const uint64_t *doc_start;  /* [n_documents + 1] */
    /* the file's identity when opened (fstat): what the verification cache
     * below compares; any write through the file system changes ctime */
    uint64_t ino, mtime_ns, ctime_ns;
} cz_shard;

/* Opens and checks the header, sizes and offsets, and the monotonicity of the
 * boundary tables; verify_payload = 1 also checks the payload checksum and
 * that every token id is < vocab_size (slow: reads the whole file). Errors
 * name the file and the offset or field. */
int cz_shard_open(cz_shard *s, const char *path, int verify_payload, cz_error *err);
void cz_shard_close(cz_shard *s);
/* The slow half of verify_payload = 1 on a shard already open. */
int cz_shard_verify_payload(const cz_shard *s, cz_error *err);

/* ---- payload verification at training time ----
 * Training verifies each shard's payload (checksum and ids, one pass) the
 * first time it opens it, and records what it verified in
 * "<manifest>.verified", a text file beside the manifest:
 *   cloze-verified 1
 *   <inode> <size> <mtime ns> <ctime ns> <payload checksum hex> <shard path>
 * A shard whose identity (inode, size, mtime, ctime) and header checksum
 * match its line is not read again; any other is verified and its line
 * rewritten. A cache that cannot be read counts as empty, one that cannot
 * be written costs a warning and a pass over the payload at the next start.
 * What it cannot see: damage below the file system that leaves the file's
 * times alone (bit rot): `cloze-prep verify` reads everything. */
typedef struct cz_verified cz_verified;
/* Loads manifest_path's cache (empty when absent or unreadable). */
cz_verified *cz_verified_load(const char *manifest_path, cz_error *err);
/* 0 when s is good: found in the cache, or verified now (and recorded);
 * -1 with a one-line error naming the file and the bad offsets. `hint` is
 * where to look first (the shard's index in the manifest). */
int cz_verified_check(cz_verified *v, const cz_shard *s, int hint, cz_error *err);
/* Writes the cache atomically when it changed and logs what was verified
 * since the last flush; a failure to write is a warning. */
void cz_verified_flush(cz_verified *v);
/* Flushes and frees. */
void cz_verified_close(cz_verified *v);

static inline uint32_t cz_shard_token(const cz_shard *s, uint64_t i) {
    return s->hdr.token_width == 2 ? ((const uint16_t *)s->tokens)[i]
                                   : ((const uint32_t *)s->tokens)[i];
}

/* Header checksum and validation of a header read from disk. */
uint64_t cz_shard_header_checksum(const cz_shard_header *h);

/* Streaming writer: tokens go to "<path>.tmp.<pid>" as they come, boundary
 * tables are kept in memory (8 bytes per sentence and per document) and
 * written at the end; finish() fsyncs and renames into place, so a crash or a
 * full disk never leaves a half-written shard under its final name. */
typedef struct cz_shard_writer cz_shard_writer;

int cz_shard_writer_open(cz_shard_writer **out, const char *path, uint32_t vocab_size,
                         uint64_t vocab_fingerprint, cz_error *err);
/* One document: n_sentences sentences, sentence i has sent_len[i] tokens taken
 * in order from tokens[]. Ids must be < vocab_size. Empty documents are
 * skipped. */
int cz_shard_writer_add_document(cz_shard_writer *w, const uint32_t *tokens,
                                 const uint32_t *sent_len, size_t n_sentences, cz_error *err);
/* Writes the tables and header, fsyncs, renames; fills *hdr if not NULL. The
 * writer is freed whether it succeeds or not. */
int cz_shard_writer_finish(cz_shard_writer *w, cz_shard_header *hdr, cz_error *err);
/* Removes the temporary file and frees the writer. */
void cz_shard_writer_abort(cz_shard_writer *w);

#define CZ_MANIFEST_MAX_SHARDS 65536

typedef struct cz_manifest_shard {
    char path[1024]; /* resolved: relative paths are relative to the manifest */
    uint64_t n_tokens, n_sentences, n_documents, payload_checksum;
} cz_manifest_shard;

/* One file of the vocabulary a shard set was made with. Manifests written
 * before these records existed have none: every string is empty. */
typedef struct cz_manifest_file {
    char path[1024];  /* absolute, as resolved when the shards were made */
    char given[1024]; /* as given on cloze-prep's command line */
    char sha256[65];  /* lower-case hex of the file's SHA-256, "" = not recorded */
} cz_manifest_file;

enum { CZ_VOCAB_FILE_VOCAB = 0, CZ_VOCAB_FILE_MERGES = 1, CZ_VOCAB_FILES = 2 };

typedef struct cz_manifest {
    char path[1024];
    char vocab_kind[16]; /* "wordpiece" | "bpe" */
    uint32_t vocab_size;
    uint64_t vocab_fingerprint;
    char vocab_path[1024];
    /* [CZ_VOCAB_FILE_VOCAB]: vocab.txt or encoder.json; [CZ_VOCAB_FILE_MERGES]:
     * BPE merges (vocab.bpe), empty for WordPiece */
    cz_manifest_file vocab_files[CZ_VOCAB_FILES];
    /* special token ids, -1 when absent */
    int32_t cls_id, sep_id, mask_id, pad_id, unk_id, eot_id;
    int n_shards;
    cz_manifest_shard *shards; /* cz_alloc'ed */
} cz_manifest;

int cz_manifest_load(cz_manifest *m, const char *path, cz_error *err);
/* A path the manifest records (shard, vocabulary), resolved as its shards
 * are: absolute as it is, relative to the manifest's directory. */
void cz_manifest_resolve(const cz_manifest *m, const char *recorded, char *out, size_t len);
/* Writes atomically; shard paths are written relative to the manifest's
 * directory when they lie below it. */
int cz_manifest_write(const cz_manifest *m, const char *path, cz_error *err);
void cz_manifest_free(cz_manifest *m);

#endif
