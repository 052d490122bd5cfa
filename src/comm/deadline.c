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

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The launcher that ends the job at once on a lost host (launch/cloze-mpirun:
 * CLOZE_LAUNCHER_PID, and CLOZE_LAUNCHER_BOOT = its machine's boot id, so
 * that only a rank on that machine signals that pid). Open MPI's mpirun,
 * once a rank has exited, still waits for the cut-off host's daemon until
 * its TCP keepalive gives up (docs/distributed-design.md, "Faults across hosts"). */
static void tell_launcher(void) {
    const char *pid = getenv("CLOZE_LAUNCHER_PID"), *boot = getenv("CLOZE_LAUNCHER_BOOT");
    if (!pid || !boot || atol(pid) <= 1) return;
    char mine[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(mine, sizeof mine, f)) mine[0] = 0;
    fclose(f);
    mine[strcspn(mine, "\n")] = 0;
    if (mine[0] && strcmp(mine, boot) == 0) kill((pid_t)atol(pid), SIGUSR2);
}

/* Ranks are lost: no collective can finish any more (MPI has no recovery),
 * so the process ends here, with CZ_EXIT_HOST_LOST. Only the lowest rank
 * that answered the probe (rank 0 unless it is lost) says the one line,
 * naming the lost hosts and their ranks; the others wait (5 s, the launcher
 * or mpirun ends them before) so that their exit cannot make mpirun end the
 * speaker before it has spoken, nor print its banner first. */
static void host_lost(cz_coll *c, const int *ok, const char *where, double waited) {
    int speaker = -1;
    for (int r = 0; r < c->p && speaker < 0; r++)
        if (ok[r]) speaker = r;
    if (speaker == c->rank) {
        /* hosts of which some rank did not answer, each with those ranks */
        char line[900] = "";
        size_t len = 0;
        int shown = 0, *seen = calloc((size_t)c->p, sizeof(int));
        for (int r = 0; seen && r < c->p; r++) {
            if (ok[r] || seen[r]) continue;
            if (shown++ >= 6) {
                len += (size_t)snprintf(line + len, sizeof line - len, " ...");
                break;
            }
            int n = 0;
            for (int q = r; q < c->p; q++) n += !ok[q] && strcmp(c->host[q], c->host[r]) == 0;
            len += (size_t)snprintf(line + len, sizeof line - len, "%shost %s (rank%s",
                                    len ? ", " : "", c->host[r], n > 1 ? "s" : "");
            for (int q = r, k = 0; q < c->p && len < sizeof line - 40; q++)
                if (!ok[q] && strcmp(c->host[q], c->host[r]) == 0) {
                    seen[q] = 1;
                    len +=
                        (size_t)snprintf(line + len, sizeof line - len, "%s %d", k++ ? "," : "", q);
                }
            len += (size_t)snprintf(line + len, sizeof line - len, ")");
            if (len >= sizeof line - 60) break;
        }
        free(seen);
        cz_log(CZ_LOG_ERROR,
               "lost %s: no answer for %.0f s in %s (dist.timeout_s); the job ends with exit %d "
               "(resume with --resume auto)",
               line, waited, where, CZ_EXIT_HOST_LOST);
        /* the line goes through mpirun's forwarding of our stderr: give it
         * a second to arrive before the launcher ends mpirun */
        fflush(stderr);
        sleep(1);
        tell_launcher();
    } else {
        sleep(5);
    }
    fflush(stdout);
    _exit(CZ_EXIT_HOST_LOST);
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
    if (missing) host_lost(c, ok, where, waited); /* does not return */
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
