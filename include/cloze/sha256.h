/* sha256: SHA-256 (FIPS 180-4) of buffers and files, for fingerprints that
 * outside tools can check (`sha256sum`, Python's hashlib): the vocabulary
 * files a shard set was made with are recorded by it in the manifest. */
#ifndef CLOZE_SHA256_H
#define CLOZE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"

typedef struct cz_sha256 {
    uint32_t h[8];
    uint64_t bytes; /* message length so far */
    uint8_t block[64];
    size_t fill; /* bytes waiting in block */
} cz_sha256;

void cz_sha256_init(cz_sha256 *s);
void cz_sha256_update(cz_sha256 *s, const void *data, size_t len);
void cz_sha256_final(cz_sha256 *s, uint8_t digest[32]);

/* The lower-case hex digest of a whole file (64 characters + NUL), read in
 * blocks. Errors name the file. */
int cz_sha256_file(const char *path, char hex[65], cz_error *err);

#endif
