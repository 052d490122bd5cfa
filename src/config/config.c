/* config: defaults, loading (libconfig), --set overrides and validation, all
 * driven by the key table in keys.c, and the texts its messages and the
 * writer share (a range, a choice word, the shortest real). Writing lives
 * in write.c, above this file (keys.h, the order). */
#include "cloze/config.h"

#include "keys.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_KEYS 128
#define WHY_MAX 512

/* Where each key got its value during one load: the error messages of the
 * cross-field checks point at the line (or --set) that set the key. */
typedef struct origin {
    int given;       /* set by the file or by --set */
    int line;        /* file line, 0 if not from the file */
    const char *set; /* the --set assignment, NULL if not from --set */
} origin;

typedef struct load_ctx {
    const char *name; /* file name (or string name) for messages; NULL: none */
    origin at[MAX_KEYS];
} load_ctx;

static void *field(cz_config *c, const cz_key *k) {
    return (char *)c + k->offset;
}
static const void *cfield(const cz_config *c, const cz_key *k) {
    return (const char *)c + k->offset;
}

static int find_key(const char *group, size_t group_len, const char *name) {
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        if (strlen(k->group) == group_len && strncmp(k->group, group, group_len) == 0 &&
            strcmp(k->name, name) == 0)
            return i;
    }
    return -1;
}

static int is_group(const char *name) {
    for (int g = 0; g < cz_config_num_groups; g++)
        if (strcmp(cz_config_groups[g], name) == 0) return 1;
    return 0;
}

/* Index of `word` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *word) {
    const char *p = choices;
    for (int i = 0;; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (strlen(word) == n && strncmp(p, word, n) == 0) return i;
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* The idx-th word of "a|b|c" into buf. */
void cz_config_choice_word(const char *choices, int idx, char *buf, size_t len) {
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p || idx < 0) {
        snprintf(buf, len, "?");
        return;
    }
    const char *bar = strchr(p, '|');
    int n = bar ? (int)(bar - p) : (int)strlen(p);
    snprintf(buf, len, "%.*s", n, p);
}

/* Shortest "%.{p}g" that reads back to exactly the same value (for a float:
 * the same float after strtod + cast, which is how the loader reads it), and
 * always with a '.' or an exponent so that libconfig sees a float. */
void cz_config_shortest_real(double v, int is_float, char *buf, size_t len) {
    char try[64];
    buf[0] = 0;
    for (int p = 1; p <= 17; p++) {
        snprintf(try, sizeof try, "%.*g", p, v);
        double r = strtod(try, NULL);
        int same = is_float ? (float)r == (float)v : r == v;
        /* the shortest text wins: "10" rather than "1e+01" */
        if (same && (!buf[0] || strlen(try) < strlen(buf))) snprintf(buf, len, "%s", try);
    }
    if (!buf[0]) snprintf(buf, len, "%.17g", v); /* NaN */
}

static void format_bound(double v, char *buf, size_t len) {
    cz_config_shortest_real(v, 0, buf, len);
}

void cz_config_describe_range(const cz_key *k, char *buf, size_t len) {
    char lo[64], hi[64];
    /* integer keys print their bounds as integers */
    int integral = k->type == CZ_KEY_INT || k->type == CZ_KEY_LONG || k->type == CZ_KEY_U64;
    if (integral) {
        snprintf(lo, sizeof lo, "%.0f", k->min);
        snprintf(hi, sizeof hi, "%.0f", k->max);
    } else {
        format_bound(k->min, lo, sizeof lo);
        format_bound(k->max, hi, sizeof hi);
    }
    if (isinf(k->max))
        snprintf(buf, len, "%s %s", (k->flags & CZ_MIN_EXCL) ? ">" : ">=", lo);
    else
        snprintf(buf, len, "in %s%s, %s%s", (k->flags & CZ_MIN_EXCL) ? "(" : "[", lo, hi,
                 (k->flags & CZ_MAX_EXCL) ? ")" : "]");
}

/* Edit distance, for "did you mean" on unknown keys (short names only). */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 40 || lb > 40) return 99;
    int prev[41], cur[41];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof prev);
    }
    return prev[lb];
}

/* "; did you mean model.layers?" or "" */
static void suggest(const char *group, const char *name, char *buf, size_t len) {
    int best = 3, bi = -1; /* at most 2 edits away */
    for (int i = 0; i < cz_config_num_keys; i++) {
        if (strcmp(cz_config_keys[i].group, group) != 0) continue;
        int d = edit_distance(name, cz_config_keys[i].name);
        if (d < best) best = d, bi = i;
    }
    if (bi >= 0)
        snprintf(buf, len, "; did you mean %s.%s?", group, cz_config_keys[bi].name);
    else
        snprintf(buf, len, " (cloze-train --help-config lists them)");
}

/* ---- range checks (shared by parsing and cz_config_validate) ---- */

static int check_range(const cz_key *k, double v, char *why) {
    if (!isfinite(v)) return snprintf(why, WHY_MAX, "%g is not a finite number", v), -1;
    int lo_ok = (k->flags & CZ_MIN_EXCL) ? v > k->min : v >= k->min;
    int hi_ok = (k->flags & CZ_MAX_EXCL) ? v < k->max : v <= k->max;
    if (lo_ok && hi_ok) return 0;
    char range[128];
    cz_config_describe_range(k, range, sizeof range);
    snprintf(why, WHY_MAX, "%.17g is out of range: must be %s", v, range);
    return -1;
}

int cz_config_check_number(const char *key, double v, char *range, size_t cap) {
    const char *dot = strchr(key, '.');
    int i = dot ? find_key(key, (size_t)(dot - key), dot + 1) : -1;
    const cz_key *k = i >= 0 ? &cz_config_keys[i] : NULL;
    if (!k || k->type == CZ_KEY_STRING || k->type == CZ_KEY_BOOL || k->type == CZ_KEY_WORD_INDEX ||
        k->type == CZ_KEY_LIST) {
        snprintf(range, cap, "not a key");
        return -1;
    }
    char why[WHY_MAX];
    if (check_range(k, v, why) == 0) return 0;
    if (!isfinite(v))
        snprintf(range, cap, "a finite number");
    else
        cz_config_describe_range(k, range, cap);
    return -1;
}

/* ---- storing typed values into the struct, with checks ---- */

static int store_integer(const cz_key *k, cz_config *c, long long v, char *why) {
    switch (k->type) {
    case CZ_KEY_INT:
        if (v < INT_MIN || v > INT_MAX)
            return snprintf(why, WHY_MAX, "%lld does not fit a 32-bit integer", v), -1;
        if (check_range(k, (double)v, why)) return -1;
        *(int *)field(c, k) = (int)v;
        return 0;
    case CZ_KEY_LONG:
        if (check_range(k, (double)v, why)) return -1;
        *(long *)field(c, k) = (long)v;
        return 0;
    case CZ_KEY_U64:
        /* libconfig integers are signed 64-bit: keep seeds below 2^63 so that
         * every value we accept can be written back and read again. */
        if (v < 0) return snprintf(why, WHY_MAX, "%lld is out of range: must be >= 0", v), -1;
        *(unsigned long long *)field(c, k) = (unsigned long long)v;
        return 0;
    case CZ_KEY_FLOAT:
    case CZ_KEY_DOUBLE:
        break;
    default:
        return snprintf(why, WHY_MAX, "internal: not a number key"), -1;
    }
    /* an integer where a float is expected ("lr = 1;") is fine */
    double d = (double)v;
    if (check_range(k, d, why)) return -1;
    if (k->type == CZ_KEY_FLOAT)
        *(float *)field(c, k) = (float)d;
    else
        *(double *)field(c, k) = d;
    return 0;
}

static int store_real(const cz_key *k, cz_config *c, double v, char *why) {
    if (k->type != CZ_KEY_FLOAT && k->type != CZ_KEY_DOUBLE)
        return snprintf(why, WHY_MAX, "expected an integer, got %.17g", v), -1;
    if (check_range(k, v, why)) return -1;
    if (k->type == CZ_KEY_FLOAT) {
        float f = (float)v;
        /* a double in range can still round to 0 or overflow as a float */
        if (check_range(k, (double)f, why)) return -1;
        *(float *)field(c, k) = f;
    } else {
        *(double *)field(c, k) = v;
    }
    return 0;
}

static int store_word(const cz_key *k, cz_config *c, const char *s, char *why) {
    if (k->type == CZ_KEY_WORD_INDEX) {
        int idx = choice_index(k->choices, s);
        if (idx < 0)
            return snprintf(why, WHY_MAX, "expected one of %s, got \"%s\"", k->choices, s), -1;
        *(int *)field(c, k) = idx;
        return 0;
    }
    if (strlen(s) >= k->size)
        return snprintf(why, WHY_MAX, "too long (%zu bytes, at most %zu)", strlen(s), k->size - 1),
               -1;
    snprintf((char *)field(c, k), k->size, "%s", s);
    return 0;
}

#define LIST_ITEM 64 /* sizeof cz_optim_config.no_decay[0] */

static int list_clear(const cz_key *k, cz_config *c) {
    memset(field(c, k), 0, k->size);
    *(int *)((char *)c + k->count_offset) = 0;
    return 0;
}

static int list_add(const cz_key *k, cz_config *c, const char *s, size_t n, char *why) {
    int *count = (int *)((char *)c + k->count_offset);
    int max = (int)(k->size / LIST_ITEM);
    if (n == 0) return snprintf(why, WHY_MAX, "empty name in the list"), -1;
    if (n >= LIST_ITEM)
        return snprintf(why, WHY_MAX, "\"%.*s\" is too long (at most %d bytes)", (int)n, s,
                        LIST_ITEM - 1),
               -1;
    if (*count >= max) return snprintf(why, WHY_MAX, "more than %d names", max), -1;
    char *dst = (char *)field(c, k) + (size_t)*count * LIST_ITEM;
    memcpy(dst, s, n);
    dst[n] = 0;
    (*count)++;
    return 0;
}

/* ---- values from text: --set and the defaults of the table ---- */

static const char *skip_space(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* Strips surrounding spaces and one pair of double quotes: [s, *end). */
static const char *unquote(const char *s, const char **end) {
    s = skip_space(s);
    const char *e = *end;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if (e - s >= 2 && s[0] == '"' && e[-1] == '"') {
        s++;
        e--;
    }
    *end = e;
    return s;
}

static int parse_list_text(const cz_key *k, cz_config *c, const char *text, char *why) {
    const char *s = skip_space(text);
    const char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) end--;
    /* ["a","b"] / ("a","b") (libconfig) or a,b (comma form) */
    if (end > s && ((s[0] == '[' && end[-1] == ']') || (s[0] == '(' && end[-1] == ')'))) {
        s++;
        end--;
    }
    list_clear(k, c);
    if (skip_space(s) == end) return 0; /* empty list */
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        const char *item = unquote(s, &item_end);
        if (list_add(k, c, item, (size_t)(item_end - item), why)) return -1;
        if (!comma) break;
        s = comma + 1;
    }
    return 0;
}

static int parse_text(const cz_key *k, cz_config *c, const char *text, char *why) {
    char *end;
    switch (k->type) {
    case CZ_KEY_INT:
    case CZ_KEY_LONG:
    case CZ_KEY_U64: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (end == text || *skip_space(end) || errno == ERANGE)
            return snprintf(why, WHY_MAX, "expected an integer"), -1;
        return store_integer(k, c, v, why);
    }
    case CZ_KEY_FLOAT:
    case CZ_KEY_DOUBLE: {
        errno = 0;
        double v = strtod(text, &end);
        if (end == text || *skip_space(end)) return snprintf(why, WHY_MAX, "expected a number"), -1;
        return store_real(k, c, v, why);
    }
    case CZ_KEY_BOOL:
        if (!strcmp(text, "true") || !strcmp(text, "1")) {
            *(int *)field(c, k) = 1;
        } else if (!strcmp(text, "false") || !strcmp(text, "0")) {
            *(int *)field(c, k) = 0;
        } else {
            return snprintf(why, WHY_MAX, "expected true or false"), -1;
        }
        return 0;
    case CZ_KEY_STRING:
    case CZ_KEY_WORD_INDEX: {
        const char *e = text + strlen(text);
        const char *s = unquote(text, &e);
        char buf[CZ_PATH_MAX + 1];
        if ((size_t)(e - s) >= sizeof buf)
            return snprintf(why, WHY_MAX, "too long (%zu bytes)", (size_t)(e - s)), -1;
        memcpy(buf, s, (size_t)(e - s));
        buf[e - s] = 0;
        return store_word(k, c, buf, why);
    }
    case CZ_KEY_LIST:
        return parse_list_text(k, c, text, why);
    }
    return snprintf(why, WHY_MAX, "internal: unknown key type"), -1;
}

/* ---- values from a libconfig setting ---- */

static const char *type_name(int t) {
    switch (t) {
    case CONFIG_TYPE_GROUP:
        return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return "an integer";
    case CONFIG_TYPE_FLOAT:
        return "a float";
    case CONFIG_TYPE_STRING:
        return "a string";
    case CONFIG_TYPE_BOOL:
        return "a boolean";
    case CONFIG_TYPE_ARRAY:
        return "an array";
    case CONFIG_TYPE_LIST:
        return "a list";
    }
    return "nothing";
}

static int parse_setting(const cz_key *k, cz_config *c, config_setting_t *s, char *why) {
    int t = config_setting_type(s);
    const char *got = type_name(t);
    switch (k->type) {
    case CZ_KEY_INT:
    case CZ_KEY_LONG:
    case CZ_KEY_U64:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return snprintf(why, WHY_MAX, "expected an integer, got %s", got), -1;
        if (store_integer(k, c, config_setting_get_int64(s), why)) {
            /* libconfig 1.5 wraps 3000000000 to a negative int without the L */
            if (k->type != CZ_KEY_INT && t == CONFIG_TYPE_INT)
                snprintf(why + strlen(why), WHY_MAX - strlen(why),
                         " (write integers above 2147483647 with an L suffix)");
            return -1;
        }
        return 0;
    case CZ_KEY_FLOAT:
    case CZ_KEY_DOUBLE:
        if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
            return store_integer(k, c, config_setting_get_int64(s), why);
        if (t != CONFIG_TYPE_FLOAT)
            return snprintf(why, WHY_MAX, "expected a number, got %s", got), -1;
        return store_real(k, c, config_setting_get_float(s), why);
    case CZ_KEY_BOOL:
        if (t != CONFIG_TYPE_BOOL)
            return snprintf(why, WHY_MAX, "expected true or false, got %s", got), -1;
        *(int *)field(c, k) = config_setting_get_bool(s) ? 1 : 0;
        return 0;
    case CZ_KEY_STRING:
    case CZ_KEY_WORD_INDEX:
        if (t != CONFIG_TYPE_STRING)
            return snprintf(why, WHY_MAX, "expected a string, got %s", got), -1;
        return store_word(k, c, config_setting_get_string(s), why);
    case CZ_KEY_LIST:
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            return snprintf(why, WHY_MAX, "expected a list of strings like [\"a\", \"b\"], got %s",
                            got),
                   -1;
        list_clear(k, c);
        for (int i = 0; i < config_setting_length(s); i++) {
            config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            if (config_setting_type(e) != CONFIG_TYPE_STRING)
                return snprintf(why, WHY_MAX, "element %d: expected a string, got %s", i,
                                type_name(config_setting_type(e))),
                       -1;
            const char *str = config_setting_get_string(e);
            if (list_add(k, c, str, strlen(str), why)) return -1;
        }
        return 0;
    }
    return snprintf(why, WHY_MAX, "internal: unknown key type"), -1;
}

/* ---- defaults ---- */

static void set_default(cz_config *c, const cz_key *k, const char *text) {
    char why[WHY_MAX];
    if (parse_text(k, c, text, why) != 0) {
        /* a broken table is a programming error that every test run catches */
        fprintf(stderr, "cloze config table: %s.%s: default \"%s\": %s\n", k->group, k->name, text,
                why);
        abort();
    }
}

/* Defaults that depend on other keys, applied after the file and --set:
 * arch-specific defaults for keys not given, intermediate 0 = 4H, and a
 * warm-up given in steps switches the default fraction off. */
static void resolve_derived(cz_config *c, const origin *at) {
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        int given = at ? at[i].given : 0;
        if (!given && k->def_gpt && c->model.arch == CZ_ARCH_GPT) set_default(c, k, k->def_gpt);
    }
    if (c->model.intermediate == 0) c->model.intermediate = 4 * c->model.hidden;
    if (at) {
        int ws = find_key("optim", 5, "warmup_steps"), wf = find_key("optim", 5, "warmup_fraction");
        if (at[ws].given && !at[wf].given) c->optim.warmup_fraction = 0;
    }
}

/* Each row's type must match the size of its field (a `long` declared as
 * CZ_KEY_INT would be half-written). Checked on every fill: 55 compares. */
static void check_table(void) {
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        size_t want = 0;
        switch (k->type) {
        case CZ_KEY_INT:
        case CZ_KEY_BOOL:
        case CZ_KEY_WORD_INDEX:
            want = sizeof(int);
            break;
        case CZ_KEY_LONG:
            want = sizeof(long);
            break;
        case CZ_KEY_U64:
            want = sizeof(unsigned long long);
            break;
        case CZ_KEY_FLOAT:
            want = sizeof(float);
            break;
        case CZ_KEY_DOUBLE:
            want = sizeof(double);
            break;
        case CZ_KEY_STRING:
            want = k->size;
            break;
        case CZ_KEY_LIST:
            want = (size_t)CZ_MAX_PATTERNS * LIST_ITEM;
            break;
        }
        if (k->size != want || (k->type == CZ_KEY_WORD_INDEX && !k->choices)) {
            fprintf(stderr, "cloze config table: %s.%s: type does not match the field\n", k->group,
                    k->name);
            abort();
        }
    }
}

/* The table defaults, before anything is derived from them. */
static void fill_defaults(cz_config *c) {
    check_table();
    if (cz_config_num_keys > MAX_KEYS) {
        fprintf(stderr, "cloze config table: %d keys, MAX_KEYS is %d\n", cz_config_num_keys,
                MAX_KEYS);
        abort();
    }
    memset(c, 0, sizeof *c);
    for (int i = 0; i < cz_config_num_keys; i++)
        set_default(c, &cz_config_keys[i], cz_config_keys[i].def);
}

void cz_config_defaults(cz_config *c) {
    fill_defaults(c);
    resolve_derived(c, NULL);
}

/* ---- --set ---- */

static int set_one(cz_config *c, const char *assignment, origin *at, cz_error *err) {
    const char *eq = strchr(assignment, '=');
    const char *dot = eq ? memchr(assignment, '.', (size_t)(eq - assignment)) : NULL;
    if (!eq || !dot)
        return cz_fail(err, "--set %s: expected section.key=value (e.g. model.layers=6)",
                       assignment);
    char name[128];
    const char *group = skip_space(assignment);
    const char *name_start = dot + 1, *name_end = eq;
    while (name_end > name_start && (name_end[-1] == ' ' || name_end[-1] == '\t')) name_end--;
    snprintf(name, sizeof name, "%.*s", (int)(name_end - name_start), name_start);
    int i = find_key(group, (size_t)(dot - group), name);
    if (i < 0) {
        char g[64];
        snprintf(g, sizeof g, "%.*s", (int)(dot - group), group);
        if (!is_group(g))
            return cz_fail(
                err, "--set %s: unknown section %s (sections: model, data, train, optim, dist)",
                assignment, g);
        char hint[128];
        suggest(g, name, hint, sizeof hint);
        return cz_fail(err, "--set %s: unknown key%s", assignment, hint);
    }
    char why[WHY_MAX];
    if (parse_text(&cz_config_keys[i], c, skip_space(eq + 1), why))
        return cz_fail(err, "--set %s: %s", assignment, why);
    if (at) {
        at[i].given = 1;
        at[i].line = 0;
        at[i].set = assignment;
    }
    return 0;
}

int cz_config_set(cz_config *c, const char *assignment, cz_error *err) {
    return set_one(c, assignment, NULL, err);
}

/* ---- the file ---- */

static int apply_file(cz_config *c, config_t *cfg, load_ctx *ctx, cz_error *err) {
    config_setting_t *root = config_root_setting(cfg);
    for (int g = 0; g < config_setting_length(root); g++) {
        config_setting_t *grp = config_setting_get_elem(root, (unsigned)g);
        const char *gname = config_setting_name(grp);
        int gline = (int)config_setting_source_line(grp);
        if (!is_group(gname))
            return cz_fail(err,
                           "%s:%d: %s: unknown section (sections: model, data, train, optim, "
                           "dist)",
                           ctx->name, gline, gname);
        if (!config_setting_is_group(grp))
            return cz_fail(err, "%s:%d: %s: expected a group { key = value; ... }, got %s",
                           ctx->name, gline, gname, type_name(config_setting_type(grp)));
        for (int j = 0; j < config_setting_length(grp); j++) {
            config_setting_t *s = config_setting_get_elem(grp, (unsigned)j);
            const char *name = config_setting_name(s);
            int line = (int)config_setting_source_line(s);
            int i = find_key(gname, strlen(gname), name);
            if (i < 0) {
                char hint[128];
                suggest(gname, name, hint, sizeof hint);
                return cz_fail(err, "%s:%d: %s.%s: unknown key%s", ctx->name, line, gname, name,
                               hint);
            }
            char why[WHY_MAX];
            if (parse_setting(&cz_config_keys[i], c, s, why))
                return cz_fail(err, "%s:%d: %s.%s: %s", ctx->name, line, gname, name, why);
            ctx->at[i].given = 1;
            ctx->at[i].line = line;
            ctx->at[i].set = NULL;
        }
    }
    return 0;
}

/* ---- validation ---- */

/* Fails with the place that set key `i`: "file:line: group.key: ..." or
 * "--set assignment: ..." or, for a default, "file: group.key: ...". */
static int fail_key(const load_ctx *ctx, int i, cz_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_key(const load_ctx *ctx, int i, cz_error *err, const char *fmt, ...) {
    char msg[CZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (i < 0) /* a rule on a field that has no key */
        return ctx && ctx->name ? cz_fail(err, "%s: %s", ctx->name, msg) : cz_fail(err, "%s", msg);
    const cz_key *k = &cz_config_keys[i];
    if (ctx && ctx->at[i].set) return cz_fail(err, "--set %s: %s", ctx->at[i].set, msg);
    if (ctx && ctx->name && ctx->at[i].line > 0)
        return cz_fail(err, "%s:%d: %s.%s: %s", ctx->name, ctx->at[i].line, k->group, k->name, msg);
    if (ctx && ctx->name) return cz_fail(err, "%s: %s.%s: %s", ctx->name, k->group, k->name, msg);
    return cz_fail(err, "%s.%s: %s", k->group, k->name, msg);
}

#define KEY_INDEX(g, n) find_key(g, strlen(g), n)

/* Every key's own range (a struct filled by hand must obey it too). */
static int validate_keys(const cz_config *c, const load_ctx *ctx, cz_error *err) {
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        const void *p = cfield(c, k);
        char why[WHY_MAX];
        int bad = 0;
        switch (k->type) {
        case CZ_KEY_INT:
            bad = check_range(k, *(const int *)p, why);
            break;
        case CZ_KEY_LONG:
            bad = check_range(k, (double)*(const long *)p, why);
            break;
        case CZ_KEY_U64:
            if (*(const unsigned long long *)p > (unsigned long long)INT64_MAX)
                bad = 1, snprintf(why, WHY_MAX, "must be < 2^63");
            break;
        case CZ_KEY_FLOAT:
            bad = check_range(k, *(const float *)p, why);
            break;
        case CZ_KEY_DOUBLE:
            bad = check_range(k, *(const double *)p, why);
            break;
        case CZ_KEY_BOOL:
            if (*(const int *)p != 0 && *(const int *)p != 1)
                bad = 1, snprintf(why, WHY_MAX, "must be 0 or 1");
            break;
        case CZ_KEY_STRING:
            if (!memchr(p, 0, k->size)) bad = 1, snprintf(why, WHY_MAX, "not terminated");
            break;
        case CZ_KEY_WORD_INDEX: {
            char w[64];
            int v = *(const int *)p;
            cz_config_choice_word(k->choices, v, w, sizeof w);
            if (v < 0 || w[0] == '?') bad = 1, snprintf(why, WHY_MAX, "invalid value %d", v);
            break;
        }
        case CZ_KEY_LIST: {
            int n = *(const int *)((const char *)c + k->count_offset);
            if (n < 0 || n > (int)(k->size / LIST_ITEM)) {
                bad = 1, snprintf(why, WHY_MAX, "%d names", n);
                break;
            }
            for (int j = 0; j < n && !bad; j++) {
                const char *item = (const char *)p + (size_t)j * LIST_ITEM;
                if (!memchr(item, 0, LIST_ITEM) || !item[0])
                    bad = 1, snprintf(why, WHY_MAX, "name %d is empty or not terminated", j);
            }
            break;
        }
        }
        if (bad) return fail_key(ctx, i, err, "%s", why);
    }
    return 0;
}

/* Rules that involve more than one key; each blames the key to change. */
static int validate_cross(const cz_config *c, const load_ctx *ctx, cz_error *err) {
    const cz_model_config *m = &c->model;
    const cz_data_config *d = &c->data;
    const cz_train_config *t = &c->train;
    const cz_optim_config *o = &c->optim;
    int gx, gy;
    cz_error gerr;
    if (cz_comm_grid_parse(c->dist.grid, &gx, &gy, &gerr) != 0)
        return fail_key(ctx, KEY_INDEX("dist", "grid"), err, "%s", gerr.msg);

    /* the model's own rules (model.h), blamed on the key they name */
    const char *key;
    cz_error why;
    if (cz_model_config_check(m, &key, &why) != 0)
        return fail_key(ctx, KEY_INDEX("model", key), err, "%s", why.msg);
    int shape = cz_model_shape_rule(m, d->seq, d->max_pred);
    if (shape == CZ_SHAPE_SEQ)
        return fail_key(ctx, KEY_INDEX("data", "seq"), err,
                        "data.seq = %d exceeds model.max_positions = %d", d->seq, m->max_positions);
    if (shape == CZ_SHAPE_PRED && d->max_pred < 1)
        return fail_key(ctx, KEY_INDEX("data", "max_pred"), err,
                        "BERT needs at least 1 prediction slot, got %d", d->max_pred);
    if (shape == CZ_SHAPE_PRED)
        return fail_key(ctx, KEY_INDEX("data", "max_pred"), err,
                        "data.max_pred = %d exceeds data.seq = %d", d->max_pred, d->seq);
    if (d->phase2_fraction > 0) {
        shape = cz_model_shape_rule(m, d->phase2_seq, d->phase2_max_pred);
        if (shape == CZ_SHAPE_SEQ)
            return fail_key(ctx, KEY_INDEX("data", "phase2_seq"), err,
                            "data.phase2_seq = %d exceeds model.max_positions = %d", d->phase2_seq,
                            m->max_positions);
        if (shape == CZ_SHAPE_PRED && d->phase2_max_pred < 1)
            return fail_key(ctx, KEY_INDEX("data", "phase2_max_pred"), err,
                            "BERT needs at least 1 prediction slot, got %d", d->phase2_max_pred);
        if (shape == CZ_SHAPE_PRED)
            return fail_key(ctx, KEY_INDEX("data", "phase2_max_pred"), err,
                            "data.phase2_max_pred = %d exceeds data.phase2_seq = %d",
                            d->phase2_max_pred, d->phase2_seq);
        int g2 = d->phase2_global_batch ? d->phase2_global_batch : t->global_batch;
        int m2 = d->phase2_micro_batch ? d->phase2_micro_batch : t->micro_batch;
        if (g2 % m2 != 0)
            return fail_key(ctx,
                            KEY_INDEX("data", d->phase2_micro_batch ? "phase2_micro_batch"
                                                                    : "phase2_global_batch"),
                            err, "phase-2 global batch %d is not a multiple of its micro-batch %d",
                            g2, m2);
    }
    if (t->global_batch % t->micro_batch != 0)
        return fail_key(ctx, KEY_INDEX("train", "micro_batch"), err,
                        "train.global_batch = %d is not a multiple of train.micro_batch = %d",
                        t->global_batch, t->micro_batch);
    if (o->warmup_steps > 0 && o->warmup_fraction > 0)
        return fail_key(ctx, KEY_INDEX("optim", "warmup_steps"), err,
                        "set only one of optim.warmup_steps (%ld) and optim.warmup_fraction (%g)",
                        o->warmup_steps, o->warmup_fraction);
    if (o->warmup_steps > t->steps)
        return fail_key(ctx, KEY_INDEX("optim", "warmup_steps"), err,
                        "optim.warmup_steps = %ld exceeds train.steps = %ld", o->warmup_steps,
                        t->steps);
    /* exact sums travel as int64: a bf16 wire would round them */
    if (c->dist.exact && c->dist.grad_wire == CZ_WIRE_BF16)
        return fail_key(ctx, KEY_INDEX("dist", "grad_wire"), err,
                        "dist.grad_wire = \"bf16\" cannot carry dist.exact = true's int64 sums: "
                        "set dist.grad_wire = \"fp32\" or dist.exact = false");
    if (c->dist.exact && o->kind == CZ_OPT_LAMB)
        return fail_key(ctx, KEY_INDEX("optim", "name"), err,
                        "optim.name = lamb with dist.exact = true: LAMB's per-tensor norms "
                        "follow the bucket layout; use adamw or dist.exact = false");
    /* µP's per-tensor learning rates are mup's MuAdam rule; LAMB's trust
     * ratio rescales each tensor's step to its norm, which µP does not define */
    if (m->parametrization == CZ_PARAM_MUP && o->kind == CZ_OPT_LAMB)
        return fail_key(ctx, KEY_INDEX("optim", "name"), err,
                        "optim.name = lamb: model.parametrization = mup defines per-tensor "
                        "learning rates for Adam(W) only; use optim.name = adamw");
    /* Open MPI's collectives reduce fp32 in their own order: no bf16 wire */
    if (c->dist.grad_wire == CZ_WIRE_BF16 && c->dist.allreduce == CZ_ALLREDUCE_MPI)
        return fail_key(ctx, KEY_INDEX("dist", "grad_wire"), err,
                        "dist.grad_wire = \"bf16\" needs one of our all-reduce algorithms "
                        "(dist.allreduce = ring, hierarchical, torus2d or auto), not \"mpi\"");
    return 0;
}

static int validate_with(const cz_config *c, const load_ctx *ctx, cz_error *err) {
    if (validate_keys(c, ctx, err)) return -1;
    return validate_cross(c, ctx, err);
}

int cz_config_validate(const cz_config *c, cz_error *err) {
    return validate_with(c, NULL, err);
}

/* ---- loading ---- */

/* Reads the parsed file `cfg` (or nothing when cfg is NULL), applies the
 * overrides, resolves derived defaults and validates. */
static int load_parsed(cz_config *c, config_t *cfg, const char *name, const char *const *overrides,
                       int n_overrides, cz_error *err) {
    load_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.name = name;
    fill_defaults(c);
    if (name) snprintf(c->source, sizeof c->source, "%s", name);
    if (cfg && apply_file(c, cfg, &ctx, err)) return -1;
    for (int i = 0; i < n_overrides; i++)
        if (set_one(c, overrides[i], ctx.at, err)) return -1;
    resolve_derived(c, ctx.at);
    return validate_with(c, &ctx, err);
}

static int syntax_error(config_t *cfg, const char *name, cz_error *err) {
    return cz_fail(err, "%s:%d: %s", name, config_error_line(cfg), config_error_text(cfg));
}

int cz_config_load(cz_config *c, const char *path, const char *const *overrides, int n_overrides,
                   cz_error *err) {
    if (!path) return load_parsed(c, NULL, NULL, overrides, n_overrides, err);
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno; /* (cz_config_defaults may change errno) */
        cz_config_defaults(c);
        return cz_fail(err, "%s: cannot open: %s", path, strerror(e));
    }
    /* libconfig's scanner ends the process (exit 2, "input in flex scanner
     * failed", no file name) when the stream is a directory: refuse it here */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        cz_config_defaults(c);
        return cz_fail(err, "%s: is a directory, not a configuration file", path);
    }
    config_t cfg;
    config_init(&cfg);
    int rc;
    if (config_read(&cfg, f) != CONFIG_TRUE)
        rc = syntax_error(&cfg, path, err);
    else
        rc = load_parsed(c, &cfg, path, overrides, n_overrides, err);
    config_destroy(&cfg);
    fclose(f);
    return rc;
}

int cz_config_from_string(cz_config *c, const char *text, const char *name, cz_error *err) {
    if (!name) name = "<string>";
    config_t cfg;
    config_init(&cfg);
    int rc;
    if (config_read_string(&cfg, text) != CONFIG_TRUE)
        rc = syntax_error(&cfg, name, err);
    else
        rc = load_parsed(c, &cfg, name, NULL, 0, err);
    config_destroy(&cfg);
    return rc;
}
