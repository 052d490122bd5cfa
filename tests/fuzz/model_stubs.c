/* model_stubs: the model functions src/ckpt refers to when it writes or
 * reads a model (cz_model_save_safetensors, cz_hf_export and its µP check,
 * cz_ckpt_get_params). The fuzz build has no model and no kernels, and no
 * harness reaches a model: reaching one is a bug. */
#include <stdio.h>
#include <stdlib.h>

#include "cloze/model.h"

static void unreachable(const char *f) {
    fprintf(stderr, "fuzz build: %s is not part of it\n", f);
    abort();
}

float *cz_model_params(cz_model *m) {
    unreachable("cz_model_params");
    return NULL;
}
int cz_model_num_tensors(const cz_model *m) {
    unreachable("cz_model_num_tensors");
    return 0;
}
const cz_tensor_info *cz_model_tensor(const cz_model *m, int i) {
    unreachable("cz_model_tensor");
    return NULL;
}
const cz_model_config *cz_model_get_config(const cz_model *m) {
    unreachable("cz_model_get_config");
    return NULL;
}
size_t cz_model_num_params(const cz_model *m) {
    unreachable("cz_model_num_params");
    return 0;
}
size_t cz_model_embeddings_begin(const cz_model *m) {
    unreachable("cz_model_embeddings_begin");
    return 0;
}
double cz_model_width_mult(const cz_model_config *c) {
    unreachable("cz_model_width_mult");
    return 1.0;
}
float cz_model_output_mult(const cz_model *m) {
    unreachable("cz_model_output_mult");
    return 1.0f;
}
float cz_model_attn_scale(const cz_model_config *c) {
    unreachable("cz_model_attn_scale");
    return 1.0f;
}
