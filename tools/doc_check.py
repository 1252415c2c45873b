#!/usr/bin/python3
"""doc_check.py - every command the READMEs show, tried as written.

    /usr/bin/python3 tools/doc_check.py [--build DIR] [--list] [README.md ...]
    make doc-check                     (after make run: its checkpoints are what --load reads)

A command is a line of a fenced code block (```sh, ```bash or a bare ```) that
starts with `./build/` or `make ` (a trailing backslash joins the next line).
Each is one of:

  run      the cheap ones, run as written from the repository's root, in the
           order the READMEs give them: --help, --compose (07_caption's scene
           files), and --load CHECKPOINT (evaluating, translating, generating
           or plotting a saved model: --translate, --input, --prompt, --index,
           --image, --plot, --beam ...), and the helpers in build/tools/.
           Each must exit 0;
  flags    a training run: it is not run, but its flags are checked, by
           running it with --help appended (the parser reads every flag
           before it stops at --help, so a misspelt flag or a bad value
           fails here);
  skipped  a make target (builds, tests, long experiments), and a --load
           whose checkpoint is not there (an experiment's own run makes it;
           say so in the list).

It also checks the names: every backticked snake_case name outside the code
blocks (`prenorm_block_forward`, `seq2seq_train()`, `make_layout()`) must be an
identifier of the project's code or scripts (comments left out, so a renamed
function that only a comment still names fails) or a tracked file's name. The
lecture's notation (`f_att`, `o_t`: a one-letter first part), the golden
vectors' case names (`n3_i7_o17`) and the PyTorch names in EXTERNAL_NAMES are
not the project's, and pass.

It prints one line per command with --list, and always the count of each
kind; the exit status is 1 when a command that ran (or a flags check)
failed, with its output. Standard library only. README.md, chapters/*/*.md
and the developer READMEs by default.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^\s*```\s*([A-Za-z]*)\s*$")
TIMEOUT_S = 600


def readmes():
    names = ["README.md"] + sorted(glob.glob("chapters/*/*.md"))
    names += [p for p in ("common/README.md", "bench/README.md", "tools/README.md", "data/README.md",
                          "tests/golden/README.md", "tests/fuzz/README.md", "CONTRIBUTING.md") if os.path.isfile(p)]
    return names


def commands(path):
    """(line number, command) of every ./build/ or make line in a shell-like fenced block."""
    found, block, pending, start = [], None, "", 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                block = None if block is not None else m.group(1).lower()
                pending = ""
                continue
            if block not in ("sh", "bash", "shell", ""):
                continue
            text = line.rstrip("\n")
            if pending:
                pending += " " + text.strip()
            elif text.lstrip().startswith(("./build/", "make ")) or text.strip() == "make":
                pending, start = text.strip(), n
            else:
                continue
            if pending.endswith("\\"):
                pending = pending[:-1].rstrip()
                continue
            found.append((start, pending))
            pending = ""
    return found


def make_run_dirs():
    """out/<program>/ of every program `make run` runs (chapters/NN_x/main.c, main_Y.c -> NN_Y)."""
    dirs = []
    for main in sorted(glob.glob("chapters/[0-9][0-9]_*/main*.c")):
        chapter = os.path.basename(os.path.dirname(main))
        name = os.path.basename(main)[:-2]
        dirs.append("out/%s/" % (chapter if name == "main" else chapter[:2] + "_" + name[len("main_"):]))
    return dirs


def kind(cmd):
    """run, flags or skipped (with why) for one command; bad (with why) for one that cannot be right."""
    if cmd == "make" or cmd.startswith("make "):
        return "skipped", "a make target"
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        return "bad", "cannot split it into words (%s)" % e
    if any(w in (">", ">>", "&", "|", "&&") or w.startswith((">", "&")) for w in words):
        return "bad", "a shell redirection or background job: a README shows the command alone"
    if "--help" in words or "-h" in words or "--compose" in words or words[0].startswith("./build/tools/"):
        return "run", ""
    if "--load" in words:
        i = words.index("--load")
        ckpt = words[i + 1] if i + 1 < len(words) else ""
        if not os.path.isfile(ckpt):
            if any(ckpt.startswith(d) for d in make_run_dirs()):
                return "bad", "%s not found: run `make run` first (its checkpoints are what --load reads)" % ckpt
            return "skipped", "its checkpoint %s is made by another command (not there now)" % ckpt
        return "run", ""
    return "flags", ""


def run(cmd):
    try:
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % TIMEOUT_S
    return r.returncode, (r.stdout[-2000:] + r.stderr[-2000:]).strip()


# Names the texts quote from elsewhere: PyTorch's parameters of a bidirectional nn.GRU (tools/README.md).
EXTERNAL_NAMES = {"weight_hh_l0_reverse", "bias_ih_l0_reverse"}
SNAKE = re.compile(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(\(\))?$")
CASE_NAME = re.compile(r"^[a-z]\d+(?:_[a-z]\d+)+$")


def code_words():
    """Every identifier of the tracked code and scripts, comments left out, and every tracked file's stem."""
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split("\n")
    words = set()
    for f in filter(None, files):
        words.add(os.path.basename(f).split(".")[0])
        if not (f.endswith((".c", ".h", ".py", ".sh")) or os.path.basename(f) == "Makefile") or not os.path.isfile(f):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if f.endswith((".c", ".h")):
            text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
        else:
            text = re.sub(r"(^|\s)#[^\n]*", " ", text)
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return words


def unknown_names(readme, words):
    """(line, name) of each backticked snake_case name of readme's prose that the code does not have."""
    found, in_fence = [], False
    with open(readme, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for quoted in re.findall(r"`([^`\n]+)`", line):
                for part in re.split(r"[/,]\s*", quoted):
                    m = SNAKE.match(part.strip())
                    if not m:
                        continue
                    name = m.group(1)
                    if (len(name.split("_")[0]) == 1 or CASE_NAME.match(name) or name in EXTERNAL_NAMES
                            or name in words):
                        continue
                    found.append((n, part.strip()))
    return found


def main(argv):
    build, listing, names = "build", False, []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--build":
            if not args:
                print("doc_check: --build: expected a directory after the flag", file=sys.stderr)
                return 2
            build = args.pop(0)
        elif a == "--list":
            listing = True
        elif a.startswith("-"):
            print("doc_check: unknown flag '%s' (see --help)" % a, file=sys.stderr)
            return 2
        else:
            names.append(a)
    os.chdir(ROOT)
    if not os.path.isdir(build):
        print("doc_check: %s/ not found: run make (and make run, for the checkpoints) first" % build, file=sys.stderr)
        return 2
    counts = {"run": 0, "flags": 0, "skipped": 0}
    failed = []
    words = code_words()
    for readme in names or readmes():
        for n, name in unknown_names(readme, words):
            failed.append(("%s:%d" % (readme, n), "`%s`" % name, "no such name in the code or the scripts "
                           "(renamed? the text must name what the code has)"))
    for readme in names or readmes():
        for n, cmd in commands(readme):
            what, why = kind(cmd)
            where = "%s:%d" % (readme, n)
            if what == "bad":
                failed.append((where, cmd, why))
                continue
            if what == "skipped":
                counts["skipped"] += 1
                if listing:
                    print("  skipped  %s  %s  (%s)" % (where, cmd, why))
                continue
            to_run = cmd if build == "build" else cmd.replace("./build/", "./%s/" % build, 1)
            if what == "flags":
                to_run += " --help"
            rc, output = run(to_run)
            counts[what] += 1
            if listing:
                print("  %-7s  %s  %s%s" % (what, where, cmd, "" if rc == 0 else "   <- exit %d" % rc))
            if rc != 0:
                failed.append((where, to_run, "exit %d: %s" % (rc, output)))
    for where, cmd, why in failed:
        print("doc_check: %s: %s\n  %s" % (where, cmd, why.replace("\n", "\n  ")))
    print("doc_check: %d commands run, %d training commands' flags checked (not trained), %d skipped%s; %d failed"
          % (counts["run"], counts["flags"], counts["skipped"], " (--list names them)" if not listing else "",
             len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
