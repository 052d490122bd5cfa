/* infer: what a trained model says. Text generation for the GPT models
 * (GPT-1's post-LN decoder and GPT-2's pre-LN layout) with a key-value
 * cache, the sampler it draws tokens with, and BERT's fill-mask.
 *
 * It runs on a model's parameters through the public model interface (the
 * tensors by their Hugging Face names, cz_model_find_tensor) and the
 * kernels; it never changes the parameters and keeps no state of the model
 * it reads, so cloze-train can sample from the model it is training between
 * two steps without changing the run (train.sample_every). Tokenizers come
 * from text; files, checkpoints and configurations are the caller's. */
#ifndef CLOZE_INFER_H
#define CLOZE_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "cloze/core.h"
#include "cloze/kernels.h"
#include "cloze/model.h"

/* ---- the sampler ----
 * How the next token is chosen from the logits z of the vocabulary, in the
 * order Hugging Face's generate() applies its logits processors:
 *   temperature <= 0 (or top_k = 1): greedy, the argmax (the lowest id
 *     among equal maxima);
 *   otherwise p = softmax(z / temperature); top_k > 0 keeps the k most
 *     probable tokens (ties to the lower id); 0 < top_p < 1 keeps the
 *     smallest set of most probable tokens whose probabilities sum to at
 *     least top_p (nucleus sampling, Holtzman et al. 2020, Sec. 3.1; always
 *     at least one); the kept probabilities are renormalised and a token is
 *     drawn by the inverse of their cumulative sum at a uniform u in [0, 1).
 * u is the caller's: Philox(seed, CZ_RNG_GENERATE, sequence, 0, 0) element
 * `index` in cz_generate, so a seed gives the same text on every run. */
typedef struct cz_sample_params {
    float temperature; /* 1 = the model's distribution; <= 0 greedy */
    int top_k;         /* 0 = all tokens */
    float top_p;       /* >= 1 or <= 0 = all tokens */
} cz_sample_params;

/* Scratch for cz_sample_token over a vocabulary of v tokens. */
typedef struct cz_prob_id {
    float p;
    int32_t id;
} cz_prob_id;
typedef struct cz_sampler {
    int v;
    cz_prob_id *top; /* [2v]: the kept tokens, most probable first; a heap */
} cz_sampler;

int cz_sampler_init(cz_sampler *s, int v, cz_error *err);
void cz_sampler_free(cz_sampler *s);
/* The token chosen from logits[0..v) (read only) with uniform u in [0,1).
 * When kept is not NULL, *kept receives the number of tokens the filters
 * left (1 for greedy), so a test can check the draw against them. */
int32_t cz_sample_token(cz_sampler *s, const float *logits, const cz_sample_params *p, double u,
                        int *kept);

/* ---- the GPT decoder with a key-value cache ----
 * Each layer keeps the keys and values of every position so far
 * ([batch, max_len, H] each), so a new token costs one position's work:
 * its own products and its attention over the cached keys (Vaswani et al.
 * 2017, Sec. 3.2.3's masked decoder run one position at a time). The
 * prompt runs as one block of positions (causal within it). The arithmetic
 * is the model's: HF's OpenAIGPTLMHeadModel (post-LN: h = LN(x + Attn(x)),
 * y = LN(h + MLP(h))) or GPT2LMHeadModel (pre-LN, then transformer.ln_f),
 * attention scaled by 1/sqrt(H/A), logits = x wte^T (the tied head) over
 * vocab_size tokens. Dropout is off. */
typedef struct cz_decoder cz_decoder;

/* A decoder for up to `batch` sequences of up to max_len positions
 * (<= model.max_positions) of GPT model m (its parameters are read at each
 * step, not copied). g runs the products. */
int cz_decoder_create(cz_decoder **out, cz_model *m, int batch, int max_len, const cz_gemm_ctx *g,
                      cz_error *err);
void cz_decoder_free(cz_decoder *d);
/* Forgets every position (the next step starts at position 0). */
void cz_decoder_reset(cz_decoder *d);
/* Positions cached so far (the same for every sequence). */
int cz_decoder_len(const cz_decoder *d);
/* Runs n new tokens of each of the decoder's sequences (tokens[b*n + i],
 * ids < vocab_size) at positions len .. len+n-1, appends their keys and
 * values to the cache, and points *logits at [batch, vocab_size]: the
 * logits of each sequence's last new token, valid until the next step. */
int cz_decoder_step(cz_decoder *d, const int32_t *tokens, int n, const float **logits,
                    cz_error *err);

/* ---- generation ---- */
typedef struct cz_generate_params {
    int max_new_tokens;
    cz_sample_params sample;
    uint64_t seed;
    int32_t eos_id; /* stop a sequence after it emits this id; < 0 never */
    int no_cache;   /* 1: run the whole prefix again at each step (the check
                       of the cache, and its cost) */
} cz_generate_params;

/* Called after each new token of sequence b (its ids so far, prompt
 * included); returns 0 to go on, -1 to stop everything. May be NULL. */
typedef int (*cz_token_fn)(void *ctx, int b, const int32_t *ids, int len);

/* Generates from `prompt` (n ids) for each of d's sequences: sequence b's
 * tokens are drawn with Philox(p->seed, CZ_RNG_GENERATE, b) so the batch
 * holds batch different samples (all equal when greedy). out[b] receives
 * max_len ids (prompt then new tokens), lens[b] how many. A sequence
 * stops at max_new_tokens or after eos_id; all stop at max_len. The
 * decoder is reset first. */
int cz_generate(cz_decoder *d, const int32_t *prompt, int n, const cz_generate_params *p,
                int32_t **out, int *lens, cz_token_fn fn, void *ctx, cz_error *err);

/* ---- BERT fill-mask ----
 * The masked-LM head of a BERT pre-training model on the sequence ids
 * (segment 0, every token real): the encoder's last hidden states from
 * cz_model_forward (m created with max_seq >= n and max_pred >= the
 * number of masks), then cls.predictions.transform (dense, GELU,
 * LayerNorm) and the tied decoder plus cls.predictions.bias, softmax in
 * double (Devlin et al. 2018, Sec. 3.1, Task #1; HF BertForMaskedLM). For
 * each position i with ids[i] == mask_id, in order: the top_k ids
 * (most probable first, ties to the lower id) and their probabilities. */
typedef struct cz_fill_result {
    int position;
    int32_t ids[64];
    double probs[64];
} cz_fill_result;

/* Returns the number of masks found (results in out[0 .. min(that,
 * max_out))), -1 on error (no mask, not a BERT pre-training model,
 * top_k outside [1, 64]). */
int cz_fill_mask(cz_model *m, const cz_gemm_ctx *g, const int32_t *ids, int n, int32_t mask_id,
                 int top_k, cz_fill_result *out, int max_out, cz_error *err);

#endif
