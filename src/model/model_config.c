/* The model configuration's rules (what cz_model_create refuses, and what
 * the run configuration's validation reports with the key to blame), apart
 * from the model itself: they need no kernels, so the config parser's fuzz
 * harness (tests/fuzz) checks them as the programs do. */
#include "cloze/model.h"

#include <limits.h>

#include "model_private.h"

/* Blames `name` (a key of the model section) for what err says. */
static int blame(const char **key, const char *name) {
    *key = name;
    return -1;
}

int cz_model_config_check(const cz_model_config *c, const char **key, cz_error *err) {
    const char *unused;
    if (!key) key = &unused;
    int bert = c->arch == CZ_ARCH_BERT;
    if (!bert && c->arch != CZ_ARCH_GPT)
        return cz_fail(err, "model.arch = %d is neither BERT nor GPT", (int)c->arch),
               blame(key, "arch");
    if (c->vocab_size < 2)
        return cz_fail(err, "model.vocab_size = %d: a vocabulary needs 2 tokens or more",
                       c->vocab_size),
               blame(key, "vocab_size");
    const struct {
        const char *name;
        int v;
    } sizes[] = {{"hidden", c->hidden},
                 {"layers", c->layers},
                 {"heads", c->heads},
                 {"max_positions", c->max_positions}};
    for (int i = 0; i < 4; i++)
        if (sizes[i].v < 1)
            return cz_fail(err, "model.%s = %d must be >= 1", sizes[i].name, sizes[i].v),
                   blame(key, sizes[i].name);
    if (c->intermediate < 1)
        return cz_fail(err,
                       "model.intermediate = %d must be >= 1 (a configuration file may say 0: "
                       "4 x hidden)",
                       c->intermediate),
               blame(key, "intermediate");
    if (c->hidden % c->heads)
        return cz_fail(err, "model.hidden = %d is not a multiple of model.heads = %d", c->hidden,
                       c->heads),
               blame(key, "heads");
    if (bert && c->type_vocab_size < 2)
        return cz_fail(err, "BERT needs 2 segment types (sentence A and B), got %d",
                       c->type_vocab_size),
               blame(key, "type_vocab_size");
    if (!bert && c->type_vocab_size != 0)
        return cz_fail(err, "GPT has no segment embeddings: must be 0, got %d", c->type_vocab_size),
               blame(key, "type_vocab_size");
    if (!(c->hidden_dropout >= 0 && c->hidden_dropout < 1))
        return cz_fail(err, "model.hidden_dropout = %g must be in [0, 1)",
                       (double)c->hidden_dropout),
               blame(key, "hidden_dropout");
    if (!(c->attn_dropout >= 0 && c->attn_dropout < 1))
        return cz_fail(err, "model.attn_dropout = %g must be in [0, 1)", (double)c->attn_dropout),
               blame(key, "attn_dropout");
    if (c->recompute != CZ_RECOMPUTE_NONE && c->recompute != CZ_RECOMPUTE_LAYERS)
        return cz_fail(err, "model.recompute = %d is neither none (0) nor layers (1)",
                       c->recompute),
               blame(key, "recompute");
    if (c->head < CZ_HEAD_PRETRAIN || c->head > CZ_HEAD_CHOICE)
        return cz_fail(err,
                       "model.head = %d is not one of pretrain, none, classify, span, tag, "
                       "similar, choice",
                       c->head),
               blame(key, "head");
    if ((c->head == CZ_HEAD_CLASSIFY || c->head == CZ_HEAD_TAG || c->head == CZ_HEAD_SIMILAR ||
         c->head == CZ_HEAD_CHOICE) &&
        (c->num_labels < 2 || c->num_labels > 1 << 16))
        return cz_fail(err, "model.num_labels = %d must be in [2, 65536] for this head",
                       c->num_labels),
               blame(key, "num_labels");
    if ((c->head == CZ_HEAD_SPAN || c->head == CZ_HEAD_TAG) && !bert)
        return cz_fail(err, "span and tag heads are BERT's (GPT classifies)"), blame(key, "head");
    if (c->head == CZ_HEAD_SIMILAR && bert)
        return cz_fail(err, "the similarity head (both orderings added) is GPT-1's; BERT reads "
                            "a pair in one sequence"),
               blame(key, "head");
    if (c->layout != CZ_LAYOUT_POST_LN && c->layout != CZ_LAYOUT_PRE_LN)
        return cz_fail(err, "model.layout = %d is neither post_ln (0) nor pre_ln (1)", c->layout),
               blame(key, "layout");
    if (c->layout == CZ_LAYOUT_PRE_LN && bert)
        return cz_fail(err, "model.layout = pre_ln is GPT-2's decoder layout: it needs model.arch "
                            "= gpt"),
               blame(key, "layout");
    if (c->vocab_pad_to < 0 || c->vocab_pad_to > 1 << 16)
        return cz_fail(err, "model.vocab_pad_to = %d must be in [0, 65536] (0 or 1: no padding)",
                       c->vocab_pad_to),
               blame(key, "vocab_pad_to");
    if (c->vocab_pad_to > 1 && bert)
        return cz_fail(err,
                       "model.vocab_pad_to = %d: only GPT's tied LM head pads its vocabulary "
                       "(BERT's MLM bias has vocab_size entries)",
                       c->vocab_pad_to),
               blame(key, "vocab_pad_to");
    if ((long)cz_model_vocab_rows(c) > (long)1 << 30)
        return cz_fail(err, "model.vocab_size = %d padded to %d is too large", c->vocab_size,
                       c->vocab_pad_to),
               blame(key, "vocab_pad_to");
    if (c->untied_head != 0 && c->untied_head != 1)
        return cz_fail(err, "model.lm_head = %d is neither tied (0) nor untied (1)",
                       c->untied_head),
               blame(key, "lm_head");
    if (c->untied_head && bert)
        return cz_fail(err, "model.lm_head = untied is GPT's: BERT's MLM decoder is the word "
                            "embedding"),
               blame(key, "lm_head");
    if (!(c->lm_weight >= 0.0f) || (c->lm_weight > 0 && bert))
        return cz_fail(err, "model.lm_weight = %g: the auxiliary LM loss is GPT's, >= 0",
                       (double)c->lm_weight),
               blame(key, "lm_weight");
    if (c->parametrization != CZ_PARAM_STANDARD && c->parametrization != CZ_PARAM_MUP)
        return cz_fail(err, "model.parametrization = %d is neither standard (0) nor mup (1)",
                       c->parametrization),
               blame(key, "parametrization");
    if (c->parametrization == CZ_PARAM_MUP && c->mup_base_width < 1)
        return cz_fail(err,
                       "model.mup_base_width = %d: model.parametrization = mup needs a base "
                       "width >= 1 (the hidden size its multipliers are 1 at)",
                       c->mup_base_width),
               blame(key, "mup_base_width");
    if (!(c->mup_attn_mult >= 0 && c->mup_attn_mult < 1e6))
        return cz_fail(err,
                       "model.mup_attn_mult = %g must be >= 0 (0: sqrt(mup_base_width / heads))",
                       (double)c->mup_attn_mult),
               blame(key, "mup_attn_mult");
    if (c->parametrization == CZ_PARAM_MUP && c->head != CZ_HEAD_PRETRAIN &&
        c->head != CZ_HEAD_NONE)
        return cz_fail(err, "model.parametrization = mup covers the pre-training heads only (the "
                            "fine-tuning heads have no µP readout); fine-tune with standard"),
               blame(key, "parametrization");
    /* mup's MuReadout for an untied head has its own init rule, which the
     * reference test (tests/reference/mup_reference.py) does not cover yet */
    if (c->parametrization == CZ_PARAM_MUP && c->untied_head)
        return cz_fail(err, "model.parametrization = mup covers the tied LM head only "
                            "(model.lm_head = tied); an untied head has no µP readout here"),
               blame(key, "parametrization");
    return 0;
}

int cz_model_vocab_rows(const cz_model_config *c) {
    long v = c->vocab_size, p = c->vocab_pad_to > 1 ? c->vocab_pad_to : 1;
    long rows = (v + p - 1) / p * p;
    return rows > INT_MAX ? INT_MAX : (int)rows;
}

int cz_model_shape_rule(const cz_model_config *c, int seq, int max_pred) {
    if (seq < 1 || seq > c->max_positions) return CZ_SHAPE_SEQ;
    /* the MLM head gathers max_pred positions of each sequence */
    if (c->arch == CZ_ARCH_BERT && c->head == CZ_HEAD_PRETRAIN && (max_pred < 1 || max_pred > seq))
        return CZ_SHAPE_PRED;
    return CZ_SHAPE_OK;
}

/* The configuration and the shapes cz_model_create is asked for (also what
 * the counts and stages check, with shapes of one) */
int model_check_create(const cz_model_config *c, int max_b, int max_t, int max_p, cz_error *err) {
    if (cz_model_config_check(c, NULL, err)) return cz_fail_prefix(err, "model");
    if (max_b < 1) return cz_fail(err, "model: batch %d must be >= 1", max_b);
    switch (cz_model_shape_rule(c, max_t, max_p)) {
    case CZ_SHAPE_SEQ:
        return cz_fail(err, "model: max_seq %d must be in [1, max_positions %d]", max_t,
                       c->max_positions);
    case CZ_SHAPE_PRED:
        return cz_fail(err, "model: max_pred %d must be in [1, max_seq %d]", max_p, max_t);
    }
    return 0;
}
