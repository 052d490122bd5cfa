/* The JSON readers: the document parser of src/core/json.c (Hugging Face
 * config.json, tokenizer_config.json, SQuAD) with the Hugging Face
 * config.json reader on top (src/ckpt/hf.c), and the string decoder
 * into a buffer (cz_json_string, used by encoder.json and JSON Lines).
 * Properties: a parsed tree is walkable within its counts, and a decoded
 * string is valid UTF-8 unless the input held invalid bytes raw. */
#include "fuzz.h"

#include "cloze/hf.h"
#include "cloze/json.h"

static int walk(const cz_json *v, int depth) {
    FUZZ_CHECK(depth <= 66, "tree deeper than the parser allows");
    int n = 0;
    for (const cz_json *c = v->child; c; c = c->next) {
        n++;
        if (v->type == CZ_JSON_OBJECT) {
            FUZZ_CHECK(c->key != NULL, "object member without a key");
            FUZZ_CHECK(cz_json_get(v, c->key) != NULL, "member '%s' not found", c->key);
        }
        walk(c, depth + 1);
    }
    FUZZ_CHECK(n == v->count, "%d children, count says %d", n, v->count);
    if (v->type == CZ_JSON_STRING) FUZZ_CHECK(v->string && v->string[v->len] == 0, "string end");
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cz_error err;
    cz_json *root = NULL;
    if (cz_json_parse((const char *)data, size, &root, &err) == 0) {
        walk(root, 0);
        cz_json_get_string(root, "model_type");
        cz_json_get_number(root, "hidden_size", 0);
        cz_json_free(root);
    }
    /* config.json of a Hugging Face directory */
    fuzz_file("config.json", data, size);
    cz_model_config mc;
    char arch[64];
    cz_hf_read_config(fuzz_dir(), &mc, arch, sizeof arch, &err);
    /* cloze-prep's string decoder on every '"' of the input */
    const char *s = (const char *)data, *end = s + size;
    for (const char *q = memchr(s, '"', size); q; q = memchr(q + 1, '"', (size_t)(end - q - 1))) {
        for (unsigned flags = 0; flags < 2; flags++) {
            cz_buf out = {0};
            const char *p = q;
            int rc = cz_json_string(&p, end, flags | CZ_JSON_RAW_CONTROL, &out, &err);
            FUZZ_CHECK(p >= q && p <= end, "position outside the input");
            if (rc == 0) FUZZ_CHECK(p > q && p[-1] == '"', "a string ends after its quote");
            cz_buf_free(&out);
        }
        if (end - q <= 1) break;
    }
    return 0;
}
