/* safetensors: a model's weights round-trip bit for bit; the file layout is
 * the published one (checked byte by byte here, independently of the
 * reader); truncated files, wrong shapes, wrong dtypes and missing tensors
 * fail with a message naming the file and the tensor or offset. */
#include <unistd.h>

#include "cloze/safetensors.h"
#include "test_model_fixture.h"

static char dir[256];

static void path_of(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void expect_error(int rc, const cz_error *err, const char *a, const char *b) {
    CHECK(rc == -1);
    printf("  error as expected: %s\n", err->msg);
    CHECK(strstr(err->msg, a) != NULL);
    CHECK(b == NULL || strstr(err->msg, b) != NULL);
}

static void write_raw(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    fclose(f);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cz_st_test.XXXXXX");
    CHECK(mkdtemp(dir));
    cz_error err;
    cz_model_config c = tiny_config(CZ_ARCH_BERT, 50, 16, 2, 2, 16);
    cz_model *a, *b;
    CHECK(cz_model_create(&a, &c, 1, 8, 2, NULL, &err) == 0);
    CHECK(cz_model_create(&b, &c, 1, 8, 2, NULL, &err) == 0);
    cz_model_init_weights(a, 1);
    cz_model_init_weights(b, 2);
    size_t n = cz_model_num_params(a);
    CHECK(memcmp(cz_model_params(a), cz_model_params(b), n * 4) != 0);

    char path[512], bad[512];
    path_of(path, sizeof path, "model.safetensors");
    CHECK(cz_model_save_safetensors(a, path, &err) == 0);
    CHECK(cz_model_load_safetensors(b, path, &err) == 0);
    CHECK(memcmp(cz_model_params(a), cz_model_params(b), n * 4) == 0);
    printf("round trip: %d tensors, %zu floats identical\n", cz_model_num_tensors(a), n);

    /* layout: 8-byte LE length, JSON header (8-aligned), then data; the
     * word embedding row 3 sits at its data_offsets */
    void *file;
    size_t len;
    CHECK(cz_read_file(path, &file, &len, &err) == 0);
    const unsigned char *u = file;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)u[i] << (8 * i);
    CHECK(hl % 8 == 0 && 8 + hl + n * 4 == len && u[8] == '{');
    const char *hdr = (const char *)u + 8;
    const char *key = strstr(hdr, "\"bert.embeddings.word_embeddings.weight\"");
    CHECK(key && key < hdr + hl);
    unsigned long long ob, oe;
    const char *offs = strstr(key, "\"data_offsets\":[");
    CHECK(offs && sscanf(offs, "\"data_offsets\":[%llu,%llu]", &ob, &oe) == 2);
    CHECK(oe - ob == 50 * 16 * 4);
    CHECK(strstr(key, "\"shape\":[50,16]") && strstr(hdr, "\"__metadata__\":{\"format\":\"pt\""));
    const cz_tensor_info *we = cz_model_find_tensor(a, "bert.embeddings.word_embeddings.weight");
    CHECK(memcmp(u + 8 + hl + ob + 3 * 16 * 4, cz_model_params(a) + we->offset + 3 * 16, 64) == 0);

    /* truncated: the last tensor's data runs past the end */
    path_of(bad, sizeof bad, "truncated.safetensors");
    write_raw(bad, u, len - 100);
    expect_error(cz_model_load_safetensors(b, bad, &err), &err, bad, "truncated");
    write_raw(bad, u, 5);
    expect_error(cz_model_load_safetensors(b, bad, &err), &err, bad, "too short");
    write_raw(bad, u, 8 + hl / 2); /* header cut in half */
    expect_error(cz_model_load_safetensors(b, bad, &err), &err, bad, "header length");
    cz_free(file);

    /* missing tensor, wrong shape, wrong dtype: write with an altered table */
    int nt = cz_model_num_tensors(a);
    cz_tensor_info *t = malloc((size_t)nt * sizeof *t);
    for (int i = 0; i < nt; i++) t[i] = *cz_model_tensor(a, i);
    path_of(bad, sizeof bad, "missing.safetensors");
    CHECK(cz_safetensors_write(bad, t, nt - 1, cz_model_params(a), NULL, 0, &err) == 0);
    expect_error(cz_model_load_safetensors(b, bad, &err), &err, bad, t[nt - 1].name);
    CHECK(strstr(err.msg, "missing"));
    int k = 0; /* swap the shape of a non-square 2-D tensor */
    while (t[k].ndim != 2 || t[k].shape[0] == t[k].shape[1]) k++;
    int s0 = t[k].shape[0];
    t[k].shape[0] = t[k].shape[1];
    t[k].shape[1] = s0;
    path_of(bad, sizeof bad, "shape.safetensors");
    CHECK(cz_safetensors_write(bad, t, nt, cz_model_params(a), NULL, 0, &err) == 0);
    expect_error(cz_model_load_safetensors(b, bad, &err), &err, bad, t[k].name);
    CHECK(strstr(err.msg, "shape"));
    free(t);
    const char *f16 = "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    unsigned char buf[256] = {0};
    uint64_t l16 = strlen(f16);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(l16 >> (8 * i));
    memcpy(buf + 8, f16, l16);
    path_of(bad, sizeof bad, "dtype.safetensors");
    write_raw(bad, buf, 8 + l16 + 4);
    cz_tensor_info x = {.name = "x", .offset = 0, .numel = 2, .ndim = 1, .shape = {2, 0}};
    float xv[2];
    expect_error(cz_safetensors_read(bad, &x, 1, xv, &err), &err, bad, "F16");
    const char *broken = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2] \"data_offsets\":[0,8]}}";
    l16 = strlen(broken);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(l16 >> (8 * i));
    memcpy(buf + 8, broken, l16);
    path_of(bad, sizeof bad, "json.safetensors");
    write_raw(bad, buf, 8 + l16 + 8);
    expect_error(cz_safetensors_read(bad, &x, 1, xv, &err), &err, bad, "byte");

    /* config.json with Hugging Face names */
    path_of(path, sizeof path, "config.json");
    CHECK(cz_hf_config_write(path, &c, &err) == 0);
    char *text;
    CHECK(cz_read_file(path, (void **)&text, &len, &err) == 0);
    CHECK(strstr(text, "\"hidden_size\": 16") && strstr(text, "\"num_hidden_layers\": 2") &&
          strstr(text, "\"intermediate_size\": 64") && strstr(text, "\"hidden_act\": \"gelu\"") &&
          strstr(text, "\"type_vocab_size\": 2") && strstr(text, "\"layer_norm_eps\": 1e-12"));
    cz_free(text);
    cz_model_config g = tiny_config(CZ_ARCH_GPT, 50, 16, 3, 2, 16);
    CHECK(cz_hf_config_write(path, &g, &err) == 0);
    CHECK(cz_read_file(path, (void **)&text, &len, &err) == 0);
    CHECK(strstr(text, "\"n_embd\": 16") && strstr(text, "\"n_layer\": 3") &&
          strstr(text, "\"afn\": \"gelu\"") && strstr(text, "\"layer_norm_epsilon\": 1e-05"));
    cz_free(text);

    cz_model_free(a);
    cz_model_free(b);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
