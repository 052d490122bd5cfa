/* core: errors, logging, timers, small allocation helpers.
 *
 * Errors follow one rule everywhere in cloze: a function that can fail
 * returns int (0 = ok, -1 = failed) and fills a caller-owned cz_error with a
 * one-line message that says where (file, line, offset, rank) and what.
 * The message travels up to main(), which prints it and exits non-zero. */
#ifndef CLOZE_CORE_H
#define CLOZE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CZ_ERROR_MAX 1024
#define CZ_PATH_MAX 1024 /* path buffers of configurations and run directories */

typedef struct cz_error {
    char msg[CZ_ERROR_MAX];
} cz_error;

/* Sets err->msg from a printf format and returns -1, so that callers can
 * write `return cz_fail(err, "%s: bad magic at offset %zu", path, off);`.
 * err may be NULL (message dropped). */
int cz_fail(cz_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message: "context: previous message". Returns -1. */
int cz_fail_prefix(cz_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- logging: rank-tagged lines on stderr ---- */
typedef enum { CZ_LOG_ERROR = 0, CZ_LOG_WARN = 1, CZ_LOG_INFO = 2, CZ_LOG_DEBUG = 3 } cz_log_level;

/* Process-wide log settings are the one piece of global state we allow:
 * logging is called from everywhere and must not need a context. Set once by
 * main() (rank, verbosity) before any other call. */
void cz_log_setup(int rank, cz_log_level level);
void cz_log(cz_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cz_info(...) cz_log(CZ_LOG_INFO, __VA_ARGS__)
#define cz_warn(...) cz_log(CZ_LOG_WARN, __VA_ARGS__)
#define cz_debug(...) cz_log(CZ_LOG_DEBUG, __VA_ARGS__)
/* The process's rank as the launcher put it in the environment, readable
 * before MPI is initialised: Open MPI's OMPI_COMM_WORLD_RANK, PMIx's
 * PMIX_RANK, MPICH's PMI_RANK, then srun's SLURM_PROCID; 0 when none is set
 * (a process started alone). A program's argument errors, found before
 * MPI_Init, are printed by rank 0 alone, not once per rank. */
int cz_launch_rank(void);
/* The number of ranks the launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE;
 * 1 under PMIx alone), 0 when no launcher started this process. */
int cz_launch_size(void);

/* ---- time ---- */
double cz_now(void); /* monotonic seconds */
/* The median of v[0..n-1] (n >= 1; sorts v in place). */
double cz_median(double *v, int n);

/* Formats seconds as "1h02m03s" / "4m05s" / "6.2s" into buf. */
const char *cz_format_duration(double seconds, char *buf, size_t len);

/* ---- memory ---- */
/* 64-byte aligned, zeroed allocation (AVX-512 loads, no false sharing).
 * Returns NULL and fills err on failure. Free with cz_free. */
void *cz_alloc(size_t bytes, cz_error *err);
void cz_free(void *p);
/* A growable byte buffer, zero-initialised empty ({0}); always
 * NUL-terminated once anything was appended. Text readers, the JSON string
 * decoder and the normaliser append to it. */
typedef struct cz_buf {
    char *data;
    size_t len, cap;
} cz_buf;
/* Appends n bytes of s (doubling the capacity as needed). */
int cz_buf_append(cz_buf *b, const char *s, size_t n, cz_error *err);
void cz_buf_free(cz_buf *b);
/* Parallel arrays (a table's columns: one index, several arrays) grown
 * together by doubling. An item is the address of one array's pointer and
 * its element size (CZ_GROW_ITEM). When n == *cap, every array is
 * reallocated to twice *cap elements (`first` when *cap is 0), contents
 * kept, and *cap set; otherwise nothing happens. On failure returns -1
 * with "<what>: out of memory for <new cap> <unit>" and *cap unchanged:
 * the arrays already grown hold their larger blocks, all of them still
 * valid and freed by the caller as before. */
typedef struct cz_grow_item {
    void *array; /* the address of the array's pointer (T **) */
    size_t elem; /* sizeof T */
} cz_grow_item;
#define CZ_GROW_ITEM(ptr) ((cz_grow_item){(void *)&(ptr), sizeof *(ptr)})
int cz_grow(const cz_grow_item *items, int count, size_t n, uint32_t *cap, uint32_t first,
            const char *what, const char *unit, cz_error *err);

/* ---- files ---- */
/* Writes a whole buffer to `path` safely: write to "path.tmp.<pid>", fsync,
 * rename over path, fsync the directory. Earlier good data under `path` is
 * never destroyed by a failed write (disk full, crash). */
int cz_write_file_atomic(const char *path, const void *data, size_t len, cz_error *err);
/* After a failed write of path: appends " (earlier file kept)" to err when
 * path exists (an atomic writer leaves it untouched), nothing when there was
 * none to keep. Returns -1. */
int cz_note_earlier_kept(cz_error *err, const char *path);
/* write(2) until every byte is out (retries short writes and EINTR);
 * 0 or -1 with errno set. The streaming writers (checkpoints, shards) use it. */
int cz_write_all(int fd, const void *data, size_t len);
/* fsync the directory holding `path`, so that a rename into it is durable. */
void cz_fsync_dir_of(const char *path);
/* Reads a whole file into a cz_alloc'ed buffer (NUL-terminated for text). */
int cz_read_file(const char *path, void **data, size_t *len, cz_error *err);
/* mkdir -p: every missing directory of path (0755). */
int cz_make_dirs(const char *path, cz_error *err);

/* FNV-1a 64-bit: cheap fingerprints (vocabulary, config) */
uint64_t cz_fnv1a64(const void *data, size_t len, uint64_t seed);
#define CZ_FNV_SEED 0xcbf29ce484222325ULL

#endif
