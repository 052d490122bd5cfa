#define _GNU_SOURCE /* memmem */
/* cloze-prep's input readers (corpus_tools/prep_input.c): binary detection,
 * the text, WikiText, JSON Lines and Gutenberg formats, in BERT mode and in
 * GPT mode (verbatim). The first byte picks the format and mode; the rest is
 * the file. Properties: every document is non-empty, at most the document
 * limit plus one line long, and in GPT mode made of the file's own bytes
 * (a document's text is a run of the file, except for JSON strings). */
#include "fuzz.h"

#include "cloze/prep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    cz_input_format fmt = (cz_input_format)(data[0] % 5);
    int verbatim = (data[0] >> 3) & 1;
    const char *path = fuzz_file("input.txt", data + 1, size - 1);
    cz_reader r;
    cz_error err;
    if (cz_reader_open(&r, path, fmt, (data[0] & 0x40) ? "body" : NULL, verbatim, &err) != 0)
        return 0;
    cz_buf doc = {0};
    int rc, docs = 0;
    while ((rc = cz_reader_next(&r, &doc, &err)) == 1 && docs < 100000) {
        docs++;
        FUZZ_CHECK(doc.len > 0, "empty document");
        FUZZ_CHECK(doc.len <= CZ_MAX_DOC_BYTES + size, "document of %zu bytes", doc.len);
        if (verbatim && r.fmt != CZ_FMT_JSONL && doc.len <= 64 && size > 1)
            FUZZ_CHECK(memmem(data + 1, size - 1, doc.data, doc.len) != NULL,
                       "a GPT document that is not a run of the file");
    }
    cz_reader_close(&r);
    cz_buf_free(&doc);
    return 0;
}
