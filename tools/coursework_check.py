#!/usr/bin/python3
"""coursework_check.py - every chapter's student tree verified end to end (make coursework-check).

For each chapter with exercises (or those given with --chapter):

  1. tools/coursework.py writes the student tree (every exercise a TODO stub);
     it is built the way a student builds it (make all grade, warnings as
     errors): it must build without a warning, and make grade must give 0
     points with "not written yet" on every row and no crash;
  2. each exercise's solution put back alone (coursework.py --keep ID rewrites
     only the files that change, so make rebuilds only those): exactly that
     exercise's points, none of the others;
  3. every solution put back: full marks.

The chapters share their builds: chapter NN's tree starts from the build/
of the tree before it, and each of its files that is byte for byte the same
as that tree's gets that tree's time stamp back (a file the earlier tree did
not have gets an old one), so make compiles only what differs: chapter
NN's own code, its stubs, and the earlier chapter's stubs now solved. The
first tree is compiled whole, so every file is compiled warning-free once.

Prints one line per step with the points seen, and the time per chapter;
exits non-zero at the end when any step was wrong. The trees go to a fresh
folder under /tmp (or --work DIR, kept).

    tools/coursework_check.py [--chapter NN[,NN...]] [--work DIR] [--jobs 2]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def exercises(nn):
    """[(id, points)] of chapter nn, in its grader's order (a bonus exercise's points negative)."""
    out = subprocess.run([PY, os.path.join(ROOT, "tools", "coursework.py"), "--list", "--chapter", nn],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [(r[0], -int(r[1]) if r[2] == "bonus" else int(r[1])) for r in rows]


def chapters_with_exercises():
    out = subprocess.run([PY, os.path.join(ROOT, "tools", "coursework.py"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    return sorted({line[:2] for line in out.splitlines() if line.strip()})


def write_tree(nn, work, keep):
    cmd = [PY, os.path.join(ROOT, "tools", "coursework.py"), "--chapter", nn, "--out", work]
    if keep:
        cmd += ["--keep", keep]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"coursework.py --chapter {nn} --keep '{keep}' failed:\n{run.stdout}{run.stderr}")
    return run.stdout.split("coursework: ")[1].split(" (")[0]


def reuse_build(previous, tree):
    """Starts tree's build/ from previous's; unchanged files get previous's time stamps (see the top)."""
    if previous is None or not os.path.isdir(os.path.join(previous, "build")):
        return
    shutil.rmtree(os.path.join(tree, "build"), ignore_errors=True)
    shutil.copytree(os.path.join(previous, "build"), os.path.join(tree, "build"), symlinks=True)
    old = os.stat(os.path.join(previous, "Makefile")).st_mtime - 3600
    for folder, dirs, names in os.walk(tree):
        if os.path.relpath(folder, tree).split(os.sep)[0] == "build":
            dirs[:] = []
            continue
        for n in names:
            path = os.path.join(folder, n)
            before = os.path.join(previous, os.path.relpath(path, tree))
            if not os.path.exists(before):
                os.utime(path, (old, old))
            elif same_bytes(path, before):
                st = os.stat(before)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def same_bytes(a, b):
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def make(tree, targets, jobs):
    """Builds as a student does, warnings as errors; returns the log (raises on failure)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(CI="true")
    run = subprocess.run(["make", "-C", tree, f"-j{jobs}", "SAN=", "BUILD=build"] + targets,
                         capture_output=True, text=True, env=env)
    log = run.stdout + run.stderr
    if run.returncode != 0 or ": warning: " in log:
        raise RuntimeError(f"make {' '.join(targets)} in {tree} failed or warned:\n{log[-3000:]}")
    return log


def listed_targets(tree):
    """Every target the tree's Makefile lists at its top exists there (make -n: what it would run)."""
    problems = []
    with open(os.path.join(tree, "Makefile")) as f:
        listed = []
        for line in f:
            if not line.startswith("#"):
                break
            if line.startswith("#   make"):
                rest = line[len("#   make"):]   # "make grade   what" or "make         what": plain make
                target = rest.split()[0] if rest.startswith(" ") and not rest.startswith("  ") else ""
                listed.append(target.replace("run-NN", "run-01"))
    for target in listed:
        run = subprocess.run(["make", "-C", tree, "-n", "BUILD=build"] + ([target] if target else []),
                             capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f"make {target}: listed in the tree's Makefile but does not work: {run.stderr.strip()[-300:]}")
    print(f"  {'the Makefile lists':<32} {', '.join('make ' + t if t else 'make' for t in listed)}: "
          f"{'ok' if not problems else 'WRONG'}", flush=True)
    for p in problems:
        print(f"    {p}", flush=True)
    return problems


def rows(tree):
    with open(os.path.join(tree, "build", "coursework", "grade.json")) as f:
        return json.load(f)["exercises"]


def check(label, got, ids, kept):
    """Problems of one grading: kept exercises earn their points, the others 0 and 'not written yet'."""
    problems = []
    if [r["id"] for r in got] != [i for i, _ in ids]:
        problems.append(f"rows {[r['id'] for r in got]}, expected {[i for i, _ in ids]}")
    for r in got:
        want = r["points"] if r["id"] in kept else 0
        if r["earned"] != want:
            problems.append(f"{r['id']}: {r['earned']} of {r['points']}, want {want} ({r['message']})")
        elif r["id"] not in kept and "not written yet" not in r["message"]:
            problems.append(f"{r['id']}: message '{r['message']}', want 'not written yet' (a crash or a wrong stub?)")
    earned = sum(r["earned"] for r in got if not r.get("bonus"))
    total = sum(r["points"] for r in got if not r.get("bonus"))
    bonus = sum(r["earned"] for r in got if r.get("bonus"))
    extra = f" + bonus {bonus}" if any(r.get("bonus") for r in got) else ""
    print(f"  {label:<32} {earned:>2} / {total:<2}{extra:<10} {'ok' if not problems else 'WRONG'}", flush=True)
    for p in problems:
        print(f"    {p}", flush=True)
    return problems


def check_chapter(nn, work, jobs, previous):
    """The problems of chapter nn's tree, and the tree (its build is the next one's start)."""
    ids = exercises(nn)
    t0 = time.time()
    problems = []
    tree = write_tree(nn, work, "")
    reuse_build(previous, tree)
    make(tree, ["all", "grade"], jobs)
    bonus = -sum(p for _, p in ids if p < 0)
    print(f"chapter {nn}: {os.path.basename(tree)}, {len(ids)} exercises, {sum(p for _, p in ids if p > 0)} points"
          f"{f' + {bonus} bonus' if bonus else ''} (built warning-free in {time.time() - t0:.0f} s)", flush=True)
    problems += check("stubs only", rows(tree), ids, set())
    problems += listed_targets(tree)
    for ident, _ in ids:
        write_tree(nn, work, ident)
        make(tree, ["grade"], jobs)
        problems += check(f"{ident} alone", rows(tree), ids, {ident})
    write_tree(nn, work, "all")
    make(tree, ["all", "grade"], jobs)
    problems += check("all of them", rows(tree), ids, {i for i, _ in ids})
    print(f"chapter {nn}: {time.time() - t0:.0f} s", flush=True)
    return problems, tree


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chapter", help="NN[,NN...]: only these chapters (default: every chapter with exercises)")
    ap.add_argument("--work", help="where the trees go (kept; default: a fresh folder under /tmp, removed)")
    ap.add_argument("--jobs", type=int, default=2, help="make -j (default 2)")
    args = ap.parse_args()
    wanted = args.chapter.split(",") if args.chapter else chapters_with_exercises()
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="attn_coursework_check.")
    t0, failed, previous = time.time(), [], None
    try:
        for nn in wanted:
            try:
                problems, previous = check_chapter(nn, work, args.jobs, previous)
                if problems:
                    failed.append(nn)
            except RuntimeError as e:
                print(f"chapter {nn}: {e}", flush=True)
                failed.append(nn)
                previous = None
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"coursework-check: {len(wanted) - len(failed)} of {len(wanted)} chapters right "
          f"({time.time() - t0:.0f} s){'; wrong: ' + ', '.join(failed) if failed else ''}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
