/* The table of every configuration key (see keys.h). Defaults follow BERT
 * (Devlin et al. 2018, Sec. 3 and App. A.2) and, where `def_gpt` is set,
 * GPT-1 (Radford et al. 2018, Sec. 4.1).
 *
 * A default that differs by architecture applies only when the key is not
 * given (in the file or with --set).
 *
 * .resume: REFUSED for a key whose change makes a resumed run another run
 * (the samples, the model, the optimisation, or what evaluation measures):
 * train.steps is one, since warm-up (warmup_fraction), the decay horizon and
 * the phase-2 start are all fractions of it. ACCEPTED for where and how it
 * runs (ranks, threads, micro-batches, kernels, communication, placement),
 * what it logs and when it checkpoints or stops (train.stop_after_steps is
 * the key that only says where to stop): the same run, equal up to float
 * summation order. */
#include "keys.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>

#define KEY(g, n, t, f)                                                                            \
    .group = g, .name = n, .type = t, .offset = offsetof(cz_config, f),                            \
    .size = sizeof(((cz_config *)0)->f)
#define NOMAX HUGE_VAL

/* Word-valued keys are C enums written through an int (CZ_KEY_WORD_INDEX):
 * the word list beside each enum (CZ_*_WORDS) is in value order. */
_Static_assert(sizeof(cz_arch) == sizeof(int), "cz_arch must be int-sized");
_Static_assert(sizeof(cz_recompute) == sizeof(int), "cz_recompute must be int-sized");
_Static_assert(sizeof(cz_layout) == sizeof(int), "cz_layout must be int-sized");
_Static_assert(sizeof(cz_parametrization) == sizeof(int), "cz_parametrization must be int-sized");
_Static_assert(sizeof(cz_gemm_choice) == sizeof(int), "cz_gemm_choice must be int-sized");
_Static_assert(sizeof(cz_ckpt_writer_choice) == sizeof(int),
               "cz_ckpt_writer_choice must be int-sized");
_Static_assert(sizeof(cz_optim_kind) == sizeof(int), "cz_optim_kind must be int-sized");
_Static_assert(sizeof(cz_schedule) == sizeof(int), "cz_schedule must be int-sized");
_Static_assert(sizeof(cz_placement) == sizeof(int), "cz_placement must be int-sized");
_Static_assert(sizeof(cz_allreduce_algo) == sizeof(int), "cz_allreduce_algo must be int-sized");
_Static_assert(sizeof(cz_grad_wire) == sizeof(int), "cz_grad_wire must be int-sized");
/* train.gemm offers the first three cz_gemm_choice values, in value order */
_Static_assert(CZ_GEMM_AUTO == 0 && CZ_GEMM_BLIS_DEFAULT == 1 && CZ_GEMM_REFERENCE == 2,
               "train.gemm words are auto|blis|reference");

const char *const cz_config_groups[] = {"model", "data", "train", "optim", "dist"};
const int cz_config_num_groups = 5;

const cz_key cz_config_keys[] = {
    /* ---- model: the network (BERT Sec. 3: L/H/A; GPT-1 Sec. 4.1) ---- */
    {KEY("model", "arch", CZ_KEY_WORD_INDEX, model.arch), .resume = CZ_RESUME_REFUSED,
     .def = "bert", .choices = CZ_ARCH_WORDS,
     .meaning = "bert: post-LN encoder, MLM + NSP heads; gpt: GPT-1 causal decoder, tied LM head"},
    {KEY("model", "vocab_size", CZ_KEY_INT, model.vocab_size), .resume = CZ_RESUME_REFUSED,
     .def = "30522", .def_gpt = "40478", .min = 1, .max = NOMAX,
     .meaning = "token vocabulary size; must match the tokenizer that wrote the shards"},
    {KEY("model", "layout", CZ_KEY_WORD_INDEX, model.layout), .resume = CZ_RESUME_REFUSED,
     .def = "post_ln", .choices = CZ_LAYOUT_WORDS,
     .meaning = "post_ln: LN after each residual sum (BERT, GPT-1); pre_ln: GPT-2's decoder "
                "(LN before each sub-layer, a final LN, residual projections initialised at "
                "init_range / sqrt(2 layers)), arch = gpt only"},
    {KEY("model", "vocab_pad_to", CZ_KEY_INT, model.vocab_pad_to), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 65536,
     .meaning = "GPT: word-embedding rows rounded up to a multiple of this (e.g. 64: GPT-2's "
                "50257 -> 50304) for the LM head's product; the padding is outside the "
                "softmax and the loss; 0 = none"},
    {KEY("model", "lm_head", CZ_KEY_WORD_INDEX, model.untied_head), .resume = CZ_RESUME_REFUSED,
     .def = "tied", .choices = "tied|untied",
     .meaning = "GPT's LM head: tied = the word embedding (GPT-1, GPT-2); untied = a matrix of "
                "its own, lm_head.weight (Hugging Face's tie_word_embeddings = false)"},
    {KEY("model", "parametrization", CZ_KEY_WORD_INDEX, model.parametrization),
     .resume = CZ_RESUME_REFUSED, .def = "standard", .choices = CZ_PARAMETRIZATION_WORDS,
     .meaning = "standard: one learning rate, init std init_range; mup: the Maximal Update "
                "Parametrization (mup's MuAdamW, MuReadout, 1/d attention) relative to "
                "mup_base_width, so that hyperparameters tuned at that width transfer"},
    {KEY("model", "mup_base_width", CZ_KEY_INT, model.mup_base_width), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 65536,
     .meaning = "mup: the hidden size at which every µP multiplier is 1 (the proxy model "
                "the hyperparameters were tuned on); required with parametrization = mup"},
    {KEY("model", "mup_attn_mult", CZ_KEY_FLOAT, model.mup_attn_mult), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 1e6,
     .meaning = "mup: attention logits q.k x mup_attn_mult / d_head (mup's 1/d rule); 0 = "
                "sqrt(mup_base_width / heads), the standard scale at the base width with a fixed "
                "head count; with heads growing at a fixed d_head give sqrt(d_head), e.g. 8"},
    {KEY("model", "hidden", CZ_KEY_INT, model.hidden), .resume = CZ_RESUME_REFUSED, .def = "768",
     .min = 1, .max = 65536, .meaning = "hidden size H"},
    {KEY("model", "layers", CZ_KEY_INT, model.layers), .resume = CZ_RESUME_REFUSED, .def = "12",
     .min = 1, .max = 1024, .meaning = "Transformer layers L"},
    {KEY("model", "heads", CZ_KEY_INT, model.heads), .resume = CZ_RESUME_REFUSED, .def = "12",
     .min = 1, .max = 1024, .meaning = "attention heads A; hidden must be a multiple of heads"},
    {KEY("model", "intermediate", CZ_KEY_INT, model.intermediate), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 1 << 20,
     .meaning = "FFN inner size; 0 = 4 x hidden (BERT and GPT-1 use 4H)"},
    {KEY("model", "max_positions", CZ_KEY_INT, model.max_positions), .resume = CZ_RESUME_REFUSED,
     .def = "512", .min = 1, .max = 1 << 20,
     .meaning = "rows of the learned position table: the longest sequence"},
    {KEY("model", "type_vocab_size", CZ_KEY_INT, model.type_vocab_size),
     .resume = CZ_RESUME_REFUSED, .def = "2", .def_gpt = "0", .min = 0, .max = 64,
     .meaning = "segment (token type) embeddings: 2 for BERT sentence A/B, 0 for GPT"},
    {KEY("model", "layer_norm_eps", CZ_KEY_FLOAT, model.layer_norm_eps),
     .resume = CZ_RESUME_REFUSED, .def = "1e-12", .def_gpt = "1e-5", .min = 0, .max = 1,
     .flags = CZ_MIN_EXCL | CZ_MAX_EXCL,
     .meaning = "LayerNorm epsilon (BERT code 1e-12, GPT-1 code 1e-5)"},
    {KEY("model", "gelu", CZ_KEY_WORD_INDEX, model.gelu_tanh), .resume = CZ_RESUME_REFUSED,
     .def = "erf", .def_gpt = "tanh", .choices = "erf|tanh",
     .meaning = "GELU form: erf = exact (BERT), tanh = approximation (GPT-1)"},
    {KEY("model", "hidden_dropout", CZ_KEY_FLOAT, model.hidden_dropout),
     .resume = CZ_RESUME_REFUSED, .def = "0.1", .min = 0, .max = 1, .flags = CZ_MAX_EXCL,
     .meaning = "dropout on embeddings, attention output and FFN output"},
    {KEY("model", "attn_dropout", CZ_KEY_FLOAT, model.attn_dropout), .resume = CZ_RESUME_REFUSED,
     .def = "0.1", .min = 0, .max = 1, .flags = CZ_MAX_EXCL,
     .meaning = "dropout on attention probabilities"},
    {KEY("model", "init_range", CZ_KEY_FLOAT, model.init_range), .resume = CZ_RESUME_REFUSED,
     .def = "0.02", .min = 0, .max = 1, .flags = CZ_MIN_EXCL,
     .meaning = "std of the truncated-normal weight initialisation"},
    {KEY("model", "recompute", CZ_KEY_WORD_INDEX, model.recompute), .resume = CZ_RESUME_ACCEPTED,
     .def = "none", .choices = "none|layers",
     .meaning = "layers: keep only each layer's input, recompute its activations before its "
                "backward (less memory, +1/3 matrix FLOPs, bitwise the same gradients)"},
    {KEY("model", "matmul_precision", CZ_KEY_WORD_INDEX, model.matmul_bf16),
     .resume = CZ_RESUME_REFUSED, .def = "fp32", .choices = "fp32|bf16",
     .meaning = "matrix-product inputs: fp32, or bf16 (vdpbf16ps, fp32 accumulation and master "
                "weights; needs AVX512_BF16)"},
    {KEY("model", "init_from", CZ_KEY_STRING, train.init_from), .resume = CZ_RESUME_ACCEPTED,
     .def = "",
     .meaning = "start from these weights: a cloze checkpoint (.lz4, e.g. from cloze-ckpt "
                "import-hf) or a Hugging Face directory; the model keys must match, heads it "
                "lacks start fresh; a resumed run takes its checkpoint instead"},

    /* ---- data: instances and the BERT length curriculum (App. A.2) ---- */
    {KEY("data", "train_manifest", CZ_KEY_STRING, data.train_manifest), .resume = CZ_RESUME_REFUSED,
     .def = "", .meaning = "shard manifest written by cloze-prep; required when training starts"},
    {KEY("data", "heldout_manifest", CZ_KEY_STRING, data.heldout_manifest),
     .resume = CZ_RESUME_REFUSED, .def = "",
     .meaning = "held-out shard manifest; empty = no evaluation"},
    {KEY("data", "seq", CZ_KEY_INT, data.seq), .resume = CZ_RESUME_REFUSED, .def = "128",
     .def_gpt = "512", .min = 2, .max = 1 << 20,
     .meaning = "tokens per sequence (max_seq_length); <= model.max_positions"},
    {KEY("data", "max_pred", CZ_KEY_INT, data.max_pred), .resume = CZ_RESUME_REFUSED, .def = "20",
     .def_gpt = "0", .min = 0, .max = 1 << 20,
     .meaning = "masked-LM prediction slots per sequence (BERT); <= seq"},
    {KEY("data", "masked_lm_prob", CZ_KEY_FLOAT, data.masked_lm_prob), .resume = CZ_RESUME_REFUSED,
     .def = "0.15", .min = 0, .max = 1, .flags = CZ_MIN_EXCL | CZ_MAX_EXCL,
     .meaning = "fraction of tokens chosen for masked-LM prediction (BERT)"},
    {KEY("data", "short_seq_prob", CZ_KEY_FLOAT, data.short_seq_prob), .resume = CZ_RESUME_REFUSED,
     .def = "0.1", .min = 0, .max = 1,
     .meaning = "probability of a shorter random target length (BERT)"},
    {KEY("data", "whole_word_mask", CZ_KEY_BOOL, data.whole_word_mask), .resume = CZ_RESUME_REFUSED,
     .def = "false", .meaning = "mask all WordPieces of a word together"},
    {KEY("data", "phase2_fraction", CZ_KEY_FLOAT, data.phase2_fraction),
     .resume = CZ_RESUME_REFUSED, .def = "0", .min = 0, .max = 1, .flags = CZ_MAX_EXCL,
     .meaning = "last fraction of steps run at phase2_seq (BERT: 0.1); 0 = one phase"},
    {KEY("data", "phase2_seq", CZ_KEY_INT, data.phase2_seq), .resume = CZ_RESUME_REFUSED,
     .def = "512", .min = 2, .max = 1 << 20,
     .meaning = "tokens per sequence in phase 2; <= model.max_positions"},
    {KEY("data", "phase2_max_pred", CZ_KEY_INT, data.phase2_max_pred), .resume = CZ_RESUME_REFUSED,
     .def = "80", .min = 0, .max = 1 << 20,
     .meaning = "prediction slots per sequence in phase 2; <= phase2_seq"},
    {KEY("data", "phase2_global_batch", CZ_KEY_INT, data.phase2_global_batch),
     .resume = CZ_RESUME_REFUSED, .def = "0", .min = 0, .max = NOMAX,
     .meaning = "sequences per step in phase 2; 0 = train.global_batch"},
    {KEY("data", "phase2_micro_batch", CZ_KEY_INT, data.phase2_micro_batch),
     .resume = CZ_RESUME_ACCEPTED, .def = "0", .min = 0, .max = NOMAX,
     .meaning = "micro-batch in phase 2; 0 = train.micro_batch"},

    /* ---- train: the step loop ---- */
    {KEY("train", "steps", CZ_KEY_LONG, train.steps), .resume = CZ_RESUME_ACCEPTED,
     .def = "1000000", .min = 1, .max = 1e15,
     .meaning = "optimizer steps in the whole run (BERT: 1M)"},
    {KEY("train", "global_batch", CZ_KEY_INT, train.global_batch), .resume = CZ_RESUME_REFUSED,
     .def = "256", .min = 1, .max = NOMAX,
     .meaning = "sequences per optimizer step over all ranks (BERT: 256)"},
    {KEY("train", "micro_batch", CZ_KEY_INT, train.micro_batch), .resume = CZ_RESUME_ACCEPTED,
     .def = "32", .min = 1, .max = NOMAX,
     .meaning = "sequences per forward/backward on one rank; divides global_batch; at most "
                "global_batch / micro_batch ranks"},
    {KEY("train", "seed", CZ_KEY_U64, train.seed), .resume = CZ_RESUME_REFUSED, .def = "12345",
     .min = 0, .max = NOMAX,
     .meaning = "seed of every random choice (init, data, masking, dropout); < 2^63"},
    {KEY("train", "threads", CZ_KEY_INT, train.threads), .resume = CZ_RESUME_ACCEPTED, .def = "0",
     .min = 0, .max = 4096,
     .meaning = "threads per rank (BLIS and kernels); 0 = the CPUs this rank may use (affinity "
                "mask, and a cgroup v2 cpu.max quota) / the node's ranks sharing them"},
    {KEY("train", "log_every", CZ_KEY_INT, train.log_every), .resume = CZ_RESUME_ACCEPTED,
     .def = "100", .min = 1, .max = NOMAX,
     .meaning = "steps between log lines (metrics.jsonl records every step)"},
    {KEY("train", "tensorboard", CZ_KEY_BOOL, train.tensorboard), .resume = CZ_RESUME_ACCEPTED,
     .def = "true",
     .meaning = "rank 0 writes metrics.jsonl's figures as TensorBoard event files "
                "(events.out.tfevents.*) into the run directory too"},
    {KEY("train", "eval_every", CZ_KEY_INT, train.eval_every), .resume = CZ_RESUME_ACCEPTED,
     .def = "0", .min = 0, .max = NOMAX,
     .meaning = "steps between held-out evaluations; 0 = only at the end"},
    {KEY("train", "eval_batches", CZ_KEY_INT, train.eval_batches), .resume = CZ_RESUME_ACCEPTED,
     .def = "100", .min = 1, .max = NOMAX, .meaning = "held-out micro-batches per evaluation"},
    {KEY("train", "ckpt_every", CZ_KEY_INT, train.ckpt_every), .resume = CZ_RESUME_ACCEPTED,
     .def = "10000", .min = 0, .max = NOMAX,
     .meaning = "steps between checkpoints; 0 = only at the end"},
    {KEY("train", "keep_last", CZ_KEY_INT, train.keep_last), .resume = CZ_RESUME_ACCEPTED,
     .def = "3", .min = 1, .max = NOMAX, .meaning = "checkpoints kept in the run directory"},
    {KEY("train", "ckpt_writer", CZ_KEY_WORD_INDEX, train.ckpt_writer),
     .resume = CZ_RESUME_ACCEPTED, .def = "thread", .choices = CZ_CKPT_WRITER_WORDS,
     .meaning = "who writes a checkpoint: thread = a background thread on a snapshot, inline = "
                "the training thread (it waits), auto = the thread only when the node's ranks' "
                "threads leave one of rank 0's allowed CPUs free (docs/checkpoints.md)"},
    {KEY("train", "max_bad_steps", CZ_KEY_INT, train.max_bad_steps), .resume = CZ_RESUME_ACCEPTED,
     .def = "5", .min = 1, .max = NOMAX,
     .meaning = "non-finite steps in a row (skipped) before the run stops"},
    {KEY("train", "stop_after_steps", CZ_KEY_LONG, train.stop_after_steps),
     .resume = CZ_RESUME_ACCEPTED, .def = "0", .min = 0, .max = 1e15,
     .meaning = "stop with a checkpoint after this many steps of this invocation (time-sliced "
                "jobs); 0 = run to train.steps"},
    {KEY("train", "run_dir", CZ_KEY_STRING, train.run_dir), .resume = CZ_RESUME_ACCEPTED, .def = "",
     .meaning = "run directory: checkpoints, metrics, effective config; required to train"},
    {KEY("train", "gemm", CZ_KEY_WORD_INDEX, train.gemm), .resume = CZ_RESUME_ACCEPTED,
     .def = "auto", .choices = "auto|blis|reference",
     .meaning = "matrix products: auto = BLIS with the kernel for this CPU, reference = loops"},
    {KEY("train", "peak_gflops", CZ_KEY_DOUBLE, train.peak_gflops), .resume = CZ_RESUME_ACCEPTED,
     .def = "0", .min = 0, .max = NOMAX,
     .meaning = "per-rank peak GFLOP/s for MFU; 0 = measure at start-up"},
    {KEY("train", "sample_every", CZ_KEY_INT, train.sample_every), .resume = CZ_RESUME_ACCEPTED,
     .def = "0", .min = 0, .max = NOMAX,
     .meaning = "GPT: steps between samples of train.sample_tokens tokens from "
                "train.sample_prompt, printed and appended to RUN_DIR/samples.jsonl; 0 = none"},
    {KEY("train", "sample_tokens", CZ_KEY_INT, train.sample_tokens), .resume = CZ_RESUME_ACCEPTED,
     .def = "32", .min = 1, .max = NOMAX, .meaning = "new tokens per sample (train.sample_every)"},
    {KEY("train", "sample_prompt", CZ_KEY_STRING, train.sample_prompt),
     .resume = CZ_RESUME_ACCEPTED, .def = "",
     .meaning = "the samples' prompt; \"\" = the vocabulary's end-of-text token"},

    /* ---- optim: AdamW (Loshchilov & Hutter) as in BERT App. A.2 ---- */
    {KEY("optim", "name", CZ_KEY_WORD_INDEX, optim.kind), .resume = CZ_RESUME_REFUSED,
     .def = "adamw", .choices = CZ_OPTIM_KIND_WORDS, .meaning = "optimizer"},
    {KEY("optim", "lr", CZ_KEY_DOUBLE, optim.lr), .resume = CZ_RESUME_REFUSED, .def = "1e-4",
     .def_gpt = "2.5e-4", .min = 0, .max = 10, .flags = CZ_MIN_EXCL,
     .meaning = "peak learning rate (BERT 1e-4, GPT-1 2.5e-4)"},
    {KEY("optim", "beta1", CZ_KEY_DOUBLE, optim.beta1), .resume = CZ_RESUME_REFUSED, .def = "0.9",
     .min = 0, .max = 1, .flags = CZ_MAX_EXCL, .meaning = "Adam first-moment decay"},
    {KEY("optim", "beta2", CZ_KEY_DOUBLE, optim.beta2), .resume = CZ_RESUME_REFUSED, .def = "0.999",
     .min = 0, .max = 1, .flags = CZ_MAX_EXCL, .meaning = "Adam second-moment decay"},
    {KEY("optim", "eps", CZ_KEY_DOUBLE, optim.eps), .resume = CZ_RESUME_REFUSED, .def = "1e-6",
     .def_gpt = "1e-8", .min = 0, .max = 1, .flags = CZ_MIN_EXCL,
     .meaning = "Adam epsilon (BERT code 1e-6, Adam paper 1e-8)"},
    {KEY("optim", "weight_decay", CZ_KEY_DOUBLE, optim.weight_decay), .resume = CZ_RESUME_REFUSED,
     .def = "0.01", .min = 0, .max = 1, .meaning = "decoupled weight decay (BERT and GPT-1: 0.01)"},
    {KEY("optim", "bias_correction", CZ_KEY_BOOL, optim.bias_correction),
     .resume = CZ_RESUME_REFUSED, .def = "false", .def_gpt = "true",
     .meaning = "Adam bias correction (BERT's AdamWeightDecayOptimizer has none)"},
    {KEY("optim", "no_decay", CZ_KEY_LIST, optim.no_decay), .resume = CZ_RESUME_REFUSED,
     .def = "LayerNorm,bias", .def_gpt = "ln_,bias",
     .count_offset = offsetof(cz_config, optim.n_no_decay),
     .meaning = "substrings of tensor names excluded from weight decay"},
    {KEY("optim", "clip_norm", CZ_KEY_DOUBLE, optim.clip_norm), .resume = CZ_RESUME_REFUSED,
     .def = "1", .min = 0, .max = NOMAX,
     .meaning = "clip the global gradient norm to this; 0 = off (BERT code: 1)"},
    {KEY("optim", "schedule", CZ_KEY_WORD_INDEX, optim.schedule), .resume = CZ_RESUME_REFUSED,
     .def = "linear", .def_gpt = "cosine", .choices = CZ_SCHEDULE_WORDS,
     .meaning = "decay after warm-up: linear (BERT), cosine (GPT-1) or constant"},
    {KEY("optim", "warmup_steps", CZ_KEY_LONG, optim.warmup_steps), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 1e15, .meaning = "warm-up steps; used when warmup_fraction = 0"},
    {KEY("optim", "warmup_fraction", CZ_KEY_DOUBLE, optim.warmup_fraction),
     .resume = CZ_RESUME_REFUSED, .def = "0.01", .min = 0, .max = 1, .flags = CZ_MAX_EXCL,
     .meaning = "warm-up as a fraction of train.steps (BERT: 10k/1M); 0 when warmup_steps given"},
    {KEY("optim", "min_lr_ratio", CZ_KEY_DOUBLE, optim.min_lr_ratio), .resume = CZ_RESUME_REFUSED,
     .def = "0", .min = 0, .max = 1, .meaning = "floor of the decay, as a fraction of lr"},

    /* ---- dist: communication (cz_comm_config) and optimizer placement ---- */
    {KEY("dist", "allreduce", CZ_KEY_WORD_INDEX, dist.allreduce), .resume = CZ_RESUME_ACCEPTED,
     .def = "ring", .choices = CZ_ALLREDUCE_WORDS,
     .meaning = "gradient all-reduce: our ring, MPI_Allreduce, hierarchical (inside hosts, "
                "then across), torus2d (rows, then columns of dist.grid), or auto (the "
                "alpha-beta model picks; the log says why)"},
    {KEY("dist", "grid", CZ_KEY_STRING, dist.grid), .resume = CZ_RESUME_ACCEPTED, .def = "",
     .meaning = "torus2d's grid XxY (X ranks per row, rank r at (r % X, r / X)); empty: the "
                "most square; auto: considered only with this grid"},
    {KEY("dist", "link_gbit", CZ_KEY_DOUBLE, dist.link_gbit), .resume = CZ_RESUME_ACCEPTED,
     .def = "10", .min = 0, .max = 1e6, .flags = CZ_MIN_EXCL,
     .meaning = "auto's cost model: one host's network link, Gbit/s each way, where nothing "
                "measured it (dist.calibrate = false, one host)"},
    {KEY("dist", "link_latency_us", CZ_KEY_DOUBLE, dist.link_latency_us),
     .resume = CZ_RESUME_ACCEPTED, .def = "30", .min = 0, .max = 1e6,
     .meaning = "auto's cost model: latency of one message between hosts, us, where nothing "
                "measured it (dist.calibrate = false, one host)"},
    {KEY("dist", "calibrate", CZ_KEY_BOOL, dist.calibrate), .resume = CZ_RESUME_ACCEPTED,
     .def = "true",
     .meaning = "measure latency and bandwidth between hosts and inside a host at start-up "
                "(logged; auto and metrics.jsonl's predictions use them); false: the "
                "dist.link_* keys' model"},
    {KEY("dist", "calibrate_s", CZ_KEY_DOUBLE, dist.calibrate_s), .resume = CZ_RESUME_ACCEPTED,
     .def = "4", .min = 0.1, .max = 600,
     .meaning = "about how long the start-up calibration may take, seconds"},
    {KEY("dist", "cluster_file", CZ_KEY_STRING, dist.cluster_file), .resume = CZ_RESUME_ACCEPTED,
     .def = "",
     .meaning = "a calibration written by cloze-plan calibrate, used instead of measuring"},
    {KEY("dist", "timeout_s", CZ_KEY_DOUBLE, dist.timeout_s), .resume = CZ_RESUME_ACCEPTED,
     .def = "300", .min = 0, .max = 1e7,
     .meaning = "a collective of the run (gradient exchange, statistics, checkpoint gather, "
                "weight all-gather) that waits this long for a rank stops the job, naming the "
                "ranks and hosts that no longer answer; 0 = wait forever"},
    {KEY("dist", "bucket_mb", CZ_KEY_DOUBLE, dist.bucket_mb), .resume = CZ_RESUME_ACCEPTED,
     .def = "0", .min = 0, .max = 1e6,
     .meaning = "gradient bucket size in MiB (overlap with backward); 0 = sized from the "
                "model: 1/16 of the gradient, within [1, 25] MiB (docs/distributed.md)"},
    {KEY("dist", "overlap", CZ_KEY_BOOL, dist.overlap), .resume = CZ_RESUME_ACCEPTED, .def = "true",
     .meaning = "reduce each gradient bucket while backward still runs (false: all of them "
                "after backward, the same bits; for measuring the overlap)"},
    {KEY("dist", "grad_wire", CZ_KEY_WORD_INDEX, dist.grad_wire), .resume = CZ_RESUME_ACCEPTED,
     .def = "fp32", .choices = CZ_WIRE_WORDS,
     .meaning = "gradients on the wire (ring, hierarchical, torus2d): bf16 sends every partial "
                "sum rounded to bfloat16 and adds it in fp32 at each hop, half the bytes; the "
                "weight all-gather stays fp32"},
    {KEY("dist", "exact", CZ_KEY_BOOL, dist.exact), .resume = CZ_RESUME_ACCEPTED, .def = "false",
     .meaning = "exact, order-independent gradient sums (int64 fixed point, a scale per "
                "tensor) and exact reported sums: the same bits on any rank count, algorithm, "
                "bucket size, overlap and placement; twice fp32's bytes on the wire "
                "(docs/distributed.md)"},
    /* the optimizer owns its placement: stored in cz_optim_config */
    {KEY("dist", "placement", CZ_KEY_WORD_INDEX, optim.placement), .resume = CZ_RESUME_ACCEPTED,
     .def = "sharded", .choices = CZ_PLACEMENT_WORDS,
     .meaning = "where the optimizer runs: rank 0, a shard per rank, or every rank"},
};

const int cz_config_num_keys = (int)(sizeof cz_config_keys / sizeof cz_config_keys[0]);
