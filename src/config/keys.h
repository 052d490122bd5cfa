/* config internals: the one table of configuration keys.
 *
 * Every key of a cloze configuration is one row of cz_config_keys[] (keys.c):
 * where it lives in cz_config, its type, its default (written in the same
 * syntax as a --set value, so that defaults go through the same parser as
 * user input), its range or allowed words, and its meaning. Loading, --set,
 * per-key validation, writing, --help-config and docs/config.md all walk this
 * table; no key is handled anywhere else, except the few cross-field rules in
 * config.c (cz_config_validate).
 *
 * The files call one way, each only the ones above it:
 *   keys.c    the table
 *   config.c  defaults, loading, --set, validation; ranges, choice words
 *   write.c   the written configuration, --help-config, docs/config.md
 *   resume.c  which keys a resumed run may change */
#ifndef CLOZE_CONFIG_KEYS_H
#define CLOZE_CONFIG_KEYS_H

#include <stddef.h>

#include "cloze/config.h"

typedef enum {
    CZ_KEY_INT,        /* int */
    CZ_KEY_LONG,       /* long (libconfig int64: written with an L suffix) */
    CZ_KEY_U64,        /* unsigned long long, kept within [0, 2^63) for libconfig */
    CZ_KEY_FLOAT,      /* float */
    CZ_KEY_DOUBLE,     /* double */
    CZ_KEY_BOOL,       /* int 0/1, written true/false */
    CZ_KEY_STRING,     /* char[size], any text (paths) */
    CZ_KEY_WORD_INDEX, /* int-sized C enum = index of the word in `choices` */
    CZ_KEY_LIST,       /* optim.no_decay: char[CZ_MAX_PATTERNS][64] + count */
} cz_key_type;

/* What a key's change means to a resumed run (--resume): each key of the
 * table is in one class, and test_config fails on a key left unclassified
 * (which cz_config_resume_diff treats as REFUSED). docs/config.md's "on
 * resume" column is written from it. */
typedef enum {
    CZ_RESUME_UNCLASSIFIED = 0,
    CZ_RESUME_REFUSED,  /* changes what the run means (seed, batch, schedule, model,
                           data): refused unless --allow-config-change */
    CZ_RESUME_ACCEPTED, /* where or how it runs, logs or stops: accepted and logged */
} cz_key_resume;

/* range flags */
#define CZ_MIN_EXCL 1u /* value must be > min (not >=) */
#define CZ_MAX_EXCL 2u /* value must be < max (not <=) */

typedef struct cz_key {
    const char *group; /* "model", "data", "train", "optim", "dist" */
    const char *name;  /* key inside the group */
    cz_key_type type;
    size_t offset, size; /* of the field in cz_config */
    const char *def;     /* default, in --set syntax */
    const char *def_gpt; /* default when model.arch = gpt and the key is not given; NULL: same */
    double min, max;     /* numeric range (ints and floats) */
    unsigned flags;      /* CZ_MIN_EXCL, CZ_MAX_EXCL */
    const char *choices; /* "linear|cosine|constant" for WORD_INDEX */
    const char *meaning; /* one line for --help-config and docs/config.md */
    size_t count_offset; /* LIST: offset of the int that counts the entries */
    cz_key_resume resume; /* may a resumed run change it (CZ_RESUME_*) */
} cz_key;

extern const cz_key cz_config_keys[];
extern const int cz_config_num_keys;

/* The names of the groups, in file order. */
extern const char *const cz_config_groups[];
extern const int cz_config_num_groups;

/* The shortest "%.{p}g" text that reads back to exactly v (is_float: the
 * same float after strtod and a cast, as the loader reads it). */
void cz_config_shortest_real(double v, int is_float, char *buf, size_t len);
/* "must be >= 1", "in [0, 1)", ... for messages and docs. */
void cz_config_describe_range(const cz_key *k, char *buf, size_t len);
/* The idx-th word of choices "a|b|c" ("?" when out of range). */
void cz_config_choice_word(const char *choices, int idx, char *buf, size_t len);
/* A key's value in config-file syntax ("12", "1e-12", "\"bert\"", "[\"a\"]"). */
void cz_config_format_value(const cz_config *c, const cz_key *k, char *buf, size_t len);

#endif
