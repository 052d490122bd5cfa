/* cloze-prep's reader of WikiExtractor output (corpus_tools/prep_input.c):
 * the <doc id=.. url=.. title=..> .. </doc> files and the JSON Lines form,
 * with and without the text-passage rule, in BERT mode and in GPT mode
 * (verbatim). The first byte picks: bit 0 GPT mode, bit 1 passages off,
 * bit 2 --format auto (else wikiextractor); the rest is the file.
 * Properties: every document is non-empty and at most the document limit
 * plus one line long; no <doc> or </doc> line is ever text; with passages
 * on, every line of a BERT-mode document is a passage (cz_is_passage); in
 * GPT mode a <doc> document is a run of the file's own bytes. */
#define _GNU_SOURCE /* memmem */
#include "fuzz.h"

#include "cloze/prep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int verbatim = data[0] & 1;
    cz_passages pass = (data[0] & 2) ? CZ_PASSAGES_OFF : CZ_PASSAGES_AUTO;
    cz_input_format fmt = (data[0] & 4) ? CZ_FMT_AUTO : CZ_FMT_WIKIEXTRACTOR;
    const char *path = fuzz_file("wiki_00", data + 1, size - 1);
    cz_reader r;
    cz_error err;
    if (cz_reader_open(&r, path, fmt, NULL, verbatim, &err) != 0) return 0;
    cz_reader_set_passages(&r, pass);
    int doc_form = r.fmt == CZ_FMT_WIKIEXTRACTOR;
    cz_buf doc = {0};
    int rc, docs = 0;
    while ((rc = cz_reader_next(&r, &doc, &err)) == 1 && docs < 100000) {
        docs++;
        FUZZ_CHECK(doc.len > 0, "empty document");
        FUZZ_CHECK(doc.len <= CZ_MAX_DOC_BYTES + size, "document of %zu bytes", doc.len);
        if (doc_form && verbatim && doc.len <= 64 && size > 1)
            FUZZ_CHECK(memmem(data + 1, size - 1, doc.data, doc.len) != NULL,
                       "a GPT document that is not a run of the file");
        /* line by line: no <doc>/</doc> line, and passages only when on */
        const char *p = doc.data, *end = doc.data + doc.len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            size_t l = len;
            while (l && p[l - 1] == '\r') l--;
            if (doc_form) {
                FUZZ_CHECK(!(l >= 5 && !memcmp(p, "<doc", 4) && (p[4] == ' ' || p[4] == '>')),
                           "a <doc> line inside a document");
                FUZZ_CHECK(!(l == 6 && !memcmp(p, "</doc>", 6)), "a </doc> line inside a document");
            }
            if (r.passages && !verbatim)
                FUZZ_CHECK(cz_is_passage(p, len), "a line that is no passage: [%.*s]",
                           (int)(len < 200 ? len : 200), p);
            p += len + 1;
        }
    }
    cz_reader_close(&r);
    cz_buf_free(&doc);
    return 0;
}
