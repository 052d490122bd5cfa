/* The vocabulary loaders (src/text): WordPiece vocab.txt and GPT-2
 * encoder.json + vocab.bpe (merges). The first byte picks which; for BPE the
 * input is encoder.json, a NUL, then the merges. A vocabulary that loads
 * tokenizes a fixed text into ids below its size, and its BPE decode gives
 * the text back. */
#include "fuzz.h"

#include "cloze/text.h"

static const char SAMPLE[] = "The quick  brown fox\n\tjumped over 13 lazy dogs' tails: "
                             "\xC3\xA9t\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 ok.";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    cz_tokenizer *t = NULL;
    cz_error err;
    int bpe = data[0] & 1;
    if (bpe) {
        const uint8_t *nul = memchr(data + 1, 0, size - 1);
        size_t ne = nul ? (size_t)(nul - data - 1) : size - 1;
        const char *enc = fuzz_file("encoder.json", data + 1, ne);
        const char *mer =
            fuzz_file("vocab.bpe", nul ? nul + 1 : data + size, nul ? size - 2 - ne : 0);
        if (cz_tokenizer_load_bpe(&t, enc, mer, &err) != 0) return 0;
    } else {
        cz_tokenizer_options o;
        cz_tokenizer_options_default(&o);
        o.lower_case = (data[0] >> 1) & 1;
        const char *path = fuzz_file("vocab.txt", data + 1, size - 1);
        if (cz_tokenizer_load_wordpiece(&t, path, &o, &err) != 0) return 0;
    }
    uint32_t vs = cz_tokenizer_vocab_size(t);
    cz_ids ids = {0};
    if (cz_tokenizer_encode(t, SAMPLE, sizeof SAMPLE - 1, &ids, &err) == 0) {
        for (size_t k = 0; k < ids.n; k++)
            FUZZ_CHECK(ids.ids[k] < vs, "id %u >= %u", ids.ids[k], vs);
        size_t len;
        char *dec = cz_tokenizer_decode(t, ids.ids, ids.n, &len);
        if (bpe)
            FUZZ_CHECK(dec && len == sizeof SAMPLE - 1 && !memcmp(dec, SAMPLE, len),
                       "a loaded BPE does not decode the text back");
        free(dec);
    }
    for (uint32_t id = 0; id < vs && id < 4096; id++) cz_tokenizer_token(t, id);
    cz_ids_free(&ids);
    cz_tokenizer_free(t);
    return 0;
}
