/* text: encode and decode dispatched by the tokenizer's kind to
 * wordpiece.c or bpe.c, the top of text's files (text_internal.h). */
#include "text_internal.h"

int cz_tokenizer_encode(const cz_tokenizer *t, const char *text, size_t len, cz_ids *out,
                        cz_error *err) {
    return t->kind == CZ_TOK_WORDPIECE ? cz_wordpiece_encode(t, text, len, out, err)
                                       : cz_bpe_encode(t, text, len, out, err);
}

char *cz_tokenizer_decode(const cz_tokenizer *t, const uint32_t *ids, size_t n, size_t *len) {
    return t->kind == CZ_TOK_WORDPIECE ? cz_wordpiece_decode(t, ids, n, len)
                                       : cz_bpe_decode(t, ids, n, len);
}
