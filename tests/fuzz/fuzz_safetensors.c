/* The safetensors reader (src/ckpt/safetensors.c): the header length, the
 * JSON header, every tensor's dtype, shape and data range. Each F32 tensor
 * of at most 2 dimensions and 1 Mi elements is loaded as a model tensor of
 * its own shape would be, and once with a shape off by one (refused).
 * Property: what loads lies inside the file's data section. */
#include "fuzz.h"

#include "cloze/safetensors.h"

static volatile float fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("model.safetensors", data, size);
    cz_st_file f;
    cz_error err;
    if (cz_safetensors_open(&f, path, &err) != 0) return 0;
    for (int i = 0; i < f.n && i < 64; i++) {
        const cz_st_entry *e = &f.entries[i];
        FUZZ_CHECK(cz_safetensors_find(&f, e->name) >= 0, "tensor %s not found by name", e->name);
        if (e->ndim < 1 || e->ndim > 2 || e->shape[0] == 0 || e->shape[0] > (1u << 20) ||
            (e->ndim == 2 && (e->shape[1] == 0 || e->shape[0] * e->shape[1] > (1u << 20))))
            continue;
        cz_tensor_info t;
        memset(&t, 0, sizeof t);
        snprintf(t.name, sizeof t.name, "%s", e->name);
        t.ndim = e->ndim;
        t.shape[0] = (int)e->shape[0];
        t.shape[1] = e->ndim == 2 ? (int)e->shape[1] : 1;
        t.numel = (size_t)t.shape[0] * (size_t)t.shape[1];
        float *buf = malloc((t.numel + 1) * sizeof *buf);
        if (cz_safetensors_load(&f, i, &t, buf, &err) == 0) {
            FUZZ_CHECK(!strcmp(e->dtype, "F32") && e->end <= f.payload_len &&
                           e->end - e->begin == t.numel * 4,
                       "tensor %s loaded from [%llu, %llu) of a %llu-byte data section", e->name,
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)f.payload_len);
            float sum = 0; /* reads every loaded float (ASan checks the buffer) */
            for (size_t k = 0; k < t.numel; k++) sum += buf[k];
            fuzz_sink = sum;
        }
        t.shape[0] += 1; /* a mismatched shape is refused */
        t.numel += (size_t)t.shape[1];
        float *big = malloc((t.numel + 1) * sizeof *big);
        FUZZ_CHECK(cz_safetensors_load(&f, i, &t, big, &err) != 0, "shape mismatch accepted");
        free(big);
        free(buf);
    }
    cz_safetensors_close(&f);
    return 0;
}
