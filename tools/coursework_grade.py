#!/usr/bin/python3
"""coursework_grade.py - grade a coursework tree: run each exercise's checks,
print the score table and write it as JSON.

make grade runs it from the tree's top folder. The exercises and their points
come from coursework.json (a student tree's, written by tools/coursework.py);
in the solution tree, which has none, from tools/coursework.py --manifest
(every chapter: full marks there). Each exercise runs alone, in a process of
its own: BUILD/coursework/grade_NN <exercise> (tests/coursework/grade.h), so a
crash costs only that exercise. A row of the table says passed, or "not written
yet" for an exercise whose TODO stub is still there, or the first failing check
with its message, or how the program died.

    tools/coursework_grade.py [--build build] [--json BUILD/coursework/grade.json]
"""
import argparse
import json
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_LIMIT = 300   # seconds per exercise: a check that loops forever fails instead of hanging


def exercises(build):
    path = os.path.join(ROOT, "coursework.json")
    if not os.path.exists(path):   # the solution tree: every chapter's exercises
        path = os.path.join(build, "coursework", "solution.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "coursework.py"), "--manifest", path], check=True)
    with open(path) as f:
        return json.load(f)


def run_exercise(program, ident):
    """(passed, message) of one exercise."""
    if not os.path.exists(program):
        return False, f"{os.path.relpath(program, ROOT)} is missing (make grade builds it)"
    try:
        run = subprocess.run([program, ident], cwd=ROOT, capture_output=True, text=True, timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return False, f"did not finish in {TIME_LIMIT} s (an endless loop?)"
    lines = run.stdout.splitlines()
    if f"PASS {ident}" in lines:
        return True, "passed"
    if f"TODO: {ident} is not written yet" in run.stderr:
        return False, "not written yet (its TODO stub is still in the code)"
    failed = [line for line in lines if line.startswith(f"FAIL {ident}: ")]
    if failed:
        return False, failed[0][len(f"FAIL {ident}: "):]
    checks = [line.split(": ", 1)[1] for line in lines if line.startswith(f"check {ident}: ")]
    where = f" in check '{checks[-1]}'" if checks else ""
    if run.returncode < 0:
        return False, f"crashed ({signal.Signals(-run.returncode).name}){where}"
    tail = run.stderr.strip().splitlines()[-1:] or [f"exit status {run.returncode}"]
    return False, f"stopped{where}: {tail[0]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the build folder (make's BUILD)")
    ap.add_argument("--json", help="where the results go (default BUILD/coursework/grade.json)")
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build)
    out = args.json or os.path.join(build, "coursework", "grade.json")
    sheet = exercises(build)
    rows, earned, bonus = [], 0, 0
    width = max(len(ex["id"]) + 8 for ex in sheet["exercises"])
    print(f"{'exercise':<{width}}  points  result")
    # the bonus exercises (coursework.py: "(P bonus points)") last, their points apart from the total
    for ex in sorted(sheet["exercises"], key=lambda e: e.get("bonus", False)):
        passed, message = run_exercise(os.path.join(build, "coursework", ex["grader"]), ex["id"])
        points = ex["points"] if passed else 0
        is_bonus = ex.get("bonus", False)
        if is_bonus:
            bonus += points
        else:
            earned += points
        rows.append({"id": ex["id"], "points": ex["points"], "earned": points, "passed": passed, "bonus": is_bonus,
                     "message": message})
        name = ex["id"] + (" (bonus)" if is_bonus else "")
        print(f"{name:<{width}}  {points:>2} / {ex['points']:<2} {message}", flush=True)
    print(f"{'total':<{width}}  {earned:>2} / {sheet['total']}")
    if sheet.get("bonus"):
        print(f"{'bonus':<{width}}  {bonus:>2} / {sheet['bonus']}  (on top of the total)")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:   # one exercise per line: easy to read back without a JSON parser
        head = {"chapter": sheet["chapter"], "total": sheet["total"], "earned": earned,
                "bonus": sheet.get("bonus", 0), "bonus_earned": bonus}
        f.write(json.dumps(head)[:-1] + ', "exercises": [\n')
        f.write(",\n".join(json.dumps(row) for row in rows))
        f.write("\n]}\n")
    print(f"results: {os.path.relpath(out, os.getcwd())}")


if __name__ == "__main__":
    main()
