/* safetensors writer and reader (format: include/cloze/safetensors.h), and
 * the Hugging Face config.json writer. The header parser understands just
 * the JSON that safetensors uses: objects, arrays, strings, integers. */
#include "cloze/safetensors.h"
#include "cloze/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- a growing text buffer ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* a JSON string literal; tensor names and metadata need only " and \ escaped */
static void sb_json_string(sbuf *b, const char *s) {
    sb_printf(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            sb_printf(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            sb_printf(b, "\\u%04x", (unsigned char)*s);
        else
            sb_printf(b, "%c", *s);
    }
    sb_printf(b, "\"");
}

/* ---- writer ---- */

int cz_safetensors_write(const char *path, const cz_tensor_info *tensors, int n, const float *base,
                         const char *const *meta, int n_meta, cz_error *err) {
    sbuf h = {0};
    size_t data_bytes = 0;
    sb_printf(&h, "{");
    if (n_meta > 0) {
        sb_printf(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            sb_printf(&h, i ? "," : "");
            sb_json_string(&h, meta[2 * i]);
            sb_printf(&h, ":");
            sb_json_string(&h, meta[2 * i + 1]);
        }
        sb_printf(&h, "}");
    }
    for (int i = 0; i < n; i++) {
        const cz_tensor_info *t = &tensors[i];
        sb_printf(&h, (i || n_meta > 0) ? "," : "");
        sb_json_string(&h, t->name);
        sb_printf(&h, ":{\"dtype\":\"F32\",\"shape\":[%d", t->shape[0]);
        if (t->ndim == 2) sb_printf(&h, ",%d", t->shape[1]);
        sb_printf(&h, "],\"data_offsets\":[%zu,%zu]}", data_bytes, data_bytes + t->numel * 4);
        data_bytes += t->numel * 4;
    }
    sb_printf(&h, "}");
    while (!h.failed && h.len % 8) sb_printf(&h, " "); /* data starts 8-byte aligned */
    if (h.failed) {
        free(h.p);
        return cz_fail(err, "%s: out of memory for the header", path);
    }
    size_t total = 8 + h.len + data_bytes;
    unsigned char *buf = cz_alloc(total, err);
    if (!buf) {
        free(h.p);
        return cz_fail_prefix(err, "%s", path);
    }
    uint64_t hl = h.len;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i)); /* little-endian */
    memcpy(buf + 8, h.p, h.len);
    free(h.p);
    unsigned char *d = buf + 8 + hl;
    for (int i = 0; i < n; i++) {
        memcpy(d, base + tensors[i].offset, tensors[i].numel * 4); /* x86: already LE */
        d += tensors[i].numel * 4;
    }
    int rc = cz_write_file_atomic(path, buf, total, err);
    cz_free(buf);
    return rc;
}

/* ---- header parser ---- */

typedef struct json {
    const char *start, *s, *end;
    const char *path;
    cz_error *err;
} json;

static void skip_ws(json *j) {
    j->s = cz_json_ws(j->s, j->end);
}

static int jfail(json *j, const char *what) {
    /* header bytes count from 8, the first byte after the length */
    return cz_fail(j->err, "%s: header, file byte %zu: %s", j->path, (size_t)(j->s - j->start) + 8,
                   what);
}

static int expect(json *j, char c) {
    skip_ws(j);
    if (j->s >= j->end || *j->s != c) {
        char what[32];
        snprintf(what, sizeof what, "expected '%c'", c);
        return jfail(j, what);
    }
    j->s++;
    return 0;
}

/* A fixed buffer, the string truncated to its size - 1 bytes. */
typedef struct strbuf {
    char *o;
    size_t n, cap;
} strbuf;

static int strbuf_emit(void *ctx, const char *s, size_t n, cz_error *err) {
    (void)err;
    strbuf *b = ctx;
    size_t room = b->cap - 1 - b->n;
    if (n > room) n = room;
    memcpy(b->o + b->n, s, n);
    b->n += n;
    return 0;
}

/* Reads a string into out (decoded, truncated to cap-1 bytes). */
static int parse_string(json *j, char *out, size_t cap) {
    skip_ws(j);
    if (j->s >= j->end || *j->s != '"') return expect(j, '"');
    strbuf b = {out, 0, cap};
    cz_error e;
    if (cz_json_decode_string(&j->s, j->end, 0, strbuf_emit, &b, &e) != 0) return jfail(j, e.msg);
    out[b.n] = 0;
    return 0;
}

static int parse_u64(json *j, uint64_t *v) {
    skip_ws(j);
    if (j->s >= j->end || *j->s < '0' || *j->s > '9') return jfail(j, "expected an integer");
    uint64_t x = 0;
    while (j->s < j->end && *j->s >= '0' && *j->s <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return jfail(j, "integer too large");
        x = x * 10 + (uint64_t)(*j->s++ - '0');
    }
    *v = x;
    return 0;
}

/* [a, b, ...] of at most cap integers */
static int parse_int_array(json *j, uint64_t *v, int cap, int *count) {
    if (expect(j, '[')) return -1;
    *count = 0;
    skip_ws(j);
    if (j->s < j->end && *j->s == ']') {
        j->s++;
        return 0;
    }
    for (;;) {
        uint64_t x = 0;
        if (parse_u64(j, &x)) return -1;
        if (*count == cap) return jfail(j, "array too long");
        v[(*count)++] = x;
        skip_ws(j);
        if (j->s < j->end && *j->s == ',') {
            j->s++;
            continue;
        }
        return expect(j, ']');
    }
}

/* skips one value of any kind (the metadata object) */
static int skip_value(json *j, int depth) {
    skip_ws(j);
    if (j->s >= j->end) return jfail(j, "unexpected end");
    if (depth > 16) return jfail(j, "nested too deep");
    char c = *j->s;
    if (c == '"') {
        char tmp[8];
        return parse_string(j, tmp, sizeof tmp);
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->s++;
        skip_ws(j);
        if (j->s < j->end && *j->s == close) {
            j->s++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                char tmp[8];
                if (parse_string(j, tmp, sizeof tmp) || expect(j, ':')) return -1;
            }
            if (skip_value(j, depth + 1)) return -1;
            skip_ws(j);
            if (j->s < j->end && *j->s == ',') {
                j->s++;
                continue;
            }
            return expect(j, close);
        }
    }
    while (j->s < j->end && *j->s != ',' && *j->s != '}' && *j->s != ']') j->s++;
    return 0;
}

/* The entry's fields; the name was read by the caller. */
static int parse_entry(json *j, cz_st_entry *e) {
    if (expect(j, '{')) return -1;
    e->dtype[0] = 0;
    e->ndim = -1;
    int n_offsets = -1;
    for (;;) {
        char key[32];
        if (parse_string(j, key, sizeof key) || expect(j, ':')) return -1;
        int rc;
        if (!strcmp(key, "dtype")) {
            rc = parse_string(j, e->dtype, sizeof e->dtype);
        } else if (!strcmp(key, "shape")) {
            rc = parse_int_array(j, e->shape, 8, &e->ndim);
        } else if (!strcmp(key, "data_offsets")) {
            uint64_t o[2];
            rc = parse_int_array(j, o, 2, &n_offsets);
            e->begin = o[0];
            e->end = o[1];
        } else {
            rc = skip_value(j, 1);
        }
        if (rc) return -1;
        skip_ws(j);
        if (j->s < j->end && *j->s == ',') {
            j->s++;
            continue;
        }
        if (expect(j, '}')) return -1;
        break;
    }
    if (!e->dtype[0] || e->ndim < 0 || n_offsets != 2)
        return cz_fail(j->err, "%s: tensor %s: dtype, shape or data_offsets missing", j->path,
                       e->name);
    if (e->end < e->begin)
        return cz_fail(j->err, "%s: tensor %s: data_offsets [%llu,%llu] run backwards", j->path,
                       e->name, (unsigned long long)e->begin, (unsigned long long)e->end);
    return 0;
}

/* Bytes per element of the dtypes safetensors defines; 0 for others. */
static uint64_t dtype_bytes(const char *d) {
    static const struct {
        const char *name;
        uint64_t bytes;
    } t[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},    {"I64", 8},
             {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},      {"BOOL", 1},
             {"U16", 2}, {"U32", 4}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(d, t[i].name)) return t[i].bytes;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const cz_st_entry *)a)->name, ((const cz_st_entry *)b)->name);
}

static int by_begin(const void *a, const void *b) {
    uint64_t x = ((const cz_st_entry *)a)->begin, y = ((const cz_st_entry *)b)->begin;
    return x < y ? -1 : x > y;
}

/* What every entry must satisfy before anything trusts its shape (the
 * safetensors format's own rules): its data inside the file's data section,
 * as many bytes as its shape and dtype say, no two sharing a byte, and its
 * name listed once. Then the tensors' sizes add up to at most the file's:
 * a hostile header is refused here, before a caller sizes anything by it. */
static int check_entries(cz_st_file *f, cz_error *err) {
    for (int i = 0; i < f->n; i++) {
        const cz_st_entry *e = &f->entries[i];
        uint64_t numel = 1;
        for (int k = 0; k < e->ndim; k++) {
            if (e->shape[k] && numel > UINT64_MAX / 8 / e->shape[k])
                return cz_fail(err, "%s: tensor %s: shape too large for any file", f->path,
                               e->name);
            numel *= e->shape[k];
        }
        if (e->end > f->payload_len)
            return cz_fail(
                err, "%s: tensor %s: data ends at byte %llu, the file has %llu (truncated?)",
                f->path, e->name, (unsigned long long)e->end, (unsigned long long)f->payload_len);
        uint64_t size = dtype_bytes(e->dtype);
        if (size && e->end - e->begin != numel * size)
            return cz_fail(err,
                           "%s: tensor %s: data_offsets [%llu,%llu] hold %llu bytes, its shape "
                           "and dtype %s need %llu",
                           f->path, e->name, (unsigned long long)e->begin,
                           (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                           e->dtype, (unsigned long long)(numel * size));
    }
    if (f->n < 2) return 0;
    cz_st_entry *sorted = malloc((size_t)f->n * sizeof *sorted);
    if (!sorted) return cz_fail(err, "%s: out of memory", f->path);
    memcpy(sorted, f->entries, (size_t)f->n * sizeof *sorted);
    qsort(sorted, (size_t)f->n, sizeof *sorted, by_name);
    int rc = 0;
    for (int i = 1; i < f->n && rc == 0; i++)
        if (!strcmp(sorted[i].name, sorted[i - 1].name))
            rc = cz_fail(err, "%s: tensor %s is listed twice in the header", f->path,
                         sorted[i].name);
    qsort(sorted, (size_t)f->n, sizeof *sorted, by_begin);
    int last = -1; /* the non-empty tensor that ends last so far (empty ones hold no byte) */
    for (int i = 0; i < f->n && rc == 0; i++) {
        if (sorted[i].begin == sorted[i].end) continue;
        if (last >= 0 && sorted[i].begin < sorted[last].end)
            rc = cz_fail(err,
                         "%s: tensors %s and %s share bytes (data_offsets [%llu,%llu] and "
                         "[%llu,%llu])",
                         f->path, sorted[last].name, sorted[i].name,
                         (unsigned long long)sorted[last].begin,
                         (unsigned long long)sorted[last].end, (unsigned long long)sorted[i].begin,
                         (unsigned long long)sorted[i].end);
        if (last < 0 || sorted[i].end > sorted[last].end) last = i;
    }
    free(sorted);
    return rc;
}

/* Parses the header at u (hl bytes after the 8-byte length) into f. */
static int parse_header(cz_st_file *f, const unsigned char *u, uint64_t hl, cz_error *err) {
    const char *path = f->path;
    json j = {(const char *)u + 8, (const char *)u + 8, (const char *)u + 8 + hl, path, err};
    if (expect(&j, '{')) return -1;
    skip_ws(&j);
    int empty = j.s < j.end && *j.s == '}';
    int cap = 0;
    while (!empty) {
        cz_st_entry e;
        memset(&e, 0, sizeof e);
        if (parse_string(&j, e.name, sizeof e.name) || expect(&j, ':')) return -1;
        if (!strcmp(e.name, "__metadata__")) {
            if (skip_value(&j, 1)) return -1;
        } else {
            if (parse_entry(&j, &e)) return -1;
            if (f->n == cap) {
                cap = cap ? 2 * cap : 64;
                cz_st_entry *ne = realloc(f->entries, (size_t)cap * sizeof *ne);
                if (!ne) return cz_fail(err, "%s: out of memory", path);
                f->entries = ne;
            }
            f->entries[f->n++] = e;
        }
        skip_ws(&j);
        if (j.s < j.end && *j.s == ',') {
            j.s++;
            continue;
        }
        if (expect(&j, '}')) return -1;
        break;
    }
    return check_entries(f, err);
}

int cz_safetensors_open(cz_st_file *f, const char *path, cz_error *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    if (cz_read_file(path, &f->data, &f->len, err)) return -1;
    const unsigned char *u = f->data;
    if (f->len < 8) {
        cz_fail(err, "%s: %zu bytes, too short for the 8-byte header length", path, f->len);
        goto fail;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)u[i] << (8 * i);
    if (hl > f->len - 8) {
        cz_fail(err, "%s: header length %llu exceeds the file (%zu bytes)", path,
                (unsigned long long)hl, f->len);
        goto fail;
    }
    f->payload = u + 8 + hl;
    f->payload_len = f->len - 8 - hl;
    if (parse_header(f, u, hl, err)) goto fail;
    return 0;
fail:
    cz_safetensors_close(f);
    return -1;
}

int cz_safetensors_open_header(cz_st_file *f, const char *path, cz_error *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *fp = fopen(path, "rb");
    if (!fp) return cz_fail(err, "%s: %s", path, strerror(errno));
    unsigned char *u = NULL;
    int rc = -1;
    unsigned char len8[8];
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        cz_fail(err, "%s: %s", path, strerror(errno));
    } else if (fread(len8, 1, 8, fp) != 8) {
        cz_fail(err, "%s: %lld bytes, too short for the 8-byte header length", path,
                (long long)st.st_size);
    } else {
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
        f->len = (size_t)st.st_size;
        if (hl > f->len - 8) {
            cz_fail(err, "%s: header length %llu exceeds the file (%zu bytes)", path,
                    (unsigned long long)hl, f->len);
        } else if (!(u = malloc(8 + hl + 1))) {
            cz_fail(err, "%s: out of memory for a %llu-byte header", path, (unsigned long long)hl);
        } else if (fread(u + 8, 1, hl, fp) != hl) {
            cz_fail(err, "%s: header cut short", path);
        } else {
            memcpy(u, len8, 8);
            f->payload_len = f->len - 8 - hl;
            rc = parse_header(f, u, hl, err);
        }
    }
    free(u);
    fclose(fp);
    if (rc) cz_safetensors_close(f);
    return rc;
}

void cz_safetensors_close(cz_st_file *f) {
    free(f->entries);
    cz_free(f->data);
    f->entries = NULL;
    f->data = NULL;
    f->n = 0;
}

int cz_safetensors_find(const cz_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->entries[i].name, name)) return i;
    return -1;
}

int cz_safetensors_load(const cz_st_file *f, int i, const cz_tensor_info *t, float *base,
                        cz_error *err) {
    const cz_st_entry *e = &f->entries[i];
    const char *path = f->path;
    if (strcmp(e->dtype, "F32"))
        return cz_fail(err, "%s: tensor %s: dtype %s, expected F32", path, e->name, e->dtype);
    int shape_ok = e->ndim == t->ndim && (uint64_t)t->shape[0] == e->shape[0] &&
                   (t->ndim < 2 || (uint64_t)t->shape[1] == e->shape[1]);
    if (!shape_ok) {
        char got[96] = "";
        for (int k = 0; k < e->ndim && k < 8; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", k ? "," : "",
                     (unsigned long long)e->shape[k]);
        char want[48];
        if (t->ndim == 2)
            snprintf(want, sizeof want, "%d,%d", t->shape[0], t->shape[1]);
        else
            snprintf(want, sizeof want, "%d", t->shape[0]);
        return cz_fail(err, "%s: tensor %s: shape [%s], expected [%s] for %s", path, e->name, got,
                       want, t->name);
    }
    if (e->end - e->begin != (uint64_t)t->numel * 4)
        return cz_fail(err, "%s: tensor %s: data_offsets [%llu,%llu] do not hold %zu floats", path,
                       e->name, (unsigned long long)e->begin, (unsigned long long)e->end, t->numel);
    if (e->end > f->payload_len || !f->payload)
        return cz_fail(err, "%s: tensor %s: data ends at byte %llu, file has %llu (truncated?)",
                       path, e->name, (unsigned long long)e->end,
                       (unsigned long long)f->payload_len);
    memcpy(base + t->offset, f->payload + e->begin, t->numel * 4);
    return 0;
}

int cz_safetensors_read(const char *path, const cz_tensor_info *tensors, int n, float *base,
                        cz_error *err) {
    cz_st_file f;
    if (cz_safetensors_open(&f, path, err)) return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int k = cz_safetensors_find(&f, tensors[i].name);
        if (k < 0)
            rc = cz_fail(err, "%s: tensor %s missing", path, tensors[i].name);
        else
            rc = cz_safetensors_load(&f, k, &tensors[i], base, err);
    }
    cz_safetensors_close(&f);
    return rc;
}

/* ---- model convenience ---- */

static int model_tensor_list(cz_model *m, cz_tensor_info **out, cz_error *err) {
    int n = cz_model_num_tensors(m);
    *out = cz_alloc((size_t)n * sizeof **out, err);
    if (!*out) return -1;
    for (int i = 0; i < n; i++) (*out)[i] = *cz_model_tensor(m, i);
    return n;
}

int cz_model_save_safetensors(cz_model *m, const char *path, cz_error *err) {
    cz_tensor_info *t;
    int n = model_tensor_list(m, &t, err);
    if (n < 0) return -1;
    const char *meta[] = {"format", "pt", "producer", "cloze"};
    int rc = cz_safetensors_write(path, t, n, cz_model_params(m), meta, 2, err);
    cz_free(t);
    return rc;
}

int cz_model_load_safetensors(cz_model *m, const char *path, cz_error *err) {
    cz_tensor_info *t;
    int n = model_tensor_list(m, &t, err);
    if (n < 0) return -1;
    int rc = cz_safetensors_read(path, t, n, cz_model_params(m), err);
    cz_free(t);
    return rc;
}

/* ---- config.json ---- */

/* The shortest decimal that reads back as the same float (1e-12f prints as
 * "1e-12", not "9.99999996e-13"). */
static const char *short_float(char *buf, size_t cap, float v) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* The Hugging Face class whose state_dict names match the model's tensors. */
const char *cz_hf_architecture(const cz_model_config *c) {
    /* SIMILAR has no Hugging Face class (BERT has no such head; a fine-tuned
     * GPT is not exported, hf.c) */
    static const char *bert[] = {"BertForPreTraining",
                                 "BertModel",
                                 "BertForSequenceClassification",
                                 "BertForQuestionAnswering",
                                 "BertForTokenClassification",
                                 "BertModel",
                                 "BertForMultipleChoice"};
    static const char *gpt[] = {
        "OpenAIGPTLMHeadModel", "OpenAIGPTModel", "OpenAIGPTForSequenceClassification",
        "OpenAIGPTModel",       "OpenAIGPTModel", "OpenAIGPTModel",
        "OpenAIGPTModel"};
    static const char *gpt2[] = {"GPT2LMHeadModel", "GPT2Model", "GPT2ForSequenceClassification",
                                 "GPT2Model",       "GPT2Model", "GPT2Model",
                                 "GPT2Model"};
    int h = c->head >= CZ_HEAD_PRETRAIN && c->head <= CZ_HEAD_CHOICE ? c->head : 0;
    return c->arch == CZ_ARCH_BERT ? bert[h] : c->layout == CZ_LAYOUT_PRE_LN ? gpt2[h] : gpt[h];
}

int cz_hf_config_write(const char *path, const cz_model_config *c, cz_error *err) {
    sbuf b = {0};
    char hd[32], ad[32], ir[32], eps[32], labels[48] = "";
    if (c->head == CZ_HEAD_CLASSIFY || c->head == CZ_HEAD_TAG)
        snprintf(labels, sizeof labels, "  \"num_labels\": %d,\n", c->num_labels);
    short_float(hd, sizeof hd, c->hidden_dropout);
    short_float(ad, sizeof ad, c->attn_dropout);
    short_float(ir, sizeof ir, c->init_range);
    short_float(eps, sizeof eps, c->layer_norm_eps);
    if (c->arch == CZ_ARCH_BERT) {
        sb_printf(&b,
                  "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"bert\",\n%s"
                  "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                  "  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n"
                  "  \"hidden_act\": \"%s\",\n  \"hidden_dropout_prob\": %s,\n"
                  "  \"attention_probs_dropout_prob\": %s,\n"
                  "  \"max_position_embeddings\": %d,\n  \"type_vocab_size\": %d,\n"
                  "  \"initializer_range\": %s,\n  \"layer_norm_eps\": %s,\n"
                  "  \"tie_word_embeddings\": true\n}\n",
                  cz_hf_architecture(c), labels, c->vocab_size, c->hidden, c->layers, c->heads,
                  c->intermediate, c->gelu_tanh ? "gelu_new" : "gelu", hd, ad, c->max_positions,
                  c->type_vocab_size, ir, eps);
    } else if (c->layout == CZ_LAYOUT_PRE_LN) { /* GPT2Config's names */
        sb_printf(&b,
                  "{\n  \"architectures\": [\"%s\"],\n%s"
                  "  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n  \"n_embd\": %d,\n"
                  "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_positions\": %d,\n"
                  "  \"n_ctx\": %d,\n  \"n_inner\": %d,\n"
                  "  \"activation_function\": \"gelu_new\",\n  \"resid_pdrop\": %s,\n"
                  "  \"embd_pdrop\": %s,\n  \"attn_pdrop\": %s,\n  \"layer_norm_epsilon\": %s,\n"
                  "  \"initializer_range\": %s,\n  \"scale_attn_weights\": true,\n"
                  "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                  "  \"tie_word_embeddings\": %s\n}\n",
                  cz_hf_architecture(c), labels, c->vocab_size, c->hidden, c->layers, c->heads,
                  c->max_positions, c->max_positions, c->intermediate, hd, hd, ad, eps, ir,
                  c->untied_head ? "false" : "true");
    } else {
        sb_printf(&b,
                  "{\n  \"architectures\": [\"%s\"],\n%s"
                  "  \"model_type\": \"openai-gpt\",\n  \"vocab_size\": %d,\n  \"n_embd\": %d,\n"
                  "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_positions\": %d,\n"
                  "  \"afn\": \"%s\",\n  \"resid_pdrop\": %s,\n  \"embd_pdrop\": %s,\n"
                  "  \"attn_pdrop\": %s,\n  \"layer_norm_epsilon\": %s,\n"
                  "  \"initializer_range\": %s,\n  \"tie_word_embeddings\": %s\n}\n",
                  cz_hf_architecture(c), labels, c->vocab_size, c->hidden, c->layers, c->heads,
                  c->max_positions, c->gelu_tanh ? "gelu" : "gelu_exact", hd, hd, ad, eps, ir,
                  c->untied_head ? "false" : "true");
    }
    if (b.failed) {
        free(b.p);
        return cz_fail(err, "%s: out of memory", path);
    }
    int rc = cz_write_file_atomic(path, b.p, b.len, err);
    free(b.p);
    return rc;
}
