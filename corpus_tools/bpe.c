/* bpe: GPT-2 byte-level BPE (placeholder until the encoder lands). */
#include "tokenizer_internal.h"

int cz_tokenizer_load_bpe(cz_tokenizer **out, const char *encoder_json, const char *merges_path,
                          cz_error *err) {
    *out = NULL;
    return cz_fail(err, "%s: BPE not implemented yet", encoder_json);
}
int cz_bpe_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out, cz_error *err) {
    return cz_fail(err, "bpe: not implemented yet");
}
char *cz_bpe_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n) {
    return NULL;
}
