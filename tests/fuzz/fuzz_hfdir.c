/* A Hugging Face model directory as import-hf and model.init_from read it
 * before anything is allocated (src/ckpt/hf.c): config.json
 * (cz_hf_read_config), then model.safetensors's header against it
 * (cz_hf_check_weights). Input: a 4-byte little-endian length n, config.json
 * (n bytes), then model.safetensors (the rest).
 * Property: a directory that passes describes a model no larger than its
 * weights file (the embeddings' and every layer's two largest matrices,
 * which the check finds in the file, in floats: at most the file's bytes /
 * 4), so that a hostile config.json cannot make the reader allocate more
 * than the files hold (issue 46). */
#include "fuzz.h"

#include "cloze/hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    size_t n =
        (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (n > size - 4) return 0;
    fuzz_file("config.json", data + 4, n);
    fuzz_file("model.safetensors", data + 4 + n, size - 4 - n);
    cz_model_config c;
    cz_error err;
    char arch[64];
    if (cz_hf_read_config(fuzz_dir(), &c, arch, sizeof arch, &err) != 0) return 0;
    if (cz_hf_check_weights(fuzz_dir(), &c, &err) != 0) return 0;
    double H = c.hidden, in = c.intermediate, L = c.layers;
    double rows =
        (double)c.vocab_size + c.max_positions + (c.arch == CZ_ARCH_BERT ? c.type_vocab_size : 0);
    double layer = c.arch == CZ_ARCH_BERT ? H * H + in * H : 3 * H * H + H * in;
    double floats = rows * H + L * layer;
    FUZZ_CHECK(floats <= (double)(size - 4 - n) / 4,
               "config.json (vocab %d, hidden %d, layers %d, intermediate %d) passed with %.0f "
               "floats in a %zu-byte file",
               c.vocab_size, c.hidden, c.layers, c.intermediate, floats, size - 4 - n);
    return 0;
}
