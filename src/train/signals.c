/* SIGTERM and SIGUSR1 (what Slurm sends before a time limit or preemption;
 * mpirun forwards SIGUSR1 to every rank) ask the run to write a checkpoint at
 * the end of the current step and exit cleanly. A signal handler can only
 * set a flag: this flag is the one piece of process state the train module
 * keeps outside its context, because a handler cannot be given one. The step
 * loop combines the flags of all ranks so that every rank stops at the same
 * step. */
#include "train_internal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_requested = 0;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

void cz_train_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* the handler only sets a flag: an open() or read() under way goes on
     * (a configuration being read when the signal comes), not EINTR */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int cz_signals_pending(void) {
    return stop_requested != 0;
}
