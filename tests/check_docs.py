#!/usr/bin/env python3
"""The lists the documentation gives, against the code that makes them: a
check fails when one drifts.

    check_docs.py SOURCE_DIR BUILD_DIR            check the tree
    check_docs.py --self-test SOURCE_DIR BUILD_DIR
        plant each drift below in a copy of the docs and require that the
        check catches it (and passes on the clean copy)

Checks (each failure is one line naming the doc, its line, and what differs):
  - fuzz: the harness table of docs/reliability.md ("| harness | what it
    reads | ...") lists exactly the harnesses tests/fuzz/fuzz_*.c;
  - config: docs/config.md's key table lists exactly the keys
    `cloze-train --help-config` prints, and every `section.key` the docs
    and README.md name in code is one of them (file names such as
    `train.manifest` aside);
  - sweeps: each "### Budget" table docs/sweeps.md shows is, line for line,
    what `cloze-sweep report` writes today from the results.csv beside the
    figures (docs/img/sweeps/table6-mini/), its figures' captions and
    names are the report's, and "The report"'s figure names are those;
  - options: every --option the docs and README.md give to a program in
    code (`cloze-prep shards ... --heldout F`, command lines in code blocks;
    the last program named on a command line owns the options after it;
    cloze-prep's by its sub-command) is in that program's --help;
  - dated: the reference pages (docs/*.md less the logs)
    carry no commit hash and no dated run (a date such as 2026-12-03, or
    "UTC"): those belong in the matching docs/*-log.md; a table of latest
    figures marked `<!-- dated table -->` may carry dates in its rows (the
    rule and its reasons: check_dated); nor do they refer to an issue
    ("issue 33", "the issue's goal"): where a figure came from is the log's.
Docs are README.md and docs/*.md, not the dated logs (docs/*-log.md).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SECTIONS = ("model", "data", "train", "optim", "dist")
# `train.manifest`, `model.safetensors`, `data.h`: files, not keys
FILE_SUFFIXES = {"h", "c", "md", "log", "manifest", "tsv", "csv", "json", "jsonl", "cfg",
                 "bin", "txt", "py", "sh", "lz4", "safetensors", "gp", "dat", "png", "svg"}
KEY_REF = re.compile(r"(?<![\w./>(-])((?:%s)\.[a-z_][a-z0-9_]*)(?![\w(])" % "|".join(SECTIONS))
OPT = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SWEEP_EXAMPLE = "docs/img/sweeps/table6-mini"

# programs whose options the docs are checked against: (name, where, sub-commands)
PROGRAMS = [
    ("cloze-train", "build", ("plot",)),
    ("cloze-ckpt", "build", ()),
    ("cloze-sweep", "build", ()),
    ("cloze-finetune", "build", ()),
    ("cloze-prep", "build", ("shards", "vocab", "tokenize", "decode", "inspect", "verify")),
    ("cloze-mpirun", "launch", ()),
    ("cloze-netsim", "launch", ()),
    ("quickstart.sh", "launch", ()),
    ("default-corpus.sh", "launch", ()),
    ("setup-debian.sh", "launch", ()),
]


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def run(cmd, timeout=120):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def doc_files(docs):
    """README.md and docs/*.md (not the logs), relative to docs root."""
    out = ["README.md"] if os.path.isfile(os.path.join(docs, "README.md")) else []
    d = os.path.join(docs, "docs")
    out += sorted("docs/" + f for f in os.listdir(d) if f.endswith(".md") and not f.endswith("-log.md"))
    return out


def code_spans(text):
    """(line, text) of every piece of code: inline `spans` outside fenced
    blocks, and the lines of fenced blocks (a trailing backslash joins the
    next line)."""
    out, in_block, buf, start = [], False, "", 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            if line.rstrip().endswith("\\"):
                if not buf:
                    start = n
                buf += line.rstrip()[:-1] + " "
                continue
            out.append((start if buf else n, buf + line))
            buf = ""
        else:
            for m in re.finditer(r"`([^`\n]+)`", line):
                out.append((n, m.group(1)))
    return out


# ---------------------------------------------------------------- the checks

def check_fuzz(docs, errors):
    rel = "docs/reliability.md"
    text = read(os.path.join(docs, rel))
    listed, in_table = {}, False
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\|\s*harness\s*\|\s*what it reads\s*\|", line):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        m = re.match(r"^\|\s*`(fuzz_[a-z0-9_]+)`\s*\|", line) if in_table else None
        if m:
            listed[m.group(1)] = n
    if not listed:
        errors.append(f"{rel}: no harness table (| harness | what it reads | ...)")
        return
    fuzz_dir = os.path.join(docs, "tests", "fuzz")
    have = {f[:-2] for f in os.listdir(fuzz_dir) if re.match(r"^fuzz_[a-z0-9_]+\.c$", f)}
    for h in sorted(have - set(listed)):
        errors.append(f"{rel}: the harness table does not list {h} (tests/fuzz/{h}.c)")
    for h in sorted(set(listed) - have):
        errors.append(f"{rel}:{listed[h]}: lists {h}, but tests/fuzz/{h}.c does not exist")


def config_keys(build):
    rc, out = run([os.path.join(build, "cloze-train"), "--help-config"])
    keys = re.findall(r"^  ((?:%s)\.[a-z0-9_]+)\s" % "|".join(SECTIONS), out, re.M)
    return set(keys) if rc == 0 else None


def check_config(docs, build, errors):
    keys = config_keys(build)
    if not keys:
        errors.append(f"{build}/cloze-train --help-config printed no keys")
        return
    rel = "docs/config.md"
    table = {}
    for n, line in enumerate(read(os.path.join(docs, rel)).split("\n"), 1):
        m = re.match(r"^\|\s*`((?:%s)\.[a-z0-9_]+)`\s*\|" % "|".join(SECTIONS), line)
        if m:
            table[m.group(1)] = n
    for k in sorted(keys - set(table)):
        errors.append(f"{rel}: the key table lacks {k} (cloze-train --help-config lists it)")
    for k in sorted(set(table) - keys):
        errors.append(f"{rel}:{table[k]}: the key table lists {k}, which cloze-train does not know")
    for d in doc_files(docs):
        for n, code in code_spans(read(os.path.join(docs, d))):
            for m in KEY_REF.finditer(code):
                k = m.group(1)
                if k.split(".", 1)[1] in FILE_SUFFIXES or code[m.end():m.end() + 1] == ".":
                    continue
                if k not in keys:
                    errors.append(f"{d}:{n}: names the key {k}, which cloze-train does not know "
                                  "(cloze-train --help-config)")


def report_of(build, csv, tmp, errors):
    """(report.md text, [(caption, figure name or None)], {figure names})."""
    out = os.path.join(tmp, "report")
    rc, log = run([os.path.join(build, "cloze-sweep"), "report", "--results", csv, "--out", out])
    if rc != 0:
        errors.append(f"cloze-sweep report --results {csv} failed: {log.strip()}")
        return None
    md = read(os.path.join(out, "report.md"))
    figs, in_laws = [], False
    for block in re.split(r"\n(?=#)", md):
        head = block.split("\n", 1)[0]
        if head.startswith("## "):
            in_laws = head.startswith("## Scaling laws")
        elif in_laws and head.startswith("### "):
            img = re.search(r"!\[[^\]]*\]\(([a-z0-9_]+)\.png\)", block)
            figs.append((head[4:].strip(), img.group(1) if img else None))
    names = {f[:-4] for f in os.listdir(out) if f.endswith(".dat")}
    return md, figs, names


def check_sweeps(docs, build, errors):
    rel = "docs/sweeps.md"
    text = read(os.path.join(docs, rel))
    csv = os.path.join(docs, SWEEP_EXAMPLE, "results.csv")
    with tempfile.TemporaryDirectory(prefix="cloze-docs-") as tmp:
        got = report_of(build, csv, tmp, errors)
    if not got:
        return
    md, figs, names = got
    # the Budget tables: heading, blank line, the table, each as the report writes it
    tables = list(re.finditer(r"^### Budget: [^\n]*\n\n(?:\|[^\n]*\n)+", text, re.M))
    if not tables:
        errors.append(f"{rel}: no '### Budget: ...' table (the report's layout of BERT's Table 6)")
    for m in tables:
        n = text.count("\n", 0, m.start()) + 1
        block = m.group(0)
        if block in md:
            continue
        head = block.split("\n", 1)[0]
        mine = md[md.find(head):] if head in md else ""
        if not mine:
            errors.append(f"{rel}:{n}: '{head}': the report of {SWEEP_EXAMPLE}/results.csv has "
                          "no such heading")
            continue
        theirs = re.match(r"[^\n]*\n\n(?:\|[^\n]*\n)+", mine)
        a, b = block.split("\n"), (theirs.group(0) if theirs else "").split("\n")
        k = next((i for i in range(max(len(a), len(b)))
                  if i >= len(a) or i >= len(b) or a[i] != b[i]), 0)
        errors.append(f"{rel}:{n + k}: '{head}' differs from what cloze-sweep report writes from "
                      f"{SWEEP_EXAMPLE}/results.csv: doc '{a[k] if k < len(a) else ''}', report "
                      f"'{b[k] if k < len(b) else ''}'")
    # the figures shown: ![caption](img/sweeps/table6-mini/NAME.png)
    shown = [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in re.finditer(
        r"!\[([^\]]+)\]\(img/sweeps/table6-mini/([a-z0-9_]+)\.png\)", text)]
    caps = {c for c, _ in figs}
    pairs = {(c, f) for c, f in figs if f}
    for cap, name, n in shown:
        if cap not in caps:
            errors.append(f"{rel}:{n}: figure caption '{cap}' is not one the report writes "
                          f"({sorted(caps)})")
        elif pairs and (cap, name) not in pairs:
            errors.append(f"{rel}:{n}: figure '{cap}' is {name}.png here, not in the report")
        if name not in names:
            errors.append(f"{rel}:{n}: figure {name}.png is not one the report draws "
                          f"({sorted(names)})")
    for cap in sorted(caps - {c for c, _, _ in shown}):
        errors.append(f"{rel}: the report's figure '{cap}' is not shown")
    # "The report": the bullets that name each figure (- **`name`**: ...)
    sec = re.search(r"^## The report\n(.*?)(?=^## )", text, re.M | re.S)
    if not sec:
        errors.append(f"{rel}: no '## The report' section")
        return
    base = text.count("\n", 0, sec.start(1)) + 1
    bullets = {m.group(1): base + sec.group(1).count("\n", 0, m.start())
               for m in re.finditer(r"^- \*\*`([a-z0-9_]+)`\*\*", sec.group(1), re.M)}
    for name in sorted(names - set(bullets)):
        errors.append(f"{rel}: '## The report' does not describe the figure {name}")
    for name in sorted(set(bullets) - names):
        errors.append(f"{rel}:{bullets[name]}: '## The report' describes a figure {name}, which "
                      "the report does not draw")


def program_options(src, build, errors):
    """{program or 'program sub': set of its --options}, from --help."""
    known = {}
    for name, where, subs in PROGRAMS:
        path = os.path.join(build if where == "build" else os.path.join(src, "launch"), name)
        if not os.access(path, os.X_OK):
            errors.append(f"{path}: missing (its options cannot be checked)")
            continue
        for sub in ("",) + tuple(subs):
            rc, out = run([path] + ([sub] if sub else []) + ["--help"])
            if rc != 0:
                errors.append(f"{name} {sub} --help: exit {rc}".replace("  ", " "))
            known[(name + " " + sub).strip()] = set(OPT.findall(out)) | {"--help"}
    return known


def check_options(docs, src, build, errors):
    known = program_options(src, build, errors)
    names = sorted({k.split()[0] for k in known}, key=len, reverse=True)
    prog = re.compile(r"(?:^|[\s`(/=])(%s)(?=\s|$)" % "|".join(re.escape(p) for p in names))
    subs = {n: s for n, _, s in PROGRAMS}
    for d in doc_files(docs):
        for n, code in code_spans(read(os.path.join(docs, d))):
            for part in re.split(r"\||&&|;|\s#\s|\$\(|\)", code):
                found = list(prog.finditer(part))
                if not found:
                    continue
                p, rest = found[-1].group(1), part[found[-1].end():]
                words = rest.split()
                key = f"{p} {words[0]}" if words and words[0] in subs.get(p, ()) else p
                if key not in known:
                    continue
                for o in OPT.findall(rest):
                    if o not in known[key]:
                        errors.append(f"{d}:{n}: {key} {o}: not an option of {key} (its --help): "
                                      f"`{part.strip()[:80]}`")


# Reference pages say what is and what to do; dated runs and the code they
# ran at belong in the logs. The rule applies to every docs/*.md that is not
# a log (docs/*-log.md).


def reference_pages(docs):
    """docs/*.md less the logs, sorted."""
    d = os.path.join(docs, "docs")
    return sorted(f"docs/{f}" for f in os.listdir(d)
                  if f.endswith(".md") and not f.endswith("-log.md"))


# One kind of table may carry dates: a table of latest figures, each row
# with its date and command (docs/performance.md's, per CPU family). It is
# marked by this comment on the line before it; the dates are allowed in
# its rows (the lines that start with "|") and nowhere else. A commit hash
# is never allowed.
DATED_TABLE = "<!-- dated table -->"
# a date (2026-12-03) or a time of day in UTC: the marks of a dated run
DATED = re.compile(r"\b(20[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01]))\b|\b(UTC)\b")
# A commit is a hex word of 7 to 40 characters holding a digit and a letter
# a-f (so neither a decimal like ckpt-00010000 nor a word like "facade"),
# not part of a longer word (a SHA-256 digest is 64 hex characters; an
# address is 0x...), that git resolves to a commit of this repository:
# ordinary hex (a CRC, a fingerprint, an example digest) is not one. Where
# the source tree is no git repository (a release tarball), git's
# abbreviated form, 7-12 characters, stands for a commit.
HEX_WORD = re.compile(r"(?<![\w.-])([0-9a-f]{7,40})(?![\w-])")


def commits_among(words, src):
    """The words that name a commit (see HEX_WORD)."""
    words = sorted({w for w in words if re.search(r"[0-9]", w) and re.search(r"[a-f]", w)})
    if not words:
        return set()
    try:
        r = subprocess.run(["git", "-C", src, "rev-parse", "--git-dir"],
                           capture_output=True, text=True, timeout=30)
        git = r.returncode == 0
    except OSError:
        git = False
    if not git:
        return {w for w in words if len(w) <= 12}
    r = subprocess.run(["git", "-C", src, "cat-file", "--batch-check"],
                       input="".join(w + "^{commit}\n" for w in words),
                       capture_output=True, text=True, timeout=60)
    out = r.stdout.split("\n")
    return {w for w, line in zip(words, out) if line.split()[1:2] == ["commit"]}


def log_of(page):
    """docs/NAME-log.md for docs/NAME.md (or docs/NAME-design.md)."""
    stem = page[len("docs/"):-len(".md")]
    if stem.endswith("-design"):
        stem = stem[:-len("-design")]
    return f"docs/{stem}-log.md"


def dated_table_rows(rel, lines, errors):
    """The line numbers of the rows of the tables marked DATED_TABLE; a
    marker not followed by a table is an error."""
    rows = set()
    for n, line in enumerate(lines, 1):
        if line.strip() != DATED_TABLE:
            continue
        if n >= len(lines) or not lines[n].startswith("|"):
            errors.append(f"{rel}:{n}: '{DATED_TABLE}' is not followed by a table "
                          f"(it marks the one table whose rows may carry dates)")
            continue
        m = n + 1
        while m <= len(lines) and lines[m - 1].startswith("|"):
            rows.add(m)
            m += 1
    return rows


# An issue (a task's text, "issue 33", "issue 34's goal") is where a figure
# or a goal came from: that history belongs in the log; the page states the
# figure or the goal itself.
ISSUE_REF = re.compile(r"\b[Ii]ssues? #?[0-9]+\b|\b[Ii]ssue(?:'s)? texts?\b|\b[Tt]he issue's\b|"
                       r"\b[Aa]n issue's\b")


def check_dated(docs, src, errors):
    """No commit hash, no dated run and no reference to an issue in a
    reference page (reference_pages); dates only in a table marked
    DATED_TABLE."""
    for rel in reference_pages(docs):
        path = os.path.join(docs, rel)
        lines = read(path).split("\n")
        hexes = [(n, m.group(1)) for n, line in enumerate(lines, 1) for m in HEX_WORD.finditer(line)]
        commits = commits_among([w for _, w in hexes], src)
        for n, w in hexes:
            if w in commits:
                errors.append(f"{rel}:{n}: names the commit {w}: a reference page says what is; "
                              f"the run at that commit belongs in {log_of(rel)}")
        allowed = dated_table_rows(rel, lines, errors)
        for n, line in enumerate(lines, 1):
            for m in ISSUE_REF.finditer(line):
                errors.append(f"{rel}:{n}: refers to an issue ('{m.group(0)}'): a reference page "
                              f"states the figure or the goal; where it came from belongs in "
                              f"{log_of(rel)}")
            if n in allowed:
                continue
            for m in DATED.finditer(line):
                errors.append(f"{rel}:{n}: a dated run ('{m.group(0)}'): a reference page says "
                              f"what is; dated runs belong in {log_of(rel)}")


def dated_cases(src):
    """The self-test's cases for check_dated: (what, plant, where, says), and
    plants that must not be reported (ordinary hex, decimals)."""
    # a recent commit whose abbreviation holds a digit and a letter, as
    # commits_among requires: HEAD's alone is all digits in about 4 % of
    # commits ((10/16)^7; 6731954 was, and the self-test failed on it); in
    # a shallow clone without one, HEAD's full hash
    try:
        recent = subprocess.run(["git", "-C", src, "log", "--format=%h %H", "--abbrev=7", "-n",
                                 "64"], capture_output=True, text=True, timeout=30).stdout.split()
    except OSError:
        recent = []
    head = next((h for h in recent[0::2] if re.search(r"[0-9]", h) and re.search(r"[a-f]", h)),
                recent[1] if recent else "")
    # without git, any 7-12 hex word stands for a commit, so a CRC is planted
    # among the ordinary hex only where git can tell it from one
    crc = "a CRC `3a1f9c2b`; " if head else ""
    head = head or "c90acfa"
    page = "docs/distributed.md"
    anchor = "\n## Launching\n"

    def plant(text):
        def do(d):
            p = os.path.join(d, page)
            body = read(p)
            if anchor not in body:
                raise SystemExit(f"self-test: '{anchor.strip()}' not in {page}: update the self-test")
            with open(p, "w") as f:
                f.write(body.replace(anchor, f"\n{text}\n{anchor}", 1))
        return do

    table = "| CPU | date | tokens/s |\n|---|---|---|\n| Zen 4 | 2026-12-01, 20:49 UTC | 5537 |"
    def newpage(rel, text):
        def do(d):
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        return do

    caught = [
        ("a dated run in a reference page", plant("Measured on 2026-12-03: 2.24 s a step."),
         page + ":", "a dated run ('2026-12-03')"),
        ("a time of day in UTC in a reference page", plant("The run of 19:05 UTC took 2.24 s."),
         page + ":", "a dated run ('UTC')"),
        ("a commit hash in a reference page", plant(f"At {head} a step took 2.24 s."),
         page + ":", f"names the commit {head}"),
        ("a backticked commit hash in a reference page", plant(f"Since `{head}`, 2.24 s."),
         page + ":", f"names the commit {head}"),
        ("a dated table without its marker", plant(table),
         page + ":", "a dated run ('2026-12-01')"),
        ("a date just after a marked dated table", plant(
            f"{DATED_TABLE}\n{table}\n\nMeasured on 2026-12-03."),
         page + ":", "a dated run ('2026-12-03')"),
        ("a commit hash inside a marked dated table", plant(
            f"{DATED_TABLE}\n{table}\n| Zen 3 | at {head} | 4286 |"),
         page + ":", f"names the commit {head}"),
        ("a dated-table marker with no table after it", plant(f"{DATED_TABLE}\n\nSome text."),
         page + ":", "is not followed by a table"),
        ("an issue named in a reference page", plant("Issue 33 asks 75 %."),
         page + ":", "refers to an issue ('Issue 33')"),
        ("an issue's text named in a dated table", plant(
            f"{DATED_TABLE}\n{table}\n| Zen 5 | as in issue 25's text | 9315 |"),
         page + ":", "refers to an issue ('issue 25')"),
        ("a new reference page with a dated run", newpage("docs/newpage.md",
         "# New\n\nMeasured on 2026-12-03.\n"),
         "docs/newpage.md:", "a dated run ('2026-12-03')"),
    ]
    ordinary = plant(f"{DATED_TABLE}\n{table}\n\n" + crc + "A SHA-256: `e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855`; "
                     "an address 0x7ffd5a3c91e0; `ckpt-00010000.lz4`; 2026 hosts; a word, facade.")
    return caught, ordinary


ENV_DOC = "docs/environment.md"
ENV_VAR = re.compile(r"CLOZE_[A-Z0-9_]*[A-Z0-9]")


def env_users(src):
    """{variable: {file}}: the CLOZE_* variables the code uses. C (src/,
    corpus_tools/): a string literal that is a variable's name alone (getenv's
    argument, or a name passed to a function that reads or sets it); launch
    scripts: a read, $NAME or ${NAME."""
    users = {}
    for top in ("src", "corpus_tools"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    p = os.path.join(root, f)
                    for v in re.findall(r'"(CLOZE_[A-Z0-9_]+)"', read(p)):
                        users.setdefault(v, set()).add(os.path.relpath(p, src))
    launch = os.path.join(src, "launch")
    for f in sorted(os.listdir(launch)):
        p = os.path.join(launch, f)
        if os.path.isfile(p):
            for v in re.findall(r"\$\{?(CLOZE_[A-Z0-9_]+)", read(p)):
                users.setdefault(v, set()).add("launch/" + f)
    return users


def check_env_meanings(docs, src, errors):
    """One name, one meaning: docs/environment.md's table lists every
    CLOZE_* variable the code uses, once, with exactly the files that use
    it; a file the row does not name is a reader the row's meaning may not
    be (CLOZE_MPIRUN was a path for cloze-sweep and the mpirun command for
    cloze-mpirun). Every CLOZE_* variable another page names in code is in
    the table or a test's own (tests/)."""
    path = os.path.join(docs, ENV_DOC)
    if not os.path.isfile(path):
        errors.append(f"{ENV_DOC}: missing (the table of environment variables)")
        return
    rows = {}
    for n, line in enumerate(read(path).split("\n"), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for v in re.findall(r"`(CLOZE_[A-Z0-9_]+)`", cells[0]):
            if v in rows:
                errors.append(f"{ENV_DOC}:{n}: {v} has a second row (first at line {rows[v][0]}): "
                              "one variable, one meaning")
                continue
            rows[v] = (n, set(re.findall(r"`([^`]+)`", cells[2])))
    users = env_users(src)
    for v in sorted(users):
        if v not in rows:
            errors.append(f"{ENV_DOC}: lacks {v}, used by {' '.join(sorted(users[v]))}")
            continue
        n, listed = rows[v]
        for f in sorted(users[v] - listed):
            errors.append(f"{ENV_DOC}:{n}: {v} is also used by {f}, which its row does not name: "
                          "a second meaning under one name? (give it its own variable, or say "
                          "how that file reads it)")
        for f in sorted(listed - users[v]):
            errors.append(f"{ENV_DOC}:{n}: {v}: its row names {f}, which does not use it")
    for v in sorted(set(rows) - set(users)):
        errors.append(f"{ENV_DOC}:{rows[v][0]}: lists {v}, which no program or launch script uses")
    test_vars = set()
    for root, _, files in os.walk(os.path.join(src, "tests")):
        for f in files:
            if f.endswith((".sh", ".py", ".cmake", ".c", ".txt")):
                test_vars.update(ENV_VAR.findall(read(os.path.join(root, f))))
    for d in doc_files(docs):
        if d == ENV_DOC:
            continue
        for n, code in code_spans(read(os.path.join(docs, d))):
            for v in ENV_VAR.findall(code):
                if v not in rows and v not in test_vars and not v.endswith("_H"):
                    errors.append(f"{d}:{n}: names {v}, which {ENV_DOC} does not list")


def check(docs, src, build):
    errors = []
    check_env_meanings(docs, src, errors)
    check_fuzz(docs, errors)
    check_config(docs, build, errors)
    check_sweeps(docs, build, errors)
    check_options(docs, src, build, errors)
    check_dated(docs, src, errors)
    return errors


# ----------------------------------------------------------------- self-test

def copy_docs(src, dest):
    os.makedirs(dest)
    shutil.copy(os.path.join(src, "README.md"), dest)
    shutil.copytree(os.path.join(src, "docs"), os.path.join(dest, "docs"),
                    ignore=shutil.ignore_patterns("*.png", "*.svg", "*.jpg"))
    os.makedirs(os.path.join(dest, "tests", "fuzz"))
    for f in os.listdir(os.path.join(src, "tests", "fuzz")):
        if f.endswith(".c"):
            open(os.path.join(dest, "tests", "fuzz", f), "w").close()


def self_test(src, build):
    def edit(path, old, new, count=1):
        def plant(d):
            p = os.path.join(d, path)
            text = read(p)
            if old not in text:
                raise SystemExit(f"self-test: '{old}' not in {path}: update the self-test")
            with open(p, "w") as f:
                f.write(text.replace(old, new, count))
        return plant

    def touch(path):
        def plant(d):
            open(os.path.join(d, path), "w").close()
        return plant

    def delete_line(path, start):
        def plant(d):
            p = os.path.join(d, path)
            lines = read(p).split("\n")
            i = next(i for i, l in enumerate(lines) if l.startswith(start))
            with open(p, "w") as f:
                f.write("\n".join(lines[:i] + lines[i + 1:]))
        return plant

    cases = [
        ("a harness missing from the table", touch("tests/fuzz/fuzz_planted.c"),
         "docs/reliability.md", "does not list fuzz_planted"),
        ("a table row for a harness that is gone", delete_line("docs/reliability.md", "| `fuzz_vocab` |"),
         "docs/reliability.md", "does not list fuzz_vocab"),
        ("a key missing from the config table", delete_line("docs/config.md", "| `optim.lr` |"),
         "docs/config.md", "lacks optim.lr"),
        ("a key in the table that the code does not know", edit(
         "docs/config.md", "| `model.hidden` |", "| `model.hidden_size` |"),
         "docs/config.md:", "lists model.hidden_size"),
        ("a doc naming a key that does not exist", edit(
         "docs/user-guide.md", "\n## 2. Train\n", "\n## 2. Train\n\nSet `train.stepz` first.\n"),
         "docs/user-guide.md:", "names the key train.stepz"),
        ("a Budget table cell that drifted", edit("docs/sweeps.md", "| 6.4276 |", "| 6.4277 |"),
         "docs/sweeps.md:", "differs from what cloze-sweep report writes"),
        ("a Budget table column the report does not write", edit(
         "docs/sweeps.md", "| held-out loss | LM (ppl) |", "| held-out loss | perplexity |", 1),
         "docs/sweeps.md:", "differs from what cloze-sweep report writes"),
        ("a figure caption the report does not write", edit(
         "docs/sweeps.md", "![IsoFLOP curves]", "![Iso-FLOP curves]"),
         "docs/sweeps.md:", "caption 'Iso-FLOP curves'"),
        ("a figure the report section does not describe", edit(
         "docs/sweeps.md", "- **`isoflop`**", "- **`isoflops`**"),
         "docs/sweeps.md:", "describes a figure isoflops"),
        ("an option a program does not have", edit(
         "docs/formats.md", "[--heldout F]", "[--held-out F]"),
         "docs/formats.md:", "cloze-prep shards --held-out"),
        ("a variable's second reader missing from its row", edit(
         "docs/environment.md", "| `src/sweep/proc.c` `launch/cloze-mpirun` |", "| `src/sweep/proc.c` |"),
         "docs/environment.md:", "CLOZE_MPIRUN is also used by launch/cloze-mpirun"),
        ("a variable documented twice", edit(
         "docs/environment.md", "| `CLOZE_HOME` |", "| `CLOZE_SBATCH` | a second meaning | `launch/cloze.sbatch` |\n| `CLOZE_HOME` |"),
         "docs/environment.md:", "CLOZE_SBATCH has a second row"),
        ("an option of a launcher it does not have", edit(
         "README.md", "launch/quickstart.sh", "launch/quickstart.sh --fast"),
         "README.md:", "quickstart.sh --fast"),
    ]
    dated, ordinary = dated_cases(src)
    cases += dated
    failures = 0
    with tempfile.TemporaryDirectory(prefix="cloze-docs-self-") as tmp:
        clean = os.path.join(tmp, "clean")
        copy_docs(src, clean)
        errs = check(clean, src, build)
        if errs:
            failures += 1
            print("FAIL: the clean copy is reported:")
            for e in errs:
                print("  " + e)
        for i, (what, plant, where, says) in enumerate(cases):
            d = os.path.join(tmp, f"case{i}")
            copy_docs(src, d)
            plant(d)
            errs = check(d, src, build)
            hit = [e for e in errs if e.startswith(where) and says in e]
            if not hit:
                failures += 1
                print(f"FAIL: {what} is not caught (want '{where} ... {says}'), got: {errs}")
            else:
                print(f"caught {what}: {hit[0]}")
        # ordinary hex, decimals and years are not commits nor dated runs
        d = os.path.join(tmp, "ordinary")
        copy_docs(src, d)
        ordinary(d)
        wrong = [e for e in check(d, src, build) if "names the commit" in e or "a dated run" in e]
        if wrong:
            failures += 1
            print(f"FAIL: ordinary hex or a year taken for a commit or a date: {wrong}")
        else:
            print("passed ordinary hex (a SHA-256, an address, a checkpoint's number, a year)")
    return failures


def main(argv):
    if len(argv) == 4 and argv[1] == "--self-test":
        failures = self_test(argv[2], argv[3])
        print("check_docs self-test: " + ("ok" if not failures else f"{failures} failure(s)"))
        return 1 if failures else 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(argv[1], argv[1], argv[2])
    for e in errors:
        print(e)
    print("check_docs: " + ("ok" if not errors else f"{len(errors)} difference(s)"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
