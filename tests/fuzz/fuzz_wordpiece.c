/* WordPiece on arbitrary input (src/text/wordpiece.c: BERT's
 * BasicTokenizer and greedy longest match), uncased and cased, with the
 * vocabulary our learner made (tests/golden/cased_vocab.txt), and
 * cloze-prep's BERT-mode document path (normalise, split into sentences,
 * encode: cz_prep_document). Properties: ids are in the vocabulary; the
 * sentences' ids, one after the other, are the document's; the normalised
 * text is valid UTF-8 without control characters or double spaces. */
#include "fuzz.h"

#include "cloze/prep.h"
#include "cloze/text.h"

static cz_tokenizer *tok[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    cz_error err;
    for (int cased = 0; cased < 2; cased++) {
        cz_tokenizer_options o;
        cz_tokenizer_options_default(&o);
        o.lower_case = !cased;
        if (cz_tokenizer_load_wordpiece(
                &tok[cased], CLOZE_SOURCE_DIR "/tests/golden/cased_vocab.txt", &o, &err) != 0) {
            fprintf(stderr, "%s\n", err.msg);
            abort();
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    cz_error err;
    for (int cased = 0; cased < 2; cased++) {
        const cz_tokenizer *t = tok[cased];
        uint32_t vs = cz_tokenizer_vocab_size(t);
        cz_ids ids = {0};
        /* the tokenizer's contract is valid UTF-8; raw bytes must not crash */
        cz_tokenizer_encode(t, text, size, &ids, &err);
        for (size_t k = 0; k < ids.n; k++)
            FUZZ_CHECK(ids.ids[k] < vs, "id %u >= %u", ids.ids[k], vs);
        char *dec = cz_tokenizer_decode(t, ids.ids, ids.n, NULL);
        free(dec);
        cz_ids_free(&ids);
        cz_prep_doc d;
        memset(&d, 0, sizeof d);
        FUZZ_CHECK(cz_prep_document(t, text, size, data[0] & 1, &d, &err) == 0, "prep: %s",
                   err.msg);
        const unsigned char *n = (const unsigned char *)d.norm.data;
        for (size_t i = 0; i < d.norm.len; i++) {
            FUZZ_CHECK(n[i] >= 0x20 || n[i] == '\n', "control byte 0x%02x kept", n[i]);
            FUZZ_CHECK(!(n[i] == ' ' && i + 1 < d.norm.len && n[i + 1] == ' '), "double space");
        }
        size_t total = 0;
        for (size_t k = 0; k < d.n_sent; k++) {
            FUZZ_CHECK(d.sent_len[k] > 0, "empty sentence %zu", k);
            total += d.sent_len[k];
        }
        FUZZ_CHECK(total == d.ids.n, "sentences hold %zu ids, the document %zu", total, d.ids.n);
        for (size_t k = 0; k < d.ids.n; k++)
            FUZZ_CHECK(d.ids.ids[k] < vs, "document id out of range");
        cz_prep_doc_free(&d);
    }
    return 0;
}
