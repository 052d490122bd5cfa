/* comm: bounded waits, for the contexts of our algorithms (cz_coll) and
 * the small collectives watched through one (cz_comm_watch): a peer that
 * sends nothing for dist.timeout_s. Calls nothing else of comm.
 *
 * A host whose link is down sends nothing and TCP reports nothing for many
 * minutes, so every wait here has a deadline. When it passes, this rank
 * pings every rank on c->alive and waits a few seconds for answers: ranks
 * waiting here answer (they poll for pings), so the ones that do not are the
 * ones whose host, link or process is gone, and the message names them and
 * their hosts. */
#include "comm_private.h"

#include <stdio.h>
#include <stdlib.h>

enum { TAG_PING = 1, TAG_PONG = 2 };

static void answer_pings(cz_coll *c) {
    for (;;) {
        int flag = 0, x;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_PING, c->alive, &flag, &st);
        if (!flag) return;
        MPI_Recv(&x, 1, MPI_INT, st.MPI_SOURCE, TAG_PING, c->alive, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, c->alive); /* eager: never blocks */
    }
}

/* The probe after a wait (comm_private.h). */
int comm_stalled(cz_coll *c, const char *where, int peer, double waited, cz_error *err) {
    int p = c->p, me = c->rank, x = me, missing = 0;
    int *ok = calloc((size_t)p, sizeof(int));
    MPI_Request *rq = calloc((size_t)p, sizeof *rq);
    char who[512] = "";
    if (ok && rq) {
        for (int r = 0; r < p; r++)
            if (r != me) MPI_Isend(&x, 1, MPI_INT, r, TAG_PING, c->alive, &rq[r]);
        ok[me] = 1;
        double t0 = cz_now(), probe = c->timeout < 5 ? c->timeout : 5;
        int answered = 1;
        while (answered < p && cz_now() - t0 < probe) {
            answer_pings(c);
            int flag = 0, y;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_PONG, c->alive, &flag, &st);
            if (!flag) continue;
            MPI_Recv(&y, 1, MPI_INT, st.MPI_SOURCE, TAG_PONG, c->alive, MPI_STATUS_IGNORE);
            if (!ok[st.MPI_SOURCE]) ok[st.MPI_SOURCE] = 1, answered++;
        }
        size_t len = 0;
        for (int r = 0; r < p; r++) {
            if (ok[r]) continue;
            if (missing++ < 8 && len < sizeof who - 100)
                len += (size_t)snprintf(who + len, sizeof who - len, "%s%d (%s)", len ? ", " : "",
                                        r, c->host[r]);
        }
        if (missing > 8) snprintf(who + len, sizeof who - len, " and %d more", missing - 8);
        for (int r = 0; r < p; r++)
            if (r != me && ok[r]) MPI_Wait(&rq[r], MPI_STATUS_IGNORE); /* delivered: answered */
    }
    free(ok);
    free(rq); /* requests to ranks that never answered end with the process (cz_comm_abort) */
    char whom[128] = "";
    if (peer >= 0) snprintf(whom, sizeof whom, " for rank %d (host %s)", peer, c->host[peer]);
    if (missing)
        return cz_fail(err,
                       "comm: rank %d (host %s) waited %.0f s%s in %s (dist.timeout_s); no answer "
                       "from rank(s) %s: host, link or process down",
                       me, c->host[me], waited, whom, where, who);
    return cz_fail(err,
                   "comm: rank %d (host %s) waited %.0f s%s in %s (dist.timeout_s); every rank "
                   "answers: a rank is stuck elsewhere or far slower",
                   me, c->host[me], waited, whom, where);
}

/* MPI_Testall with the deadline (comm_private.h). */
int comm_poll_deadline(cz_coll *c, int n, MPI_Request *req, double *waited) {
    double t0 = cz_now(), polled = t0;
    for (unsigned it = 1;; it++) {
        int done = 0;
        if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return -1;
        if (done) return 0;
        if (it % 64 == 0) {
            double now = cz_now();
            if (now - polled > 1e-3) answer_pings(c), polled = now;
            if (now - t0 > c->timeout) {
                *waited = now - t0;
                return 1;
            }
        }
    }
}

int cz_coll_wait(cz_coll *c, MPI_Request *req, const char *what, cz_error *err) {
    double waited = 0;
    int rc = c->timeout > 0 ? comm_poll_deadline(c, 1, req, &waited)
             : MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0
                                                               : -1;
    if (rc == 0) return 0;
    if (rc < 0)
        return cz_fail(err, "comm: rank %d (host %s): %s failed", c->rank, c->host[c->rank], what);
    return comm_stalled(c, what, -1, waited, err);
}
