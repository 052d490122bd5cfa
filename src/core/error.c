#include "cloze/core.h"

#include <stdarg.h>
#include <string.h>

int cz_fail(cz_error *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int cz_fail_prefix(cz_error *err, const char *fmt, ...) {
    if (!err) return -1;
    char prefix[CZ_ERROR_MAX], old[CZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}
