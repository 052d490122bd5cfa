/* cloze-finetune: fine-tune a pre-trained or imported model on a task.
 *   cloze-finetune run      one run (results.jsonl, checkpoints, --resume)
 *   cloze-finetune grid     BERT App. A.3: a grid over learning rate, batch
 *                           size and epochs, restarts with different seeds,
 *                           selection on the dev set, a results table
 *   cloze-finetune predict  a fine-tuned checkpoint's predictions on a file
 *                           (scored when the file has labels)
 *   cloze-finetune features per-token states of chosen layers (Sec. 5.3)
 * A thin main: arguments -> cz_ft_options -> src/finetune. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cloze/comm.h"
#include "cloze/finetune.h"
#include "cloze/train.h"

static const char HELP[] =
    "usage: cloze-finetune run      --init MODEL --task TASK --train FILE --dev FILE --out DIR "
    "[options]\n"
    "       cloze-finetune grid     --init MODEL --task TASK --train FILE --dev FILE --out DIR\n"
    "                               [--lr LIST] [--batch LIST] [--epochs LIST] [--restarts N] "
    "[options]\n"
    "       cloze-finetune predict  --init FINETUNED --task TASK --input FILE --out DIR [options]\n"
    "       cloze-finetune features --init MODEL --input FILE --out FILE.safetensors\n"
    "                               [--task lines|tsv|conll] [--layers LIST]\n"
    "       mpirun -np N cloze-finetune ...   (data-parallel; --exact: the same bits on any rank "
    "count)\n"
    "\n"
    "MODEL: a cloze checkpoint (cloze-train's, cloze-ckpt import-hf's, or a fine-tuned one)\n"
    "or a Hugging Face directory (BertModel / BertForPreTraining / OpenAIGPT*).\n"
    "TASK: sst2 mrpc rte cola (GLUE TSVs), tsv (any TSV: --text-a, --text-b, --label\n"
    "columns by header name or 0-based index, --no-header), squad (v1.1 JSON),\n"
    "conll / wnut17 (token<TAB>tag lines, BIO tags), choice (multiple choice, JSON lines:\n"
    "{\"context\", \"question\" (optional), \"endings\": [...], \"label\": index}). BERT models\n"
    "take every task; GPT models classify and choose (GPT-1: <s> a $ b <e>, last-token\n"
    "classifier, auxiliary LM loss; choice: <s> context $ ending <e> per ending, softmax\n"
    "over the endings).\n"
    "\n"
    "options (defaults: BERT's fine-tuning recipe, docs/finetune.md):\n"
    "  --lr X               peak learning rate (2e-5); linear warm-up then linear decay\n"
    "  --batch N            examples per step over all ranks (32)\n"
    "  --epochs N           (3)\n"
    "  --seed N             data order, head initialisation, dropout (1)\n"
    "  --max-seq N          tokens per sequence (128)\n"
    "  --train-limit N      only the first N training examples (0 = all)\n"
    "  --dev-limit N        only the first N dev examples (0 = all)\n"
    "  --test FILE          run: after the last step, predict and score FILE too\n"
    "                       (DIR/test_predictions.*, a \"test\" line in results.jsonl)\n"
    "  --test-limit N       only the first N test examples (0 = all)\n"
    "  --warmup F           warm-up fraction of the steps (0.1)\n"
    "  --weight-decay F     decoupled weight decay (0.01)\n"
    "  --lm-weight F        GPT: lambda of the auxiliary LM loss (0.5)\n"
    "  --similarity         GPT pairs: run a $ b and b $ a, add their extract states (GPT-1's\n"
    "                       input for similarity tasks such as MRPC)\n"
    "  --dropout F          hidden and attention dropout (the model's own: 0.1 for BERT's)\n"
    "  --doc-stride N       SQuAD: tokens between windows (128)\n"
    "  --max-query N        SQuAD: question tokens kept (64)\n"
    "  --max-answer N       SQuAD: longest answer in tokens (30)\n"
    "  --micro-batch N      examples per forward on one rank (batch / ranks; with --exact\n"
    "                       the largest divisor of batch up to 4, on any rank count)\n"
    "  --pad longest|max    pad each batch to its longest sequence (the same results,\n"
    "                       faster) or to --max-seq (longest)\n"
    "  --threads N          threads per rank (0 = cores / ranks)\n"
    "  --exact              exact sums (dist.exact): the same metrics, dev scores and\n"
    "                       checkpoints on any rank count up to batch / micro-batch\n"
    "  --eval-every-epoch   dev scores after every epoch (else after the last)\n"
    "  --random-init        the architecture and vocabulary of MODEL, not its weights\n"
    "  --resume auto|PATH   run: continue a stopped run; grid: finished points are kept\n"
    "  --stop-after N       stop with a checkpoint after N steps (continue: --resume auto)\n"
    "  --allow-config-change  with --resume: continue although the recipe changed what\n"
    "                       the run means (lr, batch, seed, ...; refused otherwise)\n"
    "  --quiet              no progress lines\n"
    "  --no-tensorboard     no TensorBoard event files in DIR (train.tensorboard)\n"
    "grid: --lr, --batch, --epochs take comma lists (BERT's: 2e-5,3e-5,5e-5 16,32 2,3,4);\n"
    "      --restarts N seeds seed..seed+N-1 per point (1). Each point runs in\n"
    "      DIR/lr<X>-b<N>-e<N>-s<N>/; DIR/grid.jsonl gets every point, every configuration's\n"
    "      mean and std over restarts, and the selected configuration (best dev mean).\n"
    "predict: FINETUNED is a run's DIR/ckpt-*.lz4 (its task and label order); FILE is read\n"
    "      like a dev file, labels optional (a TSV without the label column, CoNLL tokens\n"
    "      alone, SQuAD without answers). Writes DIR/predictions.txt (a label per line),\n"
    "      DIR/predictions.conll (token<TAB>tag) or DIR/predictions.json (SQuAD's official\n"
    "      format), and for a labelled FILE DIR/scores.json (run's dev figures). --limit N:\n"
    "      the first N examples; --max-seq defaults to the fine-tuning run's.\n"
    "features: --layers LIST (-1,-2,-3,-4: the last four, Sec. 5.3's best), --input a\n"
    "      text file (one sequence per line) or a TSV/CoNLL file with --task.\n"
    "Results: DIR/results.jsonl, one JSON object per evaluation (format in\n"
    "docs/finetune.md); the last evaluation's predictions in DIR/dev_predictions.jsonl\n"
    "(classification, tagging) or DIR/predictions.json (SQuAD, the official format);\n"
    "training curves in DIR/metrics.jsonl; checkpoints DIR/ckpt-*.lz4 (`cloze-ckpt\n"
    "export-hf` turns one into the Hugging Face task model).\n";

static int parse_list(const char *s, double *v, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *end;
        v[n] = strtod(s, &end);
        if (end == s) return -1;
        n++;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* strtol / strtoull with base 10, in strtod's shape for NUM() */
static long strtol10(const char *s, char **end) {
    return strtol(s, end, 10);
}
static unsigned long long strtoull10(const char *s, char **end) {
    return strtoull(s, end, 10);
}

typedef struct args {
    cz_ft_options o;
    double lrs[16], batches[16], epochs[16], layers[64];
    int n_lr, n_batch, n_epochs, n_layers, restarts;
    char task[32], text_a[64], text_b[64], label[64];
    int no_header, similarity;
    const char *input, *out_file;
} args;

/* Whether option i has its value; else err says so (said by rank 0 alone). */
static int need(const char *opt, int i, int argc, cz_error *err) {
    if (i + 1 >= argc) {
        cz_fail(err, "%s needs a value (see --help)", opt);
        return 0;
    }
    return 1;
}

/* An option with a value at argv[*i] (then *i moves past it): 1 when k is
 * one, 0 when it is not, -1 when its value is missing or bad (err). */
static int parse_valued(args *a, const char *k, int *i, int argc, char **argv, cz_error *err) {
    cz_ft_options *o = &a->o;
#define STR(flag, dst)                                                                             \
    if (!strcmp(k, flag)) {                                                                        \
        if (!need(k, *i, argc, err)) return -1;                                                    \
        snprintf(dst, sizeof dst, "%s", argv[++*i]);                                               \
        return 1;                                                                                  \
    }
#define NUM(flag, dst, conv)                                                                       \
    if (!strcmp(k, flag)) {                                                                        \
        if (!need(k, *i, argc, err)) return -1;                                                    \
        char *end_;                                                                                \
        dst = conv(argv[++*i], &end_);                                                             \
        if (*end_ || end_ == argv[*i])                                                             \
            return cz_fail(err, "%s: not a number: %s", flag, argv[*i]);                           \
        return 1;                                                                                  \
    }
#define LIST(flag, arr, n)                                                                         \
    if (!strcmp(k, flag)) {                                                                        \
        if (!need(k, *i, argc, err)) return -1;                                                    \
        n = parse_list(argv[++*i], arr, (int)(sizeof arr / sizeof arr[0]));                        \
        if (n < 1) return cz_fail(err, "%s: not a comma list of numbers: %s", flag, argv[*i]);     \
        return 1;                                                                                  \
    }
    STR("--init", o->init)
    STR("--train", o->train_path)
    STR("--dev", o->dev_path)
    STR("--test", o->test_path)
    STR("--out", o->out_dir)
    STR("--task", a->task)
    STR("--text-a", a->text_a)
    STR("--text-b", a->text_b)
    STR("--label", a->label)
    NUM("--train-limit", o->train_limit, (int)strtol10)
    NUM("--dev-limit", o->dev_limit, (int)strtol10)
    NUM("--test-limit", o->test_limit, (int)strtol10)
    NUM("--limit", o->test_limit, (int)strtol10)
    NUM("--max-seq", o->max_seq, (int)strtol10)
    NUM("--doc-stride", o->doc_stride, (int)strtol10)
    NUM("--max-query", o->max_query, (int)strtol10)
    NUM("--max-answer", o->max_answer, (int)strtol10)
    NUM("--micro-batch", o->micro_batch, (int)strtol10)
    NUM("--threads", o->threads, (int)strtol10)
    NUM("--seed", o->seed, strtoull10)
    NUM("--warmup", o->warmup_fraction, strtod)
    NUM("--weight-decay", o->weight_decay, strtod)
    NUM("--lm-weight", o->lm_weight, (float)strtod)
    NUM("--dropout", o->dropout, (float)strtod)
    NUM("--restarts", a->restarts, (int)strtol10)
    NUM("--stop-after", o->stop_after, strtol10)
    LIST("--lr", a->lrs, a->n_lr)
    LIST("--batch", a->batches, a->n_batch)
    LIST("--epochs", a->epochs, a->n_epochs)
    LIST("--layers", a->layers, a->n_layers)
    if (!strcmp(k, "--input")) {
        if (!need(k, *i, argc, err)) return -1;
        a->input = argv[++*i];
        return 1;
    }
    if (!strcmp(k, "--resume")) {
        if (!need(k, *i, argc, err)) return -1;
        o->resume = argv[++*i];
        return 1;
    }
    if (!strcmp(k, "--pad")) {
        if (!need(k, *i, argc, err)) return -1;
        const char *v = argv[++*i];
        if (strcmp(v, "longest") && strcmp(v, "max"))
            return cz_fail(err, "--pad %s: longest or max", v);
        o->pad_max = !strcmp(v, "max");
        return 1;
    }
    return 0;
#undef STR
#undef NUM
#undef LIST
}

/* A flag: 1 when k is one (set), else 0. */
static int parse_flag(args *a, const char *k) {
    const struct {
        const char *name;
        int *on;
    } flags[] = {{"--no-header", &a->no_header},
                 {"--eval-every-epoch", &a->o.eval_epochs},
                 {"--similarity", &a->similarity},
                 {"--allow-config-change", &a->o.allow_config_change},
                 {"--random-init", &a->o.random_init},
                 {"--exact", &a->o.exact},
                 {"--quiet", &a->o.quiet},
                 {"--no-tensorboard", &a->o.no_tensorboard}};
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++)
        if (!strcmp(k, flags[f].name)) {
            *flags[f].on = 1;
            return 1;
        }
    return 0;
}

static int parse(args *a, int argc, char **argv, cz_error *err) {
    for (int i = 2; i < argc; i++) {
        int r = parse_valued(a, argv[i], &i, argc, argv, err);
        if (r < 0) return -1;
        if (r == 0 && !parse_flag(a, argv[i]))
            return cz_fail(err, "unknown option %s (see --help)", argv[i]);
    }
    return 0;
}

static int task_of(args *a, cz_error *err) {
    if (!a->task[0]) snprintf(a->task, sizeof a->task, "%s", a->input ? "lines" : "");
    if (!a->task[0]) return cz_fail(err, "--task is required (see --help)");
    if (cz_ft_task_preset(&a->o.task, a->task, err)) return -1;
    cz_ft_task *t = &a->o.task;
    cz_ft_task_columns(t, a->text_a, a->text_b, a->label, a->no_header);
    if (a->similarity && (t->kind != CZ_FT_CLASSIFY || !t->text_b[0]))
        return cz_fail(err, "--similarity: task %s has no text pairs", t->name);
    t->similarity = a->similarity;
    return 0;
}

static int check_paths(const args *a, int features, int predict, cz_error *err) {
    const cz_ft_options *o = &a->o;
    if (!o->init[0]) return cz_fail(err, "--init MODEL is required");
    if (features)
        return a->input && a->out_file ? 0 : cz_fail(err, "--input and --out are required");
    if (predict)
        return a->input && o->out_dir[0] ? 0 : cz_fail(err, "--input and --out are required");
    if (!o->train_path[0] || !o->dev_path[0] || !o->out_dir[0])
        return cz_fail(err, "--train, --dev and --out are required");
    return 0;
}

/* ---- grid ---- */

/* BERT App. A.3's lists where none are given: lr 2e-5, 3e-5, 5e-5; batch
 * 16, 32; epochs 2, 3, 4. The grid itself is src/finetune/grid.c. */
static int run_grid(const cz_comm *world, const args *a, cz_error *err) {
    static const double bert_lr[3] = {2e-5, 3e-5, 5e-5};
    static const int bert_b[2] = {16, 32}, bert_e[3] = {2, 3, 4};
    int batch[16], epochs[16];
    for (int i = 0; i < a->n_batch; i++) batch[i] = (int)a->batches[i];
    for (int i = 0; i < a->n_epochs; i++) epochs[i] = (int)a->epochs[i];
    cz_ft_grid g = {
        .lr = a->n_lr ? a->lrs : bert_lr,
        .n_lr = a->n_lr ? a->n_lr : 3,
        .batch = a->n_batch ? batch : bert_b,
        .n_batch = a->n_batch ? a->n_batch : 2,
        .epochs = a->n_epochs ? epochs : bert_e,
        .n_epochs = a->n_epochs ? a->n_epochs : 3,
        .restarts = a->restarts,
    };
    return cz_ft_grid_run(world, &a->o, &g, err);
}

/* --help, no command or an unknown one, before MPI starts (rank 0 alone
 * says them): the exit status, or -1 to go on. */
static int early_exit(int *argc, char ***argv, int say) {
    if (*argc < 2 || !strcmp((*argv)[1], "--help") || !strcmp((*argv)[1], "-h")) {
        if (*argc >= 2 || say) fputs(HELP, *argc < 2 ? stderr : stdout);
        return *argc < 2 ? cz_comm_end_early(argc, argv, 2) : 0;
    }
    const char *cmd = (*argv)[1];
    if (strcmp(cmd, "run") && strcmp(cmd, "grid") && strcmp(cmd, "predict") &&
        strcmp(cmd, "features")) {
        if (say)
            fprintf(stderr,
                    "cloze-finetune: unknown command '%s' (run, grid, predict, features; see "
                    "--help)\n",
                    cmd);
        return cz_comm_end_early(argc, argv, 2);
    }
    for (int i = 2; i < *argc; i++)
        if (!strcmp((*argv)[i], "--help")) {
            fputs(HELP, stdout);
            return 0;
        }
    return -1;
}

/* The options of command cmd into a, checked as far as they can be
 * without the files. */
static int args_of(const char *cmd, int argc, char **argv, args *a, cz_error *err) {
    memset(a, 0, sizeof *a);
    cz_ft_options_default(&a->o);
    int features = !strcmp(cmd, "features"), predict = !strcmp(cmd, "predict");
    if (features) a->o.max_seq = 128;
    if (predict) a->o.max_seq = 0; /* the fine-tuning run's, unless given */
    int rc = parse(a, argc, argv, err);
    if (rc == 0 && features) {
        a->out_file = a->o.out_dir[0] ? a->o.out_dir : NULL;
        snprintf(a->o.dev_path, sizeof a->o.dev_path, "%s", a->input ? a->input : "");
    }
    if (rc == 0 && predict) {
        if (a->o.test_path[0]) rc = cz_fail(err, "--test is run's; predict reads --input FILE");
        snprintf(a->o.test_path, sizeof a->o.test_path, "%s", a->input ? a->input : "");
    }
    if (rc == 0 && !predict && !features && a->input)
        rc = cz_fail(err, "--input is predict's and features'; run and grid take --train, "
                          "--dev and --test");
    if (rc == 0) rc = task_of(a, err);
    if (rc == 0) rc = check_paths(a, features, predict, err);
    return rc;
}

/* cloze-finetune run: one run, its dev score said by rank 0. */
static int run_one(const cz_comm *world, args *a, cz_error *err) {
    if (a->n_lr == 1) a->o.lr = a->lrs[0];
    if (a->n_batch == 1) a->o.batch = (int)a->batches[0];
    if (a->n_epochs == 1) a->o.epochs = (int)a->epochs[0];
    if (a->n_lr > 1 || a->n_batch > 1 || a->n_epochs > 1)
        return cz_fail(err, "run takes one --lr, --batch and --epochs (lists: grid)");
    cz_ft_result res;
    int rc = cz_ft_run(world, &a->o, &res, err);
    if (rc == 0 && world->rank == 0 && res.finished)
        printf("%s: dev %.4f after %ld steps (%.1f s); %s/results.jsonl\n", a->o.task.name,
               res.score, res.steps, res.seconds, a->o.out_dir);
    else if (rc == 0 && world->rank == 0)
        printf("%s: stopped before step %ld with a checkpoint in %s; continue with "
               "--resume auto\n",
               a->o.task.name, res.steps, a->o.out_dir);
    return rc;
}

/* The command on every rank of world. */
static int run_command(const cz_comm *world, const char *cmd, args *a, cz_error *err) {
    if (!strcmp(cmd, "features")) {
        int layers[64];
        int nl = a->n_layers ? a->n_layers : 4;
        for (int i = 0; i < nl; i++) layers[i] = a->n_layers ? (int)a->layers[i] : -1 - i;
        return cz_ft_extract(world, &a->o, layers, nl, a->out_file, err);
    }
    if (!strcmp(cmd, "grid")) return run_grid(world, a, err);
    if (!strcmp(cmd, "predict")) {
        cz_ft_result res;
        int rc = cz_ft_predict(world, &a->o, &res, err);
        if (rc == 0 && world->rank == 0 && !isnan(res.score))
            printf("%s: %.4f on %s\n", a->o.task.name, res.score, a->o.test_path);
        return rc;
    }
    return run_one(world, a, err);
}

int main(int argc, char **argv) {
    cz_train_catch_signals(); /* a stop signal during start-up is kept for the run */
    /* argument errors come before MPI_Init: rank 0 alone says them */
    int say = cz_launch_rank() == 0;
    int rc = early_exit(&argc, &argv, say);
    if (rc >= 0) return rc;
    const char *cmd = argv[1];
    args a;
    cz_error err = {{0}};
    if (args_of(cmd, argc, argv, &a, &err) != 0) {
        if (say) fprintf(stderr, "cloze-finetune %s: %s\n", cmd, err.msg);
        return cz_comm_end_early(&argc, &argv, 2);
    }
    cz_comm world;
    if (cz_comm_init(&world, &argc, &argv, &err) != 0) {
        fprintf(stderr, "cloze-finetune: %s\n", err.msg);
        return 1;
    }
    int rank = world.rank;
    cz_log_setup(rank, getenv("CLOZE_DEBUG") ? CZ_LOG_DEBUG : CZ_LOG_INFO);
    rc = run_command(&world, cmd, &a, &err);
    if (rc == CZ_TRAIN_ERR_ALL_RANKS) { /* every rank's: said once, no MPI_Abort banner */
        if (rank == 0) fprintf(stderr, "cloze-finetune: error: %s\n", err.msg);
        cz_comm_finalize(&world);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "cloze-finetune: error (rank %d): %s\n", rank, err.msg);
        cz_comm_abort(&world, 1);
        return 1;
    }
    cz_comm_finalize(&world);
    return 0;
}
