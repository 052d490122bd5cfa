/* GPT-2 byte-level BPE on arbitrary input (src/text/bpe.c), with the BPE
 * our learner made (tests/golden/learned_bpe.*), and cloze-prep's GPT-mode
 * document path (cz_prep_document). Properties: ids are in the vocabulary,
 * decode(encode(x)) == x for every x, the heap merge of long pieces equals
 * the per-merge scan on every piece, and a document encodes to exactly the
 * ids of its bytes. */
#include "fuzz.h"

#include "../../src/text/text_internal.h" /* BPE of one piece */
#include "cloze/prep.h"
#include "cloze/text.h"

static cz_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    cz_error err;
    if (cz_tokenizer_load_bpe(&tok, CLOZE_SOURCE_DIR "/tests/golden/learned_bpe.json",
                              CLOZE_SOURCE_DIR "/tests/golden/learned_bpe.bpe", &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    cz_ids ids = {0}, a = {0}, b = {0};
    cz_error err;
    FUZZ_CHECK(cz_tokenizer_encode(tok, text, size, &ids, &err) == 0, "encode: %s", err.msg);
    uint32_t vs = cz_tokenizer_vocab_size(tok);
    for (size_t k = 0; k < ids.n; k++) FUZZ_CHECK(ids.ids[k] < vs, "id %u >= %u", ids.ids[k], vs);
    size_t len;
    char *dec = cz_tokenizer_decode(tok, ids.ids, ids.n, &len);
    FUZZ_CHECK(dec && len == size && (!size || !memcmp(dec, data, size)), "decode(encode(x)) != x");
    free(dec);
    /* every piece: the heap algorithm (long pieces) against the scan */
    for (size_t i = 0; i < size;) {
        size_t e = cz_gpt2_piece_end(data, size, i);
        FUZZ_CHECK(e > i && e <= size, "piece [%zu, %zu) of %zu bytes", i, e, size);
        a.n = b.n = 0;
        FUZZ_CHECK(cz_bpe_piece_ids(tok, data + i, e - i, 0, &a, &err) == 0 &&
                       cz_bpe_piece_ids(tok, data + i, e - i, 1, &b, &err) == 0,
                   "piece ids: %s", err.msg);
        FUZZ_CHECK(a.n == b.n && (!a.n || !memcmp(a.ids, b.ids, a.n * sizeof *a.ids)),
                   "heap and scan merges differ on a %zu-byte piece", e - i);
        i = e;
    }
    /* cloze-prep's GPT mode: the document's bytes, one sentence */
    cz_prep_doc d;
    memset(&d, 0, sizeof d);
    FUZZ_CHECK(cz_prep_document(tok, text, size, 0, &d, &err) == 0, "prep: %s", err.msg);
    FUZZ_CHECK(d.ids.n == ids.n && (!ids.n || !memcmp(d.ids.ids, ids.ids, ids.n * sizeof *ids.ids)),
               "a GPT document is not encoded as its bytes");
    FUZZ_CHECK(d.n_sent == (ids.n > 0) && (!d.n_sent || d.sent_len[0] == ids.n),
               "a GPT document is not one sentence");
    cz_prep_doc_free(&d);
    cz_ids_free(&ids), cz_ids_free(&a), cz_ids_free(&b);
    return 0;
}
