/* prep_set: how `cloze-prep shards` replaces the shard set in an output
 * directory without ever putting the old one at risk.
 *
 * Layout of an output directory DIR (docs/formats.md, "Output directory"):
 *   DIR/train.manifest, DIR/heldout.manifest  the current set: what users
 *                                             give cloze-train
 *   DIR/set-NNNN/{train,heldout}-KKKKK.bin    its shards
 *   DIR/.set-NNNN.staging/                    a set being written
 *   DIR/.cloze-prep.lock                      flock()ed by the run writing DIR
 *
 * A run writes every shard into a new staging directory. Only when all of
 * them are complete (fsynced) does it rename the directory to set-NNNN,
 * write the new manifests under temporary names, and rename them over the
 * old ones; the old set's files are removed last. Until the manifests are
 * renamed, DIR/train.manifest and every file it names are untouched, so a
 * full disk, a kill or an error at any earlier point leaves the old set as
 * it was (the next run removes the leftover staging directory). */
#ifndef CLOZE_PREP_SET_H
#define CLOZE_PREP_SET_H

#include <limits.h>

#include "cloze/core.h"
#include "cloze/shard.h"

typedef struct cz_prep_set {
    char dir[PATH_MAX];     /* the output directory, without trailing '/' */
    char staging[PATH_MAX]; /* DIR/.set-NNNN.staging */
    char final[PATH_MAX];   /* DIR/set-NNNN */
    int number;             /* NNNN */
    int lock_fd;            /* -1 when not held */
    int committed;
    int removed_sets; /* earlier set directories removed by the commit */
    int created_dir;  /* begin created DIR: a failed run removes it again */
} cz_prep_set;

/* Creates DIR if needed, takes its lock (refused with the holder's host and
 * pid when another cloze-prep holds it), removes staging directories that
 * killed runs left, and creates a new empty staging directory. */
int cz_prep_set_begin(cz_prep_set *s, const char *out_dir, cz_error *err);

/* Swaps the staged set in: train (and heldout, or NULL when this run has no
 * held-out set: an old heldout.manifest is then removed) list shards inside
 * s->staging. On success their paths point into s->final. On failure the
 * old set is still the current one and the new files are removed. */
int cz_prep_set_commit(cz_prep_set *s, cz_manifest *train, cz_manifest *heldout, cz_error *err);

/* Removes the staging directory unless the set was committed, and releases
 * the lock; when begin created DIR, an uncommitted run removes DIR too (its
 * lock file, then DIR if nothing else is in it). Safe to call after a
 * failed begin. */
void cz_prep_set_end(cz_prep_set *s);

#endif
