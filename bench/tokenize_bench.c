/* tokenize_bench: single-core encode throughput of the WordPiece (BERT
 * uncased) and GPT-2 BPE tokenizers on shared/data text, in MB/s of UTF-8
 * input. Units are lines ("\r" dropped, "\n" kept), as in
 * bench/tokenize_vs_hf.sh, which runs Hugging Face on the same units.
 * Usage: bench-tokenize_bench [shared/data dir] [repeats] */
#include "cloze/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *texts[] = {"corpus/wikitext-2-raw/wiki.valid.raw",
                              "corpus/gutenberg/pg11.txt",
                              "corpus/gutenberg/pg1342.txt",
                              "corpus/gutenberg/pg16.txt",
                              "corpus/gutenberg/pg1661.txt",
                              "corpus/gutenberg/pg174.txt",
                              "corpus/gutenberg/pg236.txt",
                              "corpus/gutenberg/pg2701.txt",
                              "corpus/gutenberg/pg345.txt",
                              "corpus/gutenberg/pg4300.txt",
                              "corpus/gutenberg/pg5200.txt",
                              "corpus/gutenberg/pg76.txt",
                              "corpus/gutenberg/pg98.txt"};
#define N_TEXTS (int)(sizeof texts / sizeof texts[0])

/* All texts as one buffer of lines; line k is [start[k], start[k+1]). */
typedef struct corpus {
    char *buf;
    size_t len, n;
    size_t *start;
} corpus;

static int load_corpus(const char *dir, corpus *c, cz_error *err) {
    memset(c, 0, sizeof *c);
    size_t cap = 0;
    char **data = calloc(N_TEXTS, sizeof *data);
    size_t *lens = calloc(N_TEXTS, sizeof *lens);
    for (int f = 0; f < N_TEXTS; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, texts[f]);
        void *d;
        if (cz_read_file(path, &d, &lens[f], err)) return -1;
        data[f] = d;
        cap += lens[f] + 1;
    }
    c->buf = malloc(cap);
    c->start = malloc((cap + 1) * sizeof *c->start);
    for (int f = 0; f < N_TEXTS; f++) {
        const char *s = data[f];
        for (size_t i = 0; i < lens[f];) {
            size_t e = i;
            while (e < lens[f] && s[e] != '\n') e++;
            size_t l = e - i;
            if (l && s[i + l - 1] == '\r') l--;
            c->start[c->n++] = c->len;
            memcpy(c->buf + c->len, s + i, l);
            c->len += l;
            c->buf[c->len++] = '\n';
            i = e + 1;
        }
        cz_free(data[f]);
    }
    c->start[c->n] = c->len;
    free(data), free(lens);
    return 0;
}

static double run(const cz_tokenizer *t, const corpus *c, int repeats, size_t *tokens) {
    double best = 1e30;
    cz_ids ids = {0};
    cz_error err;
    for (int r = 0; r < repeats; r++) {
        size_t total = 0;
        double t0 = cz_now();
        for (size_t k = 0; k < c->n; k++) {
            ids.n = 0;
            if (cz_tokenizer_encode(t, c->buf + c->start[k], c->start[k + 1] - c->start[k], &ids,
                                    &err)) {
                fprintf(stderr, "%s\n", err.msg);
                exit(1);
            }
            total += ids.n;
        }
        double dt = cz_now() - t0;
        if (dt < best) best = dt;
        *tokens = total;
    }
    cz_ids_free(&ids);
    return best;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : getenv("CLOZE_SHARED_DATA");
    int repeats = argc > 2 ? atoi(argv[2]) : 3;
    if (!dir) dir = "../shared/data";
    cz_error err;
    corpus c;
    if (load_corpus(dir, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    char p1[4096], p2[4096];
    cz_tokenizer *wp, *bpe;
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    snprintf(p1, sizeof p1, "%s/vocab/bert-base-uncased/vocab.txt", dir);
    if (cz_tokenizer_load_wordpiece(&wp, p1, &o, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    snprintf(p1, sizeof p1, "%s/vocab/gpt2/encoder.json", dir);
    snprintf(p2, sizeof p2, "%s/vocab/gpt2/vocab.bpe", dir);
    if (cz_tokenizer_load_bpe(&bpe, p1, p2, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double mb = (double)c.len / 1e6;
    printf("text: %d files, %zu lines, %.2f MB; best of %d runs, 1 thread\n", N_TEXTS, c.n, mb,
           repeats);
    size_t ntok;
    double dt = run(wp, &c, repeats, &ntok);
    printf("cloze wordpiece: %8.2f MB/s  %zu tokens  %.3f s\n", mb / dt, ntok, dt);
    dt = run(bpe, &c, repeats, &ntok);
    printf("cloze gpt2-bpe : %8.2f MB/s  %zu tokens  %.3f s\n", mb / dt, ntok, dt);
    cz_tokenizer_free(wp), cz_tokenizer_free(bpe);
    free(c.buf), free(c.start);
    return 0;
}
