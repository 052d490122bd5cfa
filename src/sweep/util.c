/* sweep: small helpers of every file of the module (paths, numbers as
 * point names show them, JSON text, appending a line). */
#include "sweep_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sw_join(char *buf, size_t len, const char *dir, const char *name) {
    if (name[0] == '/' || !dir[0])
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s/%s", dir, name);
}

int sw_file_exists(const char *path) {
    return access(path, F_OK) == 0;
}

void sw_format_number(double v, char *buf, size_t len) {
    /* whole numbers below a million as they are (1000 steps, not 1e3) */
    if (v == floor(v) && fabs(v) < 1e6) {
        snprintf(buf, len, "%.0f", v);
        return;
    }
    /* else the shortest of the texts after 1e+13 -> 1e13, 1e-05 -> 1e-5 */
    char best[64] = "";
    for (int p = 1; p <= 17; p++) {
        char t[64], out[64];
        snprintf(t, sizeof t, "%.*g", p, v);
        if (strtod(t, NULL) != v) continue;
        size_t o = 0;
        for (const char *c = t; *c && o + 1 < sizeof out; c++) {
            out[o++] = *c;
            if (*c == 'e') {
                if (c[1] == '+') c++;
                if (c[1] == '-') out[o++] = *++c;
                while (c[1] == '0' && c[2]) c++;
            }
        }
        out[o] = 0;
        if (!best[0] || strlen(out) < strlen(best)) snprintf(best, sizeof best, "%s", out);
    }
    if (!best[0]) snprintf(best, sizeof best, "%.17g", v);
    snprintf(buf, len, "%s", best);
}

void sw_json_escape(const char *s, char *buf, size_t len) {
    size_t o = 0;
    for (; *s && o + 7 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = 0;
}

int sw_append_line(const char *path, const char *line) {
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    fprintf(f, "%s\n", line);
    return fclose(f);
}

/* The whole file as a NUL-terminated string (cz_read_file ends it with a
 * NUL; free it with cz_free), or NULL when it cannot be read. */
char *sw_slurp(const char *path) {
    void *data = NULL;
    size_t len = 0;
    cz_error e;
    return cz_read_file(path, &data, &len, &e) == 0 ? data : NULL;
}
