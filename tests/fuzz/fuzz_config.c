/* The run configuration parser (src/config: libconfig syntax, the key table,
 * --set assignments, validation). Input: a config file, then optionally a
 * NUL and '\n'-separated --set assignments. Property: a configuration that
 * loads and validates is written (cz_config_to_string) to text that loads
 * back to the same configuration, as the run directory's config.cfg relies
 * on. */
#include "fuzz.h"

#include "cloze/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    size_t cfg_len = strlen(text); /* libconfig reads up to the NUL */
    cz_config c;
    cz_error err;
    int rc = cz_config_from_string(&c, text, "fuzz.cfg", &err);
    if (rc == 0 && cfg_len < size) {
        for (char *a = text + cfg_len + 1; rc == 0 && a < text + size;) {
            char *e = memchr(a, '\n', (size_t)(text + size - a));
            if (e) *e = 0;
            rc = cz_config_set(&c, a, &err);
            a = e ? e + 1 : text + size;
        }
    }
    /* --set applies keys one at a time; the whole is checked here, as
     * cz_config_load does after its overrides */
    if (rc == 0 && cz_config_validate(&c, &err) == 0) {
        char *s1 = cz_config_to_string(&c);
        cz_config c2;
        FUZZ_CHECK(s1 && cz_config_from_string(&c2, s1, "fuzz.cfg", &err) == 0,
                   "written config does not load: %s\n%s", err.msg, s1 ? s1 : "");
        char *s2 = cz_config_to_string(&c2);
        FUZZ_CHECK(s2 && !strcmp(s1, s2), "written config reads back different:\n%s\n---\n%s", s1,
                   s2 ? s2 : "");
        free(s1);
        free(s2);
    }
    free(text);
    return 0;
}
