/* tfevents: CRC-32C against RFC 3720's vectors (B.4) and the masked form
 * against values of the tensorboard package's reader
 * (tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c);
 * events written and read back; a resumed writer cuts the earlier file
 * before the steps it redoes and before a partial record, and names its
 * file after the earlier one. Loading by TensorBoard itself:
 * tests/scripts/test_train_tensorboard.sh. */
#include "cloze/tfevents.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static void test_crc(void) {
    uint8_t b[32];
    CHECK(cz_crc32c("123456789", 9) == 0xe3069283u, "CRC-32C(\"123456789\") = %08x",
          cz_crc32c("123456789", 9));
    memset(b, 0, 32);
    CHECK(cz_crc32c(b, 32) == 0x8a9136aau, "32 zeros: %08x", cz_crc32c(b, 32));
    memset(b, 0xff, 32);
    CHECK(cz_crc32c(b, 32) == 0x62a8ab43u, "32 x 0xff: %08x", cz_crc32c(b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(cz_crc32c(b, 32) == 0x46dd794eu, "0..31: %08x", cz_crc32c(b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK(cz_crc32c(b, 32) == 0x113fdb5cu, "31..0: %08x", cz_crc32c(b, 32));
    /* masked: the values tensorboard's masked_crc32c gives */
    CHECK(cz_crc32c_masked("123456789", 9) == 0xc78ab0e5u, "masked \"123456789\": %08x",
          cz_crc32c_masked("123456789", 9));
    CHECK(cz_crc32c_masked("", 0) == 0xa282ead8u, "masked empty: %08x", cz_crc32c_masked("", 0));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(cz_crc32c_masked(b, 32) == 0x951f7892u, "masked 0..31: %08x", cz_crc32c_masked(b, 32));
}

typedef struct seen {
    long steps[64];
    int summary[64];
    int n;
} seen;

static void note(void *ctx, long offset, long step, int summary, const uint8_t *d, size_t len) {
    (void)offset, (void)d, (void)len;
    seen *s = ctx;
    if (s->n < 64) {
        s->steps[s->n] = step;
        s->summary[s->n++] = summary;
    }
}

/* the event files of dir in name order (at most 4) */
static int files(const char *dir, char out[4][600]) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20) && n < 4)
            snprintf(out[n++], 600, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    if (n == 2 && strcmp(out[0], out[1]) > 0) {
        char t[600];
        strcpy(t, out[0]);
        strcpy(out[0], out[1]);
        strcpy(out[1], t);
    }
    return n;
}

static void write_steps(cz_tfevents *w, long from, long to) {
    cz_error err;
    for (long s = from; s <= to; s++) {
        cz_scalar v[2] = {{"train/loss", 10.0 / (double)s}, {"train/lr", 1e-3}};
        CHECK(cz_tfevents_scalars(w, s, v, 2, &err) == 0, "step %ld: %s", s, err.msg);
    }
}

static void test_files(const char *dir) {
    cz_error err;
    cz_tfevents w;
    CHECK(cz_tfevents_open(&w, dir, 0, 0, &err) == 0, "open: %s", err.msg);
    write_steps(&w, 1, 8);
    cz_tfevents_close(&w);
    char f[4][600];
    CHECK(files(dir, f) == 1, "one file after the first run");
    seen s = {0};
    long bad;
    CHECK(cz_tfevents_read(f[0], note, &s, &bad, &err) == 9, "9 records (version + 8 steps)");
    CHECK(bad == -1 && s.steps[0] == 0 && !s.summary[0] && s.steps[8] == 8 && s.summary[8],
          "records read back: bad %ld, last step %ld", bad, s.steps[8]);
    /* a killed job: half a record at the end */
    FILE *a = fopen(f[0], "ab");
    fwrite("\x30\x00\x00\x00\x00\x00", 1, 6, a);
    fclose(a);
    s.n = 0;
    CHECK(cz_tfevents_read(f[0], note, &s, &bad, &err) == 9 && bad > 0, "partial record found");
    /* resumed from step 5: steps 6.. and the partial record are cut, the
     * new file sorts after the old one and starts with version + START */
    CHECK(cz_tfevents_open(&w, dir, 6, 1, &err) == 0, "reopen: %s", err.msg);
    write_steps(&w, 6, 9);
    cz_tfevents_close(&w);
    CHECK(files(dir, f) == 2, "two files after the resumed run");
    s.n = 0;
    CHECK(cz_tfevents_read(f[0], note, &s, &bad, &err) == 6 && bad == -1,
          "old file cut to version + steps 1..5 (%d records, bad %ld)", s.n, bad);
    CHECK(s.steps[s.n - 1] == 5, "old file's last step %ld", s.steps[s.n - 1]);
    s.n = 0;
    CHECK(cz_tfevents_read(f[1], note, &s, &bad, &err) == 6 && bad == -1, "new file: %d records",
          s.n);
    CHECK(s.steps[1] == 6 && !s.summary[1] && s.steps[2] == 6 && s.summary[2],
          "START at step 6, then step 6");
    /* a damaged byte in the new file's last record: cut there on reopen */
    struct stat st;
    stat(f[1], &st);
    FILE *m = fopen(f[1], "r+b");
    fseek(m, (long)st.st_size - 8, SEEK_SET);
    fputc(0x55, m);
    fclose(m);
    CHECK(cz_tfevents_open(&w, dir, 100, 1, &err) == 0, "reopen after damage: %s", err.msg);
    cz_tfevents_close(&w);
    s.n = 0;
    CHECK(cz_tfevents_read(f[1], note, &s, &bad, &err) == 5 && bad == -1,
          "damaged record cut: %d records left, bad %ld", s.n, bad);
    /* a fresh start: nothing earlier stays */
    CHECK(cz_tfevents_open(&w, dir, 0, 0, &err) == 0, "fresh: %s", err.msg);
    cz_tfevents_close(&w);
    CHECK(files(dir, f) == 1, "a fresh start leaves only its own file");
}

int main(void) {
    test_crc();
    char dir[] = "/tmp/cloze-tfevents-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_files(dir);
    return check_finish(dir);
}
