#include "cloze/core.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

/* See core.h: the only process-wide state in cloze. */
static int log_rank = 0;
static cz_log_level log_level = CZ_LOG_INFO;

void cz_log_setup(int rank, cz_log_level level) {
    log_rank = rank;
    log_level = level;
}

void cz_log(cz_log_level level, const char *fmt, ...) {
    if (level > log_level) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    /* one fprintf per line so that lines from several ranks do not interleave */
    fprintf(stderr, "[%s r%d %s] %s\n", stamp, log_rank, names[level], line);
}

int cz_launch_rank(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0 && r <= INT_MAX) return (int)r;
    }
    return 0;
}

int cz_launch_size(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && n >= 1 && n <= INT_MAX) return (int)n;
    }
    return getenv("PMIX_RANK") ? 1 : 0;
}
