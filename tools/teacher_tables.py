#!/usr/bin/python3
"""teacher_tables.py - the figures of the model answers in tests/coursework/TEACHER.md.

tools/readme_tables.py (make readme) fills every block

    <!-- results:teacher-NN-qK -->
    ...
    <!-- /results -->

by calling make_table(name, out_dir, readme, rt), rt being readme_tables
itself. Each table reads the runs of the question NN.K: those of
tools/teacher_runs.sh (make teacher-runs), under DIR/teacher/NN_qK*/ (their
results.json, loss.dat and log.txt, the program's own output), or the
folders of `make run` (DIR/NN_*/). A run not made yet raises rt.Missing and
the block keeps what it has. Standard library only.
"""
import json
import os
import re


def teacher_dir(out_dir, run):
    return os.path.join(out_dir, "teacher", run)


def command(out_dir, run, rt, block, readme):
    """The command of a teacher run as a student types it (from its command.txt)."""
    path = os.path.join(teacher_dir(out_dir, run), "command.txt")
    if not os.path.isfile(path):
        raise rt.Missing("%s not found (needed by <!-- results:%s --> in %s): run `make teacher-runs` first"
                         % (path, block, readme))
    with open(path, encoding="utf-8") as f:
        cmd = f.read().strip()
    return "`./build/%s`" % cmd


def results(out_dir, run, rt, block, readme):
    """(path, data) of DIR/teacher/RUN/results.json."""
    return rt.read_results(os.path.join(teacher_dir(out_dir, run), "results.json"), block, readme,
                           "run `make teacher-runs` first")


def make_run_results(out_dir, chapter, rt, block, readme):
    return rt.read_results(os.path.join(out_dir, chapter, "results.json"), block, readme,
                           "run `make run` (or `make run-%s`) first" % chapter[:2])


def text_file(path, rt, block, readme, how="run `make teacher-runs` first"):
    if not os.path.isfile(path):
        raise rt.Missing("%s not found (needed by <!-- results:%s --> in %s): %s" % (path, block, readme, how))
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def log(out_dir, run, rt, block, readme):
    return text_file(os.path.join(teacher_dir(out_dir, run), "log.txt"), rt, block, readme)


def dat_rows(path, rt, block, readme, how="run `make teacher-runs` first"):
    """The numeric rows of a plot's .dat file (comment lines dropped)."""
    rows = []
    for n, line in enumerate(text_file(path, rt, block, readme, how).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            rows.append([float(x) for x in line.split()])
        except ValueError:
            raise rt.Failure("%s:%d: expected numbers, got %r" % (path, n, line))
    if not rows:
        raise rt.Failure("%s: no rows of numbers" % path)
    return rows


def loss_by_step(out_dir, run, rt, block, readme):
    """{step: (train loss, validation loss)} from a teacher run's loss.dat."""
    path = os.path.join(teacher_dir(out_dir, run), "loss.dat")
    return {int(r[0]): (r[1], r[2] if len(r) > 2 else None) for r in dat_rows(path, rt, block, readme)}


def pct2(x):
    return "%.2f%%" % (100.0 * x)


def buckets(rt, d):
    return rt.length_buckets(d)


def seconds_per_step_ms(rt, d, path):
    return 1000.0 * rt.number(d, "train_seconds", path) / rt.number(d, "steps", path)


# ---- chapter 01

def t01_q1(out_dir, readme, rt, block):
    path, d = results(out_dir, "01_q1", rt, block, readme)
    lines = ["| input length | exact match |", "|---|---|"]
    for lo, hi in buckets(rt, d):
        lines.append("| %d - %d | %s |" % (lo, hi, pct2(rt.number(d, "test_exact_len_%d_%d" % (lo, hi), path))))
    lines.append("| **all** | **%s** (token accuracy %s) |" % (pct2(rt.number(d, "test_exact_match", path)),
                                                              pct2(rt.number(d, "test_token_acc", path))))
    caption = "From %s (%s, %.0f s of training)." % (command(out_dir, "01_q1", rt, block, readme),
                                                      rt.conditions([d]), rt.number(d, "train_seconds", path))
    return lines, caption


def loss_table(out_dir, runs, labels, rt, block, readme, steps=None):
    """Train and validation loss of several runs at the same steps (from their loss.dat), then their test
    exact match; and the caption's list of the commands."""
    curves = [loss_by_step(out_dir, r, rt, block, readme) for r in runs]
    common = sorted(set.intersection(*[set(c) for c in curves]))
    if not common:
        raise rt.Failure("%s: the runs %s share no step in their loss.dat" % (block, ", ".join(runs)))
    if steps is not None:
        steps = [s for s in steps if s in common] or common
    else:
        steps = common
    head = ["step"]
    for l in labels:
        head += ["%s train" % l, "%s validation" % l]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in steps:
        cells = ["%d" % s]
        for c in curves:
            cells += ["%.4f" % c[s][0], "%.4f" % c[s][1] if c[s][1] is not None else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["test exact match"]
    for r in runs:
        path, d = results(out_dir, r, rt, block, readme)
        cells += ["**%s**" % pct2(rt.number(d, "test_exact_match", path)), ""]
    lines.append("| " + " | ".join(cells) + " |")
    return lines, " and ".join(command(out_dir, r, rt, block, readme) for r in runs)


def t01_q2(out_dir, readme, rt, block):
    lines, cmds = loss_table(out_dir, ["01_q2_rnn", "01_q2_gru"], ["RNN", "GRU"], rt, block, readme,
                             steps=[250, 500, 1000, 1500, 2000])
    return lines, "Cross-entropy per token from each run's `loss.dat`: %s." % cmds


def t01_q3(out_dir, readme, rt, block):
    pg, g = results(out_dir, "01_q1", rt, block, readme)
    pb, b = results(out_dir, "01_q3", rt, block, readme)
    lines = ["| input length | greedy | beam 5 |", "|---|---|---|"]
    for lo, hi in buckets(rt, g):
        key = "test_exact_len_%d_%d" % (lo, hi)
        lines.append("| %d - %d | %s | %s |" % (lo, hi, pct2(rt.number(g, key, pg)), pct2(rt.number(b, key, pb))))
    lines.append("| **all** | **%s** | **%s** |" % (pct2(rt.number(g, "test_exact_match", pg)),
                                                  pct2(rt.number(b, "test_exact_match", pb))))
    caption = ("Exact match on the same %d test strings: greedy from Q1's run, beam 5 from %s."
               % (rt.number(b, "test_n", pb), command(out_dir, "01_q3", rt, block, readme)))
    return lines, caption


# ---- chapter 02

def t02_q1(out_dir, readme, rt, block):
    pa, a = results(out_dir, "02_q1_attn", rt, block, readme)
    pr, r = results(out_dir, "02_q1_rnn", rt, block, readme)
    lines = ["| input length | chapter 02 (attention) | chapter 01 (no attention) |", "|---|---|---|"]
    for lo, hi in buckets(rt, a):
        key = "test_exact_len_%d_%d" % (lo, hi)
        lines.append("| %d - %d | %s | %s |" % (lo, hi, pct2(rt.number(a, key, pa)), pct2(rt.number(r, key, pr))))
    lines.append("| **all** | **%s** | **%s** |" % (pct2(rt.number(a, "test_exact_match", pa)),
                                                  pct2(rt.number(r, "test_exact_match", pr))))
    lines.append("| parameters | {:,} | {:,} |".format(int(rt.number(a, "parameters", pa)),
                                                       int(rt.number(r, "parameters", pr))))
    caption = ("Exact match by input length: %s and %s."
               % (command(out_dir, "02_q1_attn", rt, block, readme), command(out_dir, "02_q1_rnn", rt, block, readme)))
    return lines, caption


GP_TICS = re.compile(r'"((?:[^"\\]|\\.)*)"\s+(-?[0-9]+)')


def gp_labels(gp_text, axis):
    """The tick labels of set xtics / set ytics (...) in a heatmap's .gp, in order."""
    m = re.search(r"^set %stics \((.*?)\)\s*$" % axis, gp_text.replace("\\\n", " "), re.M | re.S)
    if not m:
        return None
    return [label for label, _ in sorted(GP_TICS.findall(m.group(1)), key=lambda t: int(t[1]))]


def heatmap(stem, rt, block, readme, how="run `make teacher-runs` first"):
    """(column labels, row labels, weights) of a plot_heatmap's STEM.gp and STEM.dat."""
    gp = text_file(stem + ".gp", rt, block, readme, how)
    weights = dat_rows(stem + ".dat", rt, block, readme, how)
    cols, rows = gp_labels(gp, "x"), gp_labels(gp, "y")
    if not cols or not rows or len(rows) != len(weights) or any(len(w) != len(cols) for w in weights):
        raise rt.Failure("%s.gp/.dat: the tick labels do not match the %d x %d weights"
                         % (stem, len(weights), len(weights[0])))
    return cols, rows, weights


def largest(row, k=2):
    """The k columns of a row with the largest weights, largest first."""
    return sorted(range(len(row)), key=lambda j: -row[j])[:k]


def t02_q2(out_dir, readme, rt, block):
    stem = os.path.join(teacher_dir(out_dir, "02_q2"), "translate_attention")
    src, out, weights = heatmap(stem, rt, block, readme)
    lines = ["| output | most weight on input | its weight | second | its weight |", "|---|---|---|---|---|"]
    for label, row in zip(out, weights):
        j1, j2 = largest(row)
        lines.append("| `%s` | `%s` (%d) | %.2f | `%s` (%d) | %.2f |"
                     % (label, src[j1], j1 + 1, row[j1], src[j2], j2 + 1, row[j2]))
    caption = ("The heatmap of %s, read from its `translate_attention.dat`: for each output character the two "
               "input characters (their position counted from 1) with the largest weight."
               % command(out_dir, "02_q2", rt, block, readme))
    return lines, caption


def t02_q3(out_dir, readme, rt, block):
    runs = [("02_q3_bi", "bidirectional, h_i = [h_fwd_i ; h_bwd_i]"), ("02_q3_uni", "one encoder, h_fwd_i")]
    lines = ["| encoder | parameters | WER | PER | final train loss |", "|---|---|---|---|---|"]
    cmds = []
    for run, label in runs:
        path, d = results(out_dir, run, rt, block, readme)
        lines.append("| %s | {:,} | %s | %s | %.3f |".format(int(rt.number(d, "parameters", path)))
                     % (label, pct2(rt.number(d, "test_wer", path)), pct2(rt.number(d, "test_per", path)),
                        rt.number(d, "final_train_loss", path)))
        cmds.append(command(out_dir, run, rt, block, readme))
    caption = "Test words' error rates (greedy): %s and %s." % tuple(cmds)
    return lines, caption


# ---- chapter 03

SCALING_ROW = re.compile(r"^\s*([0-9]+) \|\s*(\S+)\s+(\S+) \|\s*(\S+)\s+(\S+) \|\s*(\S+)\s+(\S+) \|\s*(\S+)\s+(\S+)\s*$")


def scaling_table(text, where, rt):
    """{D: (std dot, std scaled, entropy dot, scaled, max weight dot, scaled, grad dot, scaled)} of the
    scaling table chapter 03 prints."""
    rows = {}
    for line in text.splitlines():
        m = SCALING_ROW.match(line)
        if m:
            rows[int(m.group(1))] = tuple(float(x) for x in m.groups()[1:])
    if not rows:
        raise rt.Failure("%s: no scaling table (lines 'D | std std | entropy ... | ...')" % where)
    return rows


def scaling_lines(rows, dims, where, rt):
    lines = ["| D | std of scores, dot / scaled | entropy of a_i, dot / scaled | largest weight, dot / scaled "
             "| gradient norm, dot / scaled |", "|---|---|---|---|---|"]
    for D in dims:
        if D not in rows:
            raise rt.Failure("%s: the scaling table has no row D = %d" % (where, D))
        r = rows[D]
        lines.append("| %d | %.2f / %.2f | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f |" % ((D,) + r))
    return lines


def t03_q1(out_dir, readme, rt, block):
    where = os.path.join(teacher_dir(out_dir, "03_q1"), "log.txt")
    text = log(out_dir, "03_q1", rt, block, readme)
    rows = scaling_table(text, where, rt)
    m = re.search(r"uniform entropy: log ([0-9]+) = ([0-9.]+)", text)
    lines = scaling_lines(rows, [1, 16, 256, 1024], where, rt)
    caption = ("From the table %s prints (random q, k ~ N(0, I_D)%s)."
               % (command(out_dir, "03_q1", rt, block, readme),
                  ", %s keys: uniform weights have entropy log %s = %s" % (m.group(1), m.group(1), m.group(2))
                  if m else ""))
    return lines, caption


def t03_q2(out_dir, readme, rt, block):
    runs = ["03_q2_dot", "03_q2_scaled"]
    lines, cmds = loss_table(out_dir, runs, ["dot", "scaled_dot"], rt, block, readme)
    where = os.path.join(teacher_dir(out_dir, runs[0]), "log.txt")
    rows = scaling_table(log(out_dir, runs[0], rt, block, readme), where, rt)
    lines += [""] + scaling_lines(rows, [256], where, rt)
    caption = ("Cross-entropy per token from each run's `loss.dat`, then the D = 256 row of the scaling table "
               "both print first: %s." % cmds)
    return lines, caption


def t03_q3(out_dir, readme, rt, block):
    runs = [("03_q3_additive", "additive"), ("03_q3_scaled", "scaled_dot")]
    lines = ["| `--score` | steps | train s | ms per step | parameters |", "|---|---|---|---|---|"]
    ms, cmds = [], []
    for run, label in runs:
        path, d = results(out_dir, run, rt, block, readme)
        ms.append(seconds_per_step_ms(rt, d, path))
        lines.append("| %s | %d | %.1f | %.1f | {:,} |".format(int(rt.number(d, "parameters", path)))
                     % (label, rt.number(d, "steps", path), rt.number(d, "train_seconds", path), ms[-1]))
        cmds.append(command(out_dir, run, rt, block, readme))
    caption = ("Training time of %s and %s (%s); additive / scaled_dot = %.1fx a step."
               % (cmds[0], cmds[1], rt.conditions([results(out_dir, r, rt, block, readme)[1] for r, _ in runs]),
                  ms[0] / ms[1]))
    return lines, caption


# ---- chapter 04

def t04_q1(out_dir, readme, rt, block):
    path, d = make_run_results(out_dir, "04_self_attention", rt, block, readme)
    tasks, positions = ["reverse", "sort", "count"], ["none", "sinusoidal", "learned"]
    lines = ["| task | no positions | sinusoidal | learned |", "|---|---|---|---|"]
    for t in tasks:
        lines.append("| %s | %s |" % (t, " | ".join(pct2(rt.number(d, "%s_%s_exact_match" % (t, p), path))
                                                   for p in positions)))
    caption = ("Test exact match from `make run-04`'s `out/04_self_attention/results.json` (%d steps each)."
               % rt.number(d, "steps", path))
    return lines, caption


def t04_q2(out_dir, readme, rt, block):
    path, d = results(out_dir, "04_q2", rt, block, readme)
    lines = ["| run | exact match | token accuracy | final loss |", "|---|---|---|---|"]
    lines.append("| reverse, causal | %s | %s | %.3f |" % (pct2(rt.number(d, "test_exact_match", path)),
                                                         pct2(rt.number(d, "test_token_acc", path)),
                                                         rt.number(d, "reverse_sinusoidal_final_loss", path)))
    caption = "From %s (%d digits a sequence)." % (command(out_dir, "04_q2", rt, block, readme),
                                                   rt.number(d, "len", path))
    return lines, caption


# ---- chapter 05

def t05_q1(out_dir, readme, rt, block):
    path, d = make_run_results(out_dir, "05_multi_head_attention", rt, block, readme)
    lines = ["| heads H | D_H | exact match | token accuracy |", "|---|---|---|---|"]
    dim = int(rt.number(d, "dim", path))
    for H in (1, 2, 4):
        lines.append("| %d | %d | %s | %s |" % (H, dim // H, pct2(rt.number(d, "count_next_h%d_exact_match" % H, path)),
                                               pct2(rt.number(d, "count_next_h%d_token_acc" % H, path))))
    heads = [heatmap(os.path.join(teacher_dir(out_dir, "05_q1"), "input_attn_layer1_head%d" % h), rt, block, readme)
             for h in (1, 2)]
    keys = heads[0][0]
    lines += ["", "| query: position, digit | head 1: most weight on (position, digit) | head 2: most weight on "
              "| head 2: second |", "|---|---|---|---|"]

    def at(row, j):
        return "%d `%s`: %.2f" % (j + 1, keys[j], row[j])
    for i, digit in enumerate(keys):
        r1, r2 = heads[0][2][i], heads[1][2][i]
        a, = largest(r1, 1)
        b, c = largest(r2)
        lines.append("| %d `%s` | %s | %s | %s |" % (i + 1, digit, at(r1, a), at(r2, b), at(r2, c)))
    caption = ("Accuracies from `make run-05`'s `out/05_multi_head_attention/results.json` (count + next digit, "
               "%d steps, width D = %d); the heads from %s (positions counted from 1)."
               % (rt.number(d, "steps", path), dim, command(out_dir, "05_q1", rt, block, readme)))
    return lines, caption


def t05_q2(out_dir, readme, rt, block):
    pp, p = make_run_results(out_dir, "05_multi_head_attention", rt, block, readme)
    pf, f = results(out_dir, "05_q3", rt, block, readme)
    ns = sorted(int(m.group(1)) for m in (re.fullmatch(r"scale_ms_n([0-9]+)", k) for k in p) if m)
    if not ns:
        raise rt.Failure("%s: no scale_ms_nN keys (the cost table)" % pp)
    def mb(x):
        return "%.2f MB" % (x / 2 ** 20) if x > 0 else "none kept"
    lines = ["| N | plain ms | fused ms | plain: A's memory | fused: A's memory |", "|---|---|---|---|---|"]
    for n in ns:
        lines.append("| %d | %.2f | %.2f | %s | %s |"
                     % (n, rt.number(p, "scale_cpu_ms_n%d" % n, pp), rt.number(f, "scale_cpu_ms_n%d" % n, pf),
                        mb(rt.number(p, "scale_attn_bytes_n%d" % n, pp)), mb(rt.number(f, "scale_attn_bytes_n%d" % n, pf))))
    caption = ("The cost table (forward + backward of one sequence of N tokens, CPU time) of `make run-05` (plain; "
               "%s) and of %s (fused; %s)." % (rt.conditions([p]), command(out_dir, "05_q3", rt, block, readme),
                                              rt.conditions([f])))
    return lines, caption


def t05_q3(out_dir, readme, rt, block):
    pp, p = make_run_results(out_dir, "05_multi_head_attention", rt, block, readme)
    pf, f = results(out_dir, "05_q3", rt, block, readme)
    lines = ["| heads H | plain: exact / token | fused: exact / token |", "|---|---|---|"]
    for H in (1, 2, 4):
        k = "count_next_h%d_" % H
        lines.append("| %d | %s / %s | %s / %s |" % (H, pct2(rt.number(p, k + "exact_match", pp)),
                                                    pct2(rt.number(p, k + "token_acc", pp)),
                                                    pct2(rt.number(f, k + "exact_match", pf)),
                                                    pct2(rt.number(f, k + "token_acc", pf))))
    caption = "`make run-05` (plain) against %s." % command(out_dir, "05_q3", rt, block, readme)
    return lines, caption


# ---- chapter 06

NORM_ROW = re.compile(r"^\s*(post|pre)-LN\s+([0-9]+) \|\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+) \| (\w+)", re.M)


def t06_q1(out_dir, readme, rt, block):
    text = log(out_dir, "06_q1", rt, block, readme)
    where = os.path.join(teacher_dir(out_dir, "06_q1"), "log.txt")
    rows = NORM_ROW.findall(text)
    if len(rows) != 6:
        raise rt.Failure("%s: expected the 6 rows of the norm table (post-LN / pre-LN at 3 depths), found %d"
                         % (where, len(rows)))
    lines = ["| norm | depth | loss at step 50 | 100 | 200 | final | what happened |", "|---|---|---|---|---|---|---|"]
    for place, depth, a, b, c, final, what in rows:
        lines.append("| %s-LN | %s | %s | %s | %s | **%s** | %s |" % (place, depth, a, b, c, final, what))
    m = re.search(r"\(uniform guessing: ln ([0-9]+) = ([0-9.]+)\)", text)
    caption = ("Training loss (cross-entropy per target token%s) from the table %s prints."
               % ("; guessing uniformly over the %s tokens gives %s" % m.groups() if m else "",
                  command(out_dir, "06_q1", rt, block, readme)))
    return lines, caption


GENERATED = re.compile(r"^  \[(.*?)\](.*)$")
TIMING = re.compile(r"^generated ([0-9]+) tokens in ([0-9.]+) s \(([0-9.]+) ms a token, (.*)\)$")


def generated(out_dir, run, rt, block, readme):
    """(prompt, continuation, tokens, seconds, ms a token) of a 06_gpt --prompt run, from its log."""
    text = log(out_dir, run, rt, block, readme)
    where = os.path.join(teacher_dir(out_dir, run), "log.txt")
    lines = text.split("\n")
    sample = timing = None
    for i, line in enumerate(lines):
        m = GENERATED.match(line)
        if m and sample is None:
            # the continuation may hold newlines: everything up to the timing line
            rest = [m.group(2)]
            for nxt in lines[i + 1:]:
                if TIMING.match(nxt):
                    break
                rest.append(nxt)
            sample = (m.group(1), "\n".join(rest))
        t = TIMING.match(line)
        if t:
            timing = (int(t.group(1)), float(t.group(2)), float(t.group(3)))
    if sample is None or timing is None:
        raise rt.Failure("%s: no '  [prompt]text' line or no 'generated N tokens in S s (X ms a token' line" % where)
    return sample + timing


def shown(text, n):
    """A continuation in a table cell: its first n characters, newlines as a visible mark."""
    t = text[:n].replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("\n", " ⏎ ")
    return t + ("..." if len(text) > n else "")


def t06_q2(out_dir, readme, rt, block):
    runs = [("06_q2_t0.2", "0.2", "0 (all)"), ("06_q2_t1.0", "1.0", "0 (all)"), ("06_q2_t1.5", "1.5", "0 (all)"),
            ("06_q2_t1.0_k5", "1.0", "5")]
    lines = ["| temperature | top_k | continuation of \"The jury said\" (first 120 characters) |", "|---|---|---|"]
    for run, t, k in runs:
        prompt, cont = generated(out_dir, run, rt, block, readme)[:2]
        lines.append("| %s | %s | %s |" % (t, k, shown(cont, 120)))
    caption = ("What %s and the three others of the question printed (`--top-k 0` and `--top-k 5`)."
               % command(out_dir, runs[0][0], rt, block, readme))
    return lines, caption


def t06_q3(out_dir, readme, rt, block):
    a = generated(out_dir, "06_q3_cache", rt, block, readme)
    b = generated(out_dir, "06_q3_nocache", rt, block, readme)
    lines = ["| generation | tokens | seconds | ms a token |", "|---|---|---|---|"]
    lines.append("| with the KV cache | %d | %.2f | %.1f |" % a[2:])
    lines.append("| `--no-kv-cache` | %d | %.2f | %.1f |" % b[2:])
    same = "the same" if a[1] == b[1] else "different"
    ratio = " without the cache %.1fx the time a token." % (b[3] / a[3]) if a[3] > 0 else ""
    caption = ("%s, then with `--no-kv-cache`: the two continuations are %s (%d characters compared);%s"
               % (command(out_dir, "06_q3_cache", rt, block, readme), same, max(len(a[1]), len(b[1])), ratio))
    return lines, caption


# ---- chapter 07

def vit_run(rt, d, path, key):
    """(test acc., validation acc., ms a step) of one model of a chapter 07 results.json."""
    return (rt.number(d, key + "_test_acc", path), rt.number(d, key + "_valid_acc", path),
            1000.0 * rt.number(d, key + "_train_seconds", path) / rt.number(d, "steps", path))


def t07_q1(out_dir, readme, rt, block):
    path, d = results(out_dir, "07_q1", rt, block, readme)
    lines = ["| patch P | patches N = (28 / P)^2 | test acc. | validation acc. | ms a step |", "|---|---|---|---|---|"]
    for P in (14, 7, 4):
        test, valid, ms = vit_run(rt, d, path, "vit_p%d" % P)
        lines.append("| %d | %d | %s | %s | %.1f |" % (P, (28 // P) ** 2, pct2(test), pct2(valid), ms))
    caption = "From %s (%s, %d steps of %d images)." % (command(out_dir, "07_q1", rt, block, readme),
                                                         rt.conditions([d]), rt.number(d, "steps", path),
                                                         rt.number(d, "batch", path))
    return lines, caption


def pos_neighbours(path, rt, block, readme):
    """From a pos_similarity_*.dat (panel i: cos(E_pos[i], E_pos[j]) over the g x g grid of j): the mean
    cosine of each patch with its 4 grid neighbours, with the patches 2 steps away, and with the rest."""
    text = text_file(path, rt, block, readme, "run `make run-07` first")
    panels = [[[float(x) for x in line.split()] for line in chunk.splitlines()
               if line.strip() and not line.startswith("#")] for chunk in text.split("\n\n\n")]
    panels = [p for p in panels if p]
    g = len(panels[0]) if panels else 0
    if g < 3 or len(panels) != g * g or any(len(p) != g or any(len(r) != g for r in p) for p in panels):
        raise rt.Failure("%s: expected g x g panels of g x g cosines" % path)
    sums = {1: [0.0, 0], 2: [0.0, 0], 3: [0.0, 0]}
    for i, panel in enumerate(panels):
        r0, c0 = divmod(i, g)
        for r in range(g):
            for c in range(g):
                dist = abs(r - r0) + abs(c - c0)
                if dist == 0:
                    continue
                k = min(dist, 3)
                sums[k][0] += panel[r][c]
                sums[k][1] += 1
    return g, [sums[k][0] / sums[k][1] for k in (1, 2, 3)]


def t07_q2(out_dir, readme, rt, block):
    runs = [("07_q2_learned", "learned positions, cls pooling (the default)"),
            ("07_q2_sin2d", "`--pos sinusoidal2d`"), ("07_q2_mean", "`--pool mean`")]
    lines = ["| run (1000 steps each) | test acc. | validation acc. |", "|---|---|---|"]
    cmds = []
    for run, label in runs:
        path, d = results(out_dir, run, rt, block, readme)
        h = d.get("headline")
        if not isinstance(h, str):
            raise rt.Failure("%s: no \"headline\" naming its model" % path)
        test, valid, _ = vit_run(rt, d, path, h)
        lines.append("| %s | %s | %s |" % (label, pct2(test), pct2(valid)))
        cmds.append(command(out_dir, run, rt, block, readme))
    sims = [(os.path.join(teacher_dir(out_dir, "07_q2_learned"), "pos_similarity_vit_p7.dat"), "1000 steps (the first run)")]
    long = os.path.join(out_dir, "07_vision_transformer", "pos_similarity_vit_p7.dat")
    if os.path.isfile(long):
        pl, dl = make_run_results(out_dir, "07_vision_transformer", rt, block, readme)
        sims.append((long, "%d steps (`make run-07`)" % rt.number(dl, "steps", pl)))
    lines += ["", "| learned positions after | mean cosine similarity with the 4 grid neighbours | with patches 2 "
              "steps away | 3 or more steps away |", "|---|---|---|---|"]
    for sim, label in sims:
        g, (near, two, far) = pos_neighbours(sim, rt, block, readme)
        lines.append("| %s | %.3f | %.3f | %.3f |" % (label, near, two, far))
    caption = ("Accuracies of %s; similarities from each learned run's `pos_similarity_vit_p7.dat` (the "
               "cosines its picture draws; steps counted along the rows and columns of the %d x %d patch grid)."
               % (", ".join(cmds), g, g))
    return lines, caption


def overlay_panels(path, rt, block, readme):
    """The panels of a plot_overlay_grid .dat (rows "x y r g b"): [(title, {(x, y): (map / max, ink)})].
    The file blends the grey image (0.7 * 255 * ink) with orange by alpha = 0.85 map / max(map), so
    r - b = 255 alpha gives the map (over its largest value) and b / (1 - alpha) the grey back."""
    text = text_file(path, rt, block, readme)
    panels = []
    for chunk in text.split("\n\n\n"):
        m = re.search(r"^# panel [0-9]+: (.*)$", chunk, re.M)
        cells = {}
        for line in chunk.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            x, y, r, g, b = (int(v) for v in line.split())
            alpha = max(0.0, (r - b) / 255.0)
            grey = b / (1.0 - alpha) if alpha < 1.0 else 0.0
            cells[(x, y)] = (alpha / 0.85, grey / (0.7 * 255.0))
        if m and cells:
            panels.append((m.group(1), cells))
    if not panels:
        raise rt.Failure("%s: no panels of \"x y r g b\" rows" % path)
    return panels


def looked_at(cells, P):
    """(largest patch as (row, col), 'object' or 'background', share of the weight on background patches)."""
    side = 1 + max(x for x, _ in cells)
    g = side // P
    weight, ink = {}, {}
    for (x, y), (w, k) in cells.items():
        key = (y // P, x // P)
        weight[key] = w                           # one value a patch
        ink[key] = max(ink.get(key, 0.0), k)
    total = sum(weight.values()) or 1.0
    background = [k for k in weight if ink[k] < 0.1]
    top = max(weight, key=lambda k: weight[k])
    share = sum(weight[k] for k in background) / total
    return top, ("background" if top in background else "object"), share, g


def t07_q3(out_dir, readme, rt, block):
    run = "07_q2_learned"
    path, d = results(out_dir, run, rt, block, readme)
    P = int(rt.number(d, "patch", path))
    dat = os.path.join(teacher_dir(out_dir, run), "attention_%s.dat" % d.get("headline"))
    panels = overlay_panels(dat, rt, block, readme)
    lines = ["| image: predicted (true) | panel | most weight on patch (row, column) | there | weight on background "
             "patches |", "|---|---|---|---|---|"]
    image, g = None, 0
    for title, cells in panels:
        if not title.startswith("layer ") and title != "rollout":
            m = re.fullmatch(r"(.*) \(true (.*)\)", title)
            image = "%s (%s)" % (m.group(1), m.group(2)) if m else title
            continue
        (r, c), where, share, g = looked_at(cells, P)
        lines.append("| %s | %s | (%d, %d) | %s | %.0f%% |" % (image, title, r + 1, c + 1, where, 100 * share))
    caption = ("Read from the `%s` of %s's picture (the first test images; %d x %d patches, counted from the top "
               "left; a background patch holds no ink)." % (os.path.basename(dat), command(out_dir, run, rt, block,
                                                                                            readme), g, g))
    return lines, caption


TABLES = {
    "teacher-01-q1": t01_q1, "teacher-01-q2": t01_q2, "teacher-01-q3": t01_q3,
    "teacher-02-q1": t02_q1, "teacher-02-q2": t02_q2, "teacher-02-q3": t02_q3,
    "teacher-03-q1": t03_q1, "teacher-03-q2": t03_q2, "teacher-03-q3": t03_q3,
    "teacher-04-q1": t04_q1, "teacher-04-q2": t04_q2,
    "teacher-05-q1": t05_q1, "teacher-05-q2": t05_q2, "teacher-05-q3": t05_q3,
    "teacher-06-q1": t06_q1, "teacher-06-q2": t06_q2, "teacher-06-q3": t06_q3,
    "teacher-07-q1": t07_q1, "teacher-07-q2": t07_q2, "teacher-07-q3": t07_q3,
}


def make_table(name, out_dir, readme, rt):
    """(table lines, caption) of the block <!-- results:NAME -->; rt is readme_tables."""
    if name not in TABLES:
        raise rt.Failure("%s: unknown table <!-- results:%s --> (known: %s)" % (readme, name, ", ".join(TABLES)))
    return TABLES[name](out_dir, readme, rt, name)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import readme_tables
    out = sys.argv[2] if len(sys.argv) > 2 else "out"
    for n in (sys.argv[1:2] or TABLES):
        try:
            t, c = make_table(n, out, "TEACHER.md", readme_tables)
            print("\n".join(t) + "\n\n" + c + "\n")
        except readme_tables.Failure as e:
            print("%s: %s\n" % (n, e))
