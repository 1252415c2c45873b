#!/usr/bin/python3
"""coursework_grade.py - grade a coursework tree: run each exercise's checks,
print the score table and write it as JSON.

make grade runs it from the tree's top folder. The exercises and their points
come from coursework.json (a student tree's, written by tools/coursework.py);
in the solution tree, which has none, from tools/coursework.py --manifest
(every chapter: full marks there). Each exercise runs alone, in a process of
its own: BUILD/coursework/grade_NN <exercise> (tests/coursework/grade.h), so a
crash costs only that exercise. A row of the table says passed, or "not written
yet" for an exercise whose TODO stubs are all still there, or which parts are
written and right so far and which are not ("self_attention_forward right so
far, self_attention_backward not written yet (1 of 3 checks pass)"), or the
first failing check with its message, or how the program died.

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


def run_exercise(program, ident, cwd=ROOT, timeout=TIME_LIMIT, extra=()):
    """What one exercise's run said: a dict with passed, the checks that passed
    (ok) and failed ([name, message]) in order, the parts still a TODO stub
    (missing: function names), died (how the program stopped, or None) and
    the check it was in then (last)."""
    r = {"passed": False, "ok": [], "failed": [], "missing": [], "died": None, "last": None}
    if not os.path.exists(program):
        r["died"] = f"{os.path.relpath(program, cwd)} is missing (make grade builds it)"
        return r
    try:
        run = subprocess.run([program, ident, *extra], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             errors="replace")
        stdout, stderr, code = run.stdout, run.stderr, run.returncode
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        code = None
    for line in stdout.splitlines():
        if line.startswith(f"check {ident}: "):
            r["last"] = line[len(f"check {ident}: "):]
        elif line.startswith(f"ok {ident}: "):
            r["ok"].append(line[len(f"ok {ident}: "):])
            r["last"] = None
        elif line.startswith(f"FAIL {ident}: "):
            name, _, message = line[len(f"FAIL {ident}: "):].partition(": ")
            r["failed"].append([name, message])
            r["last"] = None
    prefix = f"TODO: {ident} is not written yet ("
    for line in stderr.splitlines():
        if line.startswith(prefix):
            part = line[len(prefix):].split("()", 1)[0].split(";", 1)[0]
            if part not in r["missing"]:
                r["missing"].append(part)
    if code is None:
        r["died"] = f"did not finish in {timeout} s (an endless loop?)"
    elif code < 0:
        r["died"] = f"crashed ({signal.Signals(-code).name})"
    elif code not in (0, 1):
        tail = stderr.strip().splitlines()[-1:] or [f"exit status {code}"]
        r["died"] = f"stopped: {tail[0]}"
    r["passed"] = code == 0 and f"PASS {ident}" in stdout.splitlines() and not r["failed"]
    return r


def part_names(ex):
    """The functions an exercise's parts sit in (coursework.json's where)."""
    return [w.split(": ", 1)[-1].rstrip("()") for w in ex.get("where", [])]


def describe(r, parts):
    """One line on an exercise's run: passed, which parts are missing and which
    are right so far, the first failing check, or how the program died."""
    if r["passed"]:
        return "passed"
    n_ok, n_run = len(r["ok"]), len(r["ok"]) + len(r["failed"]) + (1 if r["last"] else 0)
    score = f"{n_ok} of {n_run} checks pass" if n_run else "no check ran"
    died = f"{r['died']}{' in check ' + repr(r['last']) if r['last'] else ''}" if r["died"] else ""
    missing = r["missing"]
    written = [p for p in parts if p not in missing]
    if missing and not written or missing and not n_ok and not r["failed"] and not died:
        return "not written yet (its TODO stub is still in the code)"
    if missing:
        todo = ", ".join(missing) + " not written yet"
        if n_ok:
            return f"{', '.join(written)} right so far, {todo} ({score})"
        first = f"{r['failed'][0][0]}: {r['failed'][0][1]}" if r["failed"] else died
        return f"{todo}; {', '.join(written)} fails: {first}"
    if r["failed"]:
        name, message = r["failed"][0]
        more = f"; then {died}" if died else ""
        return f"{name}: {message}" + (f" ({score}{more})" if n_ok or more else "")
    return died or f"failed ({score})"


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
        r = run_exercise(os.path.join(build, "coursework", ex["grader"]), ex["id"])
        passed, message = r["passed"], describe(r, part_names(ex))
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
