/* vocab_learn: placeholder until the learner lands. */
#include "vocab_learn.h"

void cz_vocab_learn_options_default(cz_vocab_learn_options *o) {
    o->vocab_size = 30522;
    o->lower_case = 1;
    o->n_unused = 99;
    o->min_frequency = 2;
    o->max_word_chars = 100;
}
int cz_learn_wordpiece_opts(const char *const *files, int n_files, const cz_vocab_learn_options *o,
                            const char *out_vocab, cz_error *err) {
    return cz_fail(err, "%s: vocabulary learning not implemented yet", out_vocab);
}
int cz_learn_wordpiece(const char *const *files, int n_files, int vocab_size, int lower_case,
                       const char *out_vocab, cz_error *err) {
    cz_vocab_learn_options o;
    cz_vocab_learn_options_default(&o);
    o.vocab_size = vocab_size, o.lower_case = lower_case;
    return cz_learn_wordpiece_opts(files, n_files, &o, out_vocab, err);
}
int cz_learn_bpe(const char *const *files, int n_files, int vocab_size,
                 const char *out_encoder_json, const char *out_merges, cz_error *err) {
    return cz_fail(err, "%s: BPE learning not implemented yet", out_merges);
}
