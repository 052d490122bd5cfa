/* safetensors: the Hugging Face tensor file, so that a cloze model loads in
 * transformers (BertForPreTraining / OpenAIGPTLMHeadModel) and back.
 *
 * Format: u64 little-endian header length, a JSON header
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value"}}
 * padded with spaces to a multiple of 8 bytes, then the raw little-endian data;
 * offsets count from the first byte after the header. */
#ifndef CLOZE_SAFETENSORS_H
#define CLOZE_SAFETENSORS_H

#include "cloze/core.h"
#include "cloze/model.h"

/* Writes the n tensors found at base + tensors[i].offset (floats) atomically.
 * meta: n_meta (key, value) string pairs, stored in "__metadata__". */
int cz_safetensors_write(const char *path, const cz_tensor_info *tensors, int n, const float *base,
                         const char *const *meta, int n_meta, cz_error *err);

/* Reads every one of the n tensors by name into base + tensors[i].offset.
 * Checks dtype F32, the shape and the data range; tensors in the file that
 * are not asked for are ignored (e.g. the tied cls.predictions.decoder.weight).
 * Errors name the file and the tensor or byte offset. */
int cz_safetensors_read(const char *path, const cz_tensor_info *tensors, int n, float *base,
                        cz_error *err);

/* A safetensors file read into memory with its header parsed: every
 * tensor's name, dtype, shape and data range. Opening checks what the
 * format itself promises (each name once, each range inside the file and
 * as long as its shape and dtype say), so that a caller may size things
 * by the header's shapes. */
typedef struct cz_st_entry {
    char name[160];
    char dtype[16];
    int ndim;
    uint64_t shape[8];
    uint64_t begin, end; /* data_offsets, from the first byte after the header */
} cz_st_entry;

typedef struct cz_st_file {
    char path[1024];
    void *data;
    size_t len;
    const unsigned char *payload; /* the data section */
    uint64_t payload_len;
    cz_st_entry *entries;
    int n;
} cz_st_file;

int cz_safetensors_open(cz_st_file *f, const char *path, cz_error *err);
/* The header only (data NULL, payload NULL; payload_len from the file's
 * size): what a reader checks before it allocates anything by a shape. */
int cz_safetensors_open_header(cz_st_file *f, const char *path, cz_error *err);
void cz_safetensors_close(cz_st_file *f);
/* Index of the tensor called name, -1 when absent. */
int cz_safetensors_find(const cz_st_file *f, const char *name);
/* Copies entry i into base + t->offset after checking dtype F32, the shape
 * against t's and the data range. Errors name the file and both tensors. */
int cz_safetensors_load(const cz_st_file *f, int i, const cz_tensor_info *t, float *base,
                        cz_error *err);

/* The model's whole parameter buffer by its tensor names. */
int cz_model_save_safetensors(cz_model *m, const char *path, cz_error *err);
int cz_model_load_safetensors(cz_model *m, const char *path, cz_error *err);

/* The Hugging Face class whose state_dict names match the model's tensors
 * (BertForPreTraining, BertForSequenceClassification, ..., by cfg->head). */
const char *cz_hf_architecture(const cz_model_config *cfg);

/* config.json with Hugging Face field names (BertConfig / OpenAIGPTConfig). */
int cz_hf_config_write(const char *path, const cz_model_config *cfg, cz_error *err);

#endif
