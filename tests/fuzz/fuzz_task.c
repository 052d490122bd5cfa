/* The fine-tuning task-file readers (src/finetune/tasks.c, cz_ft_read):
 * GLUE-style TSV (presets, columns by header name or index, no header),
 * CoNLL token<TAB>tag files, SQuAD v1.1 JSON and multiple-choice JSON lines.
 * The first byte picks the task, as cloze-finetune's --task, --text-a,
 * --text-b, --label and --no-header would set it (low nibble, modulo the
 * table below), and bit 4 whether labels are collected (a training file);
 * the rest is the file.
 * Properties: a file that reads gives well-formed examples (texts present,
 * labels in [0, n_labels), a tag per word, SQuAD answers found at their
 * offsets in the context and words within it, 2..64 endings, the same K in
 * every choice example), distinct labels, sorted when collected; read again
 * as a dev file with the labels it gave, it reads to the same examples. A
 * file that does not gives a one-line error that starts with its path, and
 * an empty dataset. */
#include "fuzz.h"

#include "cloze/finetune.h"
#include "cloze/text.h"

/* A task as cloze-finetune's arguments make it: a preset, then the column
 * options (cz_ft_task_columns). */
typedef struct task_args {
    const char *task, *text_a, *text_b, *label;
    int no_header;
} task_args;

static const task_args TASKS[] = {
    {"sst2", 0, 0, 0, 0},      {"mrpc", 0, 0, 0, 0},   {"rte", 0, 0, 0, 0},
    {"cola", 0, 0, 0, 0},      {"tsv", 0, 0, 0, 0},    {"tsv", "0", "1", "2", 1},
    {"tsv", "q", "a", "y", 0}, {"rte", 0, 0, "3", 0},  {"lines", 0, 0, 0, 0},
    {"conll", 0, 0, 0, 0},     {"wnut17", 0, 0, 0, 0}, {"squad", 0, 0, 0, 0},
    {"choice", 0, 0, 0, 0},
};
#define N_TASKS (int)(sizeof TASKS / sizeof TASKS[0])

static void make_task(cz_ft_task *t, const task_args *a) {
    cz_error err;
    FUZZ_CHECK(cz_ft_task_preset(t, a->task, &err) == 0, "preset %s: %s", a->task, err.msg);
    cz_ft_task_columns(t, a->text_a, a->text_b, a->label, a->no_header);
}

/* The class order of collected labels: "O" first, then byte order. */
static int label_before(const char *x, const char *y) {
    if (!strcmp(y, "O")) return 0;
    return !strcmp(x, "O") || strcmp(x, y) < 0;
}

static void check_labels(const cz_ft_task *t, int collected) {
    FUZZ_CHECK(t->n_labels >= 0 && t->n_labels <= CZ_FT_MAX_LABELS, "%d labels", t->n_labels);
    for (int i = 0; i < t->n_labels; i++) {
        const char *s = t->labels[i];
        FUZZ_CHECK(memchr(s, 0, sizeof t->labels[i]) != NULL, "label %d unterminated", i);
        FUZZ_CHECK(cz_utf8_invalid_at((const unsigned char *)s, strlen(s)) == strlen(s),
                   "label %d \"%s\" is not valid UTF-8", i, s);
        for (int k = 0; k < i; k++)
            FUZZ_CHECK(strcmp(t->labels[k], s), "labels %d and %d are both \"%s\"", k, i, s);
        if (collected && i > 0)
            FUZZ_CHECK(label_before(t->labels[i - 1], s), "collected labels out of order: %s, %s",
                       t->labels[i - 1], s);
    }
}

static void check_example(const cz_ft_dataset *d, const cz_ft_task *t, int e) {
    const cz_ft_example *x = &d->ex[e];
    switch (d->kind) {
    case CZ_FT_CLASSIFY:
        FUZZ_CHECK(x->a != NULL, "example %d: no text a", e);
        FUZZ_CHECK(!t->text_b[0] == !x->b, "example %d: text b does not match the task", e);
        if (t->label[0])
            FUZZ_CHECK(x->label >= 0 && x->label < t->n_labels, "example %d: label %d of %d", e,
                       x->label, t->n_labels);
        else
            FUZZ_CHECK(x->label == 0, "example %d: label %d without a label column", e, x->label);
        FUZZ_CHECK(x->n_words == 0 && !x->words, "example %d: a classification with words", e);
        break;
    case CZ_FT_TAG:
        FUZZ_CHECK(x->n_words > 0 && x->words && x->tags, "example %d: %d words", e, x->n_words);
        for (int w = 0; w < x->n_words; w++) {
            FUZZ_CHECK(x->words[w] && x->words[w][0], "example %d: word %d empty", e, w);
            FUZZ_CHECK(!strpbrk(x->words[w], " \t\r\n"), "example %d: word %d has blanks", e, w);
            FUZZ_CHECK(x->tags[w] >= 0 && x->tags[w] < t->n_labels, "example %d: tag %d of %d", e,
                       x->tags[w], t->n_labels);
        }
        break;
    case CZ_FT_SPAN: {
        FUZZ_CHECK(x->id && x->question && x->context, "example %d: id, question, context", e);
        FUZZ_CHECK(x->n_answers >= 0 && (x->answers || !x->n_answers), "example %d: answers", e);
        size_t n = strlen(x->context);
        for (int k = 0; k < x->n_answers; k++) {
            const cz_ft_answer *a = &x->answers[k];
            FUZZ_CHECK(a->text, "example %d: answer %d without text", e, k);
            size_t m = strlen(a->text);
            FUZZ_CHECK(a->start >= 0 && (size_t)a->start <= n && m <= n - (size_t)a->start,
                       "example %d: answer %d at byte %d, %zu bytes, context of %zu", e, k,
                       a->start, m, n);
            FUZZ_CHECK(!memcmp(x->context + a->start, a->text, m),
                       "example %d: answer %d is not at its offset", e, k);
            FUZZ_CHECK(((unsigned char)x->context[a->start] & 0xC0) != 0x80,
                       "example %d: answer %d starts inside a character", e, k);
        }
        FUZZ_CHECK(x->n_words >= 0 && (x->word_start && x->word_end), "example %d: words", e);
        for (int w = 0; w < x->n_words; w++) {
            int s = x->word_start[w], end = x->word_end[w];
            FUZZ_CHECK(s >= (w ? x->word_end[w - 1] : 0) && s < end && (size_t)end <= n,
                       "example %d: word %d at [%d, %d) of %zu", e, w, s, end, n);
        }
        break;
    }
    case CZ_FT_CHOICE:
        FUZZ_CHECK(x->a != NULL, "example %d: no context", e);
        FUZZ_CHECK(x->n_words >= 2 && x->n_words <= CZ_FT_MAX_LABELS && x->words,
                   "example %d: %d endings", e, x->n_words);
        FUZZ_CHECK(x->n_words == t->n_labels, "example %d: %d endings, the task has %d", e,
                   x->n_words, t->n_labels);
        for (int w = 0; w < x->n_words; w++) FUZZ_CHECK(x->words[w], "example %d: ending %d", e, w);
        FUZZ_CHECK(x->label >= 0 && x->label < x->n_words, "example %d: label %d of %d", e,
                   x->label, x->n_words);
        break;
    }
}

/* A failed read: a one-line message that starts with the path, nothing kept. */
static void check_failure(const cz_ft_dataset *d, const cz_error *err, const char *path) {
    FUZZ_CHECK(err->msg[0], "an error without a message");
    FUZZ_CHECK(!strchr(err->msg, '\n'), "an error of more than one line: %s", err->msg);
    FUZZ_CHECK(!strncmp(err->msg, path, strlen(path)), "an error that does not name the file: %s",
               err->msg);
    FUZZ_CHECK(d->n == 0 && d->ex == NULL, "a failed read keeps %d examples", d->n);
}

static int same_example(const cz_ft_example *x, const cz_ft_example *y, cz_ft_kind kind) {
    if (kind == CZ_FT_TAG) {
        if (x->n_words != y->n_words) return 0;
        for (int w = 0; w < x->n_words; w++)
            if (x->tags[w] != y->tags[w] || strcmp(x->words[w], y->words[w])) return 0;
        return 1;
    }
    return x->label == y->label && !strcmp(x->a, y->a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    cz_ft_task t;
    make_task(&t, &TASKS[(data[0] & 0x0f) % N_TASKS]);
    int collect = (data[0] >> 4) & 1;
    int collecting =
        collect && t.n_labels == 0 && (t.kind == CZ_FT_CLASSIFY || t.kind == CZ_FT_TAG);
    const char *path = fuzz_file("task", data + 1, size - 1);
    cz_ft_dataset d;
    cz_error err;
    err.msg[0] = 0;
    if (cz_ft_read(&d, &t, path, collect, &err) != 0) {
        check_failure(&d, &err, path);
        return 0;
    }
    FUZZ_CHECK(d.n > 0 && d.ex && d.kind == t.kind && !strcmp(d.path, path), "dataset header");
    check_labels(&t, collecting);
    if (t.kind != CZ_FT_SPAN && (t.label[0] || t.kind != CZ_FT_CLASSIFY))
        FUZZ_CHECK(t.n_labels >= 2, "%d labels", t.n_labels);
    for (int e = 0; e < d.n; e++) check_example(&d, &t, e);
    /* The same file as a dev file, with the labels (or K) it gave: the same
     * examples, nothing collected. */
    if (collecting || t.kind == CZ_FT_CHOICE) {
        cz_ft_task t2 = t;
        cz_ft_dataset d2;
        FUZZ_CHECK(cz_ft_read(&d2, &t2, path, collect, &err) == 0, "read again: %s", err.msg);
        FUZZ_CHECK(!memcmp(&t, &t2, sizeof t), "reading again changed the task");
        FUZZ_CHECK(d2.n == d.n, "read again: %d examples, first %d", d2.n, d.n);
        for (int e = 0; e < d.n; e++)
            FUZZ_CHECK(same_example(&d.ex[e], &d2.ex[e], d.kind), "read again: example %d", e);
        cz_ft_dataset_free(&d2);
    }
    int half = d.n / 2;
    cz_ft_dataset_truncate(&d, half);
    FUZZ_CHECK(d.n == half, "truncated to %d examples, not %d", d.n, half);
    cz_ft_dataset_free(&d);
    return 0;
}
