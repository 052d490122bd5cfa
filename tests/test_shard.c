/* shard: writer -> reader round trips against the arrays that were fed in,
 * and damaged files (truncated, flipped bytes, wrong magic, bad offsets,
 * out-of-range ids) that must be refused with messages naming the file and
 * the offset or field; aborted writers leave nothing behind. */
#include "cloze/shard.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A corpus of n_docs documents kept in plain arrays, the reference that the
 * shard is compared with. Document d has (d % 5) sentences (so some are
 * empty and must be skipped), sentence lengths 0..40 (0 = empty sentence). */
typedef struct corpus {
    uint32_t *tokens; /* all tokens, in order */
    uint64_t n_tokens;
    uint64_t sent_len[4096];
    int n_sent;
    int doc_first_sent[1025], n_docs; /* over non-empty sentences/documents */
} corpus;

static void write_shard(const char *path, uint32_t vocab, int n_docs, uint64_t seed, corpus *c) {
    cz_error err = {{0}};
    cz_shard_writer *w;
    CHECK(cz_shard_writer_open(&w, path, vocab, 0x1234abcdULL, &err) == 0, "%s", err.msg);
    memset(c, 0, sizeof *c);
    c->tokens = malloc(sizeof(uint32_t) * 200000);
    uint32_t doc_tok[4 * 41], sl[4];
    for (int d = 0; d < n_docs; d++) {
        int ns = d % 5, nt = 0, kept = 0;
        for (int i = 0; i < ns; i++) {
            sl[i] = (uint32_t)(lcg(&seed) % 41);
            for (uint32_t k = 0; k < sl[i]; k++) doc_tok[nt++] = (uint32_t)(lcg(&seed) % vocab);
        }
        if (nt > 0) c->doc_first_sent[c->n_docs++] = c->n_sent;
        for (int i = 0; i < ns; i++)
            if (sl[i]) c->sent_len[c->n_sent++] = sl[i], kept++;
        memcpy(c->tokens + c->n_tokens, doc_tok, (size_t)nt * 4);
        c->n_tokens += (uint64_t)nt;
        CHECK(cz_shard_writer_add_document(w, doc_tok, sl, (size_t)ns, &err) == 0, "%s", err.msg);
    }
    c->doc_first_sent[c->n_docs] = c->n_sent;
    cz_shard_header h;
    CHECK(cz_shard_writer_finish(w, &h, &err) == 0, "%s", err.msg);
    CHECK(h.n_tokens == c->n_tokens, "n_tokens %llu want %llu", (unsigned long long)h.n_tokens,
          (unsigned long long)c->n_tokens);
}

static void test_round_trip(uint32_t vocab, uint32_t want_width) {
    char path[512];
    snprintf(path, sizeof path, "%s/rt-%u.bin", dir, vocab);
    corpus c;
    write_shard(path, vocab, 1000, vocab, &c);
    cz_shard s;
    cz_error err = {{0}};
    CHECK(cz_shard_open(&s, path, 1, &err) == 0, "%s", err.msg);
    CHECK(s.hdr.token_width == want_width, "width %u", s.hdr.token_width);
    CHECK(s.hdr.vocab_size == vocab && s.hdr.vocab_fingerprint == 0x1234abcdULL, "vocab fields");
    CHECK(s.hdr.n_tokens == c.n_tokens, "tokens");
    CHECK(s.hdr.n_sentences == (uint64_t)c.n_sent, "sentences %llu want %d",
          (unsigned long long)s.hdr.n_sentences, c.n_sent);
    CHECK(s.hdr.n_documents == (uint64_t)c.n_docs, "documents");
    CHECK(s.hdr.sentences_offset % 64 == 0 && s.hdr.documents_offset % 64 == 0, "alignment");
    int bad = 0;
    for (uint64_t i = 0; i < c.n_tokens; i++) bad += cz_shard_token(&s, i) != c.tokens[i];
    CHECK(bad == 0, "%d tokens differ", bad);
    uint64_t pos = 0;
    for (int i = 0; i < c.n_sent; i++) {
        CHECK(s.sent_start[i] == pos, "sentence %d start", i);
        pos += c.sent_len[i];
    }
    CHECK(s.sent_start[c.n_sent] == c.n_tokens, "sentence end");
    for (int d = 0; d <= c.n_docs; d++)
        CHECK(s.doc_start[d] == (uint64_t)c.doc_first_sent[d], "document %d start", d);
    cz_shard_close(&s);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(!exists(tmp), "temporary file left behind");
    free(c.tokens);
}

/* A big shard: the 1 MiB write buffer is flushed several times. */
static void test_large(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/large.bin", dir);
    cz_error err = {{0}};
    cz_shard_writer *w;
    CHECK(cz_shard_writer_open(&w, path, 50257, 7, &err) == 0, "%s", err.msg);
    enum { N = 1500000 };
    uint32_t *t = malloc(sizeof(uint32_t) * N);
    for (uint32_t i = 0; i < N; i++) t[i] = (i * 2654435761u) % 50257;
    uint32_t sl[3] = {N / 3, N / 3, N - 2 * (N / 3)};
    CHECK(cz_shard_writer_add_document(w, t, sl, 3, &err) == 0, "%s", err.msg);
    CHECK(cz_shard_writer_finish(w, NULL, &err) == 0, "%s", err.msg);
    cz_shard s;
    CHECK(cz_shard_open(&s, path, 1, &err) == 0, "%s", err.msg);
    int bad = 0;
    for (uint32_t i = 0; i < N; i++) bad += cz_shard_token(&s, i) != t[i];
    CHECK(bad == 0 && s.sent_start[2] == 2 * (N / 3), "large shard differs (%d)", bad);
    cz_shard_close(&s);
    free(t);
}

static void *slurp(const char *p, size_t *len) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*len);
    if (fread(b, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return b;
}

static void spit(const char *p, const void *b, size_t len) {
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
}

/* Writes a damaged copy and expects open (with verify) to fail with a message
 * holding the file name and every given fragment. */
static void expect_error(const char *name, const void *b, size_t len, int verify, const char *frag1,
                         const char *frag2) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    spit(path, b, len);
    cz_shard s;
    cz_error err = {{0}};
    int rc = cz_shard_open(&s, path, verify, &err);
    CHECK(rc != 0, "%s: damaged shard accepted", name);
    if (rc == 0) {
        cz_shard_close(&s);
        return;
    }
    CHECK(strstr(err.msg, path) != NULL, "%s: message lacks the path: %s", name, err.msg);
    CHECK(strstr(err.msg, frag1) != NULL, "%s: message lacks '%s': %s", name, frag1, err.msg);
    CHECK(!frag2 || strstr(err.msg, frag2) != NULL, "%s: message lacks '%s': %s", name, frag2,
          err.msg);
    CHECK(strchr(err.msg, '\n') == NULL, "%s: message is not one line", name);
}

static void rehash(uint8_t *b) {
    cz_shard_header h;
    memcpy(&h, b, sizeof h);
    h.header_checksum = cz_shard_header_checksum(&h);
    memcpy(b, &h, sizeof h);
}

static void test_damage(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/good.bin", dir);
    corpus c;
    write_shard(path, 30522, 50, 99, &c);
    free(c.tokens);
    size_t len;
    uint8_t *good = slurp(path, &len);
    uint8_t *b = malloc(len);
    cz_shard_header h;
    memcpy(&h, good, sizeof h);

    expect_error("short.bin", good, 100, 1, "offset 100", "header");
    expect_error("trunc.bin", good, len - 8, 0, "file_size", "offset 80");

    memcpy(b, good, len);
    b[0] = 'X';
    expect_error("magic.bin", b, len, 0, "offset 0", "magic");

    memcpy(b, good, len);
    b[offsetof(cz_shard_header, n_tokens)] ^= 0x10;
    expect_error("hdrflip.bin", b, len, 0, "header_checksum", "offset 120");

    /* a flipped token byte: the tables are intact, only the checksum sees it */
    memcpy(b, good, len);
    b[h.tokens_offset + 11] ^= 0x01;
    {
        char p2[512];
        snprintf(p2, sizeof p2, "%s/tokflip.bin", dir);
        spit(p2, b, len);
        cz_shard s;
        cz_error err = {{0}};
        CHECK(cz_shard_open(&s, p2, 0, &err) == 0, "without verify the layout is fine: %s",
              err.msg);
        cz_shard_close(&s);
    }
    expect_error("tokflip.bin", b, len, 1, "payload_checksum", "offset 88");

    /* a non-monotone sentence table (header checksum redone, so only the
     * table check can see it); entry 3 lies at sentences_offset + 24 */
    memcpy(b, good, len);
    uint64_t big = h.n_tokens + 5;
    memcpy(b + h.sentences_offset + 24, &big, 8);
    char want[64];
    snprintf(want, sizeof want, "offset %llu", (unsigned long long)(h.sentences_offset + 32));
    expect_error("senttab.bin", b, len, 0, "sentence table entry 4", want);

    memcpy(b, good, len);
    cz_shard_header hh = h;
    hh.documents_offset = h.sentences_offset + 8; /* overlaps the sentence table */
    memcpy(b, &hh, sizeof hh);
    rehash(b);
    expect_error("docoff.bin", b, len, 0, "documents_offset", "offset 72");

    memcpy(b, good, len);
    hh = h;
    hh.tokens_offset = 1u << 30;
    memcpy(b, &hh, sizeof hh);
    rehash(b);
    expect_error("tokoff.bin", b, len, 0, "tokens_offset", "offset 56");

    memcpy(b, good, len);
    hh = h;
    hh.n_sentences = 1ULL << 62; /* would overflow a naive size computation */
    memcpy(b, &hh, sizeof hh);
    rehash(b);
    expect_error("hugecount.bin", b, len, 0, "n_tokens/n_sentences", "offset 32");

    /* ids beyond a (shrunk) vocabulary: reported with the token's offset */
    memcpy(b, good, len);
    hh = h;
    hh.vocab_size = 1;
    memcpy(b, &hh, sizeof hh);
    rehash(b);
    {
        /* find the first token that is >= 1, i.e. not 0 */
        uint64_t i = 0;
        while (((uint16_t *)(good + h.tokens_offset))[i] == 0) i++;
        snprintf(want, sizeof want, "offset %llu", (unsigned long long)(h.tokens_offset + 2 * i));
    }
    expect_error("range.bin", b, len, 1, "vocab_size 1", want);

    free(good);
    free(b);
}

static void test_writer_rejects_and_aborts(void) {
    char path[512], tmp[600];
    snprintf(path, sizeof path, "%s/aborted.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    cz_error err = {{0}};
    cz_shard_writer *w;
    CHECK(cz_shard_writer_open(&w, path, 100, 1, &err) == 0, "%s", err.msg);
    uint32_t t[3] = {1, 2, 3}, sl[1] = {3};
    CHECK(cz_shard_writer_add_document(w, t, sl, 1, &err) == 0, "%s", err.msg);
    t[1] = 100;
    CHECK(cz_shard_writer_add_document(w, t, sl, 1, &err) != 0, "id == vocab_size accepted");
    CHECK(strstr(err.msg, path) && strstr(err.msg, "100"), "message: %s", err.msg);
    CHECK(exists(tmp), "writer writes to the temporary name");
    CHECK(!exists(path), "nothing under the final name before finish");
    cz_shard_writer_abort(w);
    CHECK(!exists(tmp) && !exists(path), "abort leaves files behind");

    /* an unwritable place fails at open, naming the file */
    CHECK(cz_shard_writer_open(&w, "/nonexistent-dir/x.bin", 100, 1, &err) != 0, "bad dir");
    CHECK(strstr(err.msg, "/nonexistent-dir/x.bin") != NULL, "message: %s", err.msg);
}

static void test_manifest(void) {
    cz_manifest m;
    memset(&m, 0, sizeof m);
    snprintf(m.vocab_kind, sizeof m.vocab_kind, "wordpiece");
    m.vocab_size = 30522;
    m.vocab_fingerprint = 0xfedcba9876543210ULL;
    snprintf(m.vocab_path, sizeof m.vocab_path, "/some dir/vocab.txt");
    m.cls_id = 101, m.sep_id = 102, m.mask_id = 103, m.pad_id = 0, m.unk_id = 100, m.eot_id = -1;
    m.n_shards = 2;
    cz_manifest_shard sh[2] = {{"", 10, 2, 1, 0xabc},
                               {"", 1ULL << 40, 3, 2, 0xffffffffffffffffULL}};
    snprintf(sh[0].path, sizeof sh[0].path, "%s/shard-0.bin", dir);
    snprintf(sh[1].path, sizeof sh[1].path, "/elsewhere/shard-1.bin");
    m.shards = sh;
    const char *sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    cz_manifest_file *vf = &m.vocab_files[CZ_VOCAB_FILE_VOCAB];
    snprintf(vf->path, sizeof vf->path, "/some dir/encoder.json");
    snprintf(vf->given, sizeof vf->given, "../some dir/encoder.json");
    snprintf(vf->sha256, sizeof vf->sha256, "%s", sha);
    cz_manifest_file *mf = &m.vocab_files[CZ_VOCAB_FILE_MERGES];
    snprintf(mf->path, sizeof mf->path, "/some dir/merges.txt");
    snprintf(mf->sha256, sizeof mf->sha256, "%064d", 0);
    char path[512];
    snprintf(path, sizeof path, "%s/train.manifest", dir);
    cz_error err = {{0}};
    CHECK(cz_manifest_write(&m, path, &err) == 0, "%s", err.msg);
    size_t len;
    char *text = slurp(path, &len);
    CHECK(len > 0 && strstr(text, "shard shard-0.bin 10 2 1 ") != NULL,
          "shard path below the manifest is written relative:\n%.*s", (int)len, text);
    free(text);
    cz_manifest r;
    CHECK(cz_manifest_load(&r, path, &err) == 0, "%s", err.msg);
    CHECK(!strcmp(r.vocab_kind, "wordpiece") && r.vocab_size == 30522 &&
              r.vocab_fingerprint == m.vocab_fingerprint && !strcmp(r.vocab_path, m.vocab_path),
          "vocab line");
    CHECK(r.cls_id == 101 && r.sep_id == 102 && r.mask_id == 103 && r.pad_id == 0 &&
              r.unk_id == 100 && r.eot_id == -1,
          "special ids");
    /* the vocabulary files: paths with spaces, a given path only when known */
    CHECK(!strcmp(r.vocab_files[0].path, vf->path) && !strcmp(r.vocab_files[0].given, vf->given) &&
              !strcmp(r.vocab_files[0].sha256, sha),
          "vocab_file vocab: [%s] [%s] [%s]", r.vocab_files[0].path, r.vocab_files[0].given,
          r.vocab_files[0].sha256);
    CHECK(!strcmp(r.vocab_files[1].path, mf->path) && r.vocab_files[1].given[0] == 0 &&
              !strcmp(r.vocab_files[1].sha256, mf->sha256),
          "vocab_file merges: [%s] [%s] [%s]", r.vocab_files[1].path, r.vocab_files[1].given,
          r.vocab_files[1].sha256);
    CHECK(r.n_shards == 2, "n_shards %d", r.n_shards);
    for (int i = 0; i < 2 && r.n_shards == 2; i++) {
        CHECK(!strcmp(r.shards[i].path, sh[i].path), "shard %d path %s", i, r.shards[i].path);
        CHECK(r.shards[i].n_tokens == sh[i].n_tokens &&
                  r.shards[i].n_sentences == sh[i].n_sentences &&
                  r.shards[i].n_documents == sh[i].n_documents &&
                  r.shards[i].payload_checksum == sh[i].payload_checksum,
              "shard %d counts", i);
    }
    cz_manifest_free(&r);

    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.manifest", dir);
    /* a manifest from before the vocab_file records still loads */
    const char *t0 = "cloze-manifest 1\nvocab bpe 50257 00ff v/encoder.json\nspecial eot 50256\n"
                     "shard x.bin 1 1 1 0\n";
    spit(bad, t0, strlen(t0));
    CHECK(cz_manifest_load(&r, bad, &err) == 0 && r.n_shards == 1 && r.eot_id == 50256 &&
              r.vocab_files[0].sha256[0] == 0 && r.vocab_files[0].path[0] == 0 &&
              r.vocab_files[1].sha256[0] == 0,
          "old manifest: %s", err.msg);
    cz_manifest_free(&r);
    /* malformed vocab_file records name the line */
    const char *bad_vf[] = {"cloze-manifest 1\nvocab bpe 5 0 v\nvocab_file vocab abc /v\n",
                            "cloze-manifest 1\nvocab bpe 5 0 v\nvocab_file tokens "
                            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 /v\n",
                            "cloze-manifest 1\nvocab bpe 5 0 v\nvocab_file vocab "
                            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n",
                            "cloze-manifest 1\nvocab bpe 5 0 v\nvocab_given merges\n"};
    for (int i = 0; i < 4; i++) {
        spit(bad, bad_vf[i], strlen(bad_vf[i]));
        CHECK(cz_manifest_load(&r, bad, &err) != 0, "bad vocab_file record %d accepted", i);
        CHECK(strstr(err.msg, ":3:") && strstr(err.msg, "vocab_"), "record %d: %s", i, err.msg);
    }
    const char *t1 = "cloze-manifest 1\nvocab wordpiece 10 0 v.txt\nshard x.bin 1 2\n";
    spit(bad, t1, strlen(t1));
    CHECK(cz_manifest_load(&r, bad, &err) != 0, "short shard line accepted");
    CHECK(strstr(err.msg, bad) && strstr(err.msg, ":3:"), "message: %s", err.msg);
    const char *t2 = "CLZSHARD junk\n";
    spit(bad, t2, strlen(t2));
    CHECK(cz_manifest_load(&r, bad, &err) != 0, "wrong magic accepted");
    CHECK(strstr(err.msg, ":1:") != NULL, "message: %s", err.msg);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cloze-test-shard-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip(30522, 2);
    test_round_trip(65536, 2);
    test_round_trip(100000, 4);
    test_large();
    test_damage();
    test_writer_rejects_and_aborts();
    test_manifest();
    return check_finish(dir);
}
