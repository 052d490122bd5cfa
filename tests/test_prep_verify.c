/* cloze-prep's checks (corpus_tools/prep_verify.c, prep.h): a manifest's
 * shards and vocabulary files against what the manifest records, each
 * planted mistake found and named once; and, run under mpirun with --mpi,
 * the ranks' agreement on a failure (the lowest failing rank's message on
 * every rank, rank 0's verdict to all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/prep.h"
#include "cloze/text.h"

#include "mpi_main.h"

static char tmpdir[256];

/* What cz_prep_verify said: counts and every line, joined. */
typedef struct said {
    int errors, warnings;
    char text[8192];
} said;

static void collect(void *ctx, int warning, const char *line) {
    said *s = ctx;
    if (warning)
        s->warnings++;
    else
        s->errors++;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s\n", line);
}

static void write_bytes(const char *path, const char *bytes) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(bytes, f) >= 0, "write %s", path);
    if (f) fclose(f);
}

/* Two shards of a few documents over vocab.txt into *m (its shards
 * cz_alloc'ed, free with cz_free(m->shards)). */
static void make_set(cz_manifest *m, const char *vocab) {
    cz_error err;
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s/train.manifest", tmpdir);
    snprintf(m->vocab_kind, sizeof m->vocab_kind, "wordpiece");
    snprintf(m->vocab_path, sizeof m->vocab_path, "%s/vocab.txt", tmpdir);
    write_bytes(m->vocab_path, vocab);
    m->vocab_size = 8;
    m->vocab_fingerprint = cz_vocab_fingerprint(vocab, strlen(vocab), NULL, 0);
    m->n_shards = 2;
    m->shards = cz_alloc(2 * sizeof *m->shards, &err);
    for (int k = 0; k < 2; k++) {
        cz_manifest_shard *e = &m->shards[k];
        snprintf(e->path, sizeof e->path, "%s/train-%d.bin", tmpdir, k);
        cz_shard_writer *w;
        CHECK(cz_shard_writer_open(&w, e->path, m->vocab_size, m->vocab_fingerprint, &err) == 0,
              "%s", err.msg);
        for (int d = 0; d < 2 + k; d++) {
            uint32_t toks[5] = {5, 6, 7, 5, (uint32_t)(5 + d % 3)}, lens[2] = {3, 2};
            CHECK(cz_shard_writer_add_document(w, toks, lens, 2, &err) == 0, "%s", err.msg);
        }
        cz_shard_header h;
        CHECK(cz_shard_writer_finish(w, &h, &err) == 0, "%s", err.msg);
        e->n_tokens = h.n_tokens, e->n_sentences = h.n_sentences;
        e->n_documents = h.n_documents, e->payload_checksum = h.payload_checksum;
    }
}

static void test_verify(void) {
    static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n";
    cz_manifest m;
    make_set(&m, vocab);
    uint64_t tokens = 0;
    said s = {0};
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 0 && s.errors == 0 && s.warnings == 0,
          "a good set: %s", s.text);
    CHECK(tokens == 25, "tokens of the good set: %llu, want 2 x 5 + 3 x 5",
          (unsigned long long)tokens);

    /* a shard whose line in the manifest has another count */
    m.shards[1].n_tokens++;
    memset(&s, 0, sizeof s);
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 1 && s.errors == 1 &&
              strstr(s.text, m.shards[1].path) &&
              strstr(s.text, "counts/checksum (offsets 32-95) differ from its line in") &&
              strstr(s.text, m.path),
          "a wrong count: %s", s.text);
    CHECK(tokens == 10, "tokens of the good shard alone: %llu", (unsigned long long)tokens);
    m.shards[1].n_tokens--;

    /* the vocabulary file changed since: the vocab line, then every shard */
    write_bytes(m.vocab_path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nd\n");
    memset(&s, 0, sizeof s);
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 1 &&
              strstr(s.text, "vocab line: fingerprint") && strstr(s.text, m.vocab_path),
          "a changed vocabulary: %s", s.text);
    write_bytes(m.vocab_path, vocab);

    /* the manifest's fingerprint is not the shards' */
    m.vocab_fingerprint ^= 1;
    memset(&s, 0, sizeof s);
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 3 &&
              strstr(s.text, "vocab_fingerprint (offset 16)"),
          "a manifest with another fingerprint: %s", s.text);
    m.vocab_fingerprint ^= 1;

    /* a recorded SHA-256 that the file no longer has */
    snprintf(m.vocab_files[CZ_VOCAB_FILE_VOCAB].path, 1024, "%s", m.vocab_path);
    memset(m.vocab_files[CZ_VOCAB_FILE_VOCAB].sha256, '0', 64);
    memset(&s, 0, sizeof s);
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 1 &&
              strstr(s.text, "vocab_file vocab line: sha256 0000"),
          "a wrong sha256 record: %s", s.text);
    m.vocab_files[CZ_VOCAB_FILE_VOCAB].sha256[0] = 0;

    /* the vocabulary gone: a warning, the shards still checked */
    char moved[1100];
    snprintf(moved, sizeof moved, "%s.gone", m.vocab_path);
    CHECK(rename(m.vocab_path, moved) == 0, "rename %s", m.vocab_path);
    memset(&s, 0, sizeof s);
    CHECK(cz_prep_verify(&m, collect, &s, &tokens) == 0 && s.warnings == 1 &&
              strstr(s.text, "not readable, its fingerprint is not checked") && tokens == 25,
          "a vocabulary not readable: %s", s.text);
    cz_free(m.shards);
}

/* BPE: the merges beside encoder.json unless recorded; the fingerprint of
 * both files as the tokenizer takes it. */
static void test_bpe_files(void) {
    cz_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.vocab_kind, sizeof m.vocab_kind, "bpe");
    snprintf(m.vocab_path, sizeof m.vocab_path, "%s/encoder.json", tmpdir);
    char merges[1100], which[2200];
    cz_prep_manifest_merges(&m, merges, sizeof merges);
    snprintf(which, sizeof which, "%s/vocab.bpe", tmpdir);
    CHECK(!strcmp(merges, which), "merges beside encoder.json: %s", merges);
    snprintf(m.vocab_files[CZ_VOCAB_FILE_MERGES].path, 1024, "%s/other.bpe", tmpdir);
    cz_prep_manifest_merges(&m, merges, sizeof merges);
    CHECK(!strcmp(merges, m.vocab_files[CZ_VOCAB_FILE_MERGES].path), "recorded merges: %s", merges);
    static const char enc[] = "{\"a\": 0}", mer[] = "#version: 0.2\n";
    write_bytes(m.vocab_path, enc);
    write_bytes(merges, mer);
    uint64_t fp = 0;
    CHECK(cz_prep_file_fingerprint(&m, &fp, which, sizeof which) == 0 &&
              fp == cz_vocab_fingerprint(enc, strlen(enc), mer, strlen(mer)) &&
              strstr(which, "encoder.json + ") && strstr(which, "other.bpe"),
          "BPE fingerprint %016llx of %s", (unsigned long long)fp, which);
    remove(merges);
    CHECK(cz_prep_file_fingerprint(&m, &fp, which, sizeof which) == -1, "merges gone");
}

/* Without MPI (comm NULL) a failure is the process's own. */
static void test_alone(void) {
    cz_prep_world w = {.comm = NULL, .rank = 0};
    cz_error err = {{0}};
    CHECK(cz_prep_agree(&w, 0, &err) == 0 && cz_prep_rank0_verdict(&w, 0, &err) == 0, "all ok");
    cz_fail(&err, "planted alone");
    CHECK(cz_prep_agree(&w, -1, &err) == 1 && cz_prep_rank0_verdict(&w, -1, &err) == 1,
          "a failure alone");
}

/* Under mpirun: the last rank fails alone; every rank ends with its
 * message. Then rank 0 fails and every rank hears it. */
static int run_mpi(int *argc, char ***argv) {
    cz_prep_world w;
    memset(&w, 0, sizeof w);
    mpi_test_begin(&w.c, argc, argv);
    w.comm = &w.c, w.rank = w.c.rank;
    const cz_comm c = w.c;
    cz_error err = {{0}};
    CHECK(cz_prep_agree(&w, 0, &err) == 0, "every rank ok");
    int last = c.size - 1, rc = 0;
    if (c.rank == last) rc = cz_fail(&err, "planted on rank %d", last);
    char want[64];
    snprintf(want, sizeof want, "planted on rank %d", last);
    CHECK(cz_prep_agree(&w, rc, &err) == 1 && !strcmp(err.msg, want), "agreed on [%s], want [%s]",
          err.msg, want);
    CHECK(cz_prep_rank0_verdict(&w, 0, &err) == 0, "rank 0 ok");
    memset(&err, 0, sizeof err);
    rc = c.rank == 0 ? cz_fail(&err, "planted on rank 0") : 0;
    CHECK(cz_prep_rank0_verdict(&w, rc, &err) == 1, "rank 0's failure heard");
    return mpi_test_end(&w.c);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--mpi")) return run_mpi(&argc, &argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cloze_prep_verify_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_verify();
    test_bpe_files();
    test_alone();
    return check_finish(tmpdir);
}
