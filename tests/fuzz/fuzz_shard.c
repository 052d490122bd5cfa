/* The token-shard reader (src/data/shard.c): header, sections, boundary
 * tables, payload checksum and id range. Property: a shard that opens can
 * be read everywhere its tables point (documents -> sentences -> tokens)
 * without leaving the mapping, which ASan would report. */
#include "fuzz.h"

#include "cloze/shard.h"

static uint64_t walk(const cz_shard *s) {
    uint64_t sum = 0;
    const cz_shard_header *h = &s->hdr;
    for (uint64_t d = 0; d < h->n_documents; d++) {
        uint64_t s0 = s->doc_start[d], s1 = s->doc_start[d + 1];
        FUZZ_CHECK(s0 <= s1 && s1 <= h->n_sentences, "document %llu: sentences [%llu, %llu)",
                   (unsigned long long)d, (unsigned long long)s0, (unsigned long long)s1);
        for (uint64_t k = s0; k < s1; k++) {
            uint64_t a = s->sent_start[k], b = s->sent_start[k + 1];
            FUZZ_CHECK(a <= b && b <= h->n_tokens, "sentence %llu: tokens [%llu, %llu)",
                       (unsigned long long)k, (unsigned long long)a, (unsigned long long)b);
            for (uint64_t i = a; i < b; i++) sum += cz_shard_token(s, i);
        }
    }
    return sum;
}

/* The first input byte: bit 0 recomputes the payload checksum, bit 1 the
 * header checksum of the rest (the shard), so that mutations reach the
 * checks behind them instead of all failing at a checksum. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t *b = malloc(size);
    memcpy(b, data + 1, size - 1);
    size_t n = size - 1;
    if (n >= CZ_SHARD_HEADER_SIZE) {
        cz_shard_header h;
        memcpy(&h, b, sizeof h);
        if (data[0] & 1)
            h.payload_checksum =
                cz_fnv1a64(b + CZ_SHARD_HEADER_SIZE, n - CZ_SHARD_HEADER_SIZE, CZ_FNV_SEED);
        if (data[0] & 2) h.header_checksum = cz_shard_header_checksum(&h);
        memcpy(b, &h, sizeof h);
    }
    const char *path = fuzz_file("shard.bin", b, n);
    free(b);
    cz_error err;
    cz_shard s;
    for (int verify = 0; verify < 2; verify++) {
        if (cz_shard_open(&s, path, verify, &err) != 0) {
            FUZZ_CHECK(strstr(err.msg, path) != NULL, "error does not name the file: %s", err.msg);
            continue;
        }
        volatile uint64_t sum = walk(&s);
        (void)sum;
        if (verify)
            for (uint64_t i = 0; i < s.hdr.n_tokens; i++)
                FUZZ_CHECK(cz_shard_token(&s, i) < s.hdr.vocab_size, "verified id out of range");
        cz_shard_close(&s);
    }
    return 0;
}
