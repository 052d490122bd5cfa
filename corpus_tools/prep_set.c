/* prep_set: staged shard sets swapped in whole, see cloze/prep.h. */
#include "cloze/prep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME ".cloze-prep.lock"

/* "set-NNNN" (the current set's directory) or ".set-NNNN.staging": the
 * number, or -1 when name is neither. */
static int set_number(const char *name, int *staging) {
    const char *p = name;
    *staging = p[0] == '.';
    if (*staging) p++;
    if (strncmp(p, "set-", 4) != 0) return -1;
    p += 4;
    char *end;
    if (*p < '0' || *p > '9') return -1;
    long n = strtol(p, &end, 10);
    if (n < 0 || n > 99999999) return -1;
    if (*staging ? strcmp(end, ".staging") != 0 : *end != 0) return -1;
    return (int)n;
}

/* A file cloze-prep writes into a set directory: {train,heldout}-DIGITS.bin,
 * or the shard writer's temporary "<that>.tmp.<pid>". */
static int is_shard_name(const char *name) {
    const char *p = !strncmp(name, "train-", 6)     ? name + 6
                    : !strncmp(name, "heldout-", 8) ? name + 8
                                                    : NULL;
    if (!p) return 0;
    size_t d = strspn(p, "0123456789");
    if (d == 0 || strncmp(p + d, ".bin", 4) != 0) return 0;
    p += d + 4;
    if (*p == 0) return 1;
    return !strncmp(p, ".tmp.", 5) && p[5] && strspn(p + 5, "0123456789") == strlen(p + 5);
}

/* Removes a set or staging directory: the shard files in it, then the
 * directory. Anything else in it (a file cloze-prep did not write) keeps the
 * directory, with a warning. Returns 1 when the directory is gone. */
static int remove_set_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT;
    struct dirent *e;
    char p[PATH_MAX + 300];
    while ((e = readdir(d)) != NULL) {
        if (!is_shard_name(e->d_name)) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
    }
    closedir(d);
    if (rmdir(path) == 0) return 1;
    cz_warn("%s: kept: it holds files that cloze-prep did not write (%s)", path, strerror(errno));
    return 0;
}

static void strip_slashes(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
}

/* Takes DIR's lock; a second cloze-prep on the same directory is told who
 * holds it. The lock is released when the descriptor closes (also when the
 * process dies), so a killed run never blocks the next one. */
static int take_lock(cz_prep_set *s, cz_error *err) {
    char path[PATH_MAX + 32], host[256] = "?";
    snprintf(path, sizeof path, "%s/" LOCK_NAME, s->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return cz_fail(err, "%s: cannot create the lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[300] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        close(fd);
        if (e == EWOULDBLOCK)
            return cz_fail(err,
                           "%s: another cloze-prep shards (%s) is writing this directory: wait for "
                           "it to finish, or choose another --out",
                           s->dir, holder[0] ? holder : "holder unknown");
        return cz_fail(err, "%s: cannot lock: %s", path, strerror(e));
    }
    gethostname(host, sizeof host - 1);
    char me[400];
    int n = snprintf(me, sizeof me, "host %s, pid %ld\n", host, (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)n, 0) != n) {
        /* the lock holds without the note; only the message gets vaguer */
    }
    s->lock_fd = fd;
    return 0;
}

int cz_prep_set_begin(cz_prep_set *s, const char *out_dir, cz_error *err) {
    memset(s, 0, sizeof *s);
    s->lock_fd = -1;
    if (strlen(out_dir) + 40 >= sizeof s->dir) return cz_fail(err, "%s: path too long", out_dir);
    snprintf(s->dir, sizeof s->dir, "%s", out_dir);
    strip_slashes(s->dir);
    struct stat st;
    if (mkdir(s->dir, 0755) == 0)
        s->created_dir = 1;
    else if (errno != EEXIST)
        return cz_fail(err, "%s: cannot create directory: %s", s->dir, strerror(errno));
    if (stat(s->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cz_fail(err, "%s: not a directory", s->dir);
    if (take_lock(s, err) != 0) {
        if (s->created_dir) rmdir(s->dir);
        return -1;
    }
    /* Under the lock nobody else writes DIR: any staging directory is a
     * leftover of a run that was killed or failed. */
    DIR *d = opendir(s->dir);
    if (!d) {
        cz_fail(err, "%s: cannot list: %s", s->dir, strerror(errno));
        cz_prep_set_end(s);
        return -1;
    }
    struct dirent *e;
    int max = 0;
    char p[PATH_MAX + 300];
    while ((e = readdir(d)) != NULL) {
        int staging, n = set_number(e->d_name, &staging);
        if (n > max) max = n;
        snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
        if (n >= 0 && staging) {
            cz_warn("%s: removing what an interrupted cloze-prep shards left", p);
            remove_set_dir(p);
        } else if (!strncmp(e->d_name, ".train.manifest.new", 19) ||
                   !strncmp(e->d_name, ".heldout.manifest.new", 21)) {
            unlink(p);
        }
    }
    closedir(d);
    s->number = max + 1;
    snprintf(s->staging, sizeof s->staging, "%s/.set-%04d.staging", s->dir, s->number);
    snprintf(s->final, sizeof s->final, "%s/set-%04d", s->dir, s->number);
    if (mkdir(s->staging, 0755) != 0) {
        cz_fail(err, "%s: cannot create: %s", s->staging, strerror(errno));
        s->staging[0] = 0;
        cz_prep_set_end(s);
        return -1;
    }
    return 0;
}

static void fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Points the shard paths of m from the staging directory to the final one. */
static int repath(cz_manifest *m, const cz_prep_set *s, cz_error *err) {
    size_t n = strlen(s->staging);
    for (int i = 0; i < m->n_shards; i++) {
        char *p = m->shards[i].path;
        if (strncmp(p, s->staging, n) != 0 || p[n] != '/')
            return cz_fail(err, "%s: shard %s is not in the staging directory", m->path, p);
        char buf[sizeof m->shards[i].path];
        snprintf(buf, sizeof buf, "%s%s", s->final, p + n);
        snprintf(p, sizeof m->shards[i].path, "%s", buf);
    }
    return 0;
}

/* Shards of an earlier cloze-prep that wrote them straight into DIR (before
 * set directories): those an old manifest lists, by their own names. */
static void remove_flat_shards(const cz_prep_set *s, const cz_manifest *m) {
    size_t n = strlen(s->dir);
    for (int i = 0; i < m->n_shards; i++) {
        const char *p = m->shards[i].path;
        if (!strncmp(p, s->dir, n) && p[n] == '/' && !strchr(p + n + 1, '/') &&
            is_shard_name(p + n + 1))
            unlink(p);
    }
}

/* Undoes steps 1-2 of the commit: the new set goes back to its staging name
 * (removed by cz_prep_set_end), the temporary manifests are removed. */
static int undo(cz_prep_set *s, const char *tnew, const char *hnew, cz_error *err) {
    unlink(tnew);
    unlink(hnew);
    if (rename(s->final, s->staging) != 0) snprintf(s->staging, sizeof s->staging, "%s", s->final);
    return cz_fail_prefix(err, "%s: the previous set is unchanged", s->dir);
}

int cz_prep_set_commit(cz_prep_set *s, cz_manifest *train, cz_manifest *heldout, cz_error *err) {
    char tm[PATH_MAX + 64], hm[PATH_MAX + 64], tnew[PATH_MAX + 64], hnew[PATH_MAX + 64];
    snprintf(tm, sizeof tm, "%s/train.manifest", s->dir);
    snprintf(hm, sizeof hm, "%s/heldout.manifest", s->dir);
    snprintf(tnew, sizeof tnew, "%s/.train.manifest.new", s->dir);
    snprintf(hnew, sizeof hnew, "%s/.heldout.manifest.new", s->dir);
    /* 1. the set directory under its final name (its files are fsynced) */
    fsync_dir(s->staging);
    if (rename(s->staging, s->final) != 0)
        return cz_fail(err, "%s: cannot rename to %s: %s (the previous set is unchanged)",
                       s->staging, s->final, strerror(errno));
    fsync_dir(s->dir);
    /* 2. the new manifests, complete and fsynced, under temporary names */
    if (repath(train, s, err) != 0 || (heldout && repath(heldout, s, err) != 0) ||
        cz_manifest_write(train, tnew, err) != 0 ||
        (heldout && cz_manifest_write(heldout, hnew, err) != 0))
        return undo(s, tnew, hnew, err);
    /* what the old manifests list, to remove once they are replaced */
    cz_manifest old[2];
    cz_error ignored;
    int have_old[2] = {cz_manifest_load(&old[0], tm, &ignored) == 0,
                       cz_manifest_load(&old[1], hm, &ignored) == 0};
    /* 3. the swap: once train.manifest is renamed, the new set is the
     * current one. A crash between the two renames leaves a new
     * train.manifest beside the old heldout.manifest, both complete: the old
     * set's files are only removed after both. */
    if (rename(tnew, tm) != 0) {
        int e = errno;
        for (int k = 0; k < 2; k++)
            if (have_old[k]) cz_manifest_free(&old[k]);
        cz_fail(err, "%s: cannot rename into place: %s", tm, strerror(e));
        return undo(s, tnew, hnew, err);
    }
    s->committed = 1;
    int rc = 0;
    if (heldout ? rename(hnew, hm) != 0 : unlink(hm) != 0 && errno != ENOENT)
        rc = cz_fail(err, "%s: cannot %s: %s (train.manifest is the new set)", hm,
                     heldout ? "rename into place" : "remove the previous one", strerror(errno));
    fsync_dir(s->dir);
    if (rc != 0) {
        for (int k = 0; k < 2; k++)
            if (have_old[k]) cz_manifest_free(&old[k]);
        return rc;
    }
    /* 4. the old set's files */
    for (int k = 0; k < 2; k++) {
        if (!have_old[k]) continue;
        remove_flat_shards(s, &old[k]);
        cz_manifest_free(&old[k]);
    }
    DIR *d = opendir(s->dir);
    if (d) {
        struct dirent *e;
        char p[PATH_MAX + 300];
        while ((e = readdir(d)) != NULL) {
            int staging, n = set_number(e->d_name, &staging);
            if (n < 0 || staging || n == s->number) continue;
            snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
            s->removed_sets += remove_set_dir(p);
        }
        closedir(d);
    }
    return 0;
}

void cz_prep_set_end(cz_prep_set *s) {
    if (!s->committed && s->staging[0]) remove_set_dir(s->staging);
    s->staging[0] = 0;
    if (!s->committed && s->created_dir && s->lock_fd >= 0) {
        /* still under the lock: nobody else has written DIR */
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/" LOCK_NAME, s->dir);
        unlink(path);
        rmdir(s->dir);
    }
    s->created_dir = 0;
    if (s->lock_fd >= 0) close(s->lock_fd);
    s->lock_fd = -1;
}
