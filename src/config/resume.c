/* config: which keys a resumed run may change (the .resume class of each
 * key in the table, keys.c). */
#include "cloze/config.h"

#include "keys.h"

#include <string.h>

/* A value as the diff shows it: config-file syntax without the int64 'L',
 * and at most 80 bytes (paths are long; the key name is what matters). */
static void shown_value(const cz_config *c, const cz_key *k, char *buf, size_t len) {
    char v[2 * CZ_PATH_MAX + 64];
    cz_config_format_value(c, k, v, sizeof v);
    size_t n = strlen(v);
    if ((k->type == CZ_KEY_LONG || k->type == CZ_KEY_U64) && n && v[n - 1] == 'L') v[--n] = 0;
    if (n > 80) { /* the first 36 and the last 40 bytes */
        memcpy(v + 36, "...", 3);
        memmove(v + 39, v + n - 40, 41);
    }
    snprintf(buf, len, "%s", v);
}

int cz_config_resume_diff(const cz_config *old, const cz_config *now, int refused, char *buf,
                          size_t len) {
    int count = 0;
    size_t at = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        if ((k->resume != CZ_RESUME_ACCEPTED) != (refused != 0)) continue;
        char a[2 * CZ_PATH_MAX + 64], b[2 * CZ_PATH_MAX + 64];
        cz_config_format_value(old, k, a, sizeof a);
        cz_config_format_value(now, k, b, sizeof b);
        if (!strcmp(a, b)) continue;
        shown_value(old, k, a, sizeof a);
        shown_value(now, k, b, sizeof b);
        count++;
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%s.%s %s -> %s", count > 1 ? ", " : "",
                                   k->group, k->name, a, b);
    }
    return count;
}
