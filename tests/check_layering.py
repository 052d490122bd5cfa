#!/usr/bin/env python3
"""Keeps docs/architecture.md true: the module table there is the one
statement of cloze's layers, and this check fails when the code disagrees.

    check_layering.py SOURCE_DIR            check the tree
    check_layering.py --self-test SOURCE_DIR
        plant each mistake below in a copy of the tree and require that the
        check catches it (and passes on the clean copy)

Rules (each violation is one line naming the file and what is wrong):
  - every header under include/cloze/, every folder under src/ and every
    other folder with C sources (corpus_tools/, any new one; tests/ and
    bench/ are not modules) is in exactly one row of the table, and every
    header and folder the table names exists;
  - a header, or a source of a module's folder, includes only cloze
    headers of its own module or of modules on lower levels;
  - every quoted include that is not a cloze/ header names a file by its
    path from the including file ("vec.h" beside it, "../src/x/y.h"), so
    that no header arrives through an include path ("tokenizer.h" from
    src/finetune, found because some target adds another folder); and no
    file includes a private header of another module (what is not in
    include/cloze/ belongs to its folder), but tests/ and bench/ may
    include a module's <module>_internal.h, its interface for them;
  - outside comm's sources (src/comm) nothing calls MPI: no <mpi.h>, no
    MPI_* name, no use of a raw communicator (.mpi); comments and string
    literals do not count. Every folder of the tree with C sources is
    scanned (include/, src/, corpus_tools/, tests/, bench/, and any new
    one), less the few files of MPI_EXCEPTIONS below, each with its reason;
    no public header (include/cloze/, comm.h too) names an MPI type or
    includes <mpi.h>;
  - comm's own headers (src/comm/*.h) are included only inside src/comm,
    but for its internal interface (COMM_INTERNAL: the MPI-typed API of
    its algorithms, host layouts and cost model), which tests/ and bench/
    may include too;
  - no file under include/ or src/ refers to ../shared (a user's clone has
    no such folder);
  - inside a module whose private header declares the order its files call
    in (comm_private.h, sweep_internal.h, text_internal.h, ...), no file
    uses a function of a file later in that order (check_file_orders);
  - a private header that declares no order does not knot the files that
    include it into a cycle: file A using a function of B that the header
    declares, and B (directly or through others) one of A's
    (check_header_knots). A module either declares the one way its files
    call, or its files do not call round in a circle.
Files checked: the project's own (project_files): in a git checkout the
tracked ones and the untracked ones that are not ignored (`git ls-files
--cached --others --exclude-standard`), elsewhere (a release tarball) a walk
that skips what .gitignore names; so build folders and an unpacked sysroot
(build-aarch64/root/) never count, a new uncommitted module folder does.
"""
import os
import re
import shutil
import sys
import tempfile

COMM = "comm"
COMM_DIR = "src/comm"
# comm's header for its own tests and the benchmarks; its other headers
# are its sources' alone
COMM_INTERNAL = "comm_internal.h"
COMM_INTERNAL_USERS = ("tests/", "bench/")
TABLE_HEAD = re.compile(r"^\|\s*level\s*\|\s*module\s*\|\s*headers\s*\|\s*sources\s*\|")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"cloze/([A-Za-z0-9_]+\.h)"', re.M)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def parse_table(root, errors):
    """{module: (level, [headers], [source dirs])} from docs/architecture.md."""
    doc = os.path.join(root, "docs", "architecture.md")
    modules, in_table = {}, False
    for n, line in enumerate(read(doc).splitlines(), 1):
        if TABLE_HEAD.match(line):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or set(cells[0]) <= set("-: "):
            continue
        try:
            level = int(cells[0])
        except ValueError:
            errors.append(f"docs/architecture.md:{n}: level '{cells[0]}' is not a number")
            continue
        name = cells[1]
        headers = re.findall(r"`([A-Za-z0-9_]+\.h)`", cells[2])
        dirs = [d.rstrip("/") for d in re.findall(r"`([A-Za-z0-9_./]+)`", cells[3])]
        if name in modules:
            errors.append(f"docs/architecture.md:{n}: module {name} listed twice")
        modules[name] = (level, headers, dirs)
    if not modules:
        errors.append("docs/architecture.md: no module table (| level | module | headers | sources |)")
    return modules


_COMMENT = r"/\*.*?(?:\*/|\Z)|//[^\n]*"
# a literal ends at its quote or, unterminated, before the line's end; a
# backslash escapes the next character, a line break too
_LITERAL = r"\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?"
_CODE_ONLY = re.compile(_COMMENT + "|" + _LITERAL, re.S)
_NO_COMMENTS = re.compile(_COMMENT, re.S)


def strip_c(text, strings=True):
    """C text with comments (and, when `strings`, string and char literals
    but their quotes) blanked; line breaks kept, so offsets give the same
    line numbers."""
    def blank(m):
        t = m.group(0)
        if t[0] in "\"'":
            end = t[-1] if len(t) > 1 and t[-1] == t[0] else ""
            return t[0] + re.sub(r"[^\n]", " ", t[1:len(t) - len(end)]) + end
        return re.sub(r"[^\n]", " ", t)
    return (_CODE_ONLY if strings else _NO_COMMENTS).sub(blank, text)


MPI_USE = re.compile(r"#\s*include\s*<mpi\.h>|\bMPI_[A-Za-z_]+|(?:\.|->)\s*mpi\b")
LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)

# Files outside src/comm that may call MPI, and why. Everything else, in
# every folder with C sources, goes through include/cloze/comm.h (comm's
# own tests and benchmarks through src/comm/comm_internal.h as well).
MPI_EXCEPTIONS = {
    # measures comm's all-reduce algorithms against MPI_Allreduce's (forced
    # through MPI_T), and the links with MPI point-to-point
    "bench/allreduce_bench.c": "benchmarks comm against MPI_Allreduce",
}
SKIP_DIRS = {".git", "shared"}
# Folders with C sources that are not modules: tests and benchmarks use
# the modules (and their *_internal.h) from outside.
NOT_MODULES = ("tests", "bench")
INTERNAL_USERS = tuple(d + "/" for d in NOT_MODULES)


# ---- which files are the project's (its own sources, not what else lies in
# the work tree: build folders, an unpacked sysroot such as
# build-aarch64/root/usr/include, a user's scratch) ----

def git_files(root):
    """The files git would commit from root: tracked ones plus untracked ones
    that no ignore rule covers (`git ls-files --cached --others
    --exclude-standard`), when root is the top of a git work tree (a clone
    or a worktree); None when it is not, or git is missing or refuses."""
    import subprocess
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)
        if top.returncode != 0 or \
                os.path.realpath(top.stdout.strip()) != os.path.realpath(root):
            return None
        ls = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True)
    except OSError:
        return None
    if ls.returncode != 0:
        return None
    names = sorted({n.decode("utf-8", "replace") for n in ls.stdout.split(b"\0") if n})
    # --cached lists files deleted from the work tree but not yet from the index
    return [n for n in names if os.path.isfile(os.path.join(root, n))]


def ignore_rules(root):
    """The .gitignore patterns of root as (pattern, anchored, dirs_only); the
    subset a release tarball needs: `/name*/` (top level only), `name/` and
    `*.ext` (any level); `!` rules and nested .gitignore files are not read."""
    rules = []
    path = os.path.join(root, ".gitignore")
    if not os.path.isfile(path):
        return rules
    for line in read(path).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        dirs_only = line.endswith("/")
        pat = line.rstrip("/")
        anchored = "/" in pat
        rules.append((pat.lstrip("/"), anchored, dirs_only))
    return rules


def ignored(rel, is_dir, rules):
    """Whether rel (relative to root, '/'-separated) matches an ignore rule."""
    import fnmatch
    for pat, anchored, dirs_only in rules:
        if dirs_only and not is_dir:
            continue
        if fnmatch.fnmatchcase(rel if anchored else rel.rsplit("/", 1)[-1], pat):
            return True
    return False


def walk_files(root):
    """Every file under root but what .gitignore ignores: the project's files
    when root is not a git checkout (a release tarball)."""
    rules, out = ignore_rules(root), []
    for base, dirs, names in os.walk(root):
        relbase = os.path.relpath(base, root).replace(os.sep, "/")
        relbase = "" if relbase == "." else relbase + "/"
        dirs[:] = sorted(d for d in dirs if not ignored(relbase + d, True, rules))
        out += [relbase + f for f in sorted(names) if not ignored(relbase + f, False, rules)]
    return out


# ---- the order of a module's files ----
# A module's private header (a .h in its folder) may declare the order its
# files call in: a comment that says they call "one way" (or each calls
# "only the ones above/before it"), then one line per file, " *   name.c
# what it holds" (continuation lines indented further). A file may then use
# only the files before it. A file of the folder that the list does not
# name sits below the list: any file may use it, and it uses no other
# (sweep_internal.h: "util.c, csv.c, which call none"). A function of a file is a definition at the start of a line that
# is not static; a use is any mention of its name outside comments and
# strings (a call, or its address taken).
ORDER_INTRO = re.compile(r"one way|only the ones (?:above|before)")
ORDER_LINE = re.compile(r"^\s*\*\s+([A-Za-z0-9_]+\.c)\s+\S")
ORDER_MORE = re.compile(r"^\s*\*\s{4,}\S")
FUNC_DEF = re.compile(r"^(?!static\b|typedef\b|extern\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)"
                      r"\s*\([^;{}]*?\)\s*\{", re.M)


def declared_order(header_text):
    """The files a header's comment lists in calling order, or None."""
    for m in re.finditer(r"/\*.*?\*/", header_text, re.S):
        comment = m.group(0)
        intro = ORDER_INTRO.search(comment)
        if not intro:
            continue
        order = []
        for line in comment[intro.end():].splitlines():
            f = ORDER_LINE.match(line)
            if f:
                order.append(f.group(1))
            elif order and not ORDER_MORE.match(line):
                break
        if order:
            return order
    return None


def check_file_orders(root, dir_of, errors):
    """Every call inside a module against the file order its private
    header declares."""
    for d in sorted(dir_of):
        full = os.path.join(root, d)
        if not os.path.isdir(full):
            continue
        names = sorted(os.listdir(full))
        for h in (n for n in names if n.endswith(".h")):
            order = declared_order(read(os.path.join(full, h)))
            if order is None:
                continue
            sources = [n for n in names if n.endswith(".c")]
            for f in order:
                if f not in sources:
                    errors.append(f"{d}/{h}: its file order lists {f}, which is not in {d}")
            rank = {f: i for i, f in enumerate(order)}
            code = {f: strip_c(read(os.path.join(full, f))) for f in sources}
            defined = {}  # function -> the file defining it
            for f in sources:
                for m in FUNC_DEF.finditer(code[f]):
                    defined.setdefault(m.group(1), f)
            for f in sources:
                for name, home in sorted(defined.items()):
                    if home == f or (f in rank and (home not in rank or rank[home] < rank[f])):
                        continue
                    m = re.search(r"(?<![\w.])(?<!->)" + re.escape(name) + r"\b", code[f])
                    if not m:
                        continue
                    line = code[f].count("\n", 0, m.start()) + 1
                    if f not in rank:
                        why = f"{f} is not in that order, so it uses no other file"
                    else:
                        why = f"{home} comes after {f} there"
                    errors.append(f"{d}/{f}:{line}: uses {name} of {home}, against the file "
                                  f"order {d}/{h} declares ({why})")


# Private headers whose files still call round in a circle while a split
# that unties them is under way, each with why it is tolerated. Meant to be
# empty; an entry whose cycle is gone (or whose header is) is reported too,
# so that it is removed with the knot.
KNOTTED_HEADERS_PENDING = {}


def cycles(edges, nodes):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check_header_knots(root, dir_of, errors, pending=None):
    """Each private header without a declared order: the files of its
    folder that include it, and which of them uses a function of which
    (a function the header declares, defined in the other file); a cycle
    among them is reported, once per header."""
    pending = KNOTTED_HEADERS_PENDING if pending is None else pending
    for d in sorted(dir_of):
        full = os.path.join(root, d)
        if not os.path.isdir(full):
            continue
        names = sorted(os.listdir(full))
        for h in (n for n in names if n.endswith(".h")):
            rel = f"{d}/{h}"
            header = strip_c(read(os.path.join(full, h)))
            if declared_order(read(os.path.join(full, h))) is not None:
                continue  # check_file_orders holds its files to one way
            inc = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"' + re.escape(h) + '"', re.M)
            users = [n for n in names if n.endswith(".c")
                     and inc.search(strip_c(read(os.path.join(full, n)), strings=False))]
            code = {f: strip_c(read(os.path.join(full, f))) for f in users}
            defined = {}
            for f in users:
                for m in FUNC_DEF.finditer(code[f]):
                    name = m.group(1)
                    if re.search(r"\b" + re.escape(name) + r"\s*\(", header):
                        defined.setdefault(name, f)
            edges, why = {}, {}
            for f in users:
                for name, home in sorted(defined.items()):
                    if home != f and re.search(r"(?<![\w.])(?<!->)" + re.escape(name) + r"\b",
                                               code[f]):
                        edges.setdefault(f, set()).add(home)
                        why.setdefault((f, home), name)
            knots = cycles(edges, users)
            if rel in pending:
                if not knots:
                    errors.append(f"{rel}: no longer knots its files into a cycle: remove it "
                                  "from KNOTTED_HEADERS_PENDING in tests/check_layering.py")
                continue
            for comp in knots:
                uses = ", ".join(f"{a} uses {why[(a, b)]} of {b}" for a in comp for b in comp
                                 if (a, b) in why)
                errors.append(f"{rel}: knots {', '.join(comp)} into a cycle ({uses}): declare "
                              "in its comment the one way they call and keep to it, or move "
                              "what they share into a file below them")
    for rel in sorted(pending):
        if not os.path.isfile(os.path.join(root, rel)):
            errors.append(f"{rel}: listed in KNOTTED_HEADERS_PENDING "
                          "(tests/check_layering.py), which is gone: remove the entry")


def project_files(root):
    """The project's own files under root, relative to it: git's view of a
    checkout, or the walk that honours .gitignore in a tarball."""
    files = git_files(root)
    return walk_files(root) if files is None else files


def c_files(root):
    """Every .c and .h of the project (project_files), but not in hidden
    folders, ../shared or a folder holding a CMakeCache.txt (a build folder
    that no ignore rule covers)."""
    out, builds = [], {}

    def in_build(folder):
        while folder:
            if folder not in builds:
                builds[folder] = os.path.isfile(os.path.join(root, folder, "CMakeCache.txt"))
            if builds[folder]:
                return True
            folder = os.path.dirname(folder)
        return False
    for rel in project_files(root):
        parts = rel.split("/")
        if not rel.endswith((".c", ".h")) or parts[0] in SKIP_DIRS or \
                any(p.startswith(".") for p in parts[:-1]):
            continue
        if in_build(os.path.dirname(rel)):
            continue
        out.append(rel)
    return sorted(out)


def check(root):
    errors = []
    cache = {}

    def source(rel):
        """(text, its directives: comments blanked) of a file, read once."""
        if rel not in cache:
            text = read(os.path.join(root, rel))
            cache[rel] = (text, strip_c(text, strings=False))
        return cache[rel]

    modules = parse_table(root, errors)
    header_of, dir_of = {}, {}
    for name, (level, headers, dirs) in modules.items():
        for h in headers:
            if h in header_of:
                errors.append(f"docs/architecture.md: {h} is in modules {header_of[h]} and {name}")
            header_of[h] = name
            if not os.path.isfile(os.path.join(root, "include", "cloze", h)):
                errors.append(f"docs/architecture.md: module {name} lists include/cloze/{h}, "
                              "which does not exist")
        for d in dirs:
            dir_of[d] = name
    inc = os.path.join(root, "include", "cloze")
    for h in sorted(os.listdir(inc)):
        if h.endswith(".h") and h not in header_of:
            errors.append(f"include/cloze/{h}: not in the module table of docs/architecture.md")
    for d in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", d)) and f"src/{d}" not in dir_of:
            errors.append(f"src/{d}: not in the module table of docs/architecture.md")
    for d, name in sorted(dir_of.items()):
        if not os.path.isdir(os.path.join(root, d)):
            errors.append(f"docs/architecture.md: module {name} lists folder {d}, "
                          "which does not exist")

    def owner(path):
        """The module whose folder holds path (relative to root), as
        (folder, module), or None."""
        best = None
        for d, name in dir_of.items():
            if path.startswith(d + "/") and (best is None or len(d) > len(best[0])):
                best = (d, name)
        return best

    all_c = c_files(root)
    # every folder with C sources belongs to a module, but tests/ and bench/
    # (and include/, whose headers are checked one by one above; src/'s
    # folders are checked above too)
    for folder in sorted({os.path.dirname(rel) for rel in all_c}):
        top = folder.split("/")[0]
        if top in NOT_MODULES or top in ("include", "src") or owner(folder + "/"):
            continue
        errors.append(f"{folder}: a folder with C sources that is not in the module table of "
                      "docs/architecture.md")

    files = [(f"include/cloze/{h}", header_of.get(h)) for h in sorted(os.listdir(inc))
             if h.endswith(".h")]
    for d, name in sorted(dir_of.items()):
        files += [(rel, name) for rel in all_c if rel.startswith(d + "/")]

    comm_dir = os.path.join(root, COMM_DIR)
    comm_headers = {f for f in os.listdir(comm_dir) if f.endswith(".h")} \
        if os.path.isdir(comm_dir) else set()
    for rel in all_c:
        if rel.startswith(COMM_DIR + "/"):
            continue
        text, directives = source(rel)
        code = strip_c(text)
        if rel.startswith("include/"):
            for m in MPI_USE.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: MPI ({m.group(0).strip()}) in a public header: "
                              f"no MPI type reaches comm's users; comm's MPI side is "
                              f"{COMM_DIR}/{COMM_INTERNAL}")
        elif rel not in MPI_EXCEPTIONS:
            for m in MPI_USE.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                errors.append(f"{rel}:{line}: uses MPI ({m.group(0).strip()}) outside the "
                              f"communication module ({COMM}): go through include/cloze/comm.h")
        for m in LOCAL_INCLUDE.finditer(directives):
            h = os.path.basename(m.group(1))
            if m.group(1).startswith("cloze/") or h not in comm_headers:
                continue
            if h == COMM_INTERNAL and rel.startswith(COMM_INTERNAL_USERS):
                continue
            line = directives.count("\n", 0, m.start()) + 1
            who = " and ".join(COMM_INTERNAL_USERS)
            errors.append(f"{rel}:{line}: includes comm's {h}: only {COMM_DIR} may"
                          + (f" (and {who}, comm's tests and benchmarks)"
                             if h == COMM_INTERNAL else "")
                          + "; use include/cloze/comm.h")

    for rel, name in files:
        if name is None:
            continue
        text, directives = source(rel)
        level = modules[name][0]
        for m in INCLUDE.finditer(directives):
            h = m.group(1)
            line = directives.count("\n", 0, m.start()) + 1
            other = header_of.get(h)
            if other is None:
                errors.append(f"{rel}:{line}: includes cloze/{h}, which is in no module")
            elif other != name and modules[other][0] >= level:
                errors.append(f"{rel}:{line}: includes cloze/{h}: {name} (level {level}) may use "
                              f"only lower levels, {other} is level {modules[other][0]}")
        top = rel.split("/")[0]
        if top in ("include", "src") and "../shared" in text:
            line = text.count("\n", 0, text.index("../shared")) + 1
            errors.append(f"{rel}:{line}: refers to ../shared, which a user's clone does not have")
    # quoted includes: by a path from the including file, and no private
    # header of another module
    private = {}  # a module folder's header name -> (folder, module)
    for rel in all_c:
        where = owner(rel)
        if rel.endswith(".h") and where:
            private.setdefault(os.path.basename(rel), where)
    for rel in all_c:
        mine = owner(rel)
        directives = source(rel)[1]
        for m in LOCAL_INCLUDE.finditer(directives):
            inc = m.group(1)
            if inc.startswith("cloze/"):
                continue
            line = directives.count("\n", 0, m.start()) + 1
            target = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            if not os.path.isfile(os.path.join(root, target)):
                known = private.get(os.path.basename(inc))
                errors.append(f"{rel}:{line}: includes \"{inc}\", which is not at that path "
                              "from it (a header found through an include path): "
                              + (f"a private header of module {known[1]} ({known[0]}); use its "
                                 "include/cloze/ header" if known and known != mine
                                 else "name it by its path from this file"))
                continue
            where = owner(target)
            if where is None or where == mine or where[1] == COMM:  # comm: its own rule above
                continue
            if (rel.startswith(INTERNAL_USERS)
                    and os.path.basename(target) == f"{where[1]}_internal.h"):
                continue
            errors.append(f"{rel}:{line}: includes \"{inc}\", a private header of module "
                          f"{where[1]} ({where[0]}): use its include/cloze/ header, or move "
                          "what is shared there"
                          + (f" (tests and benchmarks may include {where[0]}/{where[1]}_internal.h)"
                             if rel.startswith(INTERNAL_USERS) else ""))
    check_file_orders(root, dir_of, errors)
    check_header_knots(root, dir_of, errors)
    return errors


def copy_tree(root, dest):
    def only_c(base, names):  # tests/ and bench/: their C files are what is checked
        return [n for n in names
                if not n.endswith((".c", ".h")) and not os.path.isdir(os.path.join(base, n))]
    for part in ("include", "src", "corpus_tools", "tests", "bench"):
        shutil.copytree(os.path.join(root, part), os.path.join(dest, part),
                        ignore=only_c if part in ("tests", "bench") else None)
    os.makedirs(os.path.join(dest, "docs"))
    shutil.copy(os.path.join(root, "docs", "architecture.md"), os.path.join(dest, "docs"))
    if os.path.isfile(os.path.join(root, ".gitignore")):  # what the enumeration honours
        shutil.copy(os.path.join(root, ".gitignore"), dest)


def enumeration_self_test(root, tmp):
    """The files checked are the project's: an ignored folder with C sources
    (the aarch64 stage's sysroot, no CMakeCache.txt) is not reported, in a
    tarball (the walk) or a git checkout; a new folder with C sources that
    git would commit (untracked, not ignored) is. Returns the failures."""
    import subprocess

    def sysroot(d):  # what tests/aarch64/run.sh unpacks: headers that call MPI
        inc = os.path.join(d, "build-aarch64", "root", "usr", "include")
        os.makedirs(os.path.join(inc, "openmpi"))
        with open(os.path.join(inc, "openmpi", "mpi.h"), "w") as f:
            f.write("int MPI_Init(int *argc, char ***argv);\n")
        with open(os.path.join(inc, "lz4.h"), "w") as f:
            f.write("#include <mpi.h>\n")

    def new_module(d):
        os.makedirs(os.path.join(d, "tools"))
        with open(os.path.join(d, "tools", "x.c"), "w") as f:
            f.write("int planted;\n")

    def git_checkout(d):  # the clean copy, added to a new repository's index
        for cmd in (["init", "-q"], ["add", "-A"]):
            subprocess.run(["git", "-C", d] + cmd, check=True, capture_output=True)

    have_git = shutil.which("git") is not None
    cases = [  # (what, git checkout, plant, (where, says) to be reported or None: nothing)
        ("an ignored sysroot with C sources in a tarball", False, sysroot, None),
        ("an ignored sysroot with C sources in a git checkout", True, sysroot, None),
        ("an untracked, not ignored folder with C sources in a git checkout", True,
         new_module, ("tools:", "not in the module table")),
        ("a new folder with C sources in a tarball", False, new_module,
         ("tools:", "not in the module table")),
    ]
    failures = 0
    for i, (what, in_git, plant, want) in enumerate(cases):
        if in_git and not have_git:
            print(f"skipped {what}: git is not installed")
            continue
        d = os.path.join(tmp, f"files{i}")
        copy_tree(root, d)
        if in_git:
            git_checkout(d)
        plant(d)
        errs = check(d)
        if want is None and errs:
            failures += 1
            print(f"FAIL: {what} is reported: {errs}")
        elif want and not any(e.startswith(want[0]) and want[1] in e for e in errs):
            failures += 1
            print(f"FAIL: {what} is not caught (want '{want[0]} ... {want[1]}'), got: {errs}")
        else:
            print(f"{'caught' if want else 'passed'} {what}"
                  + (f": {[e for e in errs if e.startswith(want[0])][0]}" if want else ""))
    return failures


def self_test(root):
    """Each planted mistake must be reported; the clean copy must pass."""
    def add_line(path, after, line):
        def plant(d):
            p = os.path.join(d, path)
            text = read(p)
            i = text.index(after) + len(after)
            with open(p, "w") as f:
                f.write(text[:i] + "\n" + line + "\n" + text[i:])
        return plant

    def new_file(path, text):
        def plant(d):
            with open(os.path.join(d, path), "w") as f:
                f.write(text)
        return plant

    cases = [
        ("an upward include in a header", add_line("include/cloze/model.h",
         '#include "cloze/kernels.h"', '#include "cloze/train.h"'),
         "include/cloze/model.h:", "includes cloze/train.h"),
        ("a sideways include in a header", add_line("include/cloze/data.h",
         '#include "cloze/shard.h"', '#include "cloze/model.h"'),
         "include/cloze/data.h:", "includes cloze/model.h"),
        ("an upward include in a source", add_line("src/model/model.c",
         '#include "cloze/model.h"', '#include "cloze/optim.h"'),
         "src/model/model.c:", "includes cloze/optim.h"),
        ("fine-tuning using the sweep above it", add_line("src/finetune/grid.c",
         '#include "cloze/finetune.h"', '#include "cloze/sweep.h"'),
         "src/finetune/grid.c:", "includes cloze/sweep.h"),
        ("a call to MPI outside comm", add_line("src/train/train.c",
         '#include "train_internal.h"', 'static void planted(void) { MPI_Barrier(MPI_COMM_WORLD); }'),
         "src/train/train.c:", "uses MPI (MPI_Barrier)"),
        ("the raw communicator outside comm", add_line("src/optim/placement.c",
         '#include "cloze/optim.h"', 'static int planted(const cz_comm *c) { return c->mpi != 0; }'),
         "src/optim/placement.c:", "uses MPI (->mpi)"),
        ("<mpi.h> outside comm", add_line("src/programs/cloze_train.c",
         '#include "cloze/train.h"', '#include <mpi.h>'),
         "src/programs/cloze_train.c:", "uses MPI (#include <mpi.h>)"),
        ("an MPI type in a public header", add_line("include/cloze/comm.h",
         '#include "cloze/grads.h"', 'int planted(MPI_Comm c);'),
         "include/cloze/comm.h:", "MPI (MPI_Comm) in a public header"),
        ("<mpi.h> in a public header", add_line("include/cloze/comm.h",
         '#include "cloze/grads.h"', '#include <mpi.h>'),
         "include/cloze/comm.h:", "MPI (#include <mpi.h>) in a public header"),
        ("comm's internal header in another module", add_line("src/train/train.c",
         '#include "train_internal.h"', '#include "../comm/comm_internal.h"'),
         "src/train/train.c:", "includes comm's comm_internal.h"),
        ("comm's internal header on an include path", add_line("corpus_tools/prep_shards.c",
         '#include "cloze/prep.h"', '#include "comm_internal.h"'),
         "corpus_tools/prep_shards.c:", "includes comm's comm_internal.h"),
        ("comm's private header in a test", new_file("tests/planted.c",
         '#include "../src/comm/comm_private.h"\n'),
         "tests/planted.c:", "includes comm's comm_private.h"),
        ("a header missing from the table", new_file("include/cloze/planted.h",
         "/* planted */\n"), "include/cloze/planted.h:", "not in the module table"),
        ("a source folder missing from the table", lambda d: os.makedirs(
         os.path.join(d, "src", "planted")), "src/planted:", "not in the module table"),
        ("a call to MPI in corpus_tools", add_line("corpus_tools/prep_shards.c",
         '#include "cloze/prep.h"', 'static void planted(void) { MPI_Finalize(); }'),
         "corpus_tools/prep_shards.c:", "uses MPI (MPI_Finalize)"),
        ("a call to MPI in a program", add_line("src/programs/cloze_prep.c",
         '#include "cloze/text.h"', 'static void planted(void) { MPI_Barrier(MPI_COMM_WORLD); }'),
         "src/programs/cloze_prep.c:", "uses MPI (MPI_Barrier)"),
        ("<mpi.h> in a new folder with C sources", lambda d: (os.makedirs(
         os.path.join(d, "tools")), new_file("tools/x.c", "#include <mpi.h>\n")(d)),
         "tools/x.c:", "uses MPI (#include <mpi.h>)"),
        ("MPI in a test that is not an exception", new_file("tests/planted.c",
         "int planted(void) { return MPI_Barrier(MPI_COMM_WORLD); }\n"),
         "tests/planted.c:", "uses MPI (MPI_Barrier)"),
        ("a relative include of another module's private header", add_line(
         "src/optim/adamw.c", '#include "optim_simd.h"', '#include "../kernels/nn_isa.h"'),
         "src/optim/adamw.c:", "private header of module kernels"),
        ("a quoted include of another module's private header on an include path",
         add_line("src/finetune/features.c", '#include "cloze/text.h"',
                  '#include "text_internal.h"'),
         "src/finetune/features.c:", "include path): a private header of module text (src/text)"),
        ("a quoted include of a header that is nowhere beside it", add_line(
         "src/finetune/run.c", '#include "cloze/text.h"', '#include "tokenizer.h"'),
         "src/finetune/run.c:", "which is not at that path from it"),
        ("a quoted include on an include path in a public header", add_line(
         "include/cloze/text.h", '#include "cloze/core.h"', '#include "keys.h"'),
         "include/cloze/text.h:", "include path): a private header of module config (src/config)"),
        ("another module's private header in the prep library", add_line(
         "corpus_tools/vocab_learn.c", '#include "cloze/prep.h"',
         '#include "../src/text/text_internal.h"'),
         "corpus_tools/vocab_learn.c:", "a private header of module text (src/text)"),
        ("a private header of a module, not its _internal.h, in a test", new_file(
         "tests/planted.c", '#include "../src/config/keys.h"\n'),
         "tests/planted.c:", "a private header of module config (src/config)"),
        ("a folder with C sources missing from the table", lambda d: (os.makedirs(
         os.path.join(d, "tools")), new_file("tools/x.c", "int planted;\n")(d)),
         "tools:", "not in the module table"),
        ("a folder in the table that does not exist", lambda d: shutil.rmtree(
         os.path.join(d, "corpus_tools")),
         "docs/architecture.md:", "lists folder corpus_tools, which does not exist"),
        ("a reference to ../shared", add_line("src/model/model.c",
         '#include "cloze/model.h"', '/* notes: ../shared/papers/x.txt */'),
         "src/model/model.c:", "refers to ../shared"),
        ("a call against comm's declared file order", add_line("src/comm/cost_model.c",
         '#include "comm_private.h"',
         'static void planted(cz_comm *c) { cz_comm_finalize(c); }'),
         "src/comm/cost_model.c:", "uses cz_comm_finalize of world.c, against the file order"),
        ("a call against sweep's declared file order", add_line("src/sweep/spec.c",
         '#include "sweep_internal.h"',
         'static int planted(const char *p) { return sw_executable(p); }'),
         "src/sweep/spec.c:", "uses sw_executable of proc.c, against the file order"),
        ("a file outside the declared order that uses another", add_line("src/sweep/util.c",
         '#include "sweep_internal.h"',
         'static int planted(const char *p) { return sw_executable(p); }'),
         "src/sweep/util.c:", "util.c is not in that order"),
        ("a call back from text's string table into a tokenizer", add_line(
         "src/text/vocab_table.c", '#include "text_internal.h"',
         'static void planted(const cz_tokenizer *t) { cz_bpe_decode(t, 0, 0, 0); }'),
         "src/text/vocab_table.c:", "uses cz_bpe_decode of bpe.c, against the file order"),
        ("a call from fine-tuning's evaluation up into the run", add_line(
         "src/finetune/eval.c", '#include "finetune_private.h"',
         'static void planted(ft_run *r) { ft_run_free(r); }'),
         "src/finetune/eval.c:", "uses ft_run_free of run.c, against the file order"),
        ("a private header that knots two files into a cycle", lambda d: (
         new_file("src/data/planted_private.h",
                  "int planted_a(int n);\nint planted_b(int n);\n")(d),
         new_file("src/data/planted_a.c", '#include "planted_private.h"\n'
                  "int planted_a(int n) { return n ? planted_b(n - 1) : 0; }\n")(d),
         new_file("src/data/planted_b.c", '#include "planted_private.h"\n'
                  "int planted_b(int n) { return n ? planted_a(n - 1) : 1; }\n")(d)),
         "src/data/planted_private.h:", "knots planted_a.c, planted_b.c into a cycle"),
        ("a declared order naming a file that is gone", lambda d: os.remove(
         os.path.join(d, "src", "comm", "calibrate.c")),
         "src/comm/comm_private.h:", "lists calibrate.c, which is not in src/comm"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="cloze-layering-") as tmp:
        clean = os.path.join(tmp, "clean")
        copy_tree(root, clean)
        # comments and strings that mention MPI or cloze headers are fine
        add_line("src/train/train.c", '#include "train_internal.h"',
                 '/* MPI_Allreduce, #include "cloze/train.h" */ static const char *planted_s = '
                 '"MPI_Bcast";')(clean)
        errs = check(clean)
        if errs:
            failures += 1
            print("FAIL: the clean copy (with MPI only in comments and strings) is reported:")
            for e in errs:
                print("  " + e)
        for i, (what, plant, where, says) in enumerate(cases):
            d = os.path.join(tmp, f"case{i}")
            copy_tree(root, d)
            plant(d)
            errs = check(d)
            if not any(e.startswith(where) and says in e for e in errs):
                failures += 1
                print(f"FAIL: {what} is not caught (want '{where} ... {says}'), got: {errs}")
            else:
                print(f"caught {what}: {[e for e in errs if e.startswith(where)][0]}")
        # a pending knot that is untied must be removed from the list
        d = os.path.join(tmp, "untied")  # a folder alone: no copy of the tree needed
        os.makedirs(os.path.join(d, "src", "data"))
        errs = []
        check_header_knots(d, {"src/data": "data"}, errs,
                           pending={"src/data/planted_private.h": "planted"})
        new_file("src/data/planted_private.h", "int planted_a(int n);\n")(d)
        check_header_knots(d, {"src/data": "data"}, errs,
                           pending={"src/data/planted_private.h": "planted"})
        if not (any("which is gone: remove the entry" in e for e in errs)
                and any("no longer knots its files" in e for e in errs)):
            failures += 1
            print(f"FAIL: a stale KNOTTED_HEADERS_PENDING entry is not reported, got: {errs}")
        else:
            print("caught stale KNOTTED_HEADERS_PENDING entries")
        failures += enumeration_self_test(root, tmp)
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        failures = self_test(argv[2])
        print("check_layering self-test: " + ("ok" if not failures else f"{failures} failure(s)"))
        return 1 if failures else 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(argv[1])
    for e in errors:
        print(e)
    print("check_layering: " + ("ok" if not errors else f"{len(errors)} violation(s)"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
