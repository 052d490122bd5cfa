/* config: writing the effective configuration (libconfig syntax that reads
 * back to the identical struct), --help-config and the key reference of
 * docs/config.md, all from the key table. Above config.c: it reads the
 * defaults and parses GPT defaults through the loader (keys.h, the order). */
#include "cloze/config.h"

#include "keys.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LIST_ITEM 64

static void format_real(double v, int is_float, char *buf, size_t len) {
    cz_config_shortest_real(v, is_float, buf, len);
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", len - strlen(buf) - 1);
}

/* A libconfig string literal: quotes, backslashes and control bytes escaped. */
static void format_string(const char *s, char *buf, size_t len) {
    size_t o = 0;
    if (len < 3) {
        if (len) buf[0] = 0;
        return;
    }
    buf[o++] = '"';
    for (; *s && o + 6 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
        } else {
            buf[o++] = (char)ch;
        }
    }
    buf[o++] = '"';
    buf[o] = 0;
}

void cz_config_format_value(const cz_config *c, const cz_key *k, char *buf, size_t len) {
    const void *p = (const char *)c + k->offset;
    switch (k->type) {
    case CZ_KEY_INT:
        snprintf(buf, len, "%d", *(const int *)p);
        return;
    /* libconfig 1.5 truncates integers beyond 32 bits unless they carry an L */
    case CZ_KEY_LONG:
        snprintf(buf, len, "%ldL", *(const long *)p);
        return;
    case CZ_KEY_U64:
        snprintf(buf, len, "%lluL", *(const unsigned long long *)p);
        return;
    case CZ_KEY_FLOAT:
        format_real(*(const float *)p, 1, buf, len);
        return;
    case CZ_KEY_DOUBLE:
        format_real(*(const double *)p, 0, buf, len);
        return;
    case CZ_KEY_BOOL:
        snprintf(buf, len, "%s", *(const int *)p ? "true" : "false");
        return;
    case CZ_KEY_STRING:
        format_string((const char *)p, buf, len);
        return;
    case CZ_KEY_WORD_INDEX: {
        char w[64];
        cz_config_choice_word(k->choices, *(const int *)p, w, sizeof w);
        format_string(w, buf, len);
        return;
    }
    case CZ_KEY_LIST: {
        int n = *(const int *)((const char *)c + k->count_offset);
        size_t o = (size_t)snprintf(buf, len, "[");
        for (int i = 0; i < n && o < len; i++) {
            char item[2 * LIST_ITEM + 8];
            format_string((const char *)p + (size_t)i * LIST_ITEM, item, sizeof item);
            o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", item);
        }
        if (o < len) snprintf(buf + o, len - o, "]");
        return;
    }
    }
    snprintf(buf, len, "?");
}

/* "word", "int", ... as shown to users */
static const char *key_type_name(cz_key_type t) {
    switch (t) {
    case CZ_KEY_INT:
        return "int";
    case CZ_KEY_LONG:
        return "int64";
    case CZ_KEY_U64:
        return "int64";
    case CZ_KEY_FLOAT:
    case CZ_KEY_DOUBLE:
        return "float";
    case CZ_KEY_BOOL:
        return "bool";
    case CZ_KEY_STRING:
        return "string";
    case CZ_KEY_WORD_INDEX:
        return "word";
    case CZ_KEY_LIST:
        return "list";
    }
    return "?";
}

/* What values are allowed, in words: "in [0, 1)", "bert | gpt", ... */
static void describe_allowed(const cz_key *k, const char *bar, char *buf, size_t len) {
    switch (k->type) {
    case CZ_KEY_BOOL:
        snprintf(buf, len, "true, false");
        return;
    case CZ_KEY_STRING:
        snprintf(buf, len, "text, < %zu bytes", k->size);
        return;
    case CZ_KEY_LIST:
        snprintf(buf, len, "<= %zu names, < %d bytes each", k->size / LIST_ITEM, LIST_ITEM);
        return;
    case CZ_KEY_WORD_INDEX: {
        size_t o = 0;
        buf[0] = 0;
        for (const char *p = k->choices; *p && o + 8 < len; p++) {
            if (*p == '|')
                o += (size_t)snprintf(buf + o, len - o, "%s", bar);
            else
                buf[o++] = *p, buf[o] = 0;
        }
        return;
    }
    case CZ_KEY_U64:
        snprintf(buf, len, "in [0, 2^63)");
        return;
    default:
        cz_config_describe_range(k, buf, len);
        return;
    }
}

/* The default of key k (and its GPT default, if any) in file syntax. */
static void format_defaults(const cz_key *k, char *def, char *gpt, size_t len) {
    cz_config tmp;
    cz_config_defaults(&tmp); /* BERT defaults for every key */
    cz_config_format_value(&tmp, k, def, len);
    gpt[0] = 0;
    if (k->def_gpt) {
        cz_error err;
        char assignment[256];
        snprintf(assignment, sizeof assignment, "%s.%s=%s", k->group, k->name, k->def_gpt);
        if (cz_config_set(&tmp, assignment, &err) == 0) cz_config_format_value(&tmp, k, gpt, len);
    }
}

char *cz_config_to_string(const cz_config *c) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out) return NULL;
    fprintf(out, "# cloze configuration: the effective value of every key.\n");
    if (c->source[0]) {
        fprintf(out, "# loaded from: ");
        for (const char *s = c->source; *s; s++) fputc((unsigned char)*s < 0x20 ? '?' : *s, out);
        fputc('\n', out);
    }
    for (int g = 0; g < cz_config_num_groups; g++) {
        fprintf(out, "\n%s:\n{\n", cz_config_groups[g]);
        for (int i = 0; i < cz_config_num_keys; i++) {
            const cz_key *k = &cz_config_keys[i];
            if (strcmp(k->group, cz_config_groups[g]) != 0) continue;
            char value[2 * CZ_PATH_MAX + 64], line[2 * CZ_PATH_MAX + 128];
            cz_config_format_value(c, k, value, sizeof value);
            snprintf(line, sizeof line, "%s = %s;", k->name, value);
            fprintf(out, "  %-32s # %s\n", line, k->meaning);
        }
        fprintf(out, "};\n");
    }
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int cz_config_write(const cz_config *c, const char *path, cz_error *err) {
    char *text = cz_config_to_string(c);
    if (!text) return cz_fail(err, "%s: out of memory formatting the configuration", path);
    int rc = cz_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

void cz_config_print_keys(FILE *out) {
    fprintf(out,
            "Configuration keys (file: section { key = value; }, or --set section.key=value):\n");
    for (int i = 0; i < cz_config_num_keys; i++) {
        const cz_key *k = &cz_config_keys[i];
        char path[64], def[512], gpt[512], allowed[256];
        snprintf(path, sizeof path, "%s.%s", k->group, k->name);
        format_defaults(k, def, gpt, sizeof def);
        describe_allowed(k, "|", allowed, sizeof allowed);
        fprintf(out, "  %-26s %-6s default %s", path, key_type_name(k->type), def);
        if (gpt[0]) fprintf(out, " (gpt: %s)", gpt);
        fprintf(out, "\n      %s; %s\n", k->meaning, allowed);
    }
}

/* A key's class for a resumed run (keys.h), as docs/config.md shows it. */
static const char *resume_class(const cz_key *k) {
    switch (k->resume) {
    case CZ_RESUME_REFUSED:
        return "refused";
    case CZ_RESUME_ACCEPTED:
        return "accepted";
    case CZ_RESUME_UNCLASSIFIED:
        break;
    }
    return "UNCLASSIFIED (refused)";
}

void cz_config_write_docs(FILE *out) {
    for (int g = 0; g < cz_config_num_groups; g++) {
        fprintf(out, "\n### `%s`\n\n", cz_config_groups[g]);
        fprintf(out, "| key | type | default | allowed | on resume | meaning |\n"
                     "|---|---|---|---|---|---|\n");
        for (int i = 0; i < cz_config_num_keys; i++) {
            const cz_key *k = &cz_config_keys[i];
            if (strcmp(k->group, cz_config_groups[g]) != 0) continue;
            char def[512], gpt[512], allowed[256];
            format_defaults(k, def, gpt, sizeof def);
            describe_allowed(k, " \\| ", allowed, sizeof allowed);
            fprintf(out, "| `%s.%s` | %s | `%s`", k->group, k->name, key_type_name(k->type), def);
            if (gpt[0]) fprintf(out, " (gpt: `%s`)", gpt);
            fprintf(out, " | %s | %s | %s |\n", allowed, resume_class(k), k->meaning);
        }
    }
}
