/* The real model's backward driven through cz_grad_sync (2-3 ranks), the
 * word embedding lookup's rows handed to the sync apart
 * (cz_grad_sync_rows), as cloze-train does:
 *   - overlap: when backward reports the range holding the position
 *     embeddings (finished last), every bucket lying wholly below them,
 *     the tied word embedding's first, has already
 *     been reduced by the communication thread. The hook waits (bounded)
 *     for those reductions before it passes the embeddings on; a scheduler
 *     that starts with the embeddings' bucket never gets there and the wait
 *     times out;
 *   - bits: the overlapped result equals the synchronous path (no thread,
 *     every bucket reduced in finish) bit for bit, in the pieces each rank
 *     holds; and both are within rounding of a double sum of every rank's
 *     local gradients;
 * for BERT and GPT (tied embedding), all-reduce and reduce-scatter. The
 * ranks' batches hold different tokens, so the rows' union is more than
 * any one rank's rows, and a row missing from it is off the sum. */
#include "cloze/comm.h"
#include "cloze/model.h"

#include "../src/comm/comm_internal.h" /* cz_comm_set_single_thread */

#include <time.h>

#include "test_model_fixture.h"
#undef CHECK /* the fixture's stops the process; MPI tests count (check.h) */
#include "mpi_main.h"

#define WAIT_SECONDS 10.0

typedef struct overlap_hook {
    cz_grad_sync *gs;
    size_t emb_begin; /* first float of the position embeddings */
    int before;       /* buckets lying wholly below emb_begin */
    int waited;       /* 1 once the embeddings' range was reached */
    int done_then;    /* buckets reduced when it was */
    double seconds;   /* how long the hook waited for them */
} overlap_hook;

static void hook(void *ctx, size_t offset, size_t count) {
    overlap_hook *h = ctx;
    if (!h->waited && offset + count > h->emb_begin) {
        h->waited = 1;
        double t0 = cz_now();
        while (cz_grad_sync_buckets_done(h->gs) < h->before && cz_now() - t0 < WAIT_SECONDS) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        h->done_then = cz_grad_sync_buckets_done(h->gs);
        h->seconds = cz_now() - t0;
    }
    cz_grad_sync_ready(h->gs, offset, count);
}

/* rows hook of local_grads: the rows scattered into a buffer of their own */
static void rows_apart(void *ctx, const cz_grad_rows *r) {
    float *g = ctx;
    for (size_t i = 0; i < r->n; i++)
        memcpy(g + r->offset + (size_t)r->rows[i] * r->width, r->vals + i * r->width,
               r->width * sizeof(float));
}

/* Local gradients of this rank's batch in two parts: the buffer's into g,
 * the lookup's rows (laid out as in the buffer, zero elsewhere) into rows.
 * Their sum is the gradient; a reference that adds the parts in double is
 * exact for whatever order the sync adds them in. */
static void local_grads(cz_model *m, const cz_batch *b, float *g, float *rows) {
    cz_losses l;
    cz_error err;
    size_t n = cz_model_num_params(m);
    cz_model_zero_grads(m);
    memset(rows, 0, n * sizeof(float));
    cz_model_set_grad_hook(m, NULL, NULL);
    cz_model_set_grad_rows_hook(m, rows_apart, rows);
    CHECK(cz_model_forward(m, b, &l, &err) == 0, "%s", err.msg);
    cz_model_backward(m, b, 1.0f);
    cz_model_set_grad_rows_hook(m, NULL, NULL);
    memcpy(g, cz_model_grads(m), n * sizeof(float));
}

/* One step's backward through a grad sync on c; the synced gradients into
 * out. With hk: the overlap hook, else cz_grad_sync_ready itself. */
static void synced_grads(const cz_comm *c, cz_model *m, const cz_batch *b, cz_sync_mode mode,
                         double bucket_mb, overlap_hook *hk, float *out, size_t *union_rows) {
    size_t n = cz_model_num_params(m);
    cz_comm_config cfg = {.allreduce = CZ_ALLREDUCE_RING, .bucket_mb = bucket_mb, .overlap = 1};
    cz_grad_sync *gs;
    cz_error err;
    if (cz_grad_sync_create(&gs, c, &cfg, n, mode, cz_model_grad_order(m), &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    cz_losses l;
    cz_model_zero_grads(m);
    CHECK(cz_model_forward(m, b, &l, &err) == 0, "%s", err.msg);
    cz_grad_sync_begin(gs, cz_model_grads(m));
    cz_model_set_grad_rows_hook(m, cz_grad_sync_rows, gs);
    if (hk) {
        hk->gs = gs;
        cz_model_set_grad_hook(m, hook, hk);
    } else {
        cz_model_set_grad_hook(m, cz_grad_sync_ready, gs);
    }
    cz_model_backward(m, b, 1.0f);
    cz_model_set_grad_hook(m, NULL, NULL);
    cz_model_set_grad_rows_hook(m, NULL, NULL);
    CHECK(cz_grad_sync_finish(gs, &err) == 0, "%s", err.msg);
    CHECK(cz_grad_sync_tail_rows(gs) > 0, "no rows were reduced after backward");
    *union_rows = cz_grad_sync_tail_rows(gs);
    memcpy(out, cz_model_grads(m), n * sizeof(float));
    cz_grad_sync_free(gs);
}

/* vocab: 300 sends the rows as one block; 24, where the ranks' tokens
 * cover more than half the vocabulary, through the word embedding's
 * buckets (cz_grad_sync_rows) */
static void run(const cz_comm *c, cz_arch arch, cz_sync_mode mode, int vocab) {
    char label[32];
    snprintf(label, sizeof label, "%s vocab %d", arch == CZ_ARCH_BERT ? "bert" : "gpt", vocab);
    cz_model_config cfg = tiny_config(arch, vocab, 32, 3, 2, 16);
    cfg.hidden_dropout = cfg.attn_dropout = 0; /* the same function on every run */
    cz_error err;
    cz_gemm_ctx *gemm = cz_gemm_setup(CZ_GEMM_AUTO, 1, &err);
    cz_model *m;
    if (!gemm || cz_model_create(&m, &cfg, 2, 16, 4, gemm, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    cz_model_init_weights(m, 7);
    uint64_t ids[2] = {2 * (uint64_t)c->rank, 2 * (uint64_t)c->rank + 1};
    static test_batch tb;
    make_batch(&tb, &cfg, 2, 16, 4, 3, ids, 9);
    size_t n = cz_model_num_params(m);
    const double bucket_mb = 2000.0 * sizeof(float) / (1024 * 1024);

    overlap_hook hk = {0};
    const cz_tensor_info *emb =
        cz_model_find_tensor(m, arch == CZ_ARCH_BERT ? "bert.embeddings.position_embeddings.weight"
                                                     : "transformer.positions_embed.weight");
    CHECK(emb != NULL, "%s: no position embeddings", label);
    if (!emb) return;
    hk.emb_begin = emb->offset;
    cz_bucket_layout l;
    cz_bucket_layout_make(&l, n, bucket_mb * 1024 * 1024, c->size);
    for (int k = 0; k < l.n_buckets; k++) {
        size_t off, cnt;
        cz_bucket_range(&l, k, &off, &cnt);
        hk.before += off + cnt <= hk.emb_begin;
    }
    CHECK(hk.before >= 3, "%s: only %d buckets below the embeddings", label, hk.before);

    float *over = malloc(n * sizeof(float)), *sync = malloc(n * sizeof(float));
    size_t union_rows = 0;
    float *mine = malloc(n * sizeof(float)), *all = malloc(n * (size_t)c->size * sizeof(float));
    float *rows = malloc(n * sizeof(float)),
          *all_rows = malloc(n * (size_t)c->size * sizeof(float));
    synced_grads(c, m, &tb.b, mode, bucket_mb, &hk, over, &union_rows);
    int block = cz_grad_rows_as_block((double)union_rows, vocab);
    CHECK(block == (vocab > 100), "%s: %zu rows of %d went %s", label, union_rows, vocab,
          block ? "as a block" : "through the buckets");
    CHECK(hk.waited && hk.done_then >= hk.before,
          "%s mode %d: %d of the %d buckets below the embeddings reduced when their range was "
          "reported (waited %.1f s): backward does not overlap communication",
          label, mode, hk.done_then, hk.before, hk.seconds);

    /* the synchronous path: the same step without the communication thread */
    cz_comm single;
    CHECK(cz_comm_dup(c, &single, &err) == 0, "%s", err.msg);
    cz_comm_set_single_thread(&single);
    synced_grads(&single, m, &tb.b, mode, bucket_mb, NULL, sync, &union_rows);
    cz_comm_finalize(&single);

    /* a double reference from every rank's local gradients */
    /* (the library's all-gather, "mpi": rank r's n floats are chunk r of all) */
    local_grads(m, &tb.b, mine, rows);
    memcpy(all + (size_t)c->rank * n, mine, n * sizeof(float));
    memcpy(all_rows + (size_t)c->rank * n, rows, n * sizeof(float));
    CHECK(cz_allgather(c, CZ_ALLREDUCE_MPI, all, n * (size_t)c->size, &err) == 0, "%s", err.msg);
    CHECK(cz_allgather(c, CZ_ALLREDUCE_MPI, all_rows, n * (size_t)c->size, &err) == 0, "%s",
          err.msg);
    size_t differ = 0, off_ref = 0, held = 0;
    for (int k = 0; k < l.n_buckets; k++)
        for (int ch = 0; ch < c->size; ch++) {
            if (mode == CZ_SYNC_REDUCE_SCATTER && ch != c->rank) continue;
            size_t off, cnt;
            cz_piece_range(&l, k, ch, &off, &cnt);
            for (size_t i = off; i < off + cnt; i++) {
                held++;
                differ += memcmp(&over[i], &sync[i], sizeof(float)) != 0;
                double ref = 0, mag = 0;
                for (int r = 0; r < c->size; r++) {
                    ref += (double)all[(size_t)r * n + i] + all_rows[(size_t)r * n + i];
                    mag += fabs(all[(size_t)r * n + i]) + fabs(all_rows[(size_t)r * n + i]);
                }
                off_ref += fabs(over[i] - ref) > 1e-6 * mag + 1e-30;
            }
        }
    CHECK(held > 0, "%s: nothing held", label);
    CHECK(differ == 0, "%s mode %d: %zu of %zu floats differ from the synchronous path", label,
          mode, differ, held);
    CHECK(off_ref == 0, "%s mode %d: %zu of %zu floats off the double sum", label, mode, off_ref,
          held);
    if (c->rank == 0 && hk.done_then >= hk.before && differ == 0)
        printf("%s mode %d: %d buckets, %d below the embeddings, all reduced before their range "
               "was reported (hook waited %.4f s); %zu rows %s; %zu floats equal to the "
               "synchronous path\n",
               label, mode, l.n_buckets, hk.before, hk.seconds, union_rows,
               block ? "as a block" : "through the buckets", held);
    free(over), free(sync), free(mine), free(all), free(rows), free(all_rows);
    cz_model_free(m);
    cz_gemm_free(gemm);
}

int main(int argc, char **argv) {
    cz_comm c;
    mpi_test_begin(&c, &argc, &argv);
    if (!cz_comm_threads_ok(&c) || c.size < 2) {
        if (c.rank == 0)
            printf("SKIP: needs 2+ ranks and MPI_THREAD_MULTIPLE (have %d ranks, level %d)\n",
                   c.size, cz_comm_thread_level(&c));
        cz_comm_finalize(&c);
        return 77;
    }
    for (int arch = 0; arch < 2; arch++)
        for (int v = 0; v < 2; v++) {
            run(&c, (cz_arch)arch, CZ_SYNC_ALLREDUCE, v ? 24 : 300);
            run(&c, (cz_arch)arch, CZ_SYNC_REDUCE_SCATTER, v ? 24 : 300);
        }
    return mpi_test_end(&c);
}
