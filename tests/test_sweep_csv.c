/* results.csv's one reader and writer (src/sweep/csv.c): what the writer
 * quotes reads back to the same cells (a line break inside a cell becomes a
 * space), CRLF and blank lines are line ends, and malformed text (a quoted
 * field not closed, a row with another field count than the header, an
 * empty file) is refused with the file and line named, leaving no table. */
#include "cloze/sweep.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The writer's text for n rows of 3 cells. */
static char *write_rows(const char *const (*cells)[3], int n) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    for (int r = 0; r < n; r++) {
        for (int k = 0; k < 3; k++) cz_sweep_csv_field(f, cells[r][k], k == 0);
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

static void round_trip(void) {
    const char *const cells[][3] = {{"name", "error", "score"},
                                    {"a,b", "said \"no\"", "1.5"},
                                    {"plain", "two\nlines", ""},
                                    {"x", "\"", ","}};
    char *text = write_rows(cells, 4);
    CHECK(text != NULL, "open_memstream");
    if (!text) return;
    CHECK(strstr(text, "\"a,b\",\"said \"\"no\"\"\",1.5\n") != NULL, "quoting: %s", text);
    cz_sweep_csv c;
    cz_error err = {{0}};
    CHECK(cz_sweep_csv_parse(text, "rt.csv", &c, &err) == 0, "parse: %s", err.msg);
    CHECK(c.ncol == 3 && c.nrow == 3, "shape %d x %d", c.nrow, c.ncol);
    if (c.nrow == 3 && c.ncol == 3) {
        CHECK(!strcmp(c.head[1], "error"), "head %s", c.head[1]);
        CHECK(!strcmp(c.cell[0][0], "a,b"), "cell %s", c.cell[0][0]);
        CHECK(!strcmp(c.cell[0][1], "said \"no\""), "cell %s", c.cell[0][1]);
        CHECK(!strcmp(c.cell[1][1], "two lines"), "cell %s", c.cell[1][1]);
        CHECK(!strcmp(c.cell[1][2], ""), "empty cell %s", c.cell[1][2]);
        CHECK(!strcmp(c.cell[2][1], "\"") && !strcmp(c.cell[2][2], ","), "cells %s %s",
              c.cell[2][1], c.cell[2][2]);
        CHECK(cz_sweep_csv_col(&c, "score") == 2 && cz_sweep_csv_col(&c, "nope") == -1, "col");
    }
    cz_sweep_csv_free(&c);
    free(text);
}

static void line_ends(void) {
    cz_sweep_csv c;
    cz_error err = {{0}};
    CHECK(cz_sweep_csv_parse("a,b\r\n1,2\r\n\r\n3,\"4\"\n", "crlf.csv", &c, &err) == 0, "%s",
          err.msg);
    CHECK(c.nrow == 2 && c.ncol == 2, "shape %d x %d", c.nrow, c.ncol);
    if (c.nrow == 2) CHECK(!strcmp(c.cell[1][1], "4"), "cell %s", c.cell[1][1]);
    cz_sweep_csv_free(&c);
}

/* text must be refused with a message starting `want` (file:line: ...). */
static void refused(const char *text, const char *want) {
    cz_sweep_csv c;
    cz_error err = {{0}};
    int rc = cz_sweep_csv_parse(text, "bad.csv", &c, &err);
    CHECK(rc == -1, "accepted: %s", text);
    CHECK(!strncmp(err.msg, want, strlen(want)), "message \"%s\", want \"%s...\"", err.msg, want);
    CHECK(c.nrow == 0 && c.ncol == 0 && !c.head && !c.cell, "a refused text leaves a table");
    cz_sweep_csv_free(&c);
}

int main(void) {
    round_trip();
    line_ends();
    refused("a,b,c\n1,\"2,3\n", "bad.csv:2: a quoted field is not closed");
    refused("a,\"b\nc\n", "bad.csv:1: a quoted field is not closed");
    refused("a,b,c\n1,2,3\n4,5\n", "bad.csv:3: 2 fields, the header has 3");
    refused("a,b\n1,2,3\n", "bad.csv:2: 3 fields, the header has 2");
    refused("", "bad.csv: empty (no header)");
    return check_finish(NULL);
}
