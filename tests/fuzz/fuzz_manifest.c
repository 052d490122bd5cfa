/* The manifest reader (src/data/shard.c). Property: a manifest that loads
 * and can be written writes what loads back to the same fields. */
#include "fuzz.h"

#include "cloze/shard.h"

static void same(const cz_manifest *a, const cz_manifest *b) {
    FUZZ_CHECK(!strcmp(a->vocab_kind, b->vocab_kind) && a->vocab_size == b->vocab_size &&
                   a->vocab_fingerprint == b->vocab_fingerprint &&
                   !strcmp(a->vocab_path, b->vocab_path),
               "vocab line differs after a round trip");
    for (int k = 0; k < CZ_VOCAB_FILES; k++)
        FUZZ_CHECK(!strcmp(a->vocab_files[k].sha256, b->vocab_files[k].sha256) &&
                       (!a->vocab_files[k].sha256[0] ||
                        (!strcmp(a->vocab_files[k].path, b->vocab_files[k].path) &&
                         !strcmp(a->vocab_files[k].given, b->vocab_files[k].given))),
                   "vocab_file %d differs after a round trip", k);
    FUZZ_CHECK(a->cls_id == b->cls_id && a->sep_id == b->sep_id && a->mask_id == b->mask_id &&
                   a->pad_id == b->pad_id && a->unk_id == b->unk_id && a->eot_id == b->eot_id,
               "special ids differ after a round trip");
    FUZZ_CHECK(a->n_shards == b->n_shards, "%d shards, %d after a round trip", a->n_shards,
               b->n_shards);
    for (int i = 0; i < a->n_shards; i++) {
        const cz_manifest_shard *x = &a->shards[i], *y = &b->shards[i];
        FUZZ_CHECK(!strcmp(x->path, y->path) && x->n_tokens == y->n_tokens &&
                       x->n_sentences == y->n_sentences && x->n_documents == y->n_documents &&
                       x->payload_checksum == y->payload_checksum,
                   "shard %d differs after a round trip: %s / %s", i, x->path, y->path);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("train.manifest", data, size);
    cz_manifest m, r;
    cz_error err;
    if (cz_manifest_load(&m, path, &err) != 0) return 0;
    char out[600];
    snprintf(out, sizeof out, "%s", path);
    snprintf(strrchr(out, '/'), sizeof out - (size_t)(strrchr(out, '/') - out), "/%s",
             "written.manifest");
    fuzz_file("written.manifest", "", 0); /* registered for removal */
    if (cz_manifest_write(&m, out, &err) == 0) {
        FUZZ_CHECK(cz_manifest_load(&r, out, &err) == 0, "written manifest does not load: %s",
                   err.msg);
        same(&m, &r);
        cz_manifest_free(&r);
    }
    cz_manifest_free(&m);
    return 0;
}
