/* hf: Hugging Face model directories, both ways.
 *
 * A directory holds config.json (BertConfig / OpenAIGPTConfig / GPT2Config field names),
 * model.safetensors, and the tokenizer: vocab.txt (WordPiece) or vocab.json
 * + merges.txt (GPT-2 byte-level BPE), with tokenizer_config.json naming
 * the tokenizer class (BertTokenizer / GPT2Tokenizer: config.json's
 * model_type "openai-gpt" alone would make AutoTokenizer pick GPT-1's
 * tokenizer, which cloze does not use) and special_tokens_map.json.
 *
 * Export writes what AutoModelForPreTraining / AutoModelForCausalLM (or the
 * task model of a fine-tuned head) and AutoTokenizer load unchanged.
 * Import reads BertForPreTraining, BertModel (no "bert." prefix, no heads),
 * OpenAIGPTLMHeadModel, OpenAIGPTModel, GPT2LMHeadModel and GPT2Model
 * (model.layout = pre_ln); tensors the file lacks are an
 * error unless they are the model's heads, which keep their fresh
 * initialisation (and are reported). */
#ifndef CLOZE_HF_H
#define CLOZE_HF_H

#include "cloze/ckpt.h"
#include "cloze/core.h"
#include "cloze/model.h"

/* The tokenizer a model was trained with, as bytes: what export writes and
 * what a checkpoint carries (blobs "vocab.meta", "vocab.file" and, for
 * BPE, "vocab.merges"; see cz_hf_vocab_blobs). */
typedef struct cz_hf_vocab {
    char kind[16];     /* "wordpiece" | "bpe" */
    int lower_case;    /* wordpiece: 1 = uncased (lower-case + strip accents) */
    const void *vocab; /* vocab.txt, or encoder.json for bpe */
    size_t vocab_len;
    const void *merges; /* bpe: the merges (vocab.bpe / merges.txt) */
    size_t merges_len;
    char source[1024]; /* where it was read from, for messages */
    void *owned[2];    /* buffers to free (cz_hf_vocab_free) */
} cz_hf_vocab;

/* Reads the files (merges_path NULL for wordpiece). lower_case < 0: guess
 * from the vocabulary (uncased = no ASCII capital letter outside the
 * [BRACKETED] special tokens, as in BERT's uncased vocab.txt). */
int cz_hf_vocab_read(cz_hf_vocab *v, const char *kind, const char *vocab_path,
                     const char *merges_path, int lower_case, cz_error *err);
void cz_hf_vocab_free(cz_hf_vocab *v);
/* The tokenizer files of a Hugging Face directory: vocab.txt (casing from
 * tokenizer_config.json's do_lower_case, else guessed) or vocab.json +
 * merges.txt. 1 found, 0 none there, -1 error. */
int cz_hf_vocab_read_dir(cz_hf_vocab *v, const char *dir, cz_error *err);

/* The vocabulary's size (lines of vocab.txt, entries of encoder.json) and
 * its fingerprint as cloze-prep stores it in shards: FNV-1a 64 of
 * vocab.txt, or of the merges seeded with that of encoder.json. */
int cz_hf_vocab_identity(const cz_hf_vocab *v, uint32_t *size, uint64_t *fingerprint,
                         cz_error *err);

/* The checkpoint blobs that carry v: fills blobs[0..n) (n = 2 or 3) with
 * pointers into v and into meta (a text buffer of meta_cap bytes). */
int cz_hf_vocab_blobs(const cz_hf_vocab *v, char *meta, size_t meta_cap, cz_blob blobs[3]);
/* The vocabulary a checkpoint carries (pointers into c): 1 found, 0 none,
 * -1 malformed. */
int cz_hf_vocab_from_ckpt(cz_hf_vocab *v, const cz_ckpt *c, cz_error *err);

/* Reads DIR/config.json (model_type bert, openai-gpt or gpt2) into c; c->head
 * is PRETRAIN. architecture (may be NULL) receives architectures[0].
 * tie_word_embeddings = false is GPT's untied head (c->untied_head); a
 * field that changes the function in a way cloze's model has not (GPT-2's
 * scale_attn_weights = false or scale_attn_by_inverse_layer_idx = true,
 * BERT's untied decoder, is_decoder, cross-attention) is refused, and so are
 * values the model's rules refuse (cz_model_config_check). Errors name the
 * file and the field. */
int cz_hf_read_config(const char *dir, cz_model_config *c, char *architecture, size_t len,
                      cz_error *err);

/* DIR/model.safetensors's header against c (from DIR/config.json), before
 * a model of c is allocated: the layer count within what the file's tensor
 * count can hold, and the embeddings' and each layer's shapes equal to what
 * config.json says, so that the model made from c is no larger than the
 * file. Reads only the header. Errors name config.json and its field. */
int cz_hf_check_weights(const char *dir, const cz_model_config *c, cz_error *err);
/* config.json's field (GPT2Config's n_layer, BertConfig's
 * num_hidden_layers, ...) for key, a key of the model section ("layers"),
 * as c's model_type names it; NULL when config.json has none. */
const char *cz_hf_config_field(const cz_model_config *c, const char *key);
/* The error for a directory without model.safetensors (errno from stat). */
int cz_hf_load_missing(const char *dir, const char *path, cz_error *err);

typedef struct cz_hf_load_report {
    int loaded;           /* tensors of the model read from the file */
    int fresh;            /* head tensors the file lacks (left as initialised) */
    int ignored;          /* file tensors with no place: tied copies, buffers, other heads */
    char fresh_list[256]; /* their names, comma-separated (shortened) */
    int unprefixed;       /* 1: the file names tensors without "bert." / "transformer." */
} cz_hf_load_report;

/* Loads DIR/model.safetensors into m (whose configuration must match the
 * file's; cz_hf_read_config gives it). A padded word embedding
 * (model.vocab_pad_to) takes the file's vocab_size rows; its padding rows
 * are left as they are (0 after cz_model_init_weights). A NaN or
 * infinite value is refused naming the tensor. */
int cz_hf_load(cz_model *m, const char *dir, cz_hf_load_report *rep, cz_error *err);

/* Writes DIR (created if absent): model.safetensors, config.json and the
 * tokenizer files of v (NULL: no tokenizer files). The vocabulary must
 * have m's vocab_size entries. The word embedding is written with its
 * vocab_size rows, without the padding of model.vocab_pad_to. */
int cz_hf_export(cz_model *m, const cz_hf_vocab *v, const char *dir, cz_error *err);

/* The head of a fine-tuned checkpoint (blob "finetune.head", written by
 * cloze-finetune): cz_hf_head_text formats it, cz_hf_head_from_ckpt applies
 * it to mc (head, num_labels, lm_weight, vocab_size; 1 when the blob is
 * there, 0 when not: a pre-training checkpoint). */
void cz_hf_head_text(const cz_model_config *mc, char *buf, size_t cap);
/* Blob `name` (params, adam_m or adam_v) of checkpoint c (read from path)
 * into dst, m's parameter count of floats, in m's layout: moved from the
 * older layout where the file has no CZ_BLOB_LAYOUT blob. */
int cz_ckpt_get_params(const cz_ckpt *c, const char *path, const char *name, const cz_model *m,
                       float *dst, cz_error *err);
int cz_hf_head_from_ckpt(const cz_ckpt *c, cz_model_config *mc);

/* The task of a fine-tuned checkpoint (blob "finetune.task", "task NAME\n
 * labels A B ...": the classes in the order of the head's logits), the
 * one place that writes and reads it: cz_hf_task_text formats it;
 * cz_hf_task_from_ckpt reads the task's name (32 bytes) and up to cap
 * labels (32 bytes each) and returns how many, or -1 when the blob is
 * absent or not in this format. */
#define CZ_HF_LABEL_LEN 32
void cz_hf_task_text(const char *task, char (*labels)[CZ_HF_LABEL_LEN], int n, char *buf,
                     size_t cap);
int cz_hf_task_from_ckpt(const cz_ckpt *c, char *task, char (*labels)[CZ_HF_LABEL_LEN], int cap);

#endif
