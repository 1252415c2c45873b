#!/usr/bin/python3
"""coursework.py - write the student trees of the coursework: a chapter's code
with its exercises cut out, its assignment sheet and its grader.

The parts of the code a student writes are marked by one pair of comments,
each on a line of its own:

    /* Exercise 04.projections (4 points): Q = X W_Q, K = X W_K, V = X W_V. */
    ... the solution ...
    /* End of exercise 04.projections. */

An exercise may have several parts (a forward and its backward, possibly in
different files): the first says how many points it is worth, the others say
"continued" instead. "(3 bonus points)" makes it a bonus: stubbed and graded
like the others, its points shown apart and not part of the total. NN is
the chapter the exercise belongs to, which may
differ from the folder of the file (chapter 04's masks sit in chapter 03's
attention.c, chapter 01's GRU step in common/nn/cells.c).

For chapter NN, the student tree holds the Makefile and mk/, common/, chapters 01..NN,
data/, the golden vectors, the chapter's grader tests/coursework/grade_NN.c and
tools/coursework_grade.py. Every part of NN's exercises becomes a stub:

    /* Exercise 04.projections (4 points): Q = X W_Q, K = X W_K, V = X W_V. */
    /* TODO: write this part (ASSIGNMENT.md, exercise 04.projections). */
    coursework_todo("04.projections", "self_attention_forward");
    (void)X;
    /* End of exercise 04.projections. */

coursework_todo() (common/util/coursework_todo.c in the tree) says once that
the exercise is not written yet, naming the part (the function the stub sits
in: the grader says which parts are missing); the stub leaves the outputs as
they were. The
(void) lines are found by compiling each stubbed file with the Makefile's
warning flags: a variable or parameter the removed code was the only user of
is named in the stub, so the tree builds without warnings. The markers of
other chapters' exercises are dropped (their code stays). The tree also gets
ASSIGNMENT.md (tests/coursework/sheets/NN_name.md with the table of exercises filled in),
README.md (tests/coursework/sheets/student_readme.md), ANSWERS.md (the sheet's
questions with room for the answers; written once, never overwritten) and
coursework.json, the list of exercises and points that the grader reads.

    tools/coursework.py [--chapter NN] [--out DIR]   one tree per chapter (all by default), DIR/NN_name
    tools/coursework.py --chapter NN --keep ID,...   those exercises keep their solution ("all": every one)
    tools/coursework.py --list [--chapter NN]        the exercises: id, points, title
    tools/coursework.py --manifest FILE              coursework.json of this (solution) tree, every chapter

Writing a tree again rewrites only the files whose text changed (so make
rebuilds only those), and overwrites whatever a student wrote in them.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BEGIN = re.compile(r"^(\s*)/\* Exercise (\d\d)\.([a-z0-9_]+)(?: \((\d+) (bonus )?points?\))?(,? continued)?: (.*?) \*/\s*$")
END = re.compile(r"^\s*/\* End of exercise (\d\d\.[a-z0-9_]+)\. \*/\s*$")
FUNCTION = re.compile(r"^[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\(")
# as the Makefile's CFLAGS (its warnings, and -O2 for the ones only the optimiser finds)
# (OPENMP_CFLAGS: the Makefile's OpenMP flags, which it exports; none without OpenMP)
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra"] + os.environ.get("OPENMP_CFLAGS", "-fopenmp").split()
UNUSED = re.compile(r":(\d+):\d+: warning: [^\n]*?'(\w+)'[^\n]*\[-Wunused-[a-z-]+\]")
WARNING = re.compile(r": warning: ")


class Part:
    def __init__(self, path, begin, end, indent):
        self.path, self.begin, self.end, self.indent = path, begin, end, indent   # begin/end: marker line indices


class Exercise:
    def __init__(self, ident):
        self.id, self.points, self.title, self.parts, self.functions = ident, None, None, [], []
        self.bonus = False   # "(P bonus points)": graded and shown, not counted in the total

    @property
    def chapter(self):
        return self.id[:2]


def fail(msg):
    sys.exit("coursework.py: " + msg)


def source_files():
    """The C files that may hold markers (relative paths)."""
    out = []
    for top in ("common", "chapters"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            out += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(names) if n.endswith(".c")]
    return sorted(out)


def read_lines(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read().split("\n")


def enclosing_function(lines, i):
    for j in range(i, -1, -1):
        m = FUNCTION.match(lines[j])
        if m:
            return m.group(1)
    return "?"


def find_exercises():
    """id -> Exercise, in the order the markers appear, checked for pairing and points."""
    exercises = {}
    for path in source_files():
        lines = read_lines(path)
        open_part = None
        for i, line in enumerate(lines):
            m, e = BEGIN.match(line), END.match(line)
            if m:
                if open_part:
                    fail(f"{path}:{i + 1}: exercise {open_part[0]} is still open")
                ident = m.group(2) + "." + m.group(3)
                ex = exercises.setdefault(ident, Exercise(ident))
                if m.group(4):
                    if ex.points is not None:
                        fail(f"{path}:{i + 1}: the points of {ident} are given twice")
                    ex.points, ex.title, ex.bonus = int(m.group(4)), m.group(7), bool(m.group(5))
                elif not m.group(6):
                    fail(f"{path}:{i + 1}: a marker of {ident} needs '(P points)' or ', continued'")
                open_part = (ident, i, m.group(1))
            elif e:
                if not open_part or open_part[0] != e.group(1):
                    fail(f"{path}:{i + 1}: 'End of exercise {e.group(1)}' without its beginning")
                ident, begin, indent = open_part
                exercises[ident].parts.append(Part(path, begin, i, indent))
                exercises[ident].functions.append(f"{path}: {enclosing_function(lines, begin)}()")
                open_part = None
            elif "Exercise " in line and "/*" in line and re.search(r"/\* (End of e|E)xercise \d\d\.", line):
                fail(f"{path}:{i + 1}: a marker that does not follow the pattern: {line.strip()}")
        if open_part:
            fail(f"{path}: exercise {open_part[0]} is never closed")
    for ex in exercises.values():
        if ex.points is None:
            fail(f"exercise {ex.id} has no part that says its points")
    return exercises


def grader_order(nn, exs):
    """The chapter's exercises in the order of its grader's table, which must list exactly them."""
    path = f"tests/coursework/grade_{nn}.c"
    if not os.path.exists(os.path.join(ROOT, path)):
        fail(f"chapter {nn} has exercises but no grader {path}")
    text = open(os.path.join(ROOT, path)).read()
    table = text[text.find("GradeExercise EXERCISES[]"):]   # not the hidden checks' table (HIDDEN[])
    listed = re.findall(r'\{"(\d\d\.[a-z0-9_]+)", ', table[:table.find("};")])
    marked = {ex.id: ex for ex in exs}
    if sorted(listed) != sorted(marked):
        fail(f"{path} grades {', '.join(listed)}; the code marks {', '.join(sorted(marked))}")
    return [marked[i] for i in listed]


def chapters():
    """'NN' -> 'NN_name' for every chapter folder with a main.c."""
    out = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "chapters"))):
        if re.match(r"\d\d_", name) and os.path.exists(os.path.join(ROOT, "chapters", name, "main.c")):
            out[name[:2]] = name
    return out


# ------------------------------------------------------------ the stubs

def part_function(ex, part):
    """The function a part of the exercise sits in (its name in the TODO message)."""
    return ex.functions[ex.parts.index(part)].split(": ", 1)[1].rstrip("()")


def stub_lines(ex, part, voids):
    pad = part.indent
    out = [f"{pad}/* TODO: write this part (ASSIGNMENT.md, exercise {ex.id}). */",
           f'{pad}coursework_todo("{ex.id}", "{part_function(ex, part)}");']
    if voids:
        out.append(pad + " ".join(f"(void){name};" for name in sorted(voids)))
    return out


def render(path, exercises, stubbed, kept, voids):
    """The text of one file of the tree, and the stubbed parts with the line of each stub in it.
    stubbed: ids to replace by stubs; kept: ids whose markers stay around their solution;
    voids: (path, begin) -> names the stub must use."""
    lines = read_lines(path)
    parts = sorted(((p, ex) for ex in exercises.values() for p in ex.parts if p.path == path), key=lambda q: q[0].begin)
    out, placed, i = [], [], 0
    for part, ex in parts:
        out += lines[i:part.begin]
        if ex.id in stubbed:
            out.append(lines[part.begin])
            placed.append((part, ex, len(out)))   # the line (1-based) of the stub's first line - 1
            out += stub_lines(ex, part, voids.get((path, part.begin), set()))
            out.append(lines[part.end])
        elif ex.id in kept:
            out += lines[part.begin:part.end + 1]
        else:
            out += lines[part.begin + 1:part.end]
        i = part.end + 1
    out += lines[i:]
    if placed:   # the stubs call coursework_todo(): include its header after the last #include
        last = max(k for k, line in enumerate(out) if line.startswith("#include"))
        out.insert(last + 1, '#include "util/coursework_todo.h"')
        placed = [(p, ex, at + 1) for p, ex, at in placed]
    return "\n".join(out), placed


def compile_warnings(tree, path, text):
    """Warnings of compiling text as the tree's file path."""
    cc = os.environ.get("CC", "cc")
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(text)
        tmp = f.name
    try:
        cmd = [cc] + CFLAGS + ["-iquote", os.path.join(tree, os.path.dirname(path)), "-I", os.path.join(tree, "common"),
                               "-I", os.path.join(tree, "chapters"), "-c", tmp, "-o", os.devnull]
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    finally:
        os.unlink(tmp)
    if run.returncode != 0 and not WARNING.search(run.stderr):
        fail(f"{path} does not compile with its stubs:\n{run.stderr}")
    return run.stderr


def stubbed_text(tree, path, exercises, stubbed, kept):
    """The file's text with its stubs, each naming the variables it alone used (found by compiling)."""
    voids = {}
    for _ in range(4):
        text, placed = render(path, exercises, stubbed, kept, voids)
        if not placed:
            return text
        warnings = compile_warnings(tree, path, text)
        if not WARNING.search(warnings):
            return text
        added = False
        for line, name in UNUSED.findall(warnings):
            pattern = re.compile(r"\b%s\b" % re.escape(name))
            users = [(p, at) for p, ex, at in placed
                     if pattern.search("\n".join(read_lines(path)[p.begin + 1:p.end]))]
            after = [u for u in users if u[1] > int(line)] or users
            if not after:
                fail(f"{path}: warning not caused by a stub: {warnings}")
            key = (path, after[0][0].begin)
            if name not in voids.setdefault(key, set()):
                voids[key].add(name)
                added = True
        if not added:
            break
    fail(f"{path}: its stubs leave warnings:\n{warnings}")


# ------------------------------------------------------------ the tree

def write_if_changed(dest, text=None, source=None):
    """Writes text (or copies source) to dest unless it already holds exactly that."""
    data = text.encode() if text is not None else open(source, "rb").read()
    if os.path.exists(dest) and open(dest, "rb").read() == data:
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "wb") as f:
        f.write(data)
    if source:
        shutil.copymode(source, dest)


def tree_files(nn, names):
    """The files of chapter nn's tree copied from this one."""
    files = ["Makefile", ".gitignore", "tests/golden.c", "tests/golden.h", "tests/coursework/grade.c",
             f"tests/coursework/grade_{nn}.c", "tools/deps.sh", "tools/coursework_grade.py",
             "tools/coursework_submit.py"]
    files += ["tests/coursework/" + n for n in sorted(os.listdir(os.path.join(ROOT, "tests/coursework")))
              if n.startswith("grade") and n.endswith(".h")]
    tops = ["common", "data", "mk", "tests/golden"] + ["chapters/" + names[c] for c in sorted(names) if c <= nn]
    for top in tops:
        for folder, _, found in os.walk(os.path.join(ROOT, top)):
            files += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(found)]
    return files


def exercise_table(exs):
    rows = ["| exercise | points | where |", "|---|---|---|"]
    for ex in sorted(exs, key=lambda e: e.bonus):
        where = "<br>".join(f"`{w}`" for w in ex.functions)
        points = f"bonus {ex.points}" if ex.bonus else str(ex.points)
        rows.append(f"| `{ex.id}`{' (bonus)' if ex.bonus else ''}: {ex.title} | {points} | {where} |")
    rows.append(f"| total | {total(exs)} | |")
    if any(ex.bonus for ex in exs):
        rows.append(f"| bonus, on top | {sum(ex.points for ex in exs if ex.bonus)} | |")
    return "\n".join(rows)


def total(exs):
    """The points of the exercises that count (not the bonus ones)."""
    return sum(ex.points for ex in exs if not ex.bonus)


def fill(template, nn, name, exs):
    text = open(os.path.join(ROOT, template)).read()
    values = {"{{chapter}}": name, "{{NN}}": nn, "{{exercises}}": exercise_table(exs),
              "{{total}}": str(total(exs)), "{{chapters}}": "chapter 01" if nn == "01" else f"chapters 01 to {nn}"}
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def answers_template(sheet_text, nn):
    """ANSWERS.md: the questions of the sheet's "## Questions", each followed by room for its answer."""
    section = sheet_text.split("\n## Questions", 1)[-1].split("\n## ", 1)[0] if "\n## Questions" in sheet_text else ""
    questions = re.split(r"\n(?=\d+\. )", "\n" + section.strip())
    out = [f"# Answers, chapter {nn}", "",
           "Your answers to the questions of ASSIGNMENT.md; `make submit` hands this file in with your code.", ""]
    for q in (q.strip() for q in questions if re.match(r"\s*\d+\. ", q)):   # not the section's opening words
        number, _, text = q.partition(". ")
        out += [f"## Question {number}", "", "> " + re.sub(r"\n\s*", "\n> ", text), "", "Answer:", "", ""]
    return "\n".join(out).rstrip() + "\n"


def manifest(exs, chapter):
    return {"chapter": chapter,
            "exercises": [{"id": ex.id, "title": ex.title, "points": ex.points, "bonus": ex.bonus,
                           "grader": f"grade_{ex.chapter}", "where": ex.functions} for ex in exs],
            "total": total(exs), "bonus": sum(ex.points for ex in exs if ex.bonus)}


def student_makefile(nn, name):
    """The Makefile of chapter nn's tree: this one, its list of targets at the top
    replaced by the ones that work in a student tree (no tests/, bench/ or
    PyTorch twins there). tools/coursework_check.py checks each of them."""
    text = open(os.path.join(ROOT, "Makefile")).read()
    cut = text.index("# Warnings are errors")
    earlier = "#   make run-NN     the same for an earlier chapter NN\n" if nn > "01" else ""
    upto = "chapter 01" if nn == "01" else f"chapters 01 to {nn}"
    every = "chapter 01" if nn == "01" else f"chapters 01-{nn}"
    head = f"""# Makefile - builds the coursework tree of {name}: common/, {upto}
# and the grader of chapter {nn}'s exercises.
#
#   make            build every program of {every} (build/)
#   make grade      build, run each exercise's checks, print the score table
#                   (build/coursework/grade.json)
#   make run-{nn}     train chapter {nn}'s models on its quick default (out/; once your code passes)
{earlier}#   make run        every program of {every} in order
#   make clean      remove the build
#
# The other targets of the full project (tests, benchmarks, PyTorch
# cross-checks) need files this tree does not have.
#
"""
    return head + text[cut:]


LINK = re.compile(r"\[([^\]]+)\]\(([^()\s#]+)(#[^()\s]*)?\)")


def tree_links(path, text, present, sheet):
    """A text copied into the tree with its links kept true: a link to the chapter's sheet goes to ASSIGNMENT.md;
    a link to a file the tree does not have (tests, later chapters, tools) keeps its words, marked as a file of
    the full project, without the link."""
    folder = os.path.dirname(path)

    def keep_or_unlink(m):
        words, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if re.match(r"[a-z]+:", target):
            return m.group(0)
        where = os.path.normpath(os.path.join(folder, target))
        if where == sheet:
            return f"[{words}]({os.path.relpath('ASSIGNMENT.md', folder or '.')})"
        if where in present or any(p.startswith(where + "/") for p in present):
            return m.group(0)
        return f"{words} (`{where}` in the full project)"

    return LINK.sub(keep_or_unlink, text)


def write_tree(nn, names, exercises, out, keep):
    name = names[nn]
    tree = os.path.join(out, name)
    exs = grader_order(nn, [ex for ex in exercises.values() if ex.chapter == nn])
    if not exs:
        fail(f"chapter {nn} has no exercises")
    ids = {ex.id for ex in exs}
    kept = ids if keep == {"all"} else keep
    if kept - ids:
        fail(f"--keep: no exercise {', '.join(sorted(kept - ids))} in chapter {nn}")
    stubbed = ids - kept
    marked = {p.path for ex in exercises.values() for p in ex.parts}
    todo = "tests/coursework/coursework_todo"
    write_if_changed(os.path.join(tree, "common/util/coursework_todo.h"), source=os.path.join(ROOT, todo + ".h"))
    write_if_changed(os.path.join(tree, "common/util/coursework_todo.c"), source=os.path.join(ROOT, todo + ".c"))
    files = tree_files(nn, names)
    write_if_changed(os.path.join(tree, "Makefile"), text=student_makefile(nn, name))
    present = set(files) | {"ASSIGNMENT.md", "README.md", "ANSWERS.md", "coursework.json"}
    sheet = f"tests/coursework/sheets/{name}.md"
    for path in files:   # first the plain copies: compiling a stubbed file needs the tree's headers
        if path.endswith(".md"):
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                write_if_changed(os.path.join(tree, path), text=tree_links(path, f.read(), present, sheet))
        elif path not in marked and path != "Makefile":
            write_if_changed(os.path.join(tree, path), source=os.path.join(ROOT, path))
    for path in files:
        if path in marked:
            write_if_changed(os.path.join(tree, path), text=stubbed_text(tree, path, exercises, stubbed, kept))
    write_if_changed(os.path.join(tree, "ASSIGNMENT.md"), text=fill(f"tests/coursework/sheets/{name}.md", nn, name, exs))
    write_if_changed(os.path.join(tree, "README.md"), text=fill("tests/coursework/sheets/student_readme.md", nn, name, exs))
    answers = os.path.join(tree, "ANSWERS.md")
    if not os.path.exists(answers):   # the student's answers: written once, never overwritten
        write_if_changed(answers, text=answers_template(fill(f"tests/coursework/sheets/{name}.md", nn, name, exs), nn))
    write_if_changed(os.path.join(tree, "coursework.json"), text=json.dumps(manifest(exs, name), indent=1) + "\n")
    return tree, stubbed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chapter", help="NN: only this chapter (default: every chapter with exercises)")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "coursework"), help="where the trees go")
    ap.add_argument("--keep", default="", help="exercises that keep their solution: ID,ID,... or all")
    ap.add_argument("--list", action="store_true", help="print the exercises and exit")
    ap.add_argument("--manifest", help="write the coursework.json of every chapter's exercises here and exit")
    args = ap.parse_args()
    exercises = find_exercises()
    names = chapters()
    if args.chapter and args.chapter not in names:
        fail(f"--chapter {args.chapter}: expected one of {', '.join(sorted(names))}")
    wanted = [args.chapter] if args.chapter else sorted({ex.chapter for ex in exercises.values()})
    ordered = [ex for nn in wanted for ex in grader_order(nn, [e for e in exercises.values() if e.chapter == nn])]
    if args.list:
        for ex in ordered:
            print(f"{ex.id} {ex.points}{' bonus' if ex.bonus else ''} {ex.title}")
        return
    if args.manifest:
        exs = ordered
        os.makedirs(os.path.dirname(os.path.abspath(args.manifest)), exist_ok=True)
        with open(args.manifest, "w") as f:
            json.dump(manifest(exs, "solution"), f, indent=1)
            f.write("\n")
        return
    out = os.path.abspath(args.out)
    if out == ROOT or not os.path.relpath(out, ROOT).startswith(("..", "out")):
        fail(f"--out {args.out}: the trees go outside the sources (under out/ or elsewhere)")
    keep = {k for k in args.keep.split(",") if k}
    for nn in wanted:
        tree, stubbed = write_tree(nn, names, exercises, out, keep)
        print(f"coursework: {tree} ({len(stubbed)} exercises to write; then: cd {tree} && make grade)")


if __name__ == "__main__":
    main()
