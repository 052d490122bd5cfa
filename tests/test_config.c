/* config: every conf/ file loads and validates; write -> read gives the
 * identical struct; bad files and bad --set values fail with the expected
 * "file:line: key: message"; arch-dependent and derived defaults;
 * docs/config.md matches the key table.
 *
 * `test_config --update-docs` rewrites the generated part of docs/config.md. */
#include "cloze/config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[256];
static const char *source_dir;

static const char *write_tmp(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    return path;
}

/* Two configs are the same run when every byte matches apart from where
 * they were read from. */
static int same_config(const cz_config *a, const cz_config *b) {
    cz_config x = *a, y = *b;
    memset(x.source, 0, sizeof x.source);
    memset(y.source, 0, sizeof y.source);
    return memcmp(&x, &y, sizeof x) == 0;
}

/* to_string -> from_string, and write -> load, give back the same struct */
static void check_round_trip(const cz_config *c, const char *what) {
    char *text = cz_config_to_string(c);
    CHECK(text != NULL, "%s: to_string failed", what);
    if (!text) return;
    cz_config back;
    cz_error err;
    memset(&back, 0xA5, sizeof back); /* the loader must zero padding itself */
    int rc = cz_config_from_string(&back, text, "roundtrip", &err);
    CHECK(rc == 0, "%s: re-reading the written config: %s", what, err.msg);
    if (rc == 0)
        CHECK(same_config(c, &back), "%s: struct differs after to_string/from_string", what);

    char path[512];
    snprintf(path, sizeof path, "%s/written.cfg", tmpdir);
    CHECK(cz_config_write(c, path, &err) == 0, "%s: write: %s", what, err.msg);
    memset(&back, 0x5A, sizeof back);
    rc = cz_config_load(&back, path, NULL, 0, &err);
    CHECK(rc == 0, "%s: loading the written file: %s", what, err.msg);
    if (rc == 0) CHECK(same_config(c, &back), "%s: struct differs after write/load", what);
    free(text);
}

static void test_defaults(void) {
    cz_config c;
    cz_error err;
    cz_config_defaults(&c);
    CHECK(cz_config_validate(&c, &err) == 0, "defaults do not validate: %s", err.msg);
    /* BERT-base (Devlin et al. Sec. 3, App. A.2) */
    CHECK(c.model.arch == CZ_ARCH_BERT && c.model.layers == 12 && c.model.hidden == 768 &&
              c.model.heads == 12 && c.model.intermediate == 3072,
          "defaults are not BERT-base");
    CHECK(c.model.vocab_size == 30522 && c.model.type_vocab_size == 2 && c.model.gelu_tanh == 0,
          "BERT vocab/segments/gelu");
    CHECK(c.model.layer_norm_eps == 1e-12f, "BERT layer_norm_eps %g", c.model.layer_norm_eps);
    CHECK(c.optim.lr == 1e-4 && c.optim.beta1 == 0.9 && c.optim.beta2 == 0.999 &&
              c.optim.weight_decay == 0.01 && c.optim.eps == 1e-6,
          "BERT Adam settings");
    CHECK(c.optim.n_no_decay == 2 && !strcmp(c.optim.no_decay[0], "LayerNorm") &&
              !strcmp(c.optim.no_decay[1], "bias"),
          "BERT no_decay list");
    CHECK(c.optim.schedule == CZ_SCHEDULE_LINEAR && c.dist.allreduce == CZ_ALLREDUCE_RING &&
              c.optim.placement == CZ_PLACE_SHARDED && c.optim.kind == CZ_OPT_ADAMW &&
              c.train.gemm == CZ_GEMM_AUTO,
          "words");
    CHECK(c.data.seq == 128 && c.data.max_pred == 20 && c.train.global_batch == 256,
          "BERT data/batch");
    CHECK(c.data.train_manifest[0] == 0 && c.train.run_dir[0] == 0, "paths default to empty");
    check_round_trip(&c, "defaults");

    /* no path: defaults + overrides */
    const char *sets[] = {"model.arch=gpt"};
    CHECK(cz_config_load(&c, NULL, sets, 1, &err) == 0, "gpt from --set only: %s", err.msg);
    CHECK(c.model.arch == CZ_ARCH_GPT && c.model.layer_norm_eps == 1e-5f &&
              c.model.gelu_tanh == 1 && c.model.type_vocab_size == 0 && c.data.seq == 512 &&
              c.data.max_pred == 0 && c.optim.schedule == CZ_SCHEDULE_COSINE &&
              c.optim.bias_correction == 1 && c.optim.lr == 2.5e-4 &&
              !strcmp(c.optim.no_decay[0], "ln_"),
          "GPT arch defaults not applied");
}

static void test_conf_files(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/conf", source_dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        cz_config c;
        cz_error err;
        int rc = cz_config_load(&c, path, NULL, 0, &err);
        CHECK(rc == 0, "%s: %s", e->d_name, err.msg);
        if (rc == 0) check_round_trip(&c, e->d_name);
        n++;
    }
    closedir(d);
    CHECK(n >= 8, "only %d conf/*.cfg files", n);

    /* spot checks against the papers (the files could say anything) */
    struct {
        const char *name;
        int layers, hidden, heads;
    } sizes[] = {{"bert-tiny", 2, 128, 2},   {"bert-mini", 4, 256, 4},
                 {"bert-small", 4, 512, 8},  {"bert-medium", 8, 512, 8},
                 {"bert-base", 12, 768, 12}, {"bert-large", 24, 1024, 16},
                 {"gpt1", 12, 768, 12},      {"gpt-mini", 4, 256, 4},
                 {"gpt2-124m", 12, 768, 12}, {"gpt2-mini", 4, 256, 4}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s.cfg", dir, sizes[i].name);
        cz_config c;
        cz_error err;
        if (cz_config_load(&c, path, NULL, 0, &err) != 0) {
            CHECK(0, "%s", err.msg);
            continue;
        }
        CHECK(c.model.layers == sizes[i].layers && c.model.hidden == sizes[i].hidden &&
                  c.model.heads == sizes[i].heads && c.model.intermediate == 4 * sizes[i].hidden,
              "%s: L/H/A/FFN = %d/%d/%d/%d", sizes[i].name, c.model.layers, c.model.hidden,
              c.model.heads, c.model.intermediate);
        if (!strncmp(sizes[i].name, "bert", 4))
            CHECK(c.train.steps == 1000000 && c.train.global_batch == 256 && c.optim.lr == 1e-4 &&
                      c.optim.warmup_steps == 10000 && c.optim.warmup_fraction == 0 &&
                      c.model.vocab_size == 30522 && c.data.seq == 128 && c.data.max_pred == 20,
                  "%s: not the BERT recipe", sizes[i].name);
    }
    cz_config c;
    cz_error err;
    char path[2048];
    snprintf(path, sizeof path, "%s/bert-base.cfg", dir);
    if (cz_config_load(&c, path, NULL, 0, &err) == 0)
        CHECK(c.data.phase2_fraction == 0.1f && c.data.phase2_seq == 512 &&
                  c.data.phase2_max_pred == 80,
              "bert-base: phase 2 of App. A.2");
    snprintf(path, sizeof path, "%s/gpt1.cfg", dir);
    if (cz_config_load(&c, path, NULL, 0, &err) == 0)
        CHECK(c.model.arch == CZ_ARCH_GPT && c.model.vocab_size == 40478 && c.data.seq == 512 &&
                  c.train.global_batch == 64 && c.optim.lr == 2.5e-4 &&
                  c.optim.warmup_steps == 2000 && c.optim.schedule == CZ_SCHEDULE_COSINE &&
                  c.model.type_vocab_size == 0,
              "gpt1: not GPT-1 Sec. 4.1");
    /* GPT-2 small: pre-LN, 1024 positions, 50257 tokens padded to 50304 rows,
     * 124,439,808 parameters as the released checkpoint (+ 47 padding rows) */
    snprintf(path, sizeof path, "%s/gpt2-124m.cfg", dir);
    if (cz_config_load(&c, path, NULL, 0, &err) == 0) {
        cz_model_param_counts pc;
        CHECK(cz_model_count_params(&c.model, &pc, &err) == 0, "gpt2-124m: %s", err.msg);
        CHECK(c.model.arch == CZ_ARCH_GPT && c.model.layout == CZ_LAYOUT_PRE_LN &&
                  c.model.vocab_size == 50257 && cz_model_vocab_rows(&c.model) == 50304 &&
                  c.model.max_positions == 1024 && c.data.seq == 1024 && c.model.gelu_tanh &&
                  pc.total == 124439808 + 47 * 768,
              "gpt2-124m: not GPT-2 small (%zu parameters)", pc.total);
    }
    snprintf(path, sizeof path, "%s/gpt2-mini.cfg", dir);
    if (cz_config_load(&c, path, NULL, 0, &err) == 0)
        CHECK(c.model.layout == CZ_LAYOUT_PRE_LN && c.model.vocab_pad_to == 64,
              "gpt2-mini: not the pre-LN layout");
}

/* A config with awkward values in every type survives write -> read. */
static void test_round_trip_values(void) {
    cz_config c;
    cz_error err;
    const char *sets[] = {
        "model.layer_norm_eps=3.3333333e-7",
        "model.hidden_dropout=0.123456789",
        "optim.lr=0.00012345678901234567",
        "optim.beta2=0.99999999999999989", /* largest double below 1 */
        "train.steps=5000000000",
        "train.seed=9223372036854775807",
        "train.peak_gflops=1e300",
        "data.train_manifest=/tmp/a \"quoted\" \\ path\twith tab",
        "optim.no_decay=[\"LayerNorm\", \"bias\", \"position_embeddings\"]",
        "optim.warmup_steps=123",
        "data.whole_word_mask=true",
        "dist.placement=coordinator",
        "dist.allreduce=mpi",
        "optim.name=lamb",
        "optim.schedule=constant",
        "train.gemm=reference",
        "model.gelu=tanh",
    };
    int rc = cz_config_load(&c, NULL, sets, (int)(sizeof sets / sizeof sets[0]), &err);
    CHECK(rc == 0, "odd values: %s", err.msg);
    if (rc) return;
    CHECK(c.train.steps == 5000000000L && c.train.seed == 9223372036854775807ULL, "64-bit ints");
    CHECK(!strcmp(c.data.train_manifest, "/tmp/a \"quoted\" \\ path\twith tab"), "path: [%s]",
          c.data.train_manifest);
    CHECK(c.optim.n_no_decay == 3 && !strcmp(c.optim.no_decay[2], "position_embeddings"), "list");
    CHECK(c.optim.warmup_fraction == 0, "warmup_steps given: the default fraction must be off");
    CHECK(c.optim.placement == CZ_PLACE_COORDINATOR && c.dist.allreduce == CZ_ALLREDUCE_MPI &&
              c.optim.kind == CZ_OPT_LAMB && c.optim.schedule == CZ_SCHEDULE_CONSTANT &&
              c.train.gemm == CZ_GEMM_REFERENCE,
          "words to enums");
    check_round_trip(&c, "odd values");

    const char *empty[] = {"optim.no_decay=[]"};
    CHECK(cz_config_load(&c, NULL, empty, 1, &err) == 0 && c.optim.n_no_decay == 0, "empty list");
    check_round_trip(&c, "empty list");
}

/* `text` loaded from a file must fail with exactly `want` after "<path>". */
static void expect_file_error(const char *text, const char *want) {
    const char *path = write_tmp("bad.cfg", text);
    cz_config c;
    cz_error err;
    memset(&err, 0, sizeof err);
    int rc = cz_config_load(&c, path, NULL, 0, &err);
    char expect[2048];
    snprintf(expect, sizeof expect, "%s%s", path, want);
    CHECK(rc != 0, "accepted a bad file (want %s):\n%s", want, text);
    CHECK(rc == 0 || strncmp(err.msg, expect, strlen(expect)) == 0,
          "message\n  got:  %s\n  want: %s...", err.msg, expect);
}

static void test_file_errors(void) {
    expect_file_error("model:\n{\n  layers = 6;\n  layerz = 6;\n};\n",
                      ":4: model.layerz: unknown key; did you mean model.layers?");
    expect_file_error("# comment\nmodle: { layers = 6; };\n", ":2: modle: unknown section");
    expect_file_error("model = 5;\n", ":1: model: expected a group");
    expect_file_error("model:\n{\n  layers = \"six\";\n};\n",
                      ":3: model.layers: expected an integer, got a string");
    expect_file_error("model: {\n  layers = 6.0;\n};\n",
                      ":2: model.layers: expected an integer, got a float");
    expect_file_error("model: {\n\n  heads = 0;\n};\n",
                      ":3: model.heads: 0 is out of range: must be in [1, 1024]");
    expect_file_error("model: {\n  hidden_dropout = 1.0;\n};\n",
                      ":2: model.hidden_dropout: 1 is out of range: must be in [0, 1)");
    expect_file_error("optim: {\n  lr = 0.0;\n};\n",
                      ":2: optim.lr: 0 is out of range: must be in (0, 10]");
    expect_file_error("optim: {\n  beta2 = 1;\n};\n", ":2: optim.beta2: 1 is out of range");
    expect_file_error("model: { arch = \"roberta\"; };\n",
                      ":1: model.arch: expected one of bert|gpt, got \"roberta\"");
    expect_file_error("model: { matmul_precision = \"fp16\"; };\n",
                      ":1: model.matmul_precision: expected one of fp32|bf16, got \"fp16\"");
    expect_file_error("optim: { schedule = \"step\"; };\n",
                      ":1: optim.schedule: expected one of linear|cosine|constant");
    expect_file_error("data: { whole_word_mask = 1; };\n",
                      ":1: data.whole_word_mask: expected true or false, got an integer");
    expect_file_error("optim: { no_decay = \"bias\"; };\n", ":1: optim.no_decay: expected a list");
    expect_file_error("optim: { no_decay = [1, 2]; };\n",
                      ":1: optim.no_decay: element 0: expected a string");
    expect_file_error("train: {\n steps = 3000000000;\n};\n",
                      ":2: train.steps: -1294967296 is out of range");
    /* libconfig syntax errors carry the line too */
    expect_file_error("model:\n{\n  layers = 6\n  heads == 2;\n};\n", ":4: syntax error");
    expect_file_error("model: { layers = 6; layers = 7; };\n", ":1: duplicate setting name");
    /* cross-field rules point at the line of the key to change */
    expect_file_error("model:\n{\n  hidden = 100;\n  heads = 3;\n};\n",
                      ":4: model.heads: model.hidden = 100 is not a multiple of model.heads = 3");
    expect_file_error("model: { max_positions = 64; };\n",
                      ": data.seq: data.seq = 128 exceeds model.max_positions = 64");
    expect_file_error("data:\n{\n  seq = 16;\n  max_pred = 20;\n};\n",
                      ":4: data.max_pred: data.max_pred = 20 exceeds data.seq = 16");
    expect_file_error("data: { phase2_fraction = 0.1;\n phase2_seq = 1024; };\n",
                      ":2: data.phase2_seq: data.phase2_seq = 1024 exceeds model.max_positions");
    expect_file_error("train: { global_batch = 256;\n  micro_batch = 48; };\n",
                      ":2: train.micro_batch: train.global_batch = 256 is not a multiple");
    expect_file_error("model: { arch = \"gpt\";\n type_vocab_size = 2; };\n",
                      ":2: model.type_vocab_size: GPT has no segment embeddings");
    expect_file_error("model: { type_vocab_size = 0; };\n",
                      ":1: model.type_vocab_size: BERT needs 2 segment types");
    /* GPT-2's layout and the vocabulary padding are GPT's */
    expect_file_error("model: { layout = \"pre_ln\"; };\n",
                      ":1: model.layout: model.layout = pre_ln is GPT-2's decoder layout");
    expect_file_error("model: {\n vocab_pad_to = 64; };\n",
                      ":2: model.vocab_pad_to: model.vocab_pad_to = 64: only GPT's tied LM head");
    /* µP: a base width >= 1, Adam(W) only, the pre-training heads only */
    expect_file_error("model: { parametrization = \"mup\";\n mup_base_width = 0; };\n",
                      ":2: model.mup_base_width: model.mup_base_width = 0: model.parametrization "
                      "= mup needs a base width >= 1");
    expect_file_error("model: { parametrization = \"mup\"; };\n",
                      ": model.mup_base_width: model.mup_base_width = 0");
    expect_file_error("model: { mup_base_width = -4; };\n", ":1: model.mup_base_width:");
    expect_file_error("model: { parametrization = \"mup\"; mup_base_width = 64; };\n"
                      "optim: {\n name = \"lamb\"; };\n",
                      ":3: optim.name: optim.name = lamb: model.parametrization = mup defines "
                      "per-tensor learning rates for Adam(W) only");
    expect_file_error("model: { parametrization = \"mu\"; };\n",
                      ":1: model.parametrization: expected one of standard|mup");
    expect_file_error("model: { layout = \"sandwich\"; };\n",
                      ":1: model.layout: expected one of post_ln|pre_ln");
    expect_file_error("optim: { warmup_steps = 10L;\n warmup_fraction = 0.1; };\n",
                      ":1: optim.warmup_steps: set only one of");
    expect_file_error("dist: { allreduce = \"mpi\";\n grad_wire = \"bf16\"; };\n",
                      ":2: dist.grad_wire: dist.grad_wire = \"bf16\" needs one of our");

    cz_config c;
    cz_error err;
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope.cfg", tmpdir);
    CHECK(cz_config_load(&c, missing, NULL, 0, &err) != 0 &&
              strstr(err.msg, "nope.cfg: cannot open"),
          "missing file: %s", err.msg);
    CHECK(cz_config_from_string(&c, "model: { layers = ; };", "ckpt", &err) != 0 &&
              !strncmp(err.msg, "ckpt:1: syntax error", 20),
          "string syntax error: %s", err.msg);
    /* a file without training paths is valid to load */
    const char *ok = write_tmp("ok.cfg", "model: { layers = 2; hidden = 128; heads = 2; };\n");
    CHECK(cz_config_load(&c, ok, NULL, 0, &err) == 0 && c.data.train_manifest[0] == 0,
          "empty paths must load: %s", err.msg);
}

static void expect_set_error(const char *assignment, const char *want) {
    cz_config c;
    cz_error err;
    const char *sets[] = {assignment};
    int rc = cz_config_load(&c, NULL, sets, 1, &err);
    CHECK(rc != 0, "--set %s accepted", assignment);
    CHECK(rc == 0 || strncmp(err.msg, want, strlen(want)) == 0,
          "--set message\n  got:  %s\n  want: %s", err.msg, want);
}

static void test_set(void) {
    const char *path =
        write_tmp("base.cfg", "model: { arch = \"gpt\";\n layer_norm_eps = 1e-6; };\n"
                              "optim: { no_decay = [\"x\"]; };\n");
    const char *sets[] = {"model.layers=6",
                          "optim.lr=3e-4",
                          "model.hidden = 256",
                          "model.heads=4",
                          "optim.no_decay=LayerNorm, bias",
                          "train.run_dir=\"runs/a b\""};
    cz_config c;
    cz_error err;
    int rc = cz_config_load(&c, path, sets, 6, &err);
    CHECK(rc == 0, "--set: %s", err.msg);
    if (rc == 0) {
        CHECK(c.model.layers == 6 && c.optim.lr == 3e-4 && c.model.hidden == 256, "--set values");
        CHECK(c.model.intermediate == 1024, "intermediate 0 must become 4 x hidden, got %d",
              c.model.intermediate);
        CHECK(c.model.layer_norm_eps == 1e-6f, "a given key must beat the GPT default");
        CHECK(c.model.gelu_tanh == 1 && c.model.type_vocab_size == 0,
              "keys not given take the GPT default");
        CHECK(c.optim.n_no_decay == 2 && !strcmp(c.optim.no_decay[0], "LayerNorm") &&
                  !strcmp(c.optim.no_decay[1], "bias"),
              "comma-form list");
        CHECK(!strcmp(c.train.run_dir, "runs/a b"), "quoted string: %s", c.train.run_dir);
        CHECK(!strcmp(c.source, path), "source = %s", c.source);
    }
    /* --set wins over the file; arch=bert override of a gpt file */
    const char *to_bert[] = {"model.arch=bert"};
    rc = cz_config_load(&c, path, to_bert, 1, &err);
    CHECK(rc == 0 && c.model.arch == CZ_ARCH_BERT && c.model.type_vocab_size == 2 &&
              c.model.gelu_tanh == 0,
          "arch=bert over a gpt file: %s", err.msg);
    const char *list[] = {"optim.no_decay=[\"LayerNorm\",\"bias\"]"};
    rc = cz_config_load(&c, NULL, list, 1, &err);
    CHECK(rc == 0 && c.optim.n_no_decay == 2 && !strcmp(c.optim.no_decay[1], "bias"),
          "bracket list: %s", err.msg);
    /* public cz_config_set on a struct */
    cz_config_defaults(&c);
    CHECK(cz_config_set(&c, "data.seq=64", &err) == 0 && c.data.seq == 64, "cz_config_set");
    CHECK(c.model.matmul_bf16 == 0, "model.matmul_precision defaults to fp32");
    CHECK(cz_config_set(&c, "model.matmul_precision=bf16", &err) == 0 && c.model.matmul_bf16 == 1,
          "model.matmul_precision=bf16");

    expect_set_error("model.layers=x", "--set model.layers=x: expected an integer");
    expect_set_error("model.layers=6x", "--set model.layers=6x: expected an integer");
    expect_set_error("optim.lr=fast", "--set optim.lr=fast: expected a number");
    expect_set_error("optim.lr=-1", "--set optim.lr=-1: -1 is out of range");
    expect_set_error("model.arch=t5", "--set model.arch=t5: expected one of bert|gpt");
    expect_set_error("model.layerz=6",
                     "--set model.layerz=6: unknown key; did you mean model.layers?");
    expect_set_error("optim.momentum=0.9", "--set optim.momentum=0.9: unknown key (cloze-train");
    expect_set_error("modle.layers=6", "--set modle.layers=6: unknown section modle");
    expect_set_error("layers=6", "--set layers=6: expected section.key=value");
    expect_set_error("model.layers", "--set model.layers: expected section.key=value");
    expect_set_error("data.whole_word_mask=maybe",
                     "--set data.whole_word_mask=maybe: expected true");
    expect_set_error("optim.no_decay=a,,b", "--set optim.no_decay=a,,b: empty name");
    expect_set_error("train.seed=-1", "--set train.seed=-1: -1 is out of range");
    expect_set_error("model.layer_norm_eps=1e-60", "--set model.layer_norm_eps=1e-60: 0 is out");
    /* a cross-field failure names the --set that caused it */
    expect_set_error("model.heads=5", "--set model.heads=5: model.hidden = 768 is not a multiple");

    /* validate also checks structs filled in code */
    cz_config_defaults(&c);
    c.model.attn_dropout = 1.5f;
    CHECK(cz_config_validate(&c, &err) != 0 && strstr(err.msg, "model.attn_dropout"),
          "validate range: %s", err.msg);
    cz_config_defaults(&c);
    c.optim.schedule = (cz_schedule)7;
    CHECK(cz_config_validate(&c, &err) != 0 && strstr(err.msg, "optim.schedule"),
          "validate word: %s", err.msg);
}

/* Resuming: which keys differ, and in which class (cz_config_resume_diff). */
/* cz_config_check_number: a program's option checked by its key's range */
static void test_check_number(void) {
    char r[128];
    CHECK(cz_config_check_number("optim.lr", 1e-3, r, sizeof r) == 0, "lr 1e-3 refused: %s", r);
    CHECK(cz_config_check_number("optim.lr", 0, r, sizeof r) == -1 && !strcmp(r, "in (0, 10]"),
          "lr 0: '%s'", r);
    CHECK(cz_config_check_number("optim.warmup_fraction", 1, r, sizeof r) == -1 &&
              !strcmp(r, "in [0, 1)"),
          "warmup_fraction 1: '%s'", r);
    CHECK(cz_config_check_number("optim.lr", NAN, r, sizeof r) == -1, "lr NaN accepted");
    CHECK(cz_config_check_number("optim.no_such", 1, r, sizeof r) == -1 && !strcmp(r, "not a key"),
          "an unknown key: '%s'", r);
    CHECK(cz_config_check_number("train.run_dir", 1, r, sizeof r) == -1, "a string key checked");
}

static void test_resume_diff(void) {
    cz_config a, b;
    cz_error err;
    char buf[1024];
    const char *base[] = {"train.seed=1", "optim.lr=0.001"};
    CHECK(cz_config_load(&a, NULL, base, 2, &err) == 0, "resume base: %s", err.msg);
    b = a;
    CHECK(cz_config_resume_diff(&a, &b, 1, buf, sizeof buf) == 0 && buf[0] == 0 &&
              cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 0,
          "identical configurations differ: %s", buf);
    /* what the run means: refused, named with old and new values */
    const char *meaning[] = {"train.seed=7", "optim.lr=0.002"};
    for (int i = 0; i < 2; i++) CHECK(cz_config_set(&b, meaning[i], &err) == 0, "%s", err.msg);
    int n = cz_config_resume_diff(&a, &b, 1, buf, sizeof buf);
    CHECK(n == 2 && !strcmp(buf, "train.seed 1 -> 7, optim.lr 0.001 -> 0.002"),
          "refused diff: %d: '%s'", n, buf);
    CHECK(cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 0, "accepted diff: '%s'", buf);
    /* the global batch, the schedule, the model, the data: refused */
    const char *refused[] = {"train.global_batch=512",          "optim.schedule=cosine",
                             "optim.warmup_fraction=0.5",       "model.layers=3",
                             "data.train_manifest=/x.manifest", "data.masked_lm_prob=0.2"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        b = a;
        CHECK(cz_config_set(&b, refused[i], &err) == 0, "%s", err.msg);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(refused[i], "="), refused[i]);
        CHECK(cz_config_resume_diff(&a, &b, 1, buf, sizeof buf) == 1 && strstr(buf, key) == buf,
              "%s: not refused: '%s'", refused[i], buf);
        CHECK(cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 0, "%s: also accepted: '%s'",
              refused[i], buf);
    }
    /* where and how it runs, logs, stops: accepted (another rank count keeps the
     * global batch and may need another micro-batch) */
    /* (train.steps too: a run is extended or shortened; the schedule
     * follows the new horizon, and the log line says so) */
    const char *accepted[] = {
        "train.log_every=7",         "train.eval_every=5",       "train.steps=10",
        "train.ckpt_every=3",        "train.threads=2",          "train.micro_batch=4",
        "train.stop_after_steps=9",  "train.run_dir=/elsewhere", "dist.allreduce=mpi",
        "dist.placement=replicated", "model.recompute=layers"};
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        b = a;
        CHECK(cz_config_set(&b, accepted[i], &err) == 0, "%s", err.msg);
        CHECK(cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 1, "%s: not accepted: '%s'",
              accepted[i], buf);
        CHECK(cz_config_resume_diff(&a, &b, 1, buf, sizeof buf) == 0, "%s: also refused: '%s'",
              accepted[i], buf);
    }
    b = a;
    CHECK(cz_config_set(&b, "train.log_every=7", &err) == 0, "%s", err.msg);
    cz_config_resume_diff(&a, &b, 0, buf, sizeof buf);
    CHECK(!strcmp(buf, "train.log_every 100 -> 7"), "accepted diff text: '%s'", buf);
    /* a long path is shortened, the key still named */
    char set[700] = "train.run_dir=/";
    for (int i = 0; i < 600; i++) strcat(set, "d");
    CHECK(cz_config_set(&b, set, &err) == 0, "%s", err.msg);
    CHECK(cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 2 && strlen(buf) < 200 &&
              strstr(buf, "train.run_dir \"\" -> \"/ddd") && strstr(buf, "...ddd"),
          "long value: '%s'", buf);
    /* what a checkpoint stores reads back without a difference (derived and
     * arch-dependent values included) */
    const char *gpt[] = {"model.arch=gpt", "optim.warmup_steps=5"};
    CHECK(cz_config_load(&a, NULL, gpt, 2, &err) == 0, "%s", err.msg);
    char *text = cz_config_to_string(&a);
    CHECK(text && cz_config_from_string(&b, text, "saved", &err) == 0, "read back: %s", err.msg);
    CHECK(cz_config_resume_diff(&a, &b, 1, buf, sizeof buf) == 0 &&
              cz_config_resume_diff(&a, &b, 0, buf, sizeof buf) == 0,
          "a written configuration reads back different: '%s'", buf);
    free(text);
}

/* docs/config.md: everything after the marker line is generated from the table */
static void test_docs(int update) {
    static const char marker[] = "<!-- key reference: generated by `test_config --update-docs`";
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/config.md", source_dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = 0;
    fclose(f);
    char *m = strstr(doc, marker);
    CHECK(m != NULL, "%s: marker line missing", path);
    if (!m) return;
    char *after = strchr(m, '\n');
    after = after ? after + 1 : m + strlen(m);

    char *gen = NULL;
    size_t gen_len = 0;
    FILE *g = open_memstream(&gen, &gen_len);
    cz_config_write_docs(g);
    fclose(g);
    if (update) {
        FILE *w = fopen(path, "w");
        fwrite(doc, 1, (size_t)(after - doc), w);
        fputs(gen, w);
        fclose(w);
        printf("rewrote %s\n", path);
    } else {
        CHECK(strcmp(after, gen) == 0, "docs/config.md is out of date with src/config/keys.c: run "
                                       "build/tests/test_config --update-docs");
    }

    /* --help-config names every key the docs name */
    char *help = NULL;
    size_t help_len = 0;
    FILE *h = open_memstream(&help, &help_len);
    cz_config_print_keys(h);
    fclose(h);
    int keys = 0;
    for (const char *p = gen; (p = strstr(p, "| `")) != NULL; p += 3) {
        char key[64];
        if (sscanf(p + 3, "%63[a-z0-9_.]", key) != 1) continue;
        keys++;
        CHECK(strstr(help, key) != NULL, "--help-config does not list %s", key);
        /* every key says what a resumed run does with a change (keys.c's .resume) */
        const char *eol = strchr(p, '\n'), *un = strstr(p, "UNCLASSIFIED");
        CHECK(!un || (eol && un > eol), "%s has no .resume class in src/config/keys.c", key);
    }
    CHECK(keys > 50, "only %d keys in the docs", keys);
    free(help);
    free(gen);
}

int main(int argc, char **argv) {
    source_dir = getenv("CLOZE_SOURCE_DIR");
    if (!source_dir) source_dir = ".";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cloze-test-config-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    int update = argc > 1 && !strcmp(argv[1], "--update-docs");
    if (!update) {
        test_defaults();
        test_conf_files();
        test_round_trip_values();
        test_file_errors();
        test_set();
        test_resume_diff();
        test_check_number();
    }
    test_docs(update);

    return check_finish(tmpdir);
}
