/* prep: the library of `cloze-prep` (src/programs/cloze_prep.c), in
 * corpus_tools/: input readers, the shard writer and its pipeline, the
 * shard set of an output directory, the vocabulary learners, the checks of
 * `verify` and the ranks' agreement on a failure. The text
 * itself (normaliser, sentence splitter, tokenizers) is the text module's
 * (cloze/text.h); the shard format is data's (cloze/shard.h). */
#ifndef CLOZE_PREP_H
#define CLOZE_PREP_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "cloze/comm.h"
#include "cloze/core.h"
#include "cloze/shard.h"
#include "cloze/text.h"

/* ---- inputs and their readers ----
 * The input files of cloze-prep and the readers that cut them into
 * documents (formats in docs/formats.md, "Inputs"). */

typedef enum {
    CZ_FMT_AUTO = 0,     /* by name and content, see cz_input_detect */
    CZ_FMT_TEXT,         /* blank line ends a document, one paragraph per line */
    CZ_FMT_WIKITEXT,     /* " = Title = " starts a document, headings dropped */
    CZ_FMT_JSONL,        /* one JSON object per line, a string field holds the text */
    CZ_FMT_GUTENBERG,    /* a book: hard-wrapped lines joined, paragraphs by blank lines */
    CZ_FMT_WIKIEXTRACTOR /* WikiExtractor's <doc id=.. url=.. title=..> .. </doc> files */
} cz_input_format;
#define CZ_FMT_COUNT 6

/* Which lines of a document the reader keeps (docs/formats.md, "Text
 * passages"): AUTO keeps only text passages in Wikipedia input
 * (WikiExtractor's <doc> files and its JSON Lines), every line elsewhere. */
typedef enum { CZ_PASSAGES_AUTO = 0, CZ_PASSAGES_ON, CZ_PASSAGES_OFF } cz_passages;

/* 1 when the line s[0..n) (no terminator) is a text passage: BERT's corpus
 * keeps "only the text passages" of Wikipedia and ignores "lists, tables,
 * and headers" (Devlin et al. 2019, sec. 3.1). A passage starts with
 * neither whitespace nor a list/table/indent mark (* # ; : | ! { } = <),
 * holds no leftover wiki markup ({{ }} [[ ]] {| |} <ref &nbsp;), ends a
 * sentence (. ! ? or one of them followed by closing quotes or brackets)
 * and has at least CZ_PASSAGE_MIN_WORDS words, CZ_PASSAGE_MIN_WORDS_ONE
 * when it is a single sentence: WikiExtractor writes a section heading as
 * its title plus '.', one "sentence" of a few words, and the longest
 * headings run to 10 words (docs/formats.md, "Text passages"). */
#define CZ_PASSAGE_MIN_WORDS 8
#define CZ_PASSAGE_MIN_WORDS_ONE 12
int cz_is_passage(const char *s, size_t n);

int cz_input_format_parse(const char *s, cz_input_format *f);

/* The expanded list of input files (directories walked, sorted by name). */
typedef struct cz_file_list {
    char **paths;
    int n, cap;
    uint64_t total_bytes;
} cz_file_list;

int cz_file_list_add(cz_file_list *l, const char *path, cz_error *err);
void cz_file_list_free(cz_file_list *l);

/* Streams one file, document by document. The document's raw bytes go to
 * doc ('\n' between paragraphs), not yet normalised.
 *
 * verbatim = 1 (GPT mode) keeps the bytes of every line as they are: the
 * format decides only where documents begin and end (and, for Gutenberg,
 * which part of the file is the book). Inside a document every line keeps
 * its terminator ("\n", "\r\n") but the last, blank lines inside it are
 * kept, and WikiText headings are text. Blank lines at a document's edges
 * separate documents and are not part of any. */
typedef struct cz_reader {
    char path[1024];
    FILE *f;
    cz_input_format fmt;
    const char *jsonl_field;
    char *line;
    size_t line_cap;
    uint64_t offset; /* bytes consumed */
    uint64_t line_no;
    int in_body; /* Gutenberg: between the START and END markers */
    int done;
    int pending_title; /* WikiText: the last line read started the next article */
    int verbatim;
    long line_len;          /* the last line's length, without its terminator */
    int eol_cr, eol_nl;     /* the last line's terminator: eol_cr '\r's, then '\n' if eol_nl */
    cz_buf pend;            /* verbatim: terminators and blank lines since the last text line */
    int passages;           /* 1: keep only text passages (cz_is_passage); set by open, see below */
    uint64_t lines_dropped; /* ... and the lines that were not */
    uint64_t headings_marked; /* WikiExtractor: "## " heading lines (corpus_tools/wikiextract.py) */
    int wiki_json;            /* JSON Lines written by WikiExtractor (id, url, title fields) */
    int in_doc;        /* WikiExtractor: inside <doc> .. </doc>; 2 = its title line is next */
    uint64_t doc_line; /* WikiExtractor: the line of the current <doc> */
    char doc_id[32];   /* WikiExtractor: the current document's id and title, to name it */
    char doc_title[256];
    cz_buf scratch;
} cz_reader;

/* Opens a file; refuses binary data (a NUL byte or mostly invalid UTF-8 in the
 * first 64 KiB) with an error naming the offset. */
int cz_reader_open(cz_reader *r, const char *path, cz_input_format fmt, const char *jsonl_field,
                   int verbatim, cz_error *err);
/* Open decides r->passages from the input (CZ_PASSAGES_AUTO: on for
 * WikiExtractor output in either form); a caller's ON/OFF overrides it. */
void cz_reader_set_passages(cz_reader *r, cz_passages p);
/* 1 = a document is in doc, 0 = end of file, -1 = error. */
int cz_reader_next(cz_reader *r, cz_buf *doc, cz_error *err);
void cz_reader_close(cz_reader *r);

/* Documents longer than this are cut at a paragraph boundary, so that memory
 * stays bounded whatever the input. */
#define CZ_MAX_DOC_BYTES (8u << 20)

/* ---- the output directory's shard set ----
 * How `cloze-prep shards` replaces the shard set in an output
 * directory without ever putting the old one at risk.
 *
 * Layout of an output directory DIR (docs/formats.md, "Output directory"):
 *   DIR/train.manifest, DIR/heldout.manifest  the current set: what users
 *                                             give cloze-train
 *   DIR/set-NNNN/{train,heldout}-KKKKK.bin    its shards
 *   DIR/.set-NNNN.staging/                    a set being written
 *   DIR/.cloze-prep.lock                      flock()ed by the run writing DIR
 *
 * A run writes every shard into a new staging directory. Only when all of
 * them are complete (fsynced) does it rename the directory to set-NNNN,
 * write the new manifests under temporary names, and rename them over the
 * old ones; the old set's files are removed last. Until the manifests are
 * renamed, DIR/train.manifest and every file it names are untouched, so a
 * full disk, a kill or an error at any earlier point leaves the old set as
 * it was (the next run removes the leftover staging directory). */

typedef struct cz_prep_set {
    char dir[PATH_MAX];     /* the output directory, without trailing '/' */
    char staging[PATH_MAX]; /* DIR/.set-NNNN.staging */
    char final[PATH_MAX];   /* DIR/set-NNNN */
    int number;             /* NNNN */
    int lock_fd;            /* -1 when not held */
    int committed;
    int removed_sets; /* earlier set directories removed by the commit */
    int created_dir;  /* begin created DIR: a failed run removes it again */
} cz_prep_set;

/* Creates DIR if needed, takes its lock (refused with the holder's host and
 * pid when another cloze-prep holds it), removes staging directories that
 * killed runs left, and creates a new empty staging directory. */
int cz_prep_set_begin(cz_prep_set *s, const char *out_dir, cz_error *err);

/* Swaps the staged set in: train (and heldout, or NULL when this run has no
 * held-out set: an old heldout.manifest is then removed) list shards inside
 * s->staging. On success their paths point into s->final. On failure the
 * old set is still the current one and the new files are removed. */
int cz_prep_set_commit(cz_prep_set *s, cz_manifest *train, cz_manifest *heldout, cz_error *err);

/* Removes the staging directory unless the set was committed, and releases
 * the lock; when begin created DIR, an uncommitted run removes DIR too (its
 * lock file, then DIR if nothing else is in it). Safe to call after a
 * failed begin. */
void cz_prep_set_end(cz_prep_set *s);

/* ---- the shards pipeline ----
 * The `cloze-prep shards` pipeline: read documents, normalise,
 * split sentences, tokenize on a thread pool, write shards in input order.
 *
 * Determinism: documents are read in a fixed order (files in the given
 * order, directories sorted), tokenized in batches by OpenMP threads into
 * per-document slots, and written in read order, so the shards are
 * byte-identical for any thread count. With MPI, file i goes to rank
 * i % world; rank r owns train shards k with k % world == r. */

typedef struct cz_prep_options {
    const char *out_dir;
    int n_shards;   /* train shards over all ranks */
    double heldout; /* fraction of documents held out, 0 = none */
    int threads;
    cz_input_format fmt;
    const char *jsonl_field;
    int wikitext_detok;
    cz_passages passages; /* --passages: AUTO (Wikipedia input: on), ON, OFF */
    int progress;         /* progress line on stderr */
    int rank, world;      /* MPI position (0, 1 without MPI) */
} cz_prep_options;

typedef struct cz_prep_stats {
    uint64_t bytes_in, documents, heldout_documents, sentences, tokens, unk, bytes_replaced,
        chars_dropped;
    uint64_t lines_dropped; /* lines that are no text passage (--passages) */
    /* WikiExtractor files read with passages on whose headings carry no
     * mark (plain WikiExtractor, not corpus_tools/wikiextract.py): their
     * headings are told from text by the length rule only */
    uint64_t wiki_files_unmarked;
} cz_prep_stats;
#define CZ_PREP_STATS_N 10 /* uint64 fields, for MPI reductions */

/* A document's tokens, sentence lengths and counts. */
typedef struct cz_prep_doc {
    cz_buf norm;
    cz_spans spans;
    cz_ids ids;
    uint32_t *sent_len;
    size_t n_sent, cap_sent;
    cz_prep_stats st;
    uint64_t hash; /* FNV-1a 64 of the normalised text: decides the heldout split */
} cz_prep_doc;

/* Raw document bytes into d (reset first). WordPiece (BERT): normalised,
 * split into sentences, each encoded; BPE (GPT): the bytes as they are
 * (cz_verbatim), encoded whole as one sentence. */
int cz_prep_document(const cz_tokenizer *tok, const char *raw, size_t len, int detok,
                     cz_prep_doc *d, cz_error *err);
void cz_prep_doc_free(cz_prep_doc *d);

/* Is a document with this content hash held out? (hash / 2^64 < fraction) */
int cz_prep_is_heldout(uint64_t hash, double fraction);

/* Writes this rank's shards (<out>/train-KKKKK.bin, <out>/heldout-RRRRR.bin). */
int cz_prep_shards(const cz_prep_options *o, const cz_tokenizer *tok, const cz_file_list *files,
                   cz_prep_stats *st, cz_error *err);

/* After every rank finished: the manifests of the shards in o->out_dir, with
 * the vocabulary they were made with (kind, size, fingerprint, and each
 * file's paths and SHA-256). Empty shards are removed and left out; heldout
 * lists no shard without --heldout. Free both with cz_manifest_free. */
int cz_prep_collect_manifests(const cz_prep_options *o, const cz_tokenizer *tok,
                              const char *vocab_path, const char *merges_path, cz_manifest *train,
                              cz_manifest *heldout, cz_error *err);

/* ---- vocabulary learners ----
 * Learn a WordPiece vocabulary (BERT vocab.txt layout) or GPT-2
 * byte-level BPE merges (encoder.json + vocab.bpe) from text files, for
 * `cloze-prep vocab`. Deterministic: the same files and options give the same
 * bytes, whatever the thread count. Memory is bounded by the table of
 * distinct words (one entry per distinct pre-tokenised word + its count).
 * The algorithm is described in docs/tokenizers.md. */

typedef struct cz_vocab_learn_options {
    int vocab_size;     /* total entries, specials and reserved included */
    int lower_case;     /* WordPiece: 1 = uncased (lower-case + strip accents) */
    int n_unused;       /* WordPiece: [unused0..n-1] after [PAD] (BERT: 99, so [UNK] = 100) */
    int min_frequency;  /* merges whose pair occurs fewer times are not learned (default 2) */
    int max_word_chars; /* WordPiece: longer words are skipped (default 100, as the tokenizer) */
} cz_vocab_learn_options;

void cz_vocab_learn_options_default(cz_vocab_learn_options *o);

/* vocab.txt: [PAD] [unused0..] [UNK] [CLS] [SEP] [MASK], every character
 * seen (and its ## form), then learned pieces; written atomically. */
int cz_learn_wordpiece_opts(const char *const *files, int n_files, const cz_vocab_learn_options *o,
                            const char *out_vocab, cz_error *err);
int cz_learn_wordpiece(const char *const *files, int n_files, int vocab_size, int lower_case,
                       const char *out_vocab, cz_error *err);

/* encoder.json (256 byte tokens, merges, then <|endoftext|> last) and
 * vocab.bpe ("#version: 0.2" + one merge per line, rank order). */
int cz_learn_bpe(const char *const *files, int n_files, int vocab_size,
                 const char *out_encoder_json, const char *out_merges, cz_error *err);

/* ---- checks: a manifest's shards, the ranks' agreement (prep_verify.c) ---- */

/* The ranks of a `shards` run: MPI through comm when started by mpirun,
 * otherwise one process without MPI (comm NULL). Every fatal error is said
 * once: an error all ranks find alike, or one a rank finds in its own part
 * that the ranks then agree on (cz_comm_agree), by the lowest rank that
 * found it; a failed collective by the rank that saw it, which then ends
 * the job (cz_comm_abort). */
typedef struct cz_prep_world {
    cz_comm c;
    cz_comm *comm; /* &c under MPI, NULL alone */
    int rank;
} cz_prep_world;
/* Collective: 0 when every rank's rc is 0; else 1, with err the message of
 * the lowest failing rank, said on stderr by rank 0 (naming that rank when
 * it is not 0). */
int cz_prep_agree(cz_prep_world *w, int rc, cz_error *err);
/* Collective: rank 0's verdict (rc; the others pass 0) to every rank: 1
 * when it failed (rank 0 says it). */
int cz_prep_rank0_verdict(cz_prep_world *w, int rc, cz_error *err);

/* The merges file of a BPE manifest: the one it records, or (manifests from
 * before the vocab_file records) vocab.bpe next to encoder.json. */
void cz_prep_manifest_merges(const cz_manifest *m, char *buf, size_t len);
/* The fingerprint of m's vocabulary files as they are now
 * (cz_vocab_fingerprint); `which` names the files read; -1 when one cannot
 * be read. */
int cz_prep_file_fingerprint(const cz_manifest *m, uint64_t *fp, char *which, size_t len);
/* One shard against its line in m (and its own checks, cz_shard_open with
 * verify): fingerprint, vocab_size, counts and checksum, the first that
 * differs named with its header offset. */
int cz_prep_verify_shard(const cz_manifest *m, const cz_manifest_shard *e, cz_error *err);
/* One finding of cz_prep_verify: a line without a program's prefix;
 * warning 1 for what could not be checked. */
typedef void (*cz_prep_say_fn)(void *ctx, int warning, const char *line);
/* `cloze-prep verify`: the vocabulary files against the manifest's
 * fingerprint (when readable) and SHA-256 records, then every shard
 * (cz_prep_verify_shard); each problem one line to say. Returns the number
 * of problems; *tokens the tokens of the good shards. */
int cz_prep_verify(const cz_manifest *m, cz_prep_say_fn say, void *ctx, uint64_t *tokens);

#endif
