/* prep_input: the input files of cloze-prep and the readers that cut them
 * into documents (formats in docs/formats.md, "Inputs"). */
#ifndef CLOZE_PREP_INPUT_H
#define CLOZE_PREP_INPUT_H

#include <stdint.h>
#include <stdio.h>

#include "cloze/core.h"
#include "prep_text.h"

typedef enum {
    CZ_FMT_AUTO = 0, /* by name and content, see cz_input_detect */
    CZ_FMT_TEXT,     /* blank line ends a document, one paragraph per line */
    CZ_FMT_WIKITEXT, /* " = Title = " starts a document, headings dropped */
    CZ_FMT_JSONL,    /* one JSON object per line, a string field holds the text */
    CZ_FMT_GUTENBERG /* a book: hard-wrapped lines joined, paragraphs by blank lines */
} cz_input_format;

const char *cz_input_format_name(cz_input_format f);
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
    long line_len;      /* the last line's length, without its terminator */
    int eol_cr, eol_nl; /* the last line's terminator: eol_cr '\r's, then '\n' if eol_nl */
    cz_buf pend;        /* verbatim: terminators and blank lines since the last text line */
} cz_reader;

/* Opens a file; refuses binary data (a NUL byte or mostly invalid UTF-8 in the
 * first 64 KiB) with an error naming the offset. */
int cz_reader_open(cz_reader *r, const char *path, cz_input_format fmt, const char *jsonl_field,
                   int verbatim, cz_error *err);
/* 1 = a document is in doc, 0 = end of file, -1 = error. */
int cz_reader_next(cz_reader *r, cz_buf *doc, cz_error *err);
void cz_reader_close(cz_reader *r);

/* Documents longer than this are cut at a paragraph boundary, so that memory
 * stays bounded whatever the input. */
#define CZ_MAX_DOC_BYTES (8u << 20)

#endif
