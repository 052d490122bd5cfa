/* data_dump: writes a small synthetic corpus (shards, manifest, vocabulary),
 * the same corpus as plain text, and samples 0..n-1 as built by
 * cz_data_build, for tests/test_data_reference.py to rebuild independently.
 *
 *   data_dump <dir> <bert|gpt> <seq> <max_pred> <seed> <n_samples> <whole_word 0|1>
 *
 * corpus.txt: "D <shard>" starts a document, "S <ids>" is one sentence.
 * samples.txt: one line per sample, fields separated by " | ":
 *   g nsp | tokens | segments | attn | targets | positions | labels | weights */
#include "cloze/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

enum { VOCAB = 3000, FIRST_CONT = 2000, N_SHARDS = 2 };

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: data_dump <dir> <bert|gpt> <seq> <max_pred> <seed> <n> <wwm>\n");
        return 2;
    }
    const char *dir = argv[1];
    dump_program = "data_dump";
    cz_arch arch = strcmp(argv[2], "gpt") == 0 ? CZ_ARCH_GPT : CZ_ARCH_BERT;
    int seq = atoi(argv[3]), max_pred = atoi(argv[4]);
    uint64_t seed = strtoull(argv[5], NULL, 10);
    int n = atoi(argv[6]), wwm = atoi(argv[7]);
    cz_error err;
    char path[1200];

    /* vocabulary: specials, word starts, "##" pieces */
    static char vocab[VOCAB * 16];
    size_t vlen = 0;
    const char *special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eot>"};
    for (int i = 0; i < VOCAB; i++)
        vlen += (size_t)(i < 6            ? snprintf(vocab + vlen, 16, "%s\n", special[i])
                         : i < FIRST_CONT ? snprintf(vocab + vlen, 16, "w%d\n", i)
                                          : snprintf(vocab + vlen, 16, "##p%d\n", i));
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    dump_check(cz_write_file_atomic(path, vocab, vlen, &err) != 0, path, &err);

    cz_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.vocab_kind, sizeof m.vocab_kind, "wordpiece");
    m.vocab_size = VOCAB;
    m.vocab_fingerprint = cz_fnv1a64(vocab, vlen, CZ_FNV_SEED);
    snprintf(m.vocab_path, sizeof m.vocab_path, "vocab.txt");
    m.pad_id = 0, m.unk_id = 1, m.cls_id = 2, m.sep_id = 3, m.mask_id = 4, m.eot_id = 5;
    m.n_shards = N_SHARDS;
    m.shards = cz_alloc(sizeof(cz_manifest_shard) * N_SHARDS, &err);
    FILE *ct = dump_open(dir, "corpus.txt", "w");
    uint64_t r = seed * 7919 + 1;
    for (int k = 0; k < N_SHARDS; k++) {
        cz_manifest_shard *ms = &m.shards[k];
        snprintf(ms->path, sizeof ms->path, "%s/s%d.shard", dir, k);
        cz_shard_writer *w;
        dump_check(cz_shard_writer_open(&w, ms->path, VOCAB, m.vocab_fingerprint, &err) != 0,
                   ms->path, &err);
        for (int doc = 0; doc < 6 + 3 * k; doc++) {
            uint32_t toks[10 * 30], lens[10];
            int ns = 1 + (int)(lcg(&r) % 10), t = 0;
            fprintf(ct, "D %d\n", k);
            for (int s = 0; s < ns; s++) {
                lens[s] = 1 + (uint32_t)(lcg(&r) % 30);
                fprintf(ct, "S");
                for (uint32_t i = 0; i < lens[s]; i++, t++) {
                    int start = (t == 0 || lcg(&r) % 10 < 6);
                    toks[t] = start ? 6 + (uint32_t)(lcg(&r) % (FIRST_CONT - 6))
                                    : FIRST_CONT + (uint32_t)(lcg(&r) % (VOCAB - FIRST_CONT));
                    fprintf(ct, " %u", toks[t]);
                }
                fprintf(ct, "\n");
            }
            dump_check(cz_shard_writer_add_document(w, toks, lens, (size_t)ns, &err) != 0, ms->path,
                       &err);
        }
        cz_shard_header h;
        dump_check(cz_shard_writer_finish(w, &h, &err) != 0, ms->path, &err);
        ms->n_tokens = h.n_tokens, ms->n_sentences = h.n_sentences;
        ms->n_documents = h.n_documents, ms->payload_checksum = h.payload_checksum;
    }
    dump_close(ct, "corpus.txt");
    snprintf(path, sizeof path, "%s/corpus.manifest", dir);
    dump_check(cz_manifest_write(&m, path, &err) != 0, path, &err);
    cz_free(m.shards);

    cz_data_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.masked_lm_prob = 0.15f;
    cfg.short_seq_prob = 0.1f;
    cfg.whole_word_mask = wwm;
    cz_data *d;
    dump_check(cz_data_open(&d, path, arch, &cfg, seed, &err) != 0, path, &err);
    cz_batch_buf b;
    dump_check(cz_batch_buf_alloc(&b, 1, seq, max_pred, &err) != 0, "batch", &err);
    FILE *out = dump_open(dir, "samples.txt", "w");
    fprintf(out, "N %llu\n", (unsigned long long)cz_data_samples_per_epoch(d, seq));
    for (int g = 0; g < n; g++) {
        dump_check(cz_data_build(d, &b, 0, (uint64_t)g, seq, max_pred, &err) != 0, "sample", &err);
        fprintf(out, "%d %d |", g, b.nsp_labels[0]);
        for (int i = 0; i < seq; i++) fprintf(out, " %d", b.tokens[i]);
        fprintf(out, " |");
        for (int i = 0; i < seq; i++) fprintf(out, " %d", b.segments[i]);
        fprintf(out, " |");
        for (int i = 0; i < seq; i++) fprintf(out, " %d", b.attn_mask[i]);
        fprintf(out, " |");
        for (int i = 0; i < seq; i++) fprintf(out, " %d", b.targets[i]);
        fprintf(out, " |");
        for (int i = 0; i < max_pred; i++) fprintf(out, " %d", b.mlm_positions[i]);
        fprintf(out, " |");
        for (int i = 0; i < max_pred; i++) fprintf(out, " %d", b.mlm_labels[i]);
        fprintf(out, " |");
        for (int i = 0; i < max_pred; i++) fprintf(out, " %g", (double)b.mlm_weights[i]);
        fprintf(out, "\n");
    }
    dump_close(out, "samples.txt");
    cz_batch_buf_free(&b);
    cz_data_close(d);
    return 0;
}
