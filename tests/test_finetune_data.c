/* Fine-tuning data: the task readers (TSV with named columns, SQuAD JSON,
 * CoNLL columns) on small files written here and, when ../shared/data is
 * there, on the real GLUE, SQuAD and WNUT-17 files (counts from its
 * README); featurization (BERT and GPT layouts, pair truncation, SQuAD
 * windows and answer positions, first-piece tags); the metrics against
 * values worked out by hand (GLUE's figures, SQuAD's normalisation, EM and
 * F1, conlleval's chunks) and the SQuAD answer projection. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cloze/finetune.h"
#include "cloze/text.h"

static char dir[256];

static const char *write_file(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    return p;
}

static int near(double a, double b) {
    return fabs(a - b) < 1e-9;
}

static void test_tsv(void) {
    cz_ft_task t;
    cz_error err;
    cz_ft_dataset d;
    CHECK(cz_ft_task_preset(&t, "mrpc", &err) == 0, "%s", err.msg);
    const char *p =
        write_file("mrpc.tsv", "\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
                               "1\t1\t2\tThe cat sat.\tA cat sat.\r\n"
                               "0\t3\t4\tDogs bark\tCats meow\r\n");
    CHECK(cz_ft_read(&d, &t, p, 1, &err) == 0, "%s", err.msg);
    CHECK(d.n == 2 && d.ex[0].label == 1 && d.ex[1].label == 0, "MRPC-style: BOM, CRLF, labels");
    CHECK(!strcmp(d.ex[0].a, "The cat sat.") && !strcmp(d.ex[0].b, "A cat sat."),
          "columns by name");
    cz_ft_dataset_free(&d);
    /* a label the task does not know: file:line */
    p = write_file("bad.tsv",
                   "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n2\t1\t2\ta\tb\n");
    CHECK(cz_ft_read(&d, &t, p, 1, &err) == -1 && strstr(err.msg, "bad.tsv:3") &&
              strstr(err.msg, "label \"2\""),
          "bad label: %s", err.msg);
    /* any TSV: named columns, labels collected and sorted */
    cz_ft_task g;
    CHECK(cz_ft_task_preset(&g, "tsv", &err) == 0, "%s", err.msg);
    snprintf(g.text_a, sizeof g.text_a, "review");
    snprintf(g.label, sizeof g.label, "stars");
    p = write_file("any.tsv", "id\treview\tstars\n1\tgood\tpos\n2\tbad\tneg\n3\tfine\tpos\n");
    CHECK(cz_ft_read(&d, &g, p, 1, &err) == 0, "%s", err.msg);
    CHECK(g.n_labels == 2 && !strcmp(g.labels[0], "neg") && d.ex[0].label == 1 &&
              d.ex[1].label == 0,
          "collected labels sorted: %s %s", g.labels[0], g.labels[1]);
    cz_ft_dataset_free(&d);
    snprintf(g.label, sizeof g.label, "rating");
    CHECK(cz_ft_read(&d, &g, p, 1, &err) == -1 && strstr(err.msg, "no column \"rating\""),
          "missing column: %s", err.msg);
    p = write_file("short.tsv", "review\tstars\ngood\n");
    snprintf(g.label, sizeof g.label, "stars");
    CHECK(cz_ft_read(&d, &g, p, 1, &err) == -1 && strstr(err.msg, "short.tsv:2"), "short line: %s",
          err.msg);
}

static void test_conll(void) {
    cz_ft_task t;
    cz_error err;
    cz_ft_dataset d;
    CHECK(cz_ft_task_preset(&t, "wnut17", &err) == 0, "%s", err.msg);
    const char *p =
        write_file("t.conll", "@paul\tB-person\nlikes\tO\nNew\tB-location\nYork\tI-location\n"
                              "\t\n"
                              "ok\tO\n \n\n");
    CHECK(cz_ft_read(&d, &t, p, 1, &err) == 0, "%s", err.msg);
    CHECK(d.n == 2 && d.ex[0].n_words == 4 && d.ex[1].n_words == 1, "tab-only line breaks: %d",
          d.n);
    CHECK(t.n_labels == 4 && !strcmp(t.labels[0], "O"), "O first: %s", t.labels[0]);
    CHECK(!strcmp(t.labels[d.ex[0].tags[3]], "I-location"), "tags renumbered after sorting");
    cz_ft_dataset_free(&d);
}

static void test_squad_reader(void) {
    cz_ft_task t;
    cz_error err;
    cz_ft_dataset d;
    CHECK(cz_ft_task_preset(&t, "squad", &err) == 0, "%s", err.msg);
    /* answer_start counts characters: "caf\u00e9" is 4 characters, 5 bytes */
    const char *p = write_file(
        "s.json", "{\"version\": \"1.1\", \"data\": [{\"title\": \"x\", \"paragraphs\": [{"
                  "\"context\": \"The caf\\u00e9 opened in 1999 in Denver.\", \"qas\": ["
                  "{\"id\": \"q1\", \"question\": \"When?\", \"answers\": ["
                  "{\"text\": \"1999\", \"answer_start\": 19}, {\"text\": \"in 1999\", "
                  "\"answer_start\": 16}]}]}]}]}");
    CHECK(cz_ft_read(&d, &t, p, 1, &err) == 0, "%s", err.msg);
    CHECK(d.n == 1 && d.ex[0].n_answers == 2 && d.ex[0].answers[0].start == 20,
          "byte offset of a character offset: %d", d.n ? d.ex[0].answers[0].start : -1);
    CHECK(d.ex[0].n_words == 7 && d.ex[0].word_start[1] == 4, "words of the context");
    cz_ft_dataset_free(&d);
    p = write_file("s2.json",
                   "{\"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": "
                   "\"q\", \"question\": \"?\", \"answers\": [{\"text\": \"b\", "
                   "\"answer_start\": 0}]}]}]}]}");
    CHECK(cz_ft_read(&d, &t, p, 1, &err) == -1 && strstr(err.msg, "does not point"),
          "wrong answer_start: %s", err.msg);
}

/* A vocabulary for the featurization tests. */
static cz_tokenizer *tiny_tokenizer(void) {
    const char *p =
        write_file("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n"
                                "den\n##ver\nbroncos\nwon\n.\n,\nwho\n?\nin\n1999\n");
    cz_tokenizer *tok;
    cz_error err;
    cz_tokenizer_options o;
    cz_tokenizer_options_default(&o);
    CHECK(cz_tokenizer_load_wordpiece(&tok, p, &o, &err) == 0, "%s", err.msg);
    return tok;
}

static void test_features(void) {
    cz_tokenizer *tok = tiny_tokenizer();
    cz_error err;
    cz_ft_dataset d = {.kind = CZ_FT_CLASSIFY, .n = 1};
    cz_ft_example x = {.a = "the cat sat on the mat", .b = "the cat", .label = 1};
    d.ex = &x;
    cz_ft_feature_config c = {.max_seq = 8, .cls = 2, .sep = 3, .pad = 0};
    cz_ft_features f;
    CHECK(cz_ft_featurize(&f, &d, tok, &c, &err) == 0, "%s", err.msg);
    /* 6 + 2 pieces, room 5: the longer side loses its tail first -> 3 + 2 */
    int32_t want[8] = {2, 5, 6, 7, 3, 5, 6, 3};
    int32_t seg[8] = {0, 0, 0, 0, 0, 1, 1, 1};
    CHECK(!memcmp(f.tokens, want, sizeof want) && !memcmp(f.segments, seg, sizeof seg),
          "[CLS] a [SEP] b [SEP], truncate the longer text");
    CHECK(f.truncated == 1 && f.label[0] == 1, "truncation counted, label kept");
    cz_ft_features_free(&f);
    c.gpt = 1;
    c.start = 20;
    c.delim = 21;
    c.extract = 22;
    x.b = NULL;
    x.a = "the cat";
    CHECK(cz_ft_featurize(&f, &d, tok, &c, &err) == 0, "%s", err.msg);
    int32_t gw[4] = {20, 5, 6, 22}, gt[4] = {5, 6, 22, -1};
    CHECK(!memcmp(f.tokens, gw, sizeof gw) && f.cls_index[0] == 3 &&
              !memcmp(f.targets, gt, sizeof gt) && f.mask[3] == 1 && f.mask[4] == 0,
          "GPT: <s> a <e>, cls_index at <e>, next-token targets");
    cz_ft_features_free(&f);

    /* tagging: the tag on the first piece of each word */
    cz_ft_dataset td = {.kind = CZ_FT_TAG, .n = 1};
    char *words[3] = {"Denver", "won", "."};
    int tags[3] = {1, 0, 0};
    cz_ft_example tx = {.n_words = 3, .words = words, .tags = tags};
    td.ex = &tx;
    c = (cz_ft_feature_config){.max_seq = 8, .cls = 2, .sep = 3, .pad = 0};
    CHECK(cz_ft_featurize(&f, &td, tok, &c, &err) == 0, "%s", err.msg);
    int32_t tw[6] = {2, 10, 11, 13, 14, 3}, tl[6] = {-1, 1, -1, 0, 0, -1};
    CHECK(!memcmp(f.tokens, tw, sizeof tw) && !memcmp(f.token_label, tl, sizeof tl) &&
              f.first_piece[0] == 1 && f.first_piece[2] == 4,
          "tags on first pieces");
    cz_ft_features_free(&f);
    /* cut at max_seq 4 ([CLS] + 2 pieces + [SEP]): "won", then the first
     * piece of "Denver" (its word scored there), and "." is cut although it
     * would fit after "won" alone */
    char *words2[3] = {"won", "Denver", "."};
    int tags2[3] = {0, 1, 0};
    cz_ft_example tx2 = {.n_words = 3, .words = words2, .tags = tags2};
    td.ex = &tx2;
    c.max_seq = 4;
    CHECK(cz_ft_featurize(&f, &td, tok, &c, &err) == 0, "%s", err.msg);
    int32_t cw[4] = {2, 13, 10, 3}, cl[4] = {-1, 0, 1, -1};
    CHECK(!memcmp(f.tokens, cw, sizeof cw) && !memcmp(f.token_label, cl, sizeof cl) &&
              f.first_piece[0] == 1 && f.first_piece[1] == 2 && f.first_piece[2] == -1 &&
              f.truncated == 1,
          "tagging cut at max_seq: a word's first pieces kept, no later word skipped in");
    cz_ft_features_free(&f);

    /* SQuAD windows: a context of 12 pieces, windows of 4 every 2 */
    cz_ft_dataset sd = {.kind = CZ_FT_SPAN, .n = 1};
    cz_ft_answer ans = {.text = "Denver", .start = 0};
    cz_ft_example sx = {.question = "who?",
                        .context = "the cat sat on the mat , Denver Broncos. won in 1999",
                        .n_answers = 1,
                        .answers = &ans};
    sd.ex = &sx;
    cz_ft_task st;
    CHECK(cz_ft_task_preset(&st, "squad", &err) == 0, "%s", err.msg);
    /* the reader splits words; do it through a file to use the real path */
    const char *p =
        write_file("w.json", "{\"data\": [{\"paragraphs\": [{\"context\": \"the cat sat on "
                             "the mat , Denver Broncos. won in 1999\", \"qas\": [{\"id\": "
                             "\"q\", \"question\": \"who?\", \"answers\": [{\"text\": "
                             "\"Denver Broncos\", \"answer_start\": 25}]}]}]}]}");
    cz_ft_dataset rd;
    CHECK(cz_ft_read(&rd, &st, p, 1, &err) == 0, "%s", err.msg);
    (void)sd;
    c = (cz_ft_feature_config){.max_seq = 9, .doc_stride = 2, .max_query = 64, .cls = 2, .sep = 3};
    CHECK(cz_ft_featurize(&f, &rd, tok, &c, &err) == 0, "%s", err.msg);
    /* pieces: the cat sat on the mat , den ##ver broncos . won in 1999 = 14;
     * room 9 - 2 - 3 = 4: windows start at 0 2 4 6 8 10 */
    CHECK(f.n == 6, "windows: %d", f.n);
    int answered = 0, maxc[16] = {0};
    for (int r = 0; r < f.n; r++) {
        if (f.start[r]) {
            answered++;
            /* den ##ver broncos inside this window */
            CHECK(f.tokens[r * 9 + f.start[r]] == 10 && f.tokens[r * 9 + f.end[r]] == 12,
                  "answer pieces in window %d: %d..%d", r, f.start[r], f.end[r]);
        }
        for (int t = 0; t < 9; t++)
            if (f.max_context[r * 9 + t]) maxc[(r * 2) + t - 4]++; /* piece = 2r + t - 4 */
    }
    CHECK(answered == 1, "the answer lies whole in 1 window, got %d", answered);
    int once = 1;
    for (int i = 0; i < 14; i++) once &= maxc[i] == 1;
    CHECK(once, "every context piece is max-context in exactly one window");
    /* the answer text: the best span's words, cut to the pieces ("Broncos." -> "Broncos") */
    int T = 9;
    float *logits = calloc((size_t)f.n * T * 2, sizeof *logits);
    int row = -1;
    for (int r = 0; r < f.n && row < 0; r++)
        if (f.start[r]) row = r;
    for (int r = 0; r < f.n; r++)
        for (int t = 0; t < T; t++) logits[(r * T + t) * 2] = logits[(r * T + t) * 2 + 1] = -5;
    logits[(row * T + f.start[row]) * 2] = 3;
    logits[(row * T + f.end[row]) * 2 + 1] = 3;
    char *a = cz_ft_squad_answer(&f, &rd, tok, 0, logits, 0, f.n, 30, 20);
    CHECK(!strcmp(a, "Denver Broncos"), "answer text \"%s\"", a);
    free(a);
    /* too long for max_answer: another span */
    a = cz_ft_squad_answer(&f, &rd, tok, 0, logits, 0, f.n, 2, 20);
    CHECK(strcmp(a, "Denver Broncos") != 0, "max_answer honoured: \"%s\"", a);
    free(a);
    free(logits);
    cz_ft_features_free(&f);
    cz_ft_dataset_free(&rd);
    cz_tokenizer_free(tok);
}

static void test_metrics(void) {
    cz_ft_scores s;
    int gold[8] = {1, 1, 1, 0, 0, 0, 0, 1}, pred[8] = {1, 1, 0, 0, 0, 1, 0, 1};
    cz_ft_classify_scores(gold, pred, 8, &s);
    /* TP 3 FN 1 FP 1 TN 3: acc 6/8, F1 6/8, MCC (9-1)/sqrt(4*4*4*4) = 0.5 */
    CHECK(near(s.accuracy, 0.75) && near(s.f1, 0.75) && near(s.mcc, 0.5), "acc %g f1 %g mcc %g",
          s.accuracy, s.f1, s.mcc);
    int all0[4] = {0, 0, 0, 0};
    cz_ft_classify_scores(gold, all0, 4, &s);
    CHECK(s.mcc == 0 && s.f1 == 0, "constant predictions: MCC 0");

    char *n = cz_ft_squad_normalize("  The Denver  Broncos!  ");
    CHECK(!strcmp(n, "denver broncos"), "normalize: \"%s\"", n);
    free(n);
    n = cz_ft_squad_normalize("a theory, an apple & the end");
    CHECK(!strcmp(n, "theory apple end"), "articles and punctuation: \"%s\"", n);
    free(n);
    double em, f1;
    char *g[2] = {"Denver Broncos", "the Broncos"};
    cz_ft_squad_score("Broncos", g, 2, &em, &f1);
    CHECK(em == 1 && near(f1, 1.0), "EM against the second answer (\"the\" dropped)");
    cz_ft_squad_score("Denver", g, 2, &em, &f1);
    CHECK(em == 0 && near(f1, 2.0 / 3.0), "F1 max over answers: em %g f1 %g", em, f1);
    cz_ft_squad_score("The Denver Broncos.", g, 2, &em, &f1);
    CHECK(em == 1 && near(f1, 1.0), "EM after normalisation");
    char *g1[1] = {"Carolina Panthers team"};
    cz_ft_squad_score("the Panthers team won", g1, 1, &em, &f1);
    /* pred: panthers team won (3), gold: carolina panthers team (3), common 2 */
    CHECK(near(f1, 2.0 / 3.0), "token F1 %g", f1);

    /* conlleval: names B-per I-per B-loc I-loc O */
    char names[5][32] = {"O", "B-per", "I-per", "B-loc", "I-loc"};
    /* gold: [B-per I-per] O [B-loc] | [B-loc I-loc]
     * pred: [B-per] [I-per] O [I-loc] | [B-loc] [I-per]
     * pred chunks: per(0,0) per(1,1) loc(3,3) | loc(0,0) per(1,1): 5;
     * gold chunks: per(0,1) loc(3,3) | loc(0,1): 3; correct: loc(3,3) = 1 */
    int gt[6] = {1, 2, 0, 3, 3, 4}, pt[6] = {1, 1, 0, 4, 3, 2};
    int gt2[6] = {1, 2, 0, 3, 3, 4}, pt2[6] = {1, 2, 0, 4, 3, 2};
    int lens[2] = {4, 2};
    cz_ft_entity_scores(gt, pt, lens, 2, names, &s);
    CHECK(near(s.precision, 20.0) && near(s.recall, 100.0 / 3), "conlleval P %g R %g", s.precision,
          s.recall);
    /* I- after O starts a chunk; type change inside ends one:
     * pred2 chunks: per(0,1) loc(3,3) | loc(0,0) per(1,1): correct 2 of 4 / 3 */
    cz_ft_entity_scores(gt2, pt2, lens, 2, names, &s);
    CHECK(near(s.precision, 50.0) && near(s.recall, 200.0 / 3) &&
              near(s.entity_f1, 2 * 50.0 * (200.0 / 3) / (50.0 + 200.0 / 3)),
          "conlleval P %g R %g F %g", s.precision, s.recall, s.entity_f1);
}

/* The real files: counts as ../shared/data/README.md states them. */
static void test_real(void) {
    const char *root = getenv("CLOZE_SHARED_DATA");
    char path[1024];
    struct stat st;
    if (!root || (snprintf(path, sizeof path, "%s/tasks", root), stat(path, &st) != 0)) {
        printf("real task files: skipped (no ../shared/data/tasks)\n");
        return;
    }
    const struct {
        const char *task, *file;
        int n;
    } cases[] = {{"sst2", "glue/SST-2/dev.tsv", 872},
                 {"mrpc", "glue/MRPC/dev.tsv", 408},
                 {"mrpc", "glue/MRPC/train.tsv", 3667},
                 {"rte", "glue/RTE/dev.tsv", 277},
                 {"cola", "glue/CoLA/dev.tsv", 1043},
                 {"wnut17", "wnut17/emerging.dev.conll", 1009},
                 {"wnut17", "wnut17/wnut17train.conll", 3394},
                 {"squad", "squad/dev-v1.1-articles-00-23.json", 5696}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cz_ft_task t;
        cz_error err;
        cz_ft_dataset d;
        CHECK(cz_ft_task_preset(&t, cases[i].task, &err) == 0, "%s", err.msg);
        snprintf(path, sizeof path, "%s/tasks/%s", root, cases[i].file);
        int rc = cz_ft_read(&d, &t, path, 1, &err);
        CHECK(rc == 0 && d.n == cases[i].n, "%s: %d examples, README says %d (%s)", cases[i].file,
              rc ? -1 : d.n, cases[i].n, rc ? err.msg : "");
        if (rc == 0 && t.kind == CZ_FT_TAG)
            CHECK(t.n_labels == 13, "WNUT-17: 13 tags (O + B/I of 6 types), got %d", t.n_labels);
        printf("  %s: %d examples\n", cases[i].file, rc ? -1 : d.n);
        if (rc == 0) cz_ft_dataset_free(&d);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cz_ft_data.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_tsv();
    test_conll();
    test_squad_reader();
    test_features();
    test_metrics();
    test_real();
    return check_finish(dir);
}
