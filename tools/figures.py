#!/usr/bin/python3
"""figures.py - the figure manifest (chapters/FIGURES.tsv): every picture a text shows, the command that draws
it, and the commit of the code it was drawn at.

    /usr/bin/python3 tools/figures.py check [--build DIR]        (make test: tests/test_figures.sh)
    /usr/bin/python3 tools/figures.py check-run [--out DIR]      (make figures-check, after make run)
    /usr/bin/python3 tools/figures.py draw [--chapter NN] [--max-minutes M] [--build DIR]   (make figures)
    /usr/bin/python3 tools/figures.py list [--chapter NN]

The manifest has one row per image, tab-separated:

    image     the picture's path (chapters/NN_name/img/FILE)
    drawn_at  the commit whose code drew it (12 hex digits)
    minutes   about how long its command takes on 2 cores
    kind      run: drawn by `make run` (command `make run-NN`), compared byte for byte
              after it; timing: a picture of measured times (they differ from run to
              run), checked by the age of its code only; experiment: drawn by a
              command of its own, checked by the age of its code only
    programs  the programs whose code decides its numbers (comma-separated names
              of build/ binaries, or -); their sources are read from the
              binaries' debug information: every .c file linked into them,
              and the .h beside each
    also      other files that decide it (scripts, data, the sources of a program
              that `make all` does not build; comma-separated paths or globs, or -)
    source    the file the command writes, copied to `image`
    command   the shell command, run from the repository's root

check      fails when a figure's code changed after the commit it was drawn at
           (git diff drawn_at -- its files, the working tree included), when an
           image in chapters/*/img/ has no row or no text that shows it, when a
           text shows an image that has no row, or a row names a missing image.
check-run  compares every figure of kind run with what the last `make run`
           wrote, byte for byte.
draw       runs each row's command (each distinct command once, in the
           manifest's order; a source newer than its programs' binaries is kept
           as it is, and a row without programs is always drawn), copies the sources into img/ and writes HEAD as drawn_at.
           It refuses while a figure's files differ from HEAD: a figure is
           stamped with committed code only. --max-minutes M leaves out the
           commands that take longer (and says which).

Options --repo DIR and --manifest FILE point it at another tree (tests/test_figures.sh uses a planted one).
Standard library only.
"""
import argparse
import filecmp
import glob
import os
import re
import shutil
import subprocess
import sys

COLUMNS = ["image", "drawn_at", "minutes", "kind", "programs", "also", "source", "command"]
KINDS = ("run", "timing", "experiment")
# img/*.pgm are inputs a text hands to a program (--image), not pictures it drew
IMAGE_EXT = (".png", ".jpg", ".svg")


class ManifestError(Exception):
    pass


def read_manifest(path):
    """The rows of the manifest as dicts, in file order; '#' lines and blank lines are skipped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cells = line.split("\t")
            if len(cells) != len(COLUMNS):
                raise ManifestError(f"{path}:{number}: {len(cells)} columns, expected {len(COLUMNS)} "
                                    f"({', '.join(COLUMNS)}) separated by tabs")
            row = dict(zip(COLUMNS, cells))
            row["line"] = number
            if not re.fullmatch(r"[0-9a-f]{7,40}|-", row["drawn_at"]):
                raise ManifestError(f"{path}:{number}: drawn_at '{row['drawn_at']}' is not a commit hash")
            try:
                float(row["minutes"])
            except ValueError:
                raise ManifestError(f"{path}:{number}: minutes '{row['minutes']}' is not a number")
            if row["kind"] not in KINDS:
                raise ManifestError(f"{path}:{number}: kind '{row['kind']}', expected one of {', '.join(KINDS)}")
            rows.append(row)
    return rows


def write_manifest(path, rows):
    """Rewrites the rows in place, keeping the comment lines at the top."""
    with open(path, encoding="utf-8") as f:
        header = [line for line in f if line.startswith("#")]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(header)
        for row in rows:
            f.write("\t".join(row[c] for c in COLUMNS) + "\n")
    os.replace(tmp, path)


def split_list(cell):
    return [] if cell == "-" else [x for x in cell.split(",") if x]


def git(repo, *args, check=True):
    return subprocess.run(["git", "-C", repo] + list(args), capture_output=True, text=True, check=check)


SOURCES = {}   # program -> its files, read once per run


def program_sources(repo, build, program):
    """The repository files linked into BUILD/PROGRAM: the compile units named in its DWARF, and the .h beside each."""
    if program in SOURCES:
        return SOURCES[program]
    binary = os.path.join(repo, build, program)
    if not os.path.exists(binary):
        raise ManifestError(f"{binary} is not built (make all), so the files behind its figures are unknown")
    info = subprocess.run(["readelf", "--debug-dump=info", binary], capture_output=True, text=True)
    if info.returncode != 0:
        raise ManifestError(f"readelf could not read {binary}: {info.stderr.strip()}")
    files = set()
    in_unit = False
    for line in info.stdout.splitlines():
        if "DW_TAG_compile_unit" in line:
            in_unit = True
        elif in_unit and "DW_AT_name" in line:
            name = line.split()[-1]
            in_unit = False
            if name.endswith(".c") and os.path.exists(os.path.join(repo, name)):
                files.add(name)
                header = name[:-2] + ".h"
                if os.path.exists(os.path.join(repo, header)):
                    files.add(header)
    if not files:
        raise ManifestError(f"{binary} has no debug information naming the repository's sources (built without -g?)")
    SOURCES[program] = sorted(files)
    return SOURCES[program]


def row_files(repo, build, row):
    files = set()
    for pattern in split_list(row["also"]):   # a path, or a glob such as chapters/06_transformer/*.c
        found = glob.glob(os.path.join(repo, pattern)) if any(c in pattern for c in "*?[") else [pattern]
        if not found:
            raise ManifestError(f"{row['image']}: '{pattern}' (its 'also' column) matches no file")
        files.update(os.path.relpath(f, repo) if os.path.isabs(f) else f for f in found)
    for program in split_list(row["programs"]):
        files.update(program_sources(repo, build, program))
    return sorted(files)


def shown_images(repo):
    """Every img/ file a chapter text shows: {image path: [texts]}."""
    shown = {}
    for text in sorted(glob.glob(os.path.join(repo, "chapters", "*", "*.md"))):
        folder = os.path.dirname(text)
        with open(text, encoding="utf-8") as f:
            body = f.read()
        for name in re.findall(r"img/([A-Za-z0-9_.-]+\.(?:png|jpg|svg))", body):
            image = os.path.relpath(os.path.join(folder, "img", name), repo)
            shown.setdefault(image, []).append(os.path.relpath(text, repo))
    return shown


def check(args):
    repo, problems = args.repo, []
    rows = read_manifest(args.manifest)
    by_image = {}
    for row in rows:
        if row["image"] in by_image:
            problems.append(f"{row['image']}: two rows (lines {by_image[row['image']]['line']} and {row['line']})")
        by_image[row["image"]] = row
    on_disk = set()
    for path in glob.glob(os.path.join(repo, "chapters", "*", "img", "*")):
        if path.endswith(IMAGE_EXT):
            on_disk.add(os.path.relpath(path, repo))
    shown = shown_images(repo)
    for image in sorted(on_disk - set(by_image)):
        problems.append(f"{image}: in img/ but not in the manifest")
    for image in sorted(set(by_image) - on_disk):
        problems.append(f"{image}: in the manifest (line {by_image[image]['line']}) but not in img/")
    for image in sorted(on_disk - set(shown)):
        problems.append(f"{image}: in img/ but no text shows it")
    for image in sorted(set(shown) - set(by_image)):
        problems.append(f"{image}: shown by {', '.join(shown[image])} but not in the manifest")

    history = git(repo, "rev-parse", "--is-shallow-repository", check=False)
    if history.returncode != 0:
        print(f"figures: {repo} is not a git checkout: the code-age check is skipped")
    elif history.stdout.strip() == "true":
        print("figures: a shallow clone has no history to compare with: the code-age check is skipped")
    else:
        for row in rows:
            if row["drawn_at"] == "-":
                problems.append(f"{row['image']}: never drawn by `make figures` (drawn_at -)")
                continue
            if git(repo, "cat-file", "-e", row["drawn_at"] + "^{commit}", check=False).returncode != 0:
                problems.append(f"{row['image']}: drawn_at {row['drawn_at']} is not a commit of this repository")
                continue
            files = row_files(repo, args.build, row)
            missing = [f for f in files if not os.path.exists(os.path.join(repo, f))]
            for f in missing:
                problems.append(f"{row['image']}: the file {f} it depends on does not exist")
            diff = git(repo, "diff", "--name-only", row["drawn_at"], "--", *files)
            if diff.stdout.strip():
                changed = diff.stdout.split()
                shown_changed = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
                problems.append(f"{row['image']}: older than its code ({shown_changed} changed since "
                                f"{row['drawn_at']}); redraw it: make figures CHAPTER={chapter_of(row)}")
    for p in problems:
        print("figures: " + p)
    print(f"figures: {len(rows)} rows, {len(problems)} problem(s)")
    return 1 if problems else 0


def chapter_of(row):
    m = re.match(r"chapters/(\d\d)_", row["image"])
    return m.group(1) if m else "?"


def is_make_run(row):
    return row["kind"] == "run"


def check_run(args):
    rows = [r for r in read_manifest(args.manifest) if is_make_run(r)]
    problems = 0
    for row in rows:
        source = os.path.join(args.repo, args.out, row["source"][len("out/"):]) if row["source"].startswith("out/") \
            else os.path.join(args.repo, row["source"])
        image = os.path.join(args.repo, row["image"])
        if not os.path.exists(source):
            print(f"figures-check: {row['source']} is missing: run `make run` first")
            problems += 1
        elif not filecmp.cmp(source, image, shallow=False):
            print(f"figures-check: {row['image']} differs from {row['source']} (make figures CHAPTER={chapter_of(row)})")
            problems += 1
    print(f"figures-check: {len(rows)} make-run figures, {len(rows) - problems} identical, {problems} not")
    return 1 if problems else 0


def draw(args):
    repo = args.repo
    rows = read_manifest(args.manifest)
    chosen = [r for r in rows if args.chapter is None or chapter_of(r) == args.chapter]
    if args.max_minutes is not None:
        long_rows = [r for r in chosen if float(r["minutes"]) > args.max_minutes]
        for command in dict.fromkeys(r["command"] for r in long_rows):
            minutes = max(float(r["minutes"]) for r in long_rows if r["command"] == command)
            print(f"figures: left out (about {minutes:g} min): {command}")
        chosen = [r for r in chosen if float(r["minutes"]) <= args.max_minutes]
    head = git(repo, "rev-parse", "--short=12", "HEAD").stdout.strip()
    dirty = []
    for row in chosen:
        files = row_files(repo, args.build, row)
        if git(repo, "diff", "--name-only", "HEAD", "--", *files).stdout.strip():
            dirty.append(row["image"])
    if dirty:
        print("figures: the code behind these figures differs from HEAD; commit it first, so that drawn_at names it:")
        for d in dirty:
            print("  " + d)
        return 1
    done = set()
    for row in chosen:
        command = row["command"]
        if command in done:
            continue
        sources = [r["source"] for r in chosen if r["command"] == command]
        binaries = [os.path.join(repo, args.build, p) for p in split_list(row["programs"])]
        newest = max((os.path.getmtime(b) for b in binaries if os.path.exists(b)), default=0)
        # a row without programs (a benchmark make all does not build) cannot tell an old source: always drawn
        if binaries and all(os.path.exists(os.path.join(repo, s)) and os.path.getmtime(os.path.join(repo, s)) > newest
                            for s in sources):
            print(f"figures: kept (newer than its programs): {', '.join(sources)}")
        else:
            print(f"figures: about {row['minutes']} min: {command}", flush=True)
            if subprocess.run(["bash", "-c", command], cwd=repo).returncode != 0:
                print(f"figures: the command failed: {command}")
                return 1
        done.add(command)
    for row in chosen:
        source = os.path.join(repo, row["source"])
        if not os.path.exists(source):
            print(f"figures: {row['command']} did not write {row['source']}")
            return 1
        shutil.copyfile(source, os.path.join(repo, row["image"]))
        row["drawn_at"] = head
    write_manifest(args.manifest, rows)
    print(f"figures: {len(chosen)} figures drawn at {head}; commit img/ and {os.path.relpath(args.manifest, repo)}")
    return 0


def list_rows(args):
    for row in read_manifest(args.manifest):
        if args.chapter is None or chapter_of(row) == args.chapter:
            print(f"{row['image']}\t{row['minutes']} min\t{row['command']}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["check", "check-run", "draw", "list"])
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--manifest", help="default: REPO/chapters/FIGURES.tsv")
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="out")
    parser.add_argument("--chapter", help="NN: that chapter's figures only")
    parser.add_argument("--max-minutes", type=float)
    args = parser.parse_args()
    args.repo = os.path.abspath(args.repo)
    args.manifest = args.manifest or os.path.join(args.repo, "chapters", "FIGURES.tsv")
    if args.chapter is not None and not re.fullmatch(r"\d\d", args.chapter):
        parser.error(f"--chapter '{args.chapter}': expected two digits, e.g. 04")
    try:
        return {"check": check, "check-run": check_run, "draw": draw, "list": list_rows}[args.action](args)
    except (ManifestError, OSError) as e:
        print(f"figures: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
