/* window_dump: the GPT samples cloze-train builds, for a reference
 * implementation to train and evaluate on exactly the same token windows
 * (bench/gpt2_curve_vs_torch.sh).
 *
 *   bench-window_dump MANIFEST SEQ SEED FIRST COUNT OUT
 *
 * Builds global samples FIRST .. FIRST+COUNT-1 of MANIFEST with data.seq =
 * SEQ and train.seed = SEED (cz_data_build: the windows, epochs and order
 * cloze-train uses; training step s takes samples s*G .. s*G+G-1, the
 * held-out evaluation samples 0 .. eval_batches x micro_batch - 1) and
 * writes OUT: COUNT x SEQ little-endian int32 tokens, then COUNT x SEQ
 * int32 targets (the next token, -1 where there is none), then COUNT x SEQ
 * int32 attention-mask values (1 real token, 0 padding). */
#include <stdio.h>
#include <stdlib.h>

#include "cloze/data.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: bench-window_dump MANIFEST SEQ SEED FIRST COUNT OUT\n");
        return 2;
    }
    int seq = atoi(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 10), first = strtoull(argv[4], NULL, 10);
    long count = atol(argv[5]);
    cz_error err;
    cz_data_config cfg = {0};
    cz_data *d;
    cz_batch_buf b;
    if (seq < 2 || count < 1 || cz_data_open(&d, argv[1], CZ_ARCH_GPT, &cfg, seed, &err) != 0 ||
        cz_batch_buf_alloc(&b, 1, seq, 0, &err) != 0) {
        fprintf(stderr, "bench-window_dump: %s\n",
                seq < 2 || count < 1 ? "bad SEQ or COUNT" : err.msg);
        return 1;
    }
    int32_t *tok = malloc((size_t)count * seq * sizeof *tok);
    int32_t *tgt = malloc((size_t)count * seq * sizeof *tgt);
    int32_t *msk = malloc((size_t)count * seq * sizeof *msk);
    FILE *f = fopen(argv[6], "wb");
    if (!tok || !tgt || !msk || !f) {
        perror(argv[6]);
        return 1;
    }
    for (long i = 0; i < count; i++) {
        if (cz_data_build(d, &b, 0, first + (uint64_t)i, seq, 0, &err) != 0) {
            fprintf(stderr, "bench-window_dump: %s\n", err.msg);
            return 1;
        }
        for (int t = 0; t < seq; t++) {
            tok[i * seq + t] = b.tokens[t];
            tgt[i * seq + t] = b.targets[t];
            msk[i * seq + t] = b.attn_mask[t];
        }
    }
    int ok = fwrite(tok, sizeof *tok, (size_t)count * seq, f) == (size_t)count * seq &&
             fwrite(tgt, sizeof *tgt, (size_t)count * seq, f) == (size_t)count * seq &&
             fwrite(msk, sizeof *msk, (size_t)count * seq, f) == (size_t)count * seq;
    ok &= fclose(f) == 0;
    cz_batch_buf_free(&b);
    cz_data_close(d);
    free(tok);
    free(tgt);
    free(msk);
    if (!ok) perror(argv[6]);
    return ok ? 0 : 1;
}
