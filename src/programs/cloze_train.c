/* cloze-train: pre-train a BERT or GPT model from token shards.
 * A thin main: arguments -> config -> cz_train_run. */
#include "cloze/comm.h"
#include "cloze/config.h"
#include "cloze/core.h"
#include "cloze/train.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OVERRIDES 256

static void usage(FILE *out) {
    fprintf(out, "usage: cloze-train CONFIG [--set section.key=value]... [--resume auto|PATH | "
                 "--start-fresh]\n"
                 "                   [--allow-config-change] [--quiet]\n"
                 "       mpirun -np N cloze-train CONFIG ...      (one rank per process)\n"
                 "       cloze-train plot RUN_DIR [--out PREFIX]  (the run's curves: plot --help)\n"
                 "\n"
                 "Pre-trains the model described by CONFIG (a libconfig file, see conf/ and\n"
                 "docs/config.md) on the shards named by data.train_manifest.\n"
                 "\n"
                 "  --set KEY=VALUE   override any configuration key, e.g. --set model.layers=6\n"
                 "                    (repeatable; applied after the file, then validated)\n"
                 "  --resume auto     continue from the newest checkpoint in train.run_dir that\n"
                 "                    verifies (skipping corrupt ones); start fresh if there is\n"
                 "                    none; an error if there are checkpoints but none verifies\n"
                 "  --resume PATH     continue from that checkpoint file\n"
                 "                    A resume refuses changed keys that change what the run\n"
                 "                    means (train.seed, train.global_batch, train.steps,\n"
                 "                    optim.*, the model, the data: column \"on resume\" of\n"
                 "                    docs/config.md), naming them; other changes (intervals,\n"
                 "                    threads, ranks, micro-batch, dist.*) are logged\n"
                 "  --allow-config-change  resume despite such changes (a warning lists them)\n"
                 "  --start-fresh     start at step 0 even though train.run_dir holds checkpoints\n"
                 "                    (unreadable ones are kept; the same steps are replaced)\n"
                 "  --quiet           no progress lines (metrics.jsonl is still written)\n"
                 "  --help-config     list every configuration key with its default and meaning\n"
                 "  --help            this text\n"
                 "\n"
                 "The run directory (train.run_dir) receives config.cfg (the effective\n"
                 "configuration), metrics.jsonl and the same figures as TensorBoard event files\n"
                 "(events.out.tfevents.*, for tensorboard --logdir; train.tensorboard), train.log\n"
                 "lines on stderr, checkpoints ckpt-<step>.lz4, and run.lock: one job at a time\n"
                 "uses a run directory (a second is refused, naming the holder's host and pid).\n"
                 "SIGUSR1 or SIGTERM: write a checkpoint and exit 0.\n");
}

static void plot_usage(FILE *out) {
    fprintf(out, "usage: cloze-train plot RUN_DIR [--out PREFIX] [--gnuplot PATH]\n"
                 "\n"
                 "Draws a run's loss, accuracy (a GPT: perplexity) and learning-rate curves,\n"
                 "training and held-out, from RUN_DIR/metrics.jsonl (and a cloze-finetune\n"
                 "run's results.jsonl: its dev score) with gnuplot. Where a resumed run redid\n"
                 "steps, the later attempt is drawn; each training step faint, under its moving\n"
                 "average over about a fiftieth of the run. A running job can be drawn too.\n"
                 "\n"
                 "  --out PREFIX      write PREFIX.png, PREFIX.svg and PREFIX.gp (the gnuplot\n"
                 "                    script, its data inline: `gnuplot PREFIX.gp` in PREFIX's\n"
                 "                    directory redraws them); default RUN_DIR/curves\n"
                 "  --gnuplot PATH    the gnuplot to run (default: gnuplot on PATH;\n"
                 "                    Debian: apt-get install gnuplot-nox)\n"
                 "  --help            this text\n");
}

/* cloze-train plot: no MPI, one process. */
static int plot_main(int argc, char **argv) {
    cz_plot_options po = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            plot_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--out") && i + 1 < argc) {
            po.out = argv[++i];
        } else if (!strcmp(a, "--gnuplot") && i + 1 < argc) {
            po.gnuplot = argv[++i];
        } else if (a[0] == '-' || po.run_dir) {
            fprintf(stderr, "cloze-train plot: unexpected argument '%s' (try --help)\n", a);
            return 2;
        } else {
            po.run_dir = a;
        }
    }
    if (!po.run_dir) {
        plot_usage(stderr);
        return 2;
    }
    cz_error err = {{0}};
    if (cz_train_plot(&po, &err) != 0) {
        fprintf(stderr, "cloze-train plot: %s\n", err.msg);
        return 1;
    }
    char out[CZ_PATH_MAX + 16];
    snprintf(out, sizeof out, "%s", po.out ? po.out : po.run_dir);
    printf("wrote %s%s.png and .svg\n", out, po.out ? "" : "/curves");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "plot")) return plot_main(argc - 1, argv + 1);
    cz_train_catch_signals(); /* a stop signal during start-up is kept for the run */
    const char *config_path = NULL;
    const char *overrides[MAX_OVERRIDES];
    int n_overrides = 0;
    cz_train_options opt = {0};
    /* argument errors come before MPI_Init: rank 0 alone says them, and
     * every rank ends after it has (cz_comm_end_early) */
    FILE *errs = cz_launch_rank() == 0 ? stderr : NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--help-config")) {
            cz_config_print_keys(stdout);
            return 0;
        } else if ((!strcmp(a, "--set") && i + 1 < argc) || !strncmp(a, "--set=", 6)) {
            if (n_overrides == MAX_OVERRIDES) {
                if (errs) fprintf(errs, "cloze-train: more than %d --set options\n", MAX_OVERRIDES);
                return cz_comm_end_early(&argc, &argv, 2);
            }
            overrides[n_overrides++] = a[5] == '=' ? a + 6 : argv[++i];
        } else if (!strcmp(a, "--resume") && i + 1 < argc) {
            opt.resume = argv[++i];
        } else if (!strcmp(a, "--allow-config-change")) {
            opt.allow_config_change = 1;
        } else if (!strcmp(a, "--start-fresh")) {
            opt.start_fresh = 1;
        } else if (!strcmp(a, "--quiet")) {
            opt.quiet = 1;
        } else if (a[0] == '-') {
            if (errs) fprintf(errs, "cloze-train: unknown option '%s' (try --help)\n", a);
            return cz_comm_end_early(&argc, &argv, 2);
        } else if (!config_path) {
            config_path = a;
        } else {
            if (errs) fprintf(errs, "cloze-train: unexpected argument '%s' (try --help)\n", a);
            return cz_comm_end_early(&argc, &argv, 2);
        }
    }
    if (!config_path) {
        if (errs) usage(errs);
        return cz_comm_end_early(&argc, &argv, 2);
    }
    if (opt.start_fresh && opt.resume) {
        if (errs) fprintf(errs, "cloze-train: --start-fresh and --resume exclude each other\n");
        return cz_comm_end_early(&argc, &argv, 2);
    }

    cz_comm world;
    cz_error err = {{0}};
    if (cz_comm_init(&world, &argc, &argv, &err) != 0) {
        fprintf(stderr, "cloze-train: %s\n", err.msg);
        return 1;
    }
    cz_log_setup(world.rank, getenv("CLOZE_DEBUG") ? CZ_LOG_DEBUG : CZ_LOG_INFO);

    cz_config cfg;
    /* every rank loaded the configuration: rank 0 says the first failure,
     * then all end alike, without MPI_Abort's banner */
    int rc = cz_comm_agree_setup(
        &world, cz_config_load(&cfg, config_path, overrides, n_overrides, &err), &err);
    if (rc == 0) rc = cz_train_run(&world, &cfg, &opt, &err);
    if (rc == CZ_TRAIN_ERR_ALL_RANKS) {
        if (world.rank == 0) fprintf(stderr, "cloze-train: error: %s\n", err.msg);
        cz_comm_finalize(&world);
        return 1;
    }
    if (rc != 0) {
        /* every rank reaches the same verdict for config errors; a data or
         * I/O error on one rank must end the whole job, not hang the others */
        fprintf(stderr, "cloze-train: error (rank %d): %s\n", world.rank, err.msg);
        cz_comm_abort(&world, 1);
        return 1;
    }
    cz_comm_finalize(&world);
    return 0;
}
