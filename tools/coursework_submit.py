#!/usr/bin/python3
"""coursework_submit.py - hand in a coursework tree: a tarball of the
student's files (the files of the chapter's exercises and ANSWERS.md) with a
manifest (make submit, in a student tree).

    make submit STUDENT=id      the first time (the id is remembered in .student)
    make submit                 then

It first builds the tree (every program and the grader) and refuses, with one
line, when that fails. The tarball, submission-NN-<id>.tar.gz in the tree's
top folder, holds manifest.json and the files under their paths in the tree.
The manifest names the student, the chapter, the time it was made
(submitted: UTC, ISO 8601; the teacher grades a student's newest hand-in of a
chapter), each file with its sha256, and the sha256 of each grader file of the tree (tests/coursework/,
tools/coursework_grade.py): the teacher's make grade-submissions grades with
its own copy of the graders, checks the files against the manifest and says
when a grader file was changed.

    tools/coursework_submit.py [--student ID] [--build build] [--no-build]
"""
import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDENT_FILE = ".student"
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")   # the whole id (fullmatch: no trailing newline)
GRADER_FILES = ("tests/coursework", "tools/coursework_grade.py", "tools/coursework_submit.py")


def refuse(line):
    sys.exit("submit: " + line)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def student_id(given):
    """The id given now (remembered in .student), or the one remembered."""
    path = os.path.join(ROOT, STUDENT_FILE)
    if given is None and os.path.exists(path):
        given = open(path).read().strip()
    if not given:
        refuse("who is handing in? run: make submit STUDENT=your-id (remembered in .student)")
    if not STUDENT_ID.fullmatch(given):
        refuse(f"STUDENT={given}: expected letters, digits, '.', '_' or '-' (at most 64)")
    with open(path, "w") as f:
        f.write(given + "\n")
    return given


def student_files(sheet):
    """The files of the chapter's exercises (coursework.json's where), and ANSWERS.md."""
    paths = []
    for ex in sheet["exercises"]:
        for where in ex["where"]:
            path = where.split(": ", 1)[0]
            if path not in paths:
                paths.append(path)
    return paths + ["ANSWERS.md"]


def grader_files():
    out = []
    for top in GRADER_FILES:
        full = os.path.join(ROOT, top)
        if os.path.isfile(full):
            out.append(top)
        for folder, _, names in os.walk(full):
            out += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(names)]
    return sorted(out)


def builds(build):
    """Builds every program and the grader; the log goes to BUILD/submit_build.log."""
    os.makedirs(os.path.join(ROOT, build), exist_ok=True)
    log = os.path.join(build, "submit_build.log")
    with open(os.path.join(ROOT, log), "w") as f:
        run = subprocess.run(["make", "-s", f"BUILD={build}", "all", "_build_graders"], cwd=ROOT, stdout=f,
                             stderr=subprocess.STDOUT)
    return run.returncode == 0, log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--student", help="your id (remembered in .student; needed the first time)")
    ap.add_argument("--build", default="build", help="the build folder (make's BUILD)")
    ap.add_argument("--no-build", action="store_true", help="do not build first (for tests)")
    args = ap.parse_args()
    path = os.path.join(ROOT, "coursework.json")
    if not os.path.exists(path):
        refuse("this is not a student tree (no coursework.json): make coursework writes those")
    sheet = json.load(open(path))
    student = student_id(args.student)
    if not args.no_build:
        ok, log = builds(args.build)
        if not ok:
            refuse(f"the tree does not build, so nothing was handed in (make's errors: {log})")
    files = student_files(sheet)
    missing = [p for p in files if not os.path.exists(os.path.join(ROOT, p))]
    if missing:
        refuse(f"{', '.join(missing)} missing from the tree")
    links = [p for p in files if os.path.islink(os.path.join(ROOT, p)) or not os.path.isfile(os.path.join(ROOT, p))]
    if links:   # the teacher's grader refuses them: a hand-in holds plain files only
        refuse(f"{', '.join(links)}: not a plain file (a link?); copy the file itself there")
    nn = sheet["chapter"][:2]
    manifest = {"format": 1, "student": student, "chapter": sheet["chapter"],
                "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": [{"path": p, "sha256": sha256(os.path.join(ROOT, p))} for p in files],
                "grader_files": [{"path": p, "sha256": sha256(os.path.join(ROOT, p))} for p in grader_files()]}
    out = os.path.join(ROOT, f"submission-{nn}-{student}.tar.gz")
    with tarfile.open(out, "w:gz") as tar:
        data = (json.dumps(manifest, indent=1) + "\n").encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for p in files:
            tar.add(os.path.join(ROOT, p), arcname=p)
    print(f"submit: {os.path.relpath(out, os.getcwd())} ({len(files)} files, student {student}); hand in this file")


if __name__ == "__main__":
    main()
