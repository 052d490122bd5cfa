/* ckpt: checkpoints as one standard LZ4 frame per file (`lz4 -d` opens it),
 * holding a small container of named binary blobs.
 *
 * Container (little-endian), the frame's decompressed content, version 2:
 *   "CLZCKPT2"  u32 count  u32 0
 *   per blob:   u32 name_len, name bytes, u64 size, u64 fnv1a64(data),
 *               u32 filter, u32 0, the data as the filter stored it
 * filter 0 stores the bytes as they are; filter 1 (CZ_CKPT_SHUFFLE4, for
 * arrays of 4-byte words: fp32 tensors) cuts the data into chunks of
 * CZ_CKPT_SHUFFLE_CHUNK bytes (the last one shorter) and stores each chunk
 * of L bytes as four planes of q = L / 4 bytes, plane j holding byte j of
 * every word in order, then the L - 4q bytes left over as they are.
 * Grouping the sign/exponent bytes of nearby floats is what lets LZ4 find
 * matches in fp32 data (Blosc's "shuffle"). The writer picks the filter per
 * blob by measuring: a blob of whole words of at least CZ_CKPT_PROBE_MIN
 * bytes is shuffled when its first chunk compresses at least 1% smaller
 * shuffled than plain (fp32 tensors do; text does not). The checksum is
 * over the data as given (unshuffled). Version 1 ("CLZCKPT1") had no filter and reserved
 * fields; it is still read.
 * The LZ4 frame carries its content size and an xxh32 content checksum over
 * all of it (headers included); the per-blob checksum names the bad blob.
 * Files in a run directory are named ckpt-<step, 8 digits>.lz4. */
#ifndef CLOZE_CKPT_H
#define CLOZE_CKPT_H

#include "cloze/core.h"

#define CZ_CKPT_MAGIC "CLZCKPT2"
#define CZ_CKPT_MAGIC_V1 "CLZCKPT1"
#define CZ_CKPT_NAME_MAX 255
#define CZ_CKPT_SHUFFLE_CHUNK (1u << 20)
#define CZ_CKPT_PROBE_MIN 4096

enum { CZ_CKPT_PLAIN = 0, CZ_CKPT_SHUFFLE4 = 1 };

typedef struct cz_blob {
    const char *name;
    const void *data;
    size_t size;
} cz_blob;

/* The blobs cloze's checkpoints hold, by name: every writer and reader
 * uses these (docs/checkpoints.md describes each). A training run's: */
#define CZ_BLOB_STEP "step"     /* int64 little-endian: optimizer steps done */
#define CZ_BLOB_CONFIG "config" /* the configuration, as cz_config_to_string writes it */
#define CZ_BLOB_STATE "state"   /* cz_run_state (train) */
#define CZ_BLOB_PARAMS "params" /* float32 parameters, the model's flat layout */
#define CZ_BLOB_ADAM_M "adam_m" /* AdamW moments, the same layout */
#define CZ_BLOB_ADAM_V "adam_v"
/* the flat layout of params, adam_m and adam_v: CZ_PARAMS_LAYOUT, the tied
 * word embedding first; a file without this blob has the layout of before
 * (hf.h cz_ckpt_get_params reads either) */
#define CZ_BLOB_LAYOUT "layout"
/* µP runs (model.parametrization = mup): the optimizer's per-tensor
 * multipliers, float64 little-endian pairs (lr_mult, wd_mult) in the
 * table's order; resume checks them against the run's */
#define CZ_BLOB_MULTIPLIERS "multipliers"
#define CZ_PARAMS_LAYOUT "word-embedding-first"
/* a fine-tuning run's, besides those (hf.h formats and reads them): */
#define CZ_BLOB_FT_HEAD "finetune.head"
#define CZ_BLOB_FT_TASK "finetune.task"
/* the vocabulary a model was trained with (hf.h): */
#define CZ_BLOB_VOCAB_META "vocab.meta"
#define CZ_BLOB_VOCAB_FILE "vocab.file"
#define CZ_BLOB_VOCAB_MERGES "vocab.merges"

/* Streams the blobs (each through the filter that measured best, see the
 * format above) through the LZ4 frame compressor into "path.tmp.<pid>",
 * fsyncs, renames over path, fsyncs the directory. On any failure the tmp
 * file is removed and an earlier file under path is left untouched. */
int cz_ckpt_write(const char *path, const cz_blob *blobs, int n, cz_error *err);

/* A checkpoint read fully into memory (each blob its own cz_alloc). */
typedef struct cz_ckpt cz_ckpt;
int cz_ckpt_read(const char *path, cz_ckpt **out, cz_error *err);
void cz_ckpt_free(cz_ckpt *c);
int cz_ckpt_count(const cz_ckpt *c);
const char *cz_ckpt_name(const cz_ckpt *c, int i);
/* Looks a blob up by name; NULL when absent. *size may be NULL. */
const void *cz_ckpt_get(const cz_ckpt *c, const char *name, size_t *size);
/* Copies blob `name` into dst, which must hold exactly `size` bytes. */
int cz_ckpt_get_exact(const cz_ckpt *c, const char *name, void *dst, size_t size, cz_error *err);

/* Full decompression and every checksum, without keeping the data. Errors
 * name the file and the offset (compressed or container) and field. */
int cz_ckpt_verify(const char *path, cz_error *err);

/* Blob names and sizes without keeping the data (streams and verifies the
 * whole file). data is given for blobs of at most CZ_CKPT_SMALL bytes
 * (step counters, config text), NULL for larger ones. */
#define CZ_CKPT_SMALL 65536
typedef void (*cz_ckpt_blob_fn)(void *ctx, const char *name, size_t size, const void *data);
int cz_ckpt_scan(const char *path, cz_ckpt_blob_fn fn, void *ctx, cz_error *err);

/* ---- writing off the training critical path ----
 * One background writer per run. cz_ckpt_writer_start first waits for the
 * write before it (one write at a time, in order) and returns its result;
 * then it snapshots the blobs — copies them, or takes blobs[i].data over
 * when take[i] = 1 (a cz_alloc'ed buffer the writer frees) — and returns,
 * while a thread runs cz_ckpt_write and, when prune_dir is given,
 * cz_ckpt_prune(prune_dir, keep_last). The caller may change its buffers as
 * soon as start returns. cz_ckpt_writer_wait waits for the running write
 * and returns its result (0, or -1 with its one-line error). */
typedef struct cz_ckpt_writer cz_ckpt_writer;
/* verbose = 1: each finished write is logged ("... written in X s").
 * background = 0: no thread and no snapshot: start writes (and prunes)
 * before it returns, from the caller's buffers, and returns that write's
 * result; the same files and messages otherwise. For a rank that has no
 * free core for the thread (train.ckpt_writer, docs/checkpoints.md). */
cz_ckpt_writer *cz_ckpt_writer_create(int verbose, int background, cz_error *err);
int cz_ckpt_writer_start(cz_ckpt_writer *w, const char *path, const cz_blob *blobs, int n,
                         const int *take, const char *prune_dir, int keep_last, cz_error *err);
int cz_ckpt_writer_wait(cz_ckpt_writer *w, cz_error *err);
/* Waits for a running write (its error is logged) and frees. */
void cz_ckpt_writer_free(cz_ckpt_writer *w);

/* ---- run directories ---- */
void cz_ckpt_path(char *buf, size_t len, const char *run_dir, long step);
/* Steps of the ckpt-*.lz4 files in run_dir, ascending (malloc'ed, free()). */
int cz_ckpt_list(const char *run_dir, long **steps, int *n, cz_error *err);
/* Newest checkpoint that verifies: returns 1 and fills path/step; 0 when
 * none; -1 on error. Each skipped bad file is logged as a warning. */
int cz_ckpt_find_latest(const char *run_dir, char *path, size_t len, long *step, cz_error *err);
/* Deletes all but the keep_last newest checkpoints (keep_last >= 1). */
int cz_ckpt_prune(const char *run_dir, int keep_last, cz_error *err);

#endif
