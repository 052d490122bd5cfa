/* comm: the two-level shape shared by the collectives (collectives.c) and
 * their cost model (cost_model.c), so that what is modelled is what runs. */
#ifndef CLOZE_COMM_INTERNAL_H
#define CLOZE_COMM_INTERNAL_H

#include "cloze/comm.h"

/* Ranks as `outer` groups of `inner`: member[o * inner + i] is the rank at
 * (o, i); it owns chunk member[o * inner + i] (its own rank) of a buffer.
 * ring: inner = p, outer = 1, member[i] = i. */
typedef struct comm_shape {
    int inner, outer;
    int grid_x; /* torus2d: X (= inner); 0 otherwise */
    int *member;
} comm_shape;

/* The shape of algo (RING, HIERARCHICAL, TORUS2D) on layout l; grid_x for
 * TORUS2D (must divide p). Fails with a message naming the setting. */
int comm_shape_make(comm_shape *s, const cz_host_layout *l, cz_allreduce_algo algo, int grid_x,
                    cz_error *err);
void comm_shape_free(comm_shape *s);

/* A started collective of c (MPI_I...) to its end: bounded by c->watch when
 * set (cz_coll_wait), else MPI_Wait; `what` names it in the error. */
int comm_wait(const cz_comm *c, MPI_Request *req, const char *what, cz_error *err);

#endif
