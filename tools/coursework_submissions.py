#!/usr/bin/python3
"""coursework_submissions.py - the teacher's side of the coursework: grade a
folder of submissions into a gradebook and one feedback file per student
(make grade-submissions DIR=...).

A submission is a tarball from make submit (tools/coursework_submit.py:
manifest.json and the student's files), the same unpacked into a folder, or
a whole student tree (a folder with coursework.json). Each is graded with
this repository's graders, never the student's:

 1. the reference tree of its chapter is written once per batch
    (tools/coursework.py --keep all: the solution) and built; its grader
    records the hidden checks' outputs for the batch's seed
    (grade_NN --hidden SEED --record, tests/coursework/grade.h);
 2. the submission's manifest is checked (every file there, its sha256 as
    listed); grader files that differ from this repository's are named in
    the row and ignored, and so is any file that is not one of the
    chapter's exercise files or ANSWERS.md;
 3. a copy of the reference tree, build included, gets the student's
    exercise files and is rebuilt (only those files recompile), within
    --build-limit seconds;
 4. each exercise runs alone, its checks and then its hidden checks (shapes
    and inputs drawn from the seed, compared with the solution's outputs),
    within --time-limit seconds; all or nothing per exercise.

A submission that does not build, crashes, loops or lacks its manifest gets a
row that says so, and the batch goes on. Written under --out:
gradebook.csv (student, chapter, status, points per exercise, total, first
failure), feedback/<student>.txt (each exercise's checks, passed or not and
why; the build's errors), answers/<student>.md (the student's ANSWERS.md, to
read and mark by hand), seed.txt (the seed: the same seed grades the same).

The students' code runs on this machine, as their own make grade would:
grade a batch as a user that can lose nothing, or in a container.

    tools/coursework_submissions.py DIR [--out out/gradebook] [--seed N]
        [--time-limit 120] [--build-limit 600] [--work DIR]
"""
import argparse
import csv
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coursework_grade   # noqa: E402  (run_exercise, describe, part_names)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADER_PREFIXES = ("tests/coursework/", "tools/coursework_grade.py", "tools/coursework_submit.py")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_limited(cmd, cwd, limit, log):
    """Runs cmd with its output in log; kills its whole process group after
    limit seconds. Returns the exit code, or None when it ran out of time."""
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                             env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")})
        try:
            return p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return None


# ------------------------------------------------------------ the reference trees

class Reference:
    """A chapter's solution tree, built, with its hidden outputs for the seed."""

    def __init__(self, work, chapter, seed, build_limit):
        self.chapter, self.nn = chapter, chapter[:2]
        out = os.path.join(work, "reference")
        run = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "coursework.py"), "--chapter", self.nn,
                              "--keep", "all", "--out", out], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"grade-submissions: could not write chapter {self.nn}'s reference tree: {run.stderr.strip()}")
        self.tree = os.path.join(out, chapter)
        self.sheet = json.load(open(os.path.join(self.tree, "coursework.json")))
        log = os.path.join(work, f"reference-{self.nn}.log")
        print(f"grade-submissions: building chapter {self.nn}'s reference tree ({self.tree})", flush=True)
        if run_limited(["make", "-s", "-j2", "BUILD=build", "CI=", "STRICT=", "SAN=", "_build_graders"], self.tree, build_limit, log) != 0:
            sys.exit(f"grade-submissions: the reference tree of chapter {self.nn} does not build (see {log})")
        self.grader = os.path.join("build", "coursework", f"grade_{self.nn}")
        self.hidden = os.path.join(work, f"hidden-{self.nn}.bin")
        if run_limited([os.path.join(self.tree, self.grader), "--hidden", str(seed), "--record", self.hidden],
                       self.tree, build_limit, log) != 0:
            sys.exit(f"grade-submissions: the solution fails its own grader (see {log})")
        self.files = []
        for ex in self.sheet["exercises"]:
            for where in ex["where"]:
                if where.split(": ", 1)[0] not in self.files:
                    self.files.append(where.split(": ", 1)[0])
        self.files.append("ANSWERS.md")


# ------------------------------------------------------------ reading a submission

class Submission:
    def __init__(self, name):
        self.name, self.student, self.chapter = name, None, None
        self.root = None          # where the student's files are
        self.files = {}           # path -> sha256 the manifest lists (None for a tree: taken as it is)
        self.graders = {}         # grader file path -> sha256 in the submission
        self.problem = None       # why it cannot be graded
        self.notes = []


def safe_extract(tarball, dest):
    with tarfile.open(tarball) as tar:
        for m in tar.getmembers():
            if m.name.startswith("/") or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
                raise ValueError(f"unsafe member {m.name!r}")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def read_submission(path, work):
    s = Submission(os.path.basename(path.rstrip("/")))
    root = path
    if os.path.isfile(path):
        if not re.search(r"\.(tar\.gz|tgz|tar)$", path):
            s.problem = "not a submission (expected a .tar.gz from make submit, or a folder)"
            return s
        root = os.path.join(work, "unpacked", re.sub(r"\.(tar\.gz|tgz|tar)$", "", s.name))
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        try:
            safe_extract(path, root)
        except (tarfile.TarError, ValueError, OSError, EOFError) as e:
            s.problem = f"the tarball cannot be unpacked ({e})"
            return s
    s.root = root
    manifest = os.path.join(root, "manifest.json")
    tree_sheet = os.path.join(root, "coursework.json")
    if os.path.exists(manifest):
        try:
            m = json.load(open(manifest))
            s.student, s.chapter = str(m["student"]), str(m["chapter"])
            s.files = {f["path"]: f["sha256"] for f in m["files"]}
            s.graders = {f["path"]: f["sha256"] for f in m.get("grader_files", [])}
        except (ValueError, KeyError, TypeError) as e:
            s.problem = f"manifest.json is not one make submit writes ({e})"
            return s
        for p, digest in s.files.items():
            full = os.path.join(root, p)
            if not os.path.isfile(full):
                s.problem = f"manifest lists {p}, which is not in the submission"
            elif sha256(full) != digest:
                s.problem = f"{p} does not match its sha256 in the manifest"
            if s.problem:
                return s
    elif os.path.exists(tree_sheet):   # a whole student tree
        try:
            s.chapter = json.load(open(tree_sheet))["chapter"]
        except (ValueError, KeyError) as e:
            s.problem = f"coursework.json cannot be read ({e})"
            return s
        sid = os.path.join(root, ".student")
        s.student = open(sid).read().strip() if os.path.exists(sid) else s.name
        for folder, _, names in os.walk(root):
            for n in names:
                p = os.path.relpath(os.path.join(folder, n), root)
                if p.startswith(GRADER_PREFIXES):
                    s.graders[p] = sha256(os.path.join(folder, n))
    else:
        s.problem = "no manifest.json (make submit writes one) and no coursework.json (a student tree)"
        return s
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", s.student or ""):
        s.problem = f"student id {s.student!r}: expected letters, digits, '.', '_' or '-'"
    return s


def check_graders(s, ref):
    """Names the submission's grader files that differ from the teacher's (they are not used)."""
    changed = []
    for p, digest in sorted(s.graders.items()):
        mine = os.path.join(ref.tree, p)
        if not os.path.exists(mine) or sha256(mine) != digest:
            changed.append(p)
    if changed:
        s.notes.append(f"grader files changed ({', '.join(changed)}): ignored, graded with the teacher's")


# ------------------------------------------------------------ grading one

def grade(s, ref, work, seed, time_limit, build_limit):
    """The row and the feedback lines of one readable submission."""
    tree = os.path.join(work, "trees", s.student)
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ref.tree, tree, symlinks=True)
    taken = []
    for p in ref.files:
        src = os.path.join(s.root, p)
        if (s.files and p not in s.files) or not os.path.isfile(src):
            if p != "ANSWERS.md":
                s.notes.append(f"{p} missing: the solution's stands in, and its exercises get no points")
            continue
        shutil.copyfile(src, os.path.join(tree, p))
        taken.append(p)
    extra = sorted(p for p in s.files if p not in ref.files)
    if extra:
        s.notes.append(f"ignored (not an exercise file): {', '.join(extra)}")
    log = os.path.join(work, f"build-{s.student}.log")
    code = run_limited(["make", "-s", "-j2", "BUILD=build", "CI=", "STRICT=", "SAN=", "_build_graders"], tree, build_limit, log)
    if code != 0:
        text = open(log, errors="replace").read()
        errors = [line for line in text.splitlines() if ": error: " in line or "undefined reference" in line]
        first = errors[0] if errors else (text.strip().splitlines() or ["make failed"])[-1]
        first = first.replace(tree + "/", "")
        status = "does not compile" if code is not None else f"build did not finish in {build_limit} s"
        lines = text.replace(tree + "/", "").splitlines()
        shown = errors[:20] + ["..."] + lines[-30:] if len(lines) > 50 else lines
        return {"status": status, "points": {}, "first_failure": first}, "The build's errors:\n" + "\n".join(
            line.replace(tree + "/", "") for line in shown)
    points, feedback, first = {}, [], ""
    missing_files = {p for p in ref.files if p not in taken}
    for ex in ref.sheet["exercises"]:
        ex_files = {w.split(": ", 1)[0] for w in ex["where"]}
        if ex_files & missing_files:
            r = {"passed": False, "ok": [], "failed": [], "missing": [], "died": "its file is missing", "last": None}
        else:
            r = coursework_grade.run_exercise(os.path.join(tree, ref.grader), ex["id"], cwd=tree, timeout=time_limit,
                                              extra=("--hidden", str(seed), "--reference", ref.hidden))
        message = coursework_grade.describe(r, coursework_grade.part_names(ex))
        points[ex["id"]] = ex["points"] if r["passed"] else 0
        if not r["passed"] and not first:
            first = f"{ex['id']}: {message}"
        feedback.append(f"{ex['id']}: {points[ex['id']]} of {ex['points']} points: {message}")
        for name in r["ok"]:
            feedback.append(f"    passed  {name}")
        for name, why in r["failed"]:
            feedback.append(f"    FAILED  {name}: {why}")
        if r["died"]:
            feedback.append(f"    {r['died']}" + (f" in check '{r['last']}'" if r["last"] else ""))
        for part in r["missing"]:
            feedback.append(f"    not written yet: {part}()")
    return {"status": "graded", "points": points, "first_failure": first}, "\n".join(feedback)


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="the folder of submissions (tarballs from make submit, unpacked ones, student trees)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "gradebook"), help="where the gradebook goes")
    ap.add_argument("--seed", type=int, help="the hidden checks' seed (default: a fresh random one)")
    ap.add_argument("--time-limit", type=int, default=120, help="seconds per exercise of a submission")
    ap.add_argument("--build-limit", type=int, default=600, help="seconds for a submission's build")
    ap.add_argument("--work", help="scratch folder (default: a fresh one under /tmp, removed at the end)")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        sys.exit(f"grade-submissions: DIR={args.dir}: expected a folder of submissions")
    entries = sorted(n for n in os.listdir(args.dir) if not n.startswith("."))
    if not entries:
        sys.exit(f"grade-submissions: {args.dir} holds no submission")
    seed = args.seed if args.seed is not None else secrets.randbelow(2 ** 31)
    work = args.work or tempfile.mkdtemp(prefix="attn_submissions.")
    os.makedirs(work, exist_ok=True)
    os.makedirs(os.path.join(args.out, "feedback"), exist_ok=True)
    with open(os.path.join(args.out, "seed.txt"), "w") as f:
        f.write(f"{seed}\n")
    refs, rows, seen = {}, [], set()
    try:
        for name in entries:
            s = read_submission(os.path.join(args.dir, name), work)
            ref = None
            if not s.problem:
                if not re.match(r"^\d\d_", s.chapter or "") or not os.path.isdir(os.path.join(ROOT, "chapters", s.chapter)):
                    s.problem = f"chapter {s.chapter!r} is not one of this course's"
                else:
                    ref = refs.get(s.chapter) or refs.setdefault(
                        s.chapter, Reference(work, s.chapter, seed, args.build_limit))
            if not s.problem and s.student in seen:
                s.notes.append(f"student id {s.student} handed in twice: this is {name}")
                s.student = f"{s.student}~{name}"
            student = s.student if s.student and not s.problem else name
            seen.add(student)
            if s.problem:
                row, feedback = {"status": "not graded", "points": {}, "first_failure": s.problem}, s.problem
            else:
                check_graders(s, ref)
                row, feedback = grade(s, ref, work, seed, args.time_limit, args.build_limit)
            if s.notes:
                row["status"] += "; " + "; ".join(s.notes)
            row.update(student=student, chapter=s.chapter or "", source=name,
                       total=sum(row["points"].values()), max=ref.sheet["total"] if ref else "")
            rows.append((row, ref))
            answers = os.path.join(s.root or "", "ANSWERS.md")
            if s.root and not s.problem and os.path.isfile(answers):   # for the teacher to read and mark
                os.makedirs(os.path.join(args.out, "answers"), exist_ok=True)
                shutil.copyfile(answers, os.path.join(args.out, "answers", f"{student}.md"))
                feedback += f"\n\nANSWERS.md: handed in ({len(open(answers, errors='replace').read().split())} words)"
            elif not s.problem:
                feedback += "\n\nANSWERS.md: not handed in"
            with open(os.path.join(args.out, "feedback", f"{student}.txt"), "w") as f:
                f.write(f"Coursework feedback: {student}, {s.chapter or 'chapter unknown'} ({name})\n")
                f.write(f"Total: {row['total']} of {row['max'] or '?'}; {row['status']}\n\n{feedback}\n")
            print(f"{student}: {row['total']} / {row['max'] or '?'}  {row['status']}"
                  f"{'  (' + row['first_failure'] + ')' if row['first_failure'] else ''}", flush=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    ids = []
    for _, ref in rows:
        for ex in (ref.sheet["exercises"] if ref else []):
            if ex["id"] not in ids:
                ids.append(ex["id"])
    path = os.path.join(args.out, "gradebook.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "chapter", "status", *ids, "total", "max", "first failure", "source"])
        for row, ref in rows:
            mine = {ex["id"] for ex in ref.sheet["exercises"]} if ref else set()
            cells = [row["points"].get(i, 0) if i in mine else "" for i in ids]
            w.writerow([row["student"], row["chapter"], row["status"], *cells, row["total"], row["max"],
                        row["first_failure"], row["source"]])
    print(f"gradebook: {os.path.relpath(path, os.getcwd())} ({len(rows)} submissions, seed {seed}); "
          f"feedback: {os.path.relpath(os.path.join(args.out, 'feedback'), os.getcwd())}/")


if __name__ == "__main__":
    main()
