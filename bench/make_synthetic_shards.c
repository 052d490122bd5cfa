/* Writes a synthetic corpus for throughput benchmarks: a vocabulary file, one
 * shard of random token ids with sentence and document boundaries, and a
 * manifest, so that cloze-train runs end to end (data pipeline, model,
 * optimizer, all-reduce) without a real corpus. The text means nothing;
 * only its shape matters (sentences of 5-40 tokens, documents of 2-30
 * sentences, as in BERT's pre-training data).
 *
 *   bench-make_synthetic_shards OUT_DIR [--vocab V] [--tokens N] [--seed S]
 *
 * Writes OUT_DIR/vocab.txt, OUT_DIR/train.shard, OUT_DIR/train.manifest.
 * Defaults: V = 30522 (BERT's WordPiece size), N = 4,000,000 tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/rng.h"
#include "cloze/shard.h"

static int fail(const cz_error *err) {
    fprintf(stderr, "make_synthetic_shards: %s\n", err->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s OUT_DIR [--vocab V] [--tokens N] [--seed S]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    uint32_t vocab = 30522;
    uint64_t want = 4000000, seed = 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--vocab"))
            vocab = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--tokens"))
            want = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "make_synthetic_shards: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    enum { N_SPECIAL = 6 };
    if (vocab < N_SPECIAL + 10) {
        fprintf(stderr, "make_synthetic_shards: --vocab %u is too small\n", vocab);
        return 2;
    }
    cz_error err = {0};

    /* vocabulary: the specials the data pipeline looks up, then plain words */
    const char *special[N_SPECIAL] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eot>"};
    size_t cap = (size_t)vocab * 16, vlen = 0;
    char *text = malloc(cap);
    for (uint32_t i = 0; i < vocab; i++)
        vlen += (size_t)(i < N_SPECIAL ? snprintf(text + vlen, cap - vlen, "%s\n", special[i])
                                       : snprintf(text + vlen, cap - vlen, "w%u\n", i));
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if (cz_write_file_atomic(path, text, vlen, &err) != 0) return fail(&err);

    cz_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.vocab_kind, sizeof m.vocab_kind, "wordpiece");
    m.vocab_size = vocab;
    m.vocab_fingerprint = cz_fnv1a64(text, vlen, CZ_FNV_SEED);
    free(text);
    snprintf(m.vocab_path, sizeof m.vocab_path, "vocab.txt");
    m.pad_id = 0, m.unk_id = 1, m.cls_id = 2, m.sep_id = 3, m.mask_id = 4, m.eot_id = 5;
    m.n_shards = 1;
    m.shards = cz_alloc(sizeof(cz_manifest_shard), &err);
    if (!m.shards) return fail(&err);
    cz_manifest_shard *ms = &m.shards[0];
    snprintf(ms->path, sizeof ms->path, "%s/train.shard", dir);

    cz_shard_writer *w;
    if (cz_shard_writer_open(&w, ms->path, vocab, m.vocab_fingerprint, &err) != 0)
        return fail(&err);
    cz_rng_stream r = cz_rng_stream_make(seed, CZ_RNG_TEST, 0, 0, 0);
    uint64_t draw = 0, written = 0;
    uint32_t toks[30 * 40], lens[30];
    while (written < want) {
        size_t ns = 2 + (size_t)cz_rng_below(&r, draw++, 29), t = 0;
        for (size_t s = 0; s < ns; s++) {
            lens[s] = 5 + (uint32_t)cz_rng_below(&r, draw++, 36);
            for (uint32_t i = 0; i < lens[s]; i++)
                toks[t++] = N_SPECIAL + (uint32_t)cz_rng_below(&r, draw++, vocab - N_SPECIAL);
        }
        if (cz_shard_writer_add_document(w, toks, lens, ns, &err) != 0) return fail(&err);
        written += t;
    }
    cz_shard_header h;
    if (cz_shard_writer_finish(w, &h, &err) != 0) return fail(&err);
    ms->n_tokens = h.n_tokens, ms->n_sentences = h.n_sentences;
    ms->n_documents = h.n_documents, ms->payload_checksum = h.payload_checksum;
    snprintf(path, sizeof path, "%s/train.manifest", dir);
    if (cz_manifest_write(&m, path, &err) != 0) return fail(&err);
    cz_free(m.shards);
    printf("%s: %llu tokens, %llu sentences, %llu documents, vocab %u\n", path,
           (unsigned long long)h.n_tokens, (unsigned long long)h.n_sentences,
           (unsigned long long)h.n_documents, vocab);
    return 0;
}
