/* cloze-prep's checks (include/cloze/prep.h): a manifest's shards and
 * vocabulary files against what the manifest records (`cloze-prep verify`),
 * and how the ranks of a `shards` run agree on a failure so that it is said
 * once. */
#include "cloze/prep.h"

#include "cloze/sha256.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int die(const cz_error *err) {
    fprintf(stderr, "cloze-prep: error: %s\n", err->msg);
    return 1;
}

/* ---- the ranks of a `shards` run ---- */

/* 0 when every rank's rc is 0; else 1, with err the message of the lowest
 * failing rank, said here by rank 0 (naming that rank when it is not 0). */
int cz_prep_agree(cz_prep_world *w, int rc, cz_error *err) {
    if (!w->comm) return rc != 0 ? (die(err), 1) : 0;
    int who = 0, r = cz_comm_agree(w->comm, rc, &who, err);
    if (r < 0) {
        fprintf(stderr, "cloze-prep: error (rank %d): %s\n", w->rank, err->msg);
        cz_comm_abort(w->comm, 1);
    }
    if (r > 0 && w->rank == 0) {
        if (who == 0)
            die(err);
        else
            fprintf(stderr, "cloze-prep: error (rank %d): %s\n", who, err->msg);
    }
    return r != 0;
}

/* Rank 0's verdict (rc; the others pass 0) to every rank: 1 when it failed
 * (rank 0 says it). */
int cz_prep_rank0_verdict(cz_prep_world *w, int rc, cz_error *err) {
    if (w->comm) {
        int v = cz_comm_share_verdict(w->comm, 0, rc, err);
        if (w->rank == 0 && rc == 0 && v != 0) { /* the broadcast itself failed */
            fprintf(stderr, "cloze-prep: error (rank 0): %s\n", err->msg);
            cz_comm_abort(w->comm, 1);
        }
        rc = v;
    }
    if (rc != 0 && w->rank == 0) die(err);
    return rc != 0;
}

/* ---- a manifest's shards and vocabulary ---- */

/* The merges file of a BPE manifest: the one it records, or (manifests from
 * before the vocab_file records) vocab.bpe next to encoder.json. */
void cz_prep_manifest_merges(const cz_manifest *m, char *buf, size_t len) {
    if (m->vocab_files[CZ_VOCAB_FILE_MERGES].path[0]) {
        snprintf(buf, len, "%s", m->vocab_files[CZ_VOCAB_FILE_MERGES].path);
        return;
    }
    snprintf(buf, len, "%s", m->vocab_path);
    char *s = strrchr(buf, '/');
    snprintf(s ? s + 1 : buf, len - (size_t)(s ? s + 1 - buf : 0), "vocab.bpe");
}

/* The fingerprint of the vocabulary files as the tokenizer computes it
 * (cz_vocab_fingerprint). */
int cz_prep_file_fingerprint(const cz_manifest *m, uint64_t *fp, char *which, size_t len) {
    void *a = NULL, *b = NULL;
    size_t na, nb = 0;
    cz_error e;
    if (cz_read_file(m->vocab_path, &a, &na, &e) != 0) return -1;
    snprintf(which, len, "%s", m->vocab_path);
    if (!strcmp(m->vocab_kind, "bpe")) {
        char mp[PATH_MAX];
        cz_prep_manifest_merges(m, mp, sizeof mp);
        if (cz_read_file(mp, &b, &nb, &e) != 0) {
            cz_free(a);
            return -1;
        }
        snprintf(which, len, "%s + %s", m->vocab_path, mp);
    }
    *fp = cz_vocab_fingerprint(a, na, b, nb);
    cz_free(a);
    cz_free(b);
    return 0;
}

/* The recorded SHA-256 of each vocabulary file against the file now; a file
 * that cannot be read is only warned about (it may live elsewhere now). */
static int check_vocab_sha256(const cz_manifest *m, cz_prep_say_fn say, void *ctx) {
    int bad = 0;
    for (int k = 0; k < CZ_VOCAB_FILES; k++) {
        const cz_manifest_file *f = &m->vocab_files[k];
        char hex[65];
        cz_error e;
        if (!f->sha256[0] || cz_sha256_file(f->path, hex, &e) != 0) continue;
        if (strcmp(hex, f->sha256) != 0) {
            char line[2 * CZ_PATH_MAX + 256];
            snprintf(line, sizeof line,
                     "%s: vocab_file %s line: sha256 %s, but %s now hashes to %s", m->path,
                     k == CZ_VOCAB_FILE_VOCAB ? "vocab" : "merges", f->sha256, f->path, hex);
            say(ctx, 0, line);
            bad++;
        }
    }
    return bad;
}

int cz_prep_verify_shard(const cz_manifest *m, const cz_manifest_shard *e, cz_error *err) {
    cz_shard s;
    if (cz_shard_open(&s, e->path, 1, err) != 0) return -1;
    const cz_shard_header *h = &s.hdr;
    int rc = 0;
    if (h->vocab_fingerprint != m->vocab_fingerprint)
        rc = cz_fail(err, "%s: vocab_fingerprint (offset 16) %016llx, manifest %s says %016llx",
                     e->path, (unsigned long long)h->vocab_fingerprint, m->path,
                     (unsigned long long)m->vocab_fingerprint);
    else if (h->vocab_size != m->vocab_size)
        rc = cz_fail(err, "%s: vocab_size (offset 24) %u, manifest %s says %u", e->path,
                     h->vocab_size, m->path, m->vocab_size);
    else if (h->n_tokens != e->n_tokens || h->n_sentences != e->n_sentences ||
             h->n_documents != e->n_documents || h->payload_checksum != e->payload_checksum)
        rc = cz_fail(err, "%s: counts/checksum (offsets 32-95) differ from its line in %s", e->path,
                     m->path);
    cz_shard_close(&s);
    return rc;
}

int cz_prep_verify(const cz_manifest *m, cz_prep_say_fn say, void *ctx, uint64_t *tokens) {
    int bad = 0;
    uint64_t fp;
    char which[2 * PATH_MAX + 8], line[4 * PATH_MAX + 256];
    *tokens = 0;
    if (cz_prep_file_fingerprint(m, &fp, which, sizeof which) == 0) {
        if (fp != m->vocab_fingerprint) {
            snprintf(line, sizeof line,
                     "%s: vocab line: fingerprint %016llx, but %s now hashes to %016llx", m->path,
                     (unsigned long long)m->vocab_fingerprint, which, (unsigned long long)fp);
            say(ctx, 0, line);
            bad++;
        }
    } else {
        snprintf(line, sizeof line,
                 "%s: vocabulary file %s not readable, its fingerprint is not checked", m->path,
                 m->vocab_path);
        say(ctx, 1, line);
    }
    if (!bad) bad += check_vocab_sha256(m, say, ctx); /* one line per cause */
    for (int i = 0; i < m->n_shards; i++) {
        cz_error err = {{0}};
        if (cz_prep_verify_shard(m, &m->shards[i], &err) != 0) {
            say(ctx, 0, err.msg);
            bad++;
        } else {
            *tokens += m->shards[i].n_tokens;
        }
    }
    return bad;
}
