#!/usr/bin/python3
"""readme_tables.py - rewrite the results tables in the READMEs from a run's results.json files.

    /usr/bin/python3 tools/readme_tables.py [--out DIR] [--check] [README.md ...]
    /usr/bin/python3 tools/readme_tables.py [--out DIR] --print NAME [--print NAME ...]
    /usr/bin/python3 tools/readme_tables.py [--out DIR] --data length-ood|translate|translate-long|vit-data-size|gpt-genre
    make readme                       (the same, on out/ and every README)

--print writes the table NAME (below) with its caption to standard output and
touches no README.

A README marks a generated table with two lines of their own:

    <!-- results:NAME -->
    ... anything: replaced by a fresh table ...
    <!-- /results -->

NAME is one of
    make-run   one row per chapter, as tools/results_table.sh prints it, from
               DIR/NN_*/results.json of every chapter (what `make run` writes);
    side-by-side  each chapter's idea beside the one before it (or a baseline
               without it) on the same data: SIDE_BY_SIDE below, from make
               run's results and tools/side_by_side.sh's runs;
    reverse40  make run's reverse 5-40 runs of chapters 01, 02 and 03 (and 03 in
               chapter 02's placement), exact match by input length;
    NN         (e.g. 04, 05) chapter NN's runs, one row each, from
               DIR/NN_*/results.json: every key <run>_exact_match other than
               test_exact_match is a run, with <run>_token_acc, _final_loss,
               _solved_step (first step with loss < 0.5, 0 = never) and
               _train_seconds. A run named <task>_h<H> (chapter 05) gets
               "heads H" and "D_H" (= dim / H) columns; any other run
               <task>_<positions> (chapter 04) a "positions" column;
    compare-06 chapters 01, 02, 03 and 06 on the same seq2seq tasks and step
               budget (tools/compare_seq2seq.sh), one row per chapter: exact
               match on dates, reverse 5-40 and 5-80, g2p WER / PER greedy
               and with a beam of 5, training seconds, parameters; from
               DIR/compare/NN_RUN/results.json, RUN one of dates, reverse40,
               reverse80, g2p, g2p_beam5;
    compare-06-length  the same runs' reverse 5-80 exact match by input
               length (the test_exact_len_LO_HI keys), one row per length
               bucket, one column per chapter;
    length-ood models trained on reverse 5-40 and tested on 41-80
               (tools/length_ood.sh), one row per length bucket of both
               tests, one column per model; from DIR/length_ood/MODEL/ and
               MODEL_41_80/results.json. `--data length-ood` writes the same
               figures as gnuplot's data blocks (the script's plot);
    caption-07 chapter 07's three captioners at the same budget
               (tools/compare_caption.sh), one row per model: parameters,
               exact caption match, per-word accuracy, exact match by the
               number of items, training seconds, the command; from
               DIR/caption_compare/g2_MODEL/results.json, MODEL one of pool,
               attend, transformer;
    model-size the lecture's size table and chapter 06's GPT: parameters and
               FLOPs a token from the configurations, as build/tools/model_size
               prints them (its formulas are the code's own: tools/model_size.c);
    vit-07     chapter 07's Vision Transformer: the quick default and each
               run of the long preset found, one row each (model, epochs,
               training seconds, validation and test accuracy; with --ema,
               the last step's weights' test accuracy beside the average's),
               from DIR/07_vision_transformer/results.json and the
               directories of LONG_RUNS; without any of those the block is
               kept as it is.

    vit-07-long  --preset long's runs (LONG_RUNS), one row each;
    gpt-long   the GPT's --preset long (DIR/06_gpt_long);
    01-reverse chapter 01 on reverse 5-50 (DIR/01_reverse): exact match by
               input length;
    01-g2p     chapter 01 on g2p, greedy and beam 5 (DIR/01_g2p, 01_g2p_beam5);
    g2p-02     chapters 01 and 02 on g2p at about equal parameters
               (DIR/01_g2p_2500, 02_g2p_bi and their _beam5 re-decodes);
    scores-03  chapter 03's four scores on dates (DIR/03_dot,
               03_dot_product_attention, 03_multiplicative, 03_additive);
    norm-06    chapter 06's post-LN vs pre-LN experiment
               (DIR/06_transformer/norm_experiment.json).

Everything outside the markers stays byte-identical. The tables of `make
run` (make-run, NN, vit-07, gpt) must have their results.json: a missing or
broken one stops the script with a message naming it and no README changes.
The other tables come from runs of their own (the commands beside them in the
READMEs): without their results the block is kept as it is, and the script
says so. Each README is written to a temporary file next to it and renamed
over it. With --check nothing is written: the exit status is 1 when a README
would change (its name printed).

    teacher-*  the figures of the model answers in tests/coursework/TEACHER.md,
               from the runs each question names (tools/teacher_tables.py).

Standard library only; DIR defaults to out, the READMEs to README.md,
chapters/*/*.md and tests/coursework/TEACHER.md.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPEN = re.compile(r"^[ \t]*<!--[ \t]*results:([A-Za-z0-9_.-]+)[ \t]*-->[ \t]*$")
CLOSE = re.compile(r"^[ \t]*<!--[ \t]*/results[ \t]*-->[ \t]*$")


class Failure(Exception):
    """One clear line for the user; the script exits 1 without writing."""


class Missing(Failure):
    """A results.json that is not there (yet): for a table of an optional run, the block is kept."""


# The tables that `make run` alone fills: their results must be there.
MAKE_RUN_TABLES = ("make-run", "side-by-side", "reverse40", "vit-07", "gpt")


def chapters():
    """The programs `make run` runs, in its order: each chapter directory
    (NN_name) with a main.c, then its extra programs main_X.c as NN_X."""
    found = sorted(os.path.basename(os.path.dirname(p))
                   for p in glob.glob(os.path.join(ROOT, "chapters", "[0-9][0-9]_*", "main.c")))
    if not found:
        raise Failure("no chapters/NN_*/main.c found under %s" % ROOT)
    programs = []
    for ch in found:
        programs.append(ch)
        extras = glob.glob(os.path.join(ROOT, "chapters", ch, "main_*.c"))
        programs += sorted(ch[:2] + "_" + os.path.basename(p)[len("main_"):-len(".c")] for p in extras)
    return programs


def results_path(out_dir, chapter):
    return os.path.join(out_dir, chapter, "results.json")


def load_results(out_dir, chapter, block, readme):
    path = results_path(out_dir, chapter)
    return read_results(path, block, readme, "run `make run` (or `make run-%s`) first" % chapter[:2])


def read_results(path, block, readme, how):
    """One flat results.json; `how` tells the user how to make it."""
    if not os.path.isfile(path):
        raise Missing("%s not found (needed by <!-- results:%s --> in %s): %s, or pass --out DIR"
                      % (path, block, readme, how))
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure("%s: cannot read it as JSON (%s)" % (path, e))
    if not isinstance(data, dict):
        raise Failure("%s: expected one JSON object" % path)
    return path, data


def conditions(datas):
    """'backend avx512, 2 threads' when every file agrees, else each chapter's."""
    pairs = sorted({(str(d.get("backend", "?")), str(d.get("threads", "?"))) for d in datas})
    return "; ".join("backend %s, %s thread%s" % (b, t, "" if t == "1" else "s") for b, t in pairs)


def table_make_run(out_dir, readme):
    paths, datas = [], []
    for ch in chapters():
        path, data = load_results(out_dir, ch, "make-run", readme)
        paths.append(path)
        datas.append(data)
    script = os.path.join(ROOT, "tools", "results_table.sh")
    run = subprocess.run(["bash", script] + paths, capture_output=True, text=True)
    if run.returncode != 0 or run.stderr.strip():
        raise Failure("tools/results_table.sh failed on %s: %s" % (out_dir, run.stderr.strip()))
    caption = ("From `make run`'s `out/*/results.json` (%s), by `bash tools/results_table.sh`; "
               "`make readme` rewrites this table." % conditions(datas))
    return run.stdout.rstrip("\n").split("\n"), caption


def number(data, key, path):
    if key not in data:
        raise Failure("%s: no key \"%s\"" % (path, key))
    v = data[key]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise Failure("%s: \"%s\" is not a finite number (%r)" % (path, key, v))
    return float(v)


def pct(x):
    return "%.1f%%" % (100.0 * x)


def table_chapter(nn, out_dir, readme):
    matches = [c for c in chapters() if c.startswith(nn + "_")]
    if not matches:
        raise Failure("<!-- results:%s --> in %s: no chapter %s_* with a main.c" % (nn, readme, nn))
    chapter = matches[0]
    path, data = load_results(out_dir, chapter, nn, readme)
    runs = [k[:-len("_exact_match")] for k in data
            if k.endswith("_exact_match") and k != "test_exact_match"]
    if not runs:
        raise Failure("%s: no <run>_exact_match keys (besides test_exact_match): "
                      "<!-- results:%s --> needs a chapter that trains several runs" % (path, nn))

    heads = [re.fullmatch(r"(.+)_h([0-9]+)", r) for r in runs]
    by_heads = all(heads)
    rows = []
    for run, h in zip(runs, heads):
        cells = {}
        if by_heads:
            H = int(h.group(2))
            dim = data.get("dim")
            cells["label"] = [h.group(1), str(H),
                              str(dim // H) if isinstance(dim, int) and H > 0 and dim % H == 0 else "-"]
        else:
            task, _, pos = run.rpartition("_")
            cells["label"] = [task, pos] if task else [run, "-"]
        exact = number(data, run + "_exact_match", path)
        token = number(data, run + "_token_acc", path)
        loss = number(data, run + "_final_loss", path)
        solved = number(data, run + "_solved_step", path)
        secs = number(data, run + "_train_seconds", path)
        rows.append((cells["label"], exact, token, loss, solved, secs))

    def best(values):
        """The index of a unique maximum (bolded), else None."""
        top = max(values)
        return values.index(top) if len(values) > 1 and values.count(top) == 1 else None

    best_exact = best([round(100.0 * r[1], 1) for r in rows])     # as printed: 99.96% ties 100.0%
    best_token = best([round(100.0 * r[2], 1) for r in rows])
    labels = ["task", "heads H", "D_H"] if by_heads else ["task", "positions"]
    head = labels + ["exact match", "token acc.", "final loss", "loss < 0.5 at step", "train s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, (label, exact, token, loss, solved, secs) in enumerate(rows):
        e, t = pct(exact), pct(token)
        if i == best_exact:
            e = "**%s**" % e
        if i == best_token:
            t = "**%s**" % t
        step = "never" if solved <= 0 else "%d" % solved
        lines.append("| " + " | ".join(label + [e, t, "%.3f" % loss, step, "%.1f" % secs]) + " |")
    caption = ("From `make run`'s `out/%s/results.json` (%s, seed %s); `make readme` rewrites this table."
               % (chapter, conditions([data]), data.get("seed", "?")))
    return lines, caption


# ---- compare-06: chapters 01, 02, 03 and 06 on the same tasks (tools/compare_seq2seq.sh)

COMPARE_CHAPTERS = ["01", "02", "03", "06"]
# run name (the directory NN_RUN) -> (task, min_len, max_len, beam)
COMPARE_RUNS = {
    "dates": ("dates", None, None, 1),
    "reverse40": ("reverse", 5, 40, 1),
    "reverse80": ("reverse", 5, 80, 1),
    "g2p": ("g2p", None, None, 1),
    "g2p_beam5": ("g2p", None, None, 5),
}


def model_summary(d):
    """A short description of a seq2seq model from its results.json config keys."""
    model = d.get("model")
    if model == "transformer":
        text = "transformer %s+%s blocks, D %s, %s heads, F %s, %s-LN" % (
            d.get("layers"), d.get("layers"), d.get("dim"), d.get("heads"), d.get("ff"), d.get("norm"))
        if d.get("label_smoothing"):
            text += ", label smoothing %g" % d["label_smoothing"]
        return text
    text = "%s, S %s" % (str(d.get("cell", "?")).upper(), d.get("state", d.get("hidden")))
    if model == "bahdanau":
        text += ", additive attention"
        if d.get("bidirectional"):
            text += ", bidirectional"
    elif model == "attn_seq2seq":
        text += ", %s attention" % d.get("score")
    elif model != "rnn_seq2seq":
        text = "%s %s" % (model, text)
    return text


def load_compare(out_dir, block, readme):
    """{(NN, run): (path, data)} for every chapter and run, checked against what the table says."""
    found = {}
    for nn in COMPARE_CHAPTERS:
        for run, (task, lo, hi, beam) in COMPARE_RUNS.items():
            path = os.path.join(out_dir, "compare", "%s_%s" % (nn, run), "results.json")
            _, data = read_results(path, block, readme, "run `bash tools/compare_seq2seq.sh` first")
            if not str(data.get("chapter", "")).startswith(nn + "_"):
                raise Failure("%s: chapter %r, expected chapter %s" % (path, data.get("chapter"), nn))
            if data.get("task") != task or (lo is not None and (data.get("min_len"), data.get("max_len")) != (lo, hi)):
                raise Failure("%s: task %s %s-%s, expected %s%s" % (
                    path, data.get("task"), data.get("min_len"), data.get("max_len"), task,
                    "" if lo is None else " %d-%d" % (lo, hi)))
            if number(data, "beam", path) != beam:
                raise Failure("%s: beam %g, expected %d" % (path, data["beam"], beam))
            # n_test is the generated tasks' test size (g2p's split is fixed: checked below)
            if task != "g2p" and number(data, "test_n", path) != number(data, "n_test", path):
                raise Failure("%s: evaluated on %d of the %d test examples (--max-eval): the table compares "
                              "whole test sets" % (path, data["test_n"], data["n_test"]))
            found[(nn, run)] = (path, data)
    tested = {number(d, "test_n", p) for (nn, run), (p, d) in found.items() if run.startswith("g2p")}
    if len(tested) != 1:
        raise Failure("%s/compare/*_g2p*: evaluated on different numbers of test words %s (--max-eval?)"
                      % (out_dir, sorted(tested)))
    # the same budget for every chapter: the point of the table
    for run in ("dates", "reverse40", "reverse80", "g2p"):
        budgets = {(number(d, "steps", p), number(d, "batch", p), number(d, "lr", p), number(d, "seed", p))
                   for nn in COMPARE_CHAPTERS for p, d in [found[(nn, run)]]}
        if len(budgets) != 1:
            raise Failure("%s/compare/*_%s: the chapters trained with different steps, batch, lr or seed %s"
                          % (out_dir, run, sorted(budgets)))
    return found


def bold_best(cells, values, lowest=False):
    """Bold the cell of a unique best value (as printed), in place."""
    best = min(values) if lowest else max(values)
    if len(values) > 1 and values.count(best) == 1:
        i = values.index(best)
        cells[i] = "**%s**" % cells[i]


def compare_caption(found, out_dir, what):
    datas = [d for _, d in found.values()]
    def budget(run):
        d = found[(COMPARE_CHAPTERS[0], run)][1]
        return "%d steps of %d" % (d["steps"], d["batch"])
    return ("%s From `bash tools/compare_seq2seq.sh` (`%s/compare/NN_RUN/results.json`; %s, seed %s; every "
            "chapter with its own default model flags and lr %g): dates %s, reverse %s, g2p %s; test sets: "
            "%d dates, %d reversed strings per length range, %d g2p words. `make readme` rewrites this table."
            % (what, out_dir.rstrip("/"), conditions(datas), datas[0].get("seed", "?"), datas[0].get("lr"),
               budget("dates"), budget("reverse40"), budget("g2p"), found[("01", "dates")][1]["test_n"],
               found[("01", "reverse40")][1]["test_n"], found[("01", "g2p")][1]["test_n"]))


def table_compare(out_dir, readme):
    found = load_compare(out_dir, "compare-06", readme)
    train_runs = ["dates", "reverse40", "reverse80", "g2p"]
    head = ["chapter", "model", "parameters", "dates exact", "reverse 5-40 exact", "reverse 5-80 exact",
            "g2p WER / PER, greedy", "g2p WER / PER, beam 5",
            "train s: dates / rev 5-40 / rev 5-80 / g2p", "train s, total"]
    columns = {k: [] for k in ("dates", "reverse40", "reverse80", "wer1", "per1", "wer5", "per5")}
    rows = []
    for nn in COMPARE_CHAPTERS:
        path, d = found[(nn, "dates")]
        get = {run: (lambda key, run=run: number(found[(nn, run)][1], key, found[(nn, run)][0]))
               for run in COMPARE_RUNS}
        for run in ("dates", "reverse40", "reverse80"):
            columns[run].append(round(100.0 * get[run]("test_exact_match"), 2))
        for beam, run in (("1", "g2p"), ("5", "g2p_beam5")):
            columns["wer" + beam].append(round(100.0 * get[run]("test_wer"), 2))
            columns["per" + beam].append(round(100.0 * get[run]("test_per"), 2))
        secs = [get[run]("train_seconds") for run in train_runs]
        rows.append([d["chapter"], model_summary(d), "{:,}".format(int(number(d, "parameters", path))),
                     None, None, None, None, None,
                     " / ".join("%.0f" % s for s in secs), "%.0f" % sum(secs)])
    for col, run in ((3, "dates"), (4, "reverse40"), (5, "reverse80")):
        cells = ["%.2f%%" % v for v in columns[run]]
        bold_best(cells, columns[run])
        for row, cell in zip(rows, cells):
            row[col] = cell
    for col, beam in ((6, "1"), (7, "5")):
        wer = ["%.2f%%" % v for v in columns["wer" + beam]]
        per = ["%.2f%%" % v for v in columns["per" + beam]]
        bold_best(wer, columns["wer" + beam], lowest=True)
        bold_best(per, columns["per" + beam], lowest=True)
        for row, w, p in zip(rows, wer, per):
            row[col] = "%s / %s" % (w, p)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    caption = compare_caption(found, out_dir, "Parameters as on dates (reverse and g2p change only the "
                              "vocabulary rows); g2p beam 5 decodes the greedy run's checkpoint again "
                              "(`--load NN_g2p/model.ckpt --beam 5`).")
    return lines, caption


def table_compare_length(out_dir, readme):
    found = load_compare(out_dir, "compare-06-length", readme)
    buckets = None
    for nn in COMPARE_CHAPTERS:
        path, d = found[(nn, "reverse80")]
        mine = sorted((int(m.group(1)), int(m.group(2))) for m in
                      (re.fullmatch(r"test_exact_len_([0-9]+)_([0-9]+)", k) for k in d) if m)
        if not mine:
            raise Failure("%s: no test_exact_len_LO_HI keys" % path)
        if buckets is not None and mine != buckets:
            raise Failure("%s: length buckets %s differ from chapter 01's %s" % (path, mine, buckets))
        buckets = mine
    head = ["input length"] + [found[(nn, "reverse80")][1]["chapter"] for nn in COMPARE_CHAPTERS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = ["test_exact_len_%d_%d" % b for b in buckets] + ["test_exact_match"]
    labels = ["%d-%d" % b for b in buckets] + ["**all**"]
    for key, label in zip(keys, labels):
        values = [round(100.0 * number(found[(nn, "reverse80")][1], key, found[(nn, "reverse80")][0]), 2)
                  for nn in COMPARE_CHAPTERS]
        cells = ["%.2f%%" % v for v in values]
        bold_best(cells, values)
        lines.append("| " + " | ".join([label] + cells) + " |")
    caption = compare_caption(found, out_dir, "Reverse, lengths 5-80: test exact match by input length.")
    return lines, caption


LENGTH_OOD_MODELS = (("06_sinusoidal", "transformer, sinusoidal"), ("06_learned", "transformer, learned"),
                     ("06_rope", "transformer, RoPE"), ("02_bahdanau", "chapter 02, Bahdanau"))


def length_ood_rows(out_dir, readme):
    """[(lo, hi, [exact per model])] over both tests (5-40, then 41-80), and the results read."""
    rows, found = None, []
    for run, _ in LENGTH_OOD_MODELS:
        mine = []
        for part in (run, run + "_41_80"):
            path, d = read_results(os.path.join(out_dir, "length_ood", part, "results.json"), "length-ood", readme,
                                   "run `make length-ood` first")
            found.append(d)
            mine += sorted((int(m.group(1)), int(m.group(2)), 100.0 * number(d, m.group(0), path)) for m in
                           (re.fullmatch(r"test_exact_len_([0-9]+)_([0-9]+)", k) for k in d) if m)
        if rows is None:
            rows = [(lo, hi, [v]) for lo, hi, v in mine]
        elif [(lo, hi) for lo, hi, _ in rows] != [(lo, hi) for lo, hi, _ in mine]:
            raise Failure("%s: length buckets differ from %s's" % (run, LENGTH_OOD_MODELS[0][0]))
        else:
            for row, (_, _, v) in zip(rows, mine):
                row[2].append(v)
    return rows, found


def table_length_ood(out_dir, readme):
    rows, found = length_ood_rows(out_dir, readme)
    lines = ["| input length | " + " | ".join(name for _, name in LENGTH_OOD_MODELS) + " |",
             "|" + "---|" * (1 + len(LENGTH_OOD_MODELS))]
    for lo, hi, values in rows:
        cells = ["%.2f%%" % v for v in values]
        bold_best(cells, [round(v, 2) for v in values])
        lines.append("| %d-%d%s | %s |" % (lo, hi, "" if hi <= 40 else " (longer)", " | ".join(cells)))
    first = found[0]
    caption = ("Reverse, trained on 5-40 letters (%d steps of %d, lr %g, seed %d), then each checkpoint "
               "tested on 2000 strings of 41-80 (`--load CKPT --min-len 41 --max-len 80`); exact match by input "
               "length. From `bash tools/length_ood.sh` (`out/length_ood/*/results.json`; %s). The learned table "
               "has one source row per trained position (%d): past them every position gets the last row. `make readme` rewrites this "
               "table." % (number(first, "steps", "length_ood"), number(first, "batch", "length_ood"),
                           number(first, "lr", "length_ood"), number(first, "seed", "length_ood"),
                           conditions(found), number(found[2], "src_pos_rows", "06_learned")))
    return lines, caption


def data_length_ood(out_dir):
    """gnuplot's data: one block per model (two blank lines between), x = the bucket's middle."""
    rows, _ = length_ood_rows(out_dir, "--data")
    blocks = []
    for m, (_, name) in enumerate(LENGTH_OOD_MODELS):
        blocks.append("# %s\n" % name + "".join("%.1f %.2f\n" % ((lo + hi) / 2.0, values[m])
                                                 for lo, hi, values in rows))
    return "\n\n".join(blocks)


# tools/translate_compare.sh's runs (make run): chapters 01, 02, 03 and 06 on the translate task, the same
# steps, batch and test verses; BLEU by the source's English words.
TRANSLATE_MODELS = [("01_rnn", "01 fixed context"), ("02_bahdanau", "02 additive attention"),
                    ("03_dot", "03 scaled dot"), ("06_transformer", "06 transformer")]
BLEU_BUCKETS = [("1_10", "1-10"), ("11_20", "11-20"), ("21_30", "21-30"), ("31_40", "31-40"), ("41_up", "41+")]


def translate_runs(out_dir, readme, long=False):
    """make run's (DIR/translate, one budget, all four chapters) or the long presets' (DIR/translate_long,
    the chapters that were run)."""
    found = []
    for directory, name in TRANSLATE_MODELS:
        path = os.path.join(out_dir, "translate_long" if long else "translate", directory, "results.json")
        if long and not os.path.exists(path):
            continue
        path, d = read_results(path, "translate-long" if long else "translate", readme,
                               "run `bash tools/translate_compare.sh` (make run does) first")
        found.append((name, path, d))
    if not found:
        raise Missing("%s/translate_long/*/results.json not found (PRESET=long-translate bash "
                      "tools/translate_compare.sh)" % out_dir.rstrip("/"))
    budgets = {(d.get("test_n"),) if long else (d.get("steps"), d.get("batch"), d.get("test_n")) for _, _, d in found}
    if len(budgets) != 1:
        raise Failure("%s/translate*/*: the chapters trained with different steps or batch, or were tested on "
                      "different verses %s" % (out_dir, sorted(budgets, key=str)))
    return found


def table_translate(out_dir, readme, long=False):
    found = translate_runs(out_dir, readme, long)
    d0 = found[0][2]
    lines = ["| English words | verses | " + " | ".join(name for name, _, _ in found) + " |",
             "|---|---:|" + "---:|" * len(found)]
    for key, label in BLEU_BUCKETS + [("", "**all**")]:
        values = [number(d, "test_bleu_" + key if key else "test_bleu", path) for _, path, d in found]
        cells = ["%.2f" % v for v in values]
        bold_best(cells, [round(v, 2) for v in values])
        n = number(d0, "test_n_" + key, found[0][1]) if key else number(d0, "test_n", found[0][1])
        lines.append("| %s | %d | %s |" % (label, n, " | ".join(cells)))
    if long:
        budget = "each chapter's `--preset long-translate` (%s)" % ", ".join(
            "%s: %d steps of %d" % (name.split()[0], number(d, "steps", p), number(d, "batch", p))
            for name, p, d in found)
        source = "`PRESET=long-translate bash tools/translate_compare.sh` (`out/translate_long/*/results.json`)"
    else:
        budget = "every model %d steps of %d" % (number(d0, "steps", found[0][1]), number(d0, "batch", found[0][1]))
        source = "`bash tools/translate_compare.sh` (`out/translate/*/results.json`, make run)"
    caption = ("Corpus BLEU (sacreBLEU's 13a tokens) of greedy translations of the %d test verses, by the source's "
               "English words; %s, on training verses of 1-%d words (%s). Parameters: %s. From %s; `make readme` "
               "rewrites this table." % (number(d0, "test_n", found[0][1]), budget, number(d0, "max_len", found[0][1]),
                                         conditions([d for _, _, d in found]),
                                         ", ".join("%s %s" % (name.split()[0],
                                                              "{:,}".format(int(number(d, "parameters", p))))
                                                   for name, p, d in found), source))
    return lines, caption


def data_translate(out_dir, long=False):
    """gnuplot's data: one block per model ("# NN what" first), x = the bucket's middle (41+ at 46)."""
    found = translate_runs(out_dir, "--data", long)
    blocks = []
    for name, path, d in found:
        blocks.append("# %s\n" % name + "".join("%.1f %.2f\n" % (5.5 + 10 * k, number(d, "test_bleu_" + key, path))
                                                 for k, (key, _) in enumerate(BLEU_BUCKETS)))
    return "\n\n".join(blocks)


def table_gpt(out_dir, readme, long=False):
    """Chapter 06's GPT: the quick default (DIR/06_gpt) or --preset long
    (DIR/06_gpt_long), beside the counting baselines on the same split."""
    rows = ["| run | tokens | model | parameters | tokens trained | train s | unigram | Kneser-Ney trigram | GPT validation | GPT test | sampled words in the training text |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    datas = []
    runs = [("06_gpt_long", "`./build/06_gpt --preset long --threads 1 --out out/06_gpt_long`")] if long else \
        [("06_gpt", "`./build/06_gpt` (make run-06)")]
    for run, how in runs:
        path, d = read_results(os.path.join(out_dir, run, "results.json"), "gpt", readme,
                               "run %s first" % how)
        datas.append(d)
        words = d.get("tokens") == "word"
        unit = "ppl" if words else "bpc"
        key = "perplexity" if words else "bpc"
        fmt = "%.1f" if words else "%.3f"
        model = "L=%d D=%d H=%d F=%d N=%d, %s-%s %s" % (number(d, "layers", path), number(d, "dim", path),
                                                       number(d, "heads", path), number(d, "ff", path),
                                                       number(d, "context", path), d.get("norm"),
                                                       d.get("norm_type"), d.get("mlp"))
        share = d.get("sampled_word_share")   # character models only (and not in older results)
        share = "-" if share is None else "%.0f%% of %d" % (100.0 * number(d, "sampled_word_share", path),
                                                           number(d, "sampled_words", path))
        rows.append("| %s | %ss | %s | %s | %.2fM | %.0f | %s | %s | %s | %s | %s |" % (
            how, d.get("tokens"), model, "%.2fM" % (number(d, "parameters", path) / 1e6),
            number(d, "steps", path) * number(d, "batch", path) * number(d, "context", path) / 1e6,
            number(d, "train_seconds", path),
            (fmt % number(d, "unigram_test", path)) + " " + unit,
            (fmt % number(d, "kn_trigram_test", path)) + " " + unit,
            (fmt % number(d, "valid_" + key, path)) + " " + unit,
            "**" + (fmt % number(d, "test_" + key, path)) + " " + unit + "**", share))
    caption = ("From `out/%s/results.json` (%s); baselines and GPT on the same split, test part; `make readme` "
               "rewrites this table." % (runs[0][0], conditions(datas)))
    return rows, caption


def table_gpt_variants(out_dir, readme):
    """The lecture's variants on the GPT (tools/gpt_variants.sh): one row per run."""
    runs = [("baseline", "pre-LN, LayerNorm, GELU (F = 512)"), ("post-ln", "post-LN"),
            ("rmsnorm", "RMSNorm"), ("swiglu", "SwiGLU (F = 341: equal parameters)"), ("relu", "ReLU MLP")]
    rows = ["| variant | parameters | validation bpc | test bpc | train s | ms per step |", "|---|---|---|---|---|---|"]
    datas = []
    for run, label in runs:
        path, d = read_results(os.path.join(out_dir, "gpt_variants", run, "results.json"), "gpt-variants", readme,
                               "run `bash tools/gpt_variants.sh` first")
        datas.append(d)
        secs = number(d, "train_seconds", path)
        rows.append("| %s | %s | %.3f | %.3f | %.0f | %.0f |" % (
            label, "{:,}".format(int(number(d, "parameters", path))), number(d, "valid_bpc", path),
            number(d, "test_bpc", path), secs, 1000.0 * secs / number(d, "steps", path)))
    caption = ("From `tools/gpt_variants.sh` (`out/gpt_variants/*/results.json`, %s; two sweeps side by side, "
               "`ONLY=\"baseline post-ln rmsnorm\"` and `ONLY=\"swiglu relu\"`, one thread each); `make readme` "
               "rewrites this table." % conditions(datas))
    return rows, caption


def three_seeds(out_dir, readme, sub, block, script, runs, key="test_bpc", lower_is_better=True):
    """The three seeds of each run under out_dir/sub/RUN/seedK/results.json: per run (label, the three
    values of key, parameters, ms per step, verdict against the first run), and the data read. A verdict
    is a win or a loss only where the ranges of the three seeds' values do not overlap, else a tie."""
    out, datas, ranges = [], [], []
    for run, label in runs:
        bpcs, secs, steps = [], 0.0, 0.0
        for seed in (1, 2, 3):
            path, d = read_results(os.path.join(out_dir, sub, run, "seed%d" % seed, "results.json"),
                                   block, readme, "run `bash %s` first" % script)
            datas.append(d)
            bpcs.append(number(d, key, path))
            secs += number(d, "train_seconds", path)
            steps += number(d, "steps", path)
            params = int(d.get("parameters", 0))
        ranges.append((min(bpcs), max(bpcs)))
        above, below = ranges[-1][0] > ranges[0][1], ranges[-1][1] < ranges[0][0]
        if len(out) == 0:
            verdict = "-"
        elif above or below:
            verdict = "**win**" if below == lower_is_better else "loss"
        else:
            verdict = "tie"
        out.append((label, bpcs, params, 1000.0 * secs / steps, verdict))
    return out, datas


def table_gpt_mlp(out_dir, readme):
    """Why the MLP (tools/gpt_mlp.sh): the GELU MLP against attention only, at a third of the parameters and at
    equal parameters (12 blocks), three seeds each."""
    runs = [("gelu", "4 blocks, attention + GELU MLP (F = 512)"), ("none", "4 blocks, attention only"),
            ("none-deep", "12 blocks, attention only (equal parameters)")]
    rows = ["| model | parameters | test bpc, seeds 1 / 2 / 3 | mean | ms per step | against the MLP |",
            "|---|---|---|---|---|---|"]
    got, datas = three_seeds(out_dir, readme, "gpt_mlp", "gpt-mlp", "tools/gpt_mlp.sh", runs)
    for label, bpcs, params, ms, verdict in got:
        rows.append("| %s | %s | %s | %.3f | %.0f | %s |" % (
            label, "{:,}".format(params), " / ".join("%.3f" % b for b in bpcs), sum(bpcs) / 3.0, ms, verdict))
    d = datas[0]
    caption = ("Brown characters, %d steps of 16 windows of 64 for each seed; bits per character on the test part "
               "(lower is better); a win or a loss only where the three seeds' ranges do not overlap. From "
               "`tools/gpt_mlp.sh` (`out/gpt_mlp/*/seed*/results.json`, %s; two runs side by side); `make readme` "
               "rewrites this table." % (int(number(d, "steps", "gelu")), conditions(datas)))
    return rows, caption


def table_attention_quality(out_dir, readme):
    """Full, window and BigBird attention in the GPT (tools/attention_quality.sh), on the copy task and on
    Brown, three seeds each; the verdict against full attention on the same text."""
    runs = [("full", "full (chapter 05's)", "every earlier position"),
            ("window", "window `--sparse 16,1,0,0`", "17 to 32 back"),
            ("bigbird", "BigBird `--sparse 16,1,1,2`", "window, block 0, 2 random blocks")]
    rows = ["| text | attention | a query sees | test bpc, seeds 1 / 2 / 3 | mean | against full |",
            "|---|---|---|---|---|---|"]
    alldata = []
    for text, text_label in (("copy", "copy task"), ("brown", "Brown")):
        got, datas = three_seeds(out_dir, readme, os.path.join("attention_quality", text), "attention-quality",
                                 "tools/attention_quality.sh", [(r, label) for r, label, _ in runs])
        alldata += datas
        for (label, bpcs, _, _, verdict), (_, _, sees) in zip(got, runs):   # speed: the cost table's
            rows.append("| %s | %s | %s | %s | %.3f | %s |" % (
                text_label, label, sees, " / ".join("%.3f" % b for b in bpcs), sum(bpcs) / 3.0, verdict))
    d = alldata[0]
    caption = ("Chapter 06's GPT (4 blocks, D 128, rotary positions), %d steps of 16 windows of 128 characters for "
               "each seed; bits per character on the first 50,000 test characters, each predicted from at least 64 "
               "before it (lower is better); a win or a loss only where the three seeds' ranges do not overlap. The "
               "copy task (`tools/copy_corpus.c`): 24 random letters, `=`, the same letters, so half the letters "
               "are a copy of the one 50 characters back. From `tools/attention_quality.sh` "
               "(`out/attention_quality/*/*/seed*/results.json`, %s; two runs side by side); `make readme` "
               "rewrites this table." % (int(number(d, "steps", "copy")), conditions(alldata)))
    return rows, caption


def table_vit_norms(out_dir, readme):
    """Layer norm, RMSNorm and batch norm in the ViT (tools/vit_norms.sh), three seeds each."""
    runs = [("layernorm", "LayerNorm (the default)"), ("rmsnorm", "RMSNorm"),
            ("batchnorm", "batch norm (running statistics in evaluation)")]
    rows = ["| norm | test accuracy, seeds 1 / 2 / 3 | mean | against LayerNorm |", "|---|---|---|---|"]
    got, datas = three_seeds(out_dir, readme, "vit_norms", "vit-norms", "tools/vit_norms.sh", runs,
                             key="test_token_acc", lower_is_better=False)
    for label, accs, _, _, verdict in got:
        rows.append("| %s | %s | %.2f%% | %s |" % (label, " / ".join("%.2f%%" % (100 * a) for a in accs),
                                                   100 * sum(accs) / 3.0, verdict))
    caption = ("Chapter 07's ViT at its quick default (%d steps) for each seed, accuracy on the 10,000 test images; a "
               "win or a loss only where the three seeds' ranges do not overlap. From `tools/vit_norms.sh` "
               "(`out/vit_norms/*/seed*/results.json`, %s; two runs side by side); `make readme` rewrites this "
               "table." % (int(number(datas[0], "steps", "layernorm")), conditions(datas)))
    return rows, caption


def table_vit_linformer(out_dir, readme):
    """Full attention against Linformer in the ViT (tools/vit_linformer.sh), three seeds each."""
    runs = [("full", "full attention (the default)"), ("k8", "Linformer `--linformer 8`"),
            ("k4", "Linformer `--linformer 4`")]
    rows = ["| attention | keys a query sees | test accuracy, seeds 1 / 2 / 3 | mean | against full |",
            "|---|---|---|---|---|"]
    got, datas = three_seeds(out_dir, readme, "vit_linformer", "vit-linformer", "tools/vit_linformer.sh", runs,
                             key="test_token_acc", lower_is_better=False)
    for (run, _), (label, accs, _, _, verdict) in zip(runs, got):
        sees = "all 17 tokens" if run == "full" else "%s mixtures of them" % run[1:]
        rows.append("| %s | %s | %s | %.2f%% | %s |" % (label, sees, " / ".join("%.2f%%" % (100 * a) for a in accs),
                                                       100 * sum(accs) / 3.0, verdict))
    caption = ("Chapter 07's ViT at its quick default (patches of 7: 16 patches and the class token; %d steps) for "
               "each seed, accuracy on the 10,000 test images; a win or a loss only where the three seeds' ranges "
               "do not overlap. From `tools/vit_linformer.sh` (`out/vit_linformer/*/seed*/results.json`, %s; two "
               "runs side by side); `make readme` rewrites this table." % (
                   int(number(datas[0], "steps", "full")), conditions(datas)))
    return rows, caption


DATA_SIZES = (1000, 5000, 20000, 55000)
DATA_SIZE_MODELS = (("mlp", "MLP"), ("cnn", "CNN"), ("vit", "ViT"), ("vit-augment", "ViT + augmentation"))


def data_size_runs(out_dir, readme):
    """tools/vit_data_size.sh's runs: {(size, model): [test accuracy of seeds 1, 2, 3]}, and the data read.
    Each file must say it trained on that many images (its train_size)."""
    accs, datas = {}, []
    for n in DATA_SIZES:
        for model, _ in DATA_SIZE_MODELS:
            for seed in (1, 2, 3):
                path, d = read_results(os.path.join(out_dir, "vit_data_size", "n%d" % n, model, "seed%d" % seed,
                                                    "results.json"), "vit-data-size", readme,
                                       "run `bash tools/vit_data_size.sh` first")
                if int(number(d, "train_size", path)) != n:
                    raise Failure("%s: train_size %d, expected %d" % (path, int(number(d, "train_size", path)), n))
                datas.append(d)
                accs.setdefault((n, model), []).append(100.0 * number(d, "test_token_acc", path))
    return accs, datas


def seeds_verdict(a, b):
    """a against b (higher is better): a win or a loss only where the seeds' ranges do not overlap."""
    if min(a) > max(b):
        return "**win**"
    if max(a) < min(b):
        return "loss"
    return "tie"


def table_vit_data_size(out_dir, readme):
    """The ViT, the ViT with augmentation, the CNN and the MLP on 1,000 to 55,000 training images
    (tools/vit_data_size.sh), three seeds each."""
    accs, datas = data_size_runs(out_dir, readme)
    steps, batch = int(number(datas[0], "steps", "vit_data_size")), int(number(datas[0], "batch", "vit_data_size"))
    rows = ["| training images | epochs | %s | ViT against CNN | augmentation for the ViT |"
            % " | ".join(label for _, label in DATA_SIZE_MODELS), "|---|---|---|---|---|---|---|---|"]
    for n in DATA_SIZES:
        cells = ["%.2f%% (%.2f-%.2f)" % (sum(accs[(n, m)]) / 3.0, min(accs[(n, m)]), max(accs[(n, m)]))
                 for m, _ in DATA_SIZE_MODELS]
        rows.append("| {:,} | {:,.0f} | {} | {} | {} |".format(
            n, steps * batch / n, " | ".join(cells), seeds_verdict(accs[(n, "vit")], accs[(n, "cnn")]),
            seeds_verdict(accs[(n, "vit-augment")], accs[(n, "vit")])))
    caption = ("Each model at chapter 07's quick budget (%d steps of %d images, the same schedule) on the first N "
               "training images (`--train-size N`), accuracy on the 10,000 test images: the mean of seeds 1, 2 and 3 "
               "and their range; epochs = steps x batch / N. A win or a loss only where the three seeds' ranges do "
               "not overlap. From `tools/vit_data_size.sh` (`out/vit_data_size/n*/*/seed*/results.json`, %s; two "
               "runs side by side); `make readme` rewrites this table." % (steps, batch, conditions(datas)))
    return rows, caption


CAPTION_ENCODERS = (("vit", "the ViT (patches of 7: an 8 x 8 grid), from scratch"),
                    ("cnn-scratch", "the CNN's grid (14 x 14 of 16 features), from scratch"),
                    ("cnn-finetuned", "the CNN's grid, pretrained, fine-tuned"),
                    ("cnn-frozen", "the CNN's grid, pretrained, frozen"))


def table_caption_encoders(out_dir, readme):
    """The captioner's encoders (tools/caption_encoders.sh): the ViT against the CNN's grid from scratch,
    pretrained on single items and fine-tuned, or frozen; three seeds each, each seed's CNN its own."""
    args = (out_dir, readme, "caption_encoders", "caption-encoders", "tools/caption_encoders.sh")
    cnns, _ = three_seeds(*args, [("pretrain", "")], key="test_token_acc", lower_is_better=False)
    pretrain = [100 * a for a in cnns[0][1]]   # the pretrained classifiers' test accuracy, seeds 1-3
    exact, datas = three_seeds(*args, CAPTION_ENCODERS, key="test_exact_match", lower_is_better=False)
    token, _ = three_seeds(*args, CAPTION_ENCODERS, key="test_token_acc", lower_is_better=False)
    for k, d in enumerate(datas):   # each run is the encoder its directory names
        name = CAPTION_ENCODERS[k // 3][0]
        want = ("vit", "scratch", 0) if name == "vit" else \
            ("cnn", "scratch" if name == "cnn-scratch" else "pretrained", int(name == "cnn-frozen"))
        got = (d.get("encoder"), d.get("encoder_start"), int(d.get("encoder_frozen", -1)))
        if got != want:
            raise Failure("caption_encoders/%s/seed%d: encoder %s, start %s, frozen %s; expected %s, %s, %s"
                          % ((name, k % 3 + 1) + got + want))
    rows = ["| encoder | parameters | exact match (seeds' range) | word accuracy (range) | exact match against "
            "the ViT | against the CNN from scratch |", "|---|---|---|---|---|---|"]
    scratch = [100 * e for e in exact[1][1]]
    for (name, _), (label, e, params, _, verdict), (_, t, _, _, _) in zip(CAPTION_ENCODERS, exact, token):
        e, t = [100 * x for x in e], [100 * x for x in t]
        rows.append("| %s | {:,} | %.2f%% (%.2f-%.2f) | %.2f%% (%.2f-%.2f) | %s | %s |".format(params) % (
            label, sum(e) / 3, min(e), max(e), sum(t) / 3, min(t), max(t), verdict,
            "-" if name in ("vit", "cnn-scratch") else seeds_verdict(e, scratch)))
    d = datas[0]
    caption = ("07_caption's quick default (model 2, the GRU decoder with additive attention; %d steps of %d scenes "
               "of 2 x 2 items) for seeds 1, 2 and 3, on its %d test scenes: the mean and the range. The pretrained "
               "CNNs: 07_cnn at its quick default with the same seed, %.2f%% (%.2f-%.2f) on the 10,000 test items; "
               "the parameters counted are all the captioner's, the frozen ones included. A win or a loss only "
               "where the three seeds' ranges do not overlap. From `tools/caption_encoders.sh` "
               "(`out/caption_encoders/*/seed*/results.json`, %s; two runs side by side); `make readme` rewrites "
               "this table." % (int(number(d, "steps", "caption")), int(number(d, "batch", "caption")),
                                int(number(d, "test_n", "caption")), sum(pretrain) / 3, min(pretrain),
                                max(pretrain), conditions(datas)))
    return rows, caption


def data_vit_data_size(out_dir):
    """gnuplot's data: one block per model ("# label" first), rows: N, mean, lowest, highest accuracy."""
    accs, _ = data_size_runs(out_dir, "--data")
    return "\n\n".join("# %s\n" % label + "".join("%d %.2f %.2f %.2f\n" % (
        n, sum(accs[(n, m)]) / 3.0, min(accs[(n, m)]), max(accs[(n, m)])) for n in DATA_SIZES)
        for m, label in DATA_SIZE_MODELS)


GENRE_SIZES = (50, 200, 1000)
GENRE_WAYS = (("scratch", "from scratch"), ("probe", "pretrained, frozen (a probe)"),
              ("finetune", "pretrained, fine-tuned"))


def genre_runs(out_dir, readme):
    """tools/gpt_genre.sh's runs: {(per genre, way): [test accuracy of seeds 1, 2, 3]}, and the data read.
    Each file must say it is that way, at that many labels per genre, on the test texts."""
    accs, datas = {}, []
    for n in GENRE_SIZES:
        for way, _ in GENRE_WAYS:
            for seed in (1, 2, 3):
                path, d = read_results(os.path.join(out_dir, "gpt_genre", "n%d" % n, way, "seed%d" % seed,
                                                    "results.json"), "gpt-genre", readme,
                                       "run `bash tools/gpt_genre.sh` first")
                got = (int(number(d, "per_genre", path)), d.get("runs"), d.get("split"))
                if got != (n, way, "test"):
                    raise Failure("%s: per_genre %s, runs %s, split %s; expected %d, %s, test" % ((path,) + got + (n, way)))
                datas.append(d)
                accs.setdefault((n, way), []).append(100.0 * number(d, "test_token_acc", path))
    return accs, datas


def table_gpt_genre(out_dir, readme):
    """The genre of a Brown passage from 50, 200 and 1000 labels per genre (tools/gpt_genre.sh): the GPT's
    shape from scratch, the pretrained GPT probed and fine-tuned; three seeds each."""
    accs, datas = genre_runs(out_dir, readme)
    pre, _ = three_seeds(out_dir, readme, "gpt_genre", "gpt-genre", "tools/gpt_genre.sh", [("pretrain", "")])
    bpc = pre[0][1]
    rows = ["| labelled per genre | labelled passages | %s | fine-tuned against scratch | probe against scratch |"
            % " | ".join(label for _, label in GENRE_WAYS), "|---|---|---|---|---|---|---|"]
    for n in GENRE_SIZES:
        labelled = int(number(datas[GENRE_SIZES.index(n) * 9], "labelled", "gpt_genre"))
        cells = ["%.2f%% (%.2f-%.2f)" % (sum(accs[(n, w)]) / 3.0, min(accs[(n, w)]), max(accs[(n, w)]))
                 for w, _ in GENRE_WAYS]
        rows.append("| {:,} | {:,} | {} | {} | {} |".format(
            n, labelled, " | ".join(cells), seeds_verdict(accs[(n, "finetune")], accs[(n, "scratch")]),
            seeds_verdict(accs[(n, "probe")], accs[(n, "scratch")])))
    d = datas[0]
    caption = ("06_gpt_genre, %d steps of %d passages for every size and way (`--steps %d`; the probe at "
               "`--probe-lr %g`, the others at `--lr %g`), accuracy on the %d test passages (60 per genre, from "
               "texts no training passage comes from; chance 6.67%%): the mean of seeds 1, 2 and 3 and their "
               "range. The pretrained GPTs: 06_gpt at its quick default with the same seed, %.3f (%.3f-%.3f) test "
               "bits per character. A win or a loss only where the three seeds' ranges do not overlap. From "
               "`tools/gpt_genre.sh` (`out/gpt_genre/n*/*/seed*/results.json`, %s; two runs side by side); "
               "`make readme` rewrites this table." % (
                   int(number(d, "steps", "gpt_genre")), int(number(d, "batch", "gpt_genre")),
                   int(number(d, "steps", "gpt_genre")), number(d, "probe_lr", "gpt_genre"),
                   number(d, "lr", "gpt_genre"), int(number(d, "test_n", "gpt_genre")), sum(bpc) / 3.0, min(bpc),
                   max(bpc), conditions(datas)))
    return rows, caption


def table_gpt_genre_run(out_dir, readme):
    """06_gpt_genre's quick default (make run-06): the three ways on one seed, 50 labels per genre."""
    path, d = read_results(os.path.join(out_dir, "06_gpt_genre", "results.json"), "gpt-genre-run", readme,
                           "run `make run-06` first")
    rows = ["| way | parameters trained | test accuracy | final loss | train s |", "|---|---|---|---|---|"]
    for way, label in GENRE_WAYS:
        rows.append("| %s | {:,} | %.2f%% | %.3f | %.1f |".format(int(number(d, way + "_trained_parameters", path))) % (
            label, 100.0 * number(d, way + "_token_acc", path), number(d, way + "_final_loss", path),
            number(d, way + "_train_seconds", path)))
    caption = ("`./build/06_gpt_genre` (make run-06): %d steps of %d passages, %d labelled passages per genre "
               "(%d), seed %d, on the %d test passages (chance 6.67%%); the GPT of `%s`. One seed: the "
               "experiment below gives the spread. From `out/06_gpt_genre/results.json` (%s); `make readme` "
               "rewrites this table." % (
                   int(number(d, "steps", path)), int(number(d, "batch", path)), int(number(d, "per_genre", path)),
                   int(number(d, "labelled", path)), int(number(d, "seed", path)), int(number(d, "test_n", path)),
                   d.get("gpt"), conditions([d])))
    return rows, caption


def data_gpt_genre(out_dir):
    """gnuplot's data: one block per way ("# label" first), rows: labels per genre, mean, lowest, highest."""
    accs, _ = genre_runs(out_dir, "--data")
    return "\n\n".join("# %s\n" % label + "".join("%d %.2f %.2f %.2f\n" % (
        n, sum(accs[(n, w)]) / 3.0, min(accs[(n, w)]), max(accs[(n, w)])) for n in GENRE_SIZES)
        for w, label in GENRE_WAYS)


def table_attention_cost(out_dir, readme):
    """bench_attention_cost's figures (make attention-cost): one layer's ms and memory against N, and
    attention's share of a whole block."""
    path = os.path.join(out_dir, "attention_cost", "attention_cost.tsv")
    if not os.path.isfile(path):
        raise Missing("%s not found (needed by <!-- results:attention-cost --> in %s): run `make attention-cost` "
                      "first, or pass --out DIR" % (path, readme))
    ms, mem, share = {}, {}, {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for line in lines[1:]:
        if not line:
            continue
        method, n, a, b = line.split("\t")
        if method == "share":
            share[int(n)] = float(b) / float(a)
        else:
            ms[(method, int(n))] = float(a)
            mem[(method, int(n))] = float(b)
    methods = ("full", "fused", "window", "bigbird", "linformer")
    rows = ["| N | " + " | ".join("%s ms" % m for m in methods) + " | full MiB | fused, window, bigbird KiB "
            "| linformer KiB | attention's share of a block |", "|---|" + "---|" * (len(methods) + 4)]
    for n in sorted({n for _, n in ms}):
        cells = ["%.1f" % ms[(m, n)] if (m, n) in ms else "-" for m in methods]
        full_mib = "%.0f" % (mem[("full", n)] / 2**20) if ("full", n) in mem else "-"
        small = " / ".join("%.0f" % (mem[(m, n)] / 1024) for m in ("fused", "window", "bigbird"))
        lin = "%.0f" % (mem[("linformer", n)] / 1024) if ("linformer", n) in mem else "-"
        rows.append("| %d | %s | %s | %s | %s | %s |" % (n, " | ".join(cells), full_mib, small, lin,
                                                         "%.0f%%" % (100 * share[n]) if n in share else "-"))
    caption = ("One self-attention layer of the GPT's width (D 128, H 4), one sequence without a mask, forward and "
               "backward with its projections, median of 3 with the five methods taking turns (Linformer at k = "
               "256, its E and F and their gradients counted in its memory); memory beyond the "
               "O(N) activations; the share: the fused kernel's steps 2-3 over a whole pre-norm block (GELU MLP of "
               "F = 512) at the same N. From `make attention-cost` (`out/attention_cost/attention_cost.tsv`, one "
               "thread); `make readme` rewrites this table.")
    return rows, caption


def table_gpt_moe(out_dir, readme):
    """A mixture of experts against dense MLPs on the GPT (tools/gpt_moe.sh): one row per run, then the
    share of each block's tokens each expert takes and, for the first block, the tokens each takes most."""
    runs = [("dense", "dense MLP, F = 512"), ("moe-k1", "4 experts of F = 512, k = 1 (equal active)"),
            ("moe-k2", "4 experts of F = 512, k = 2"), ("dense-4x", "dense MLP, F = 2048 (equal total)")]
    rows = ["| model | parameters | active per token | validation bpc | test bpc | ms per step | tokens dropped |",
            "|---|---|---|---|---|---|---|"]
    datas, shares = [], []
    for run, label in runs:
        path, d = read_results(os.path.join(out_dir, "gpt_moe", run, "results.json"), "gpt-moe", readme,
                               "run `make gpt-moe` first")
        datas.append(d)
        total = number(d, "parameters", path)
        active = d.get("active_parameters", total)
        rows.append("| %s | %.2fM | %.2fM | %.3f | %.3f | %.0f | %s |" % (
            label, total / 1e6, active / 1e6, number(d, "valid_bpc", path),
            number(d, "test_bpc", path), 1000.0 * number(d, "train_seconds", path) / number(d, "steps", path),
            "%.1f%%" % (100.0 * d["moe_dropped_share"]) if "moe_dropped_share" in d else "-"))
        if "moe_experts" in d:
            shares.append((label, d))
    rows += ["", "| model | block | share of the tokens, expert 0 .. E-1 |", "|---|---|---|"]
    for label, d in shares:
        l = 0
        while "moe_share_l%d" % l in d:
            rows.append("| %s | %d | %s |" % (label, l, d["moe_share_l%d" % l]))
            l += 1
    rows += ["", "| model | first block's expert | the characters it takes the largest part of |", "|---|---|---|"]
    for label, d in shares:
        for e in range(int(d["moe_experts"])):
            key = "moe_tokens_l0_e%d" % e
            if key in d:
                rows.append("| %s | %d | %s |" % (label, e, d[key].replace("|", "\\|")))
    first = datas[0]
    caption = ("The Brown characters, %d steps of %d windows of %d; bits per character on the first "
               "100,000 characters of the validation and test parts; ms per step of training. From "
               "`tools/gpt_moe.sh` (`out/gpt_moe/*/results.json`, %s; the runs one after another); `make readme` "
               "rewrites these tables." % (number(first, "steps", "gpt-moe"), number(first, "batch", "gpt-moe"),
                                           number(first, "context", "gpt-moe"), conditions(datas)))
    return rows, caption


def table_caption(out_dir, readme):
    """Chapter 07's captioners on 2 x 2 scenes, one row per model (tools/compare_caption.sh)."""
    models = [("pool", "no attention: the grid pooled to one vector, chapter 01's GRU decoder"),
              ("attend", "additive attention over the grid, chapter 02's GRU decoder (Show-Attend-Tell)"),
              ("transformer", "cross-attention, chapter 06's decoder")]
    found = []
    for m, label in models:
        path, d = read_results(os.path.join(out_dir, "caption_compare", "g2_" + m, "results.json"), "caption-07",
                               readme, "run `bash tools/compare_caption.sh` (make caption-compare) first")
        found.append((m, label, path, d))
    budgets = {(d.get("steps"), d.get("batch"), d.get("lr"), d.get("seed"), d.get("test_n")) for _, _, _, d in found}
    if len(budgets) != 1:
        raise Failure("%s/caption_compare/g2_*: the models trained with different steps, batch, lr, seed or test "
                      "scenes %s" % (out_dir.rstrip("/"), sorted(budgets, key=str)))
    counts = sorted({int(k.split("_")[3]) for _, _, _, d in found for k in d if k.startswith("test_exact_len_")})
    rows = ["| model | how the decoder reads the image | parameters | exact match | per-word accuracy | %s | train s |"
            % " | ".join("exact, %d item%s" % (n, "" if n == 1 else "s") for n in counts),
            "|---|---|---|---|---|%s---|" % ("---|" * len(counts))]
    exact = [number(d, "test_exact_match", p) for _, _, p, d in found]
    words = [number(d, "test_token_acc", p) for _, _, p, d in found]
    for (m, label, path, d), e, w in zip(found, exact, words):
        by_count = []
        for n in counts:
            key = "test_exact_len_%d_%d" % (n, n)
            by_count.append(pct(number(d, key, path)) if key in d else "-")
        rows.append("| `--model %s` | %s | %s | %s | %s | %s | %.0f |" % (
            m, label, "{:,}".format(int(number(d, "parameters", path))),
            ("**%s**" if e == max(exact) else "%s") % pct(e), ("**%s**" if w == max(words) else "%s") % pct(w),
            " | ".join(by_count), number(d, "train_seconds", path)))
    d0 = found[0][3]
    caption = ("From `bash tools/compare_caption.sh` (`%s/caption_compare/g2_MODEL/results.json`; %s): "
               "`./build/07_caption --model MODEL --grid 2 --steps %d --batch %d`, the same encoder (P 7, D 64, "
               "2 blocks), lr %g, seed %d; %d test scenes of 2 x 2 cells, greedy captions. `make readme` rewrites "
               "this table." % (out_dir.rstrip("/"), conditions([f[3] for f in found]), number(d0, "steps", found[0][2]),
                                number(d0, "batch", found[0][2]), number(d0, "lr", found[0][2]),
                                number(d0, "seed", found[0][2]), number(d0, "test_n", found[0][2])))
    return rows, caption


def length_buckets(d):
    """The (lo, hi) of every test_exact_len_LO_HI key, in order."""
    return sorted((int(m.group(1)), int(m.group(2))) for m in
                  (re.fullmatch(r"test_exact_len_([0-9]+)_([0-9]+)", k) for k in d) if m)


def table_01_reverse(out_dir, readme):
    path, d = read_results(os.path.join(out_dir, "01_reverse", "results.json"), "01-reverse", readme,
                           "run chapter 01's reverse command (its README) first")
    lines = ["| input length | exact match |", "|---|---|"]
    for lo, hi in length_buckets(d):
        lines.append("| %d - %d | %.2f%% |" % (lo, hi, 100 * number(d, "test_exact_len_%d_%d" % (lo, hi), path)))
    lines.append("| **all** | **%.2f%%** (token accuracy %.2f%%) |" % (100 * number(d, "test_exact_match", path),
                                                                    100 * number(d, "test_token_acc", path)))
    caption = "From `out/01_reverse/results.json` (%s). `make readme` rewrites this table." % conditions([d])
    return lines, caption


def table_01_g2p(out_dir, readme):
    lines = ["| decoding | test words | WER | PER |", "|---|---|---|---|"]
    datas = []
    for run, label in (("01_g2p", "greedy"), ("01_g2p_beam5", "beam 5")):
        path, d = read_results(os.path.join(out_dir, run, "results.json"), "01-g2p", readme,
                               "run chapter 01's g2p commands (its README) first")
        datas.append(d)
        lines.append("| %s | {:,} | %.2f%% | %.2f%% |".format(int(number(d, "test_n", path)))
                     % (label, 100 * number(d, "test_wer", path), 100 * number(d, "test_per", path)))
    caption = ("From `out/01_g2p/results.json` and `out/01_g2p_beam5/results.json` (%s). `make readme` rewrites "
               "this table." % conditions(datas))
    return lines, caption


def table_g2p_02(out_dir, readme):
    rows = [("01_g2p_2500", "chapter 01, `S = 128` (first command)"),
            ("02_g2p_bi", "chapter 02, bidirectional, `S = 96` (second command)")]
    lines = ["| model | parameters | test words | WER greedy | PER greedy | WER beam 5 | PER beam 5 |",
             "|---|---|---|---|---|---|---|"]
    datas = []
    for run, label in rows:
        cells = []
        for r in (run, run + "_beam5"):
            path, d = read_results(os.path.join(out_dir, r, "results.json"), "g2p-02", readme,
                                   "run chapter 02's g2p commands (its README) first")
            datas.append(d)
            cells += ["%.2f%%" % (100 * number(d, "test_wer", path)), "%.2f%%" % (100 * number(d, "test_per", path))]
        path, d = read_results(os.path.join(out_dir, run, "results.json"), "g2p-02", readme, "")
        lines.append("| %s | {:,} | {:,} | %s |".format(int(number(d, "parameters", path)),
                                                       int(number(d, "test_n", path))) % (label, " | ".join(cells)))
    caption = ("From `out/{01_g2p_2500,02_g2p_bi}{,_beam5}/results.json` (%s). `make readme` rewrites this table."
               % conditions(datas))
    return lines, caption


def table_scores_03(out_dir, readme):
    runs = [("03_dot", "`dot`"), ("03_dot_product_attention", "`scaled_dot` (the default, `make run`)"),
            ("03_multiplicative", "`multiplicative`"), ("03_additive", "`additive`")]
    found = []
    for run, label in runs:
        path, d = read_results(os.path.join(out_dir, run, "results.json"), "scores-03", readme,
                               "run chapter 03's --score commands (its README) first")
        found.append((label, path, d))
    exact = [round(100 * number(d, "test_exact_match", p), 2) for _, p, d in found]
    lines = ["| `--score` | parameters | exact match | token accuracy | train s |", "|---|---|---|---|---|"]
    cells = ["%.2f%%" % e for e in exact]
    bold_best(cells, exact)
    for (label, path, d), e in zip(found, cells):
        lines.append("| %s | {:,} | %s | %.2f%% | %.0f |".format(int(number(d, "parameters", path)))
                     % (label, e, 100 * number(d, "test_token_acc", path), number(d, "train_seconds", path)))
    d0 = found[1][2]
    caption = ("From `out/03_*/results.json` (%s): %d test dates, %d steps of %d, seed %d. `make readme` rewrites "
               "this table." % (conditions([f[2] for f in found]), number(d0, "test_n", found[1][1]),
                                number(d0, "steps", found[1][1]), number(d0, "batch", found[1][1]),
                                number(d0, "seed", found[1][1])))
    return lines, caption


def table_norm_06(out_dir, readme):
    path, d = read_results(os.path.join(out_dir, "06_transformer", "norm_experiment.json"), "norm-06", readme,
                           "run `./build/06_transformer --norm-experiment` first")
    lines = ["| norm | depth 2 | depth 6 | depth 12 |", "|---|---|---|---|"]
    for place in ("post", "pre"):
        cells = []
        for depth in (2, 6, 12):
            key = "%s_%d_final_loss" % (place, depth)
            v = d.get(key)
            if v is None:
                cells.append("diverged")
            else:
                v = number(d, key, path)
                cells.append("%.3f%s" % (v, " (stalled)" if v > 1.0 else ""))
        lines.append("| %s-LN | %s |" % (place, " | ".join(cells)))
    caption = ("From `out/06_transformer/norm_experiment.json`: training loss at the end (mean of the last 10 "
               "steps). `make readme` rewrites this table.")
    return lines, caption


FASHION_MNIST_TRAIN = 55000    # the training images the ViT samples its batches from (the last 5,000 validate)


# The runs of chapter 07's --preset long, as (directory under DIR, command).
LONG_RUNS = [("07_vision_transformer_long",
              "`./build/07_vision_transformer --preset long --out out/07_vision_transformer_long` (seed 1)"),
             ("07_vision_transformer_long_seed2",
              "`./build/07_vision_transformer --preset long --seed 2 --out out/07_vision_transformer_long_seed2`")]


def long_runs_found(out_dir):
    """The runs of LONG_RUNS that have finished (a run still training has its directory, no results.json)."""
    return [(run, how) for run, how in LONG_RUNS if os.path.isfile(os.path.join(out_dir, run, "results.json"))]


def table_vit(out_dir, readme, long=False):
    """Chapter 07's ViT: the quick default, or each run of --preset long found, one row each."""
    runs = long_runs_found(out_dir) if long else [("07_vision_transformer", "`make run-07` (the quick default)")]
    if not runs:
        raise Missing("no run of --preset long in %s (%s)" % (out_dir.rstrip("/"), ", ".join(r for r, _ in LONG_RUNS)))
    rows = ["| run | model | epochs | train s | validation acc. | test acc. | test acc., each image averaged with "
            "its mirror image |",
            "|---|---|---|---|---|---|---|"]
    datas = []
    for run, how in runs:
        path, d = read_results(os.path.join(out_dir, run, "results.json"), "vit-07", readme, "run %s first" % how)
        datas.append(d)
        h = d.get("headline")
        if not isinstance(h, str) or h + "_test_acc" not in d:
            raise Failure("%s: no \"headline\" naming a run with a _test_acc" % path)
        P = number(d, "patch", path)
        K = number(d, "kernel", path) if "kernel" in d else P   # results from before --kernel: K = P
        stem = number(d, "stem", path) if "stem" in d else 0   # results from before --stem: none
        model = ("a %d-channel convolutional stem, " % stem if stem else "") + \
            "patch %d (%d patches%s), %d blocks of D %d, %d heads, F %d, %s pooling, %s positions%s" % (
            P, (number(d, "rows", path) // P) ** 2, " through %d x %d kernels" % (K, K) if K > P else "",
            number(d, "layers", path), number(d, "dim", path), number(d, "heads", path), number(d, "ff", path),
            d.get("pool"), d.get("pos"),
            ", augmented (shift %d%s)" % (number(d, "augment_shift", path),
                                          ", flip" if d.get("augment_flip") else "")
            if d.get("augment_shift") or d.get("augment_flip") else "")
        if "augment_erase" in d and number(d, "augment_erase", path) > 0:
            model += ", random erasing p %g" % number(d, "augment_erase", path)
        if "label_smoothing" in d and number(d, "label_smoothing", path) > 0:
            model += ", label smoothing %g" % number(d, "label_smoothing", path)
        if "keep" in d and 0 < number(d, "keep", path) < 1:   # results from before --keep: every patch
            until = number(d, "keep_until", path) if "keep_until" in d else 1   # from before --keep-until: to the end
            model += ", patch dropout (training keeps %g of the patches%s)" % (
                number(d, "keep", path), " for the first %g%% of the steps" % (100 * until) if 0 < until < 1 else "")
        if "replicas" in d and number(d, "replicas", path) > 1:
            model += ", batch split between %d data-parallel replicas" % number(d, "replicas", path)
        if "sam" in d and number(d, "sam", path) > 0:   # results from before --sam: plain steps
            model += ", sharpness-aware steps (`--sam %g`)" % number(d, "sam", path)
        averaged = "ema" in d and number(d, "ema", path) > 0   # results from before --ema: the last weights
        if averaged:
            model += "; evaluated: the moving average of the weights (`--ema %g`)" % number(d, "ema", path)
        rows.append("| %s | %s | %.1f | %.0f | %s | **%s**%s | %s |" % (
            how, model, number(d, "steps", path) * number(d, "batch", path) / FASHION_MNIST_TRAIN,
            number(d, h + "_train_seconds", path), "%.2f%%" % (100 * number(d, h + "_valid_acc", path)),
            "%.2f%%" % (100 * number(d, h + "_test_acc", path)),
            " (the last step's weights: %.2f%%)" % (100 * number(d, h + "_token_acc_last_weights", path))
            if averaged else "",
            "%.2f%% (validation %.2f%%)" % (100 * number(d, h + "_test_acc_flip_averaged", path),
                                            100 * number(d, h + "_valid_acc_flip_averaged", path))
            if h + "_test_acc_flip_averaged" in d
            else "- (not in this run's results: see below)" if d.get("augment_flip")
            else "- (not trained on mirror images)"))
    caption = ("From the `results.json` of each run's `--out` directory "
               "(%s); validation on the 5,000 held-out training images, test on the official 10,000; the last "
               "column averages the class probabilities of each image and of its mirror image (a model trained "
               "with flips only): a second figure beside the plain one, not instead of it (the published figures "
               "are of the plain kind); `make readme` rewrites this table." % conditions(datas))
    return rows, caption


TABLES = ("make-run, side-by-side, reverse40, translate, translate-long, model-size, compare-06, compare-06-length, length-ood, gpt, gpt-long, gpt-variants, gpt-moe, gpt-mlp, attention-quality, attention-cost, vit-norms, vit-linformer, vit-data-size, caption-encoders, gpt-genre, gpt-genre-run, caption-07, vit-07, vit-07-long, "
          "01-reverse, 01-g2p, g2p-02, scores-03, norm-06, or a chapter number like 04")


# The side-by-side table (make run's last table): each chapter's idea beside the one before it, or a baseline
# without it, on the same data and budget. (chapter, idea, data and measure, [before: (label, dir, key)],
# [after: (label, dir, key)], lower_is_better). A directory is out/DIR/results.json of make run (the chapters'
# own runs and tools/side_by_side.sh's). Seed runs, when made (tools/side_by_side.sh --seeds), are
# DIR/seeds/NAME_seedK/results.json with the same keys; their spread decides "win" or "tie".
SIDE_BY_SIDE = [
    ("02", "attention", "reverse 5-40, exact match",
     ("01 fixed context", "side_by_side/01_reverse40", "test_exact_match"),
     ("02 additive attention", "side_by_side/02_reverse40", "test_exact_match"), False),
    ("03", "the scaled dot-product score", "reverse 5-40, exact match",
     ("02 additive score", "side_by_side/02_reverse40", "test_exact_match"),
     ("03 scaled dot", "side_by_side/03_reverse40", "test_exact_match"), False),
    ("04", "positions", "reverse digits, exact match",
     ("none", "04_self_attention", "reverse_none_exact_match"),
     ("sinusoidal", "04_self_attention", "reverse_sinusoidal_exact_match"), False),
    ("05", "heads at equal width", "count + next, exact match",
     ("H = 1", "05_multi_head_attention", "count_next_h1_exact_match"),
     ("H = 4", "05_multi_head_attention", "count_next_h4_exact_match"), False),
    ("06", "the transformer", "dates, exact match",
     ("02 GRU + attention", "02_bahdanau_attention", "test_exact_match"),
     ("06 2 + 2 blocks", "06_transformer", "test_exact_match"), False),
    ("06 GPT", "causal self-attention", "Brown, test bpc",
     ("Kneser-Ney trigram", "06_gpt", "kn_trigram_test"),
     ("GPT", "06_gpt", "test_bpc"), True),
    ("07", "patches and attention", "Fashion-MNIST, test accuracy",
     ("MLP on pixels", "07_mlp", "test_exact_match"),
     ("ViT", "07_vision_transformer", "test_exact_match"), False),
    ("07 CNN", "attention against convolution", "Fashion-MNIST, test accuracy",
     ("CNN", "07_cnn", "test_exact_match"),
     ("ViT", "07_vision_transformer", "test_exact_match"), False),
    ("07 caption", "attention over the grid", "scenes, exact caption",
     ("pool", "side_by_side/07_caption_pool", "test_exact_match"),
     ("attend", "07_caption", "test_exact_match"), False),
]


def side_value(out_dir, directory, key, readme):
    path, data = read_results(os.path.join(out_dir, directory, "results.json"), "side-by-side", readme,
                              "run `make run` first")
    return number(data, key, path)


def seed_values(out_dir, directory, key):
    """The figure of every seed run of DIR (DIR/seeds/*/results.json), [] when none were made."""
    values = []
    for path in sorted(glob.glob(os.path.join(out_dir, directory, "seeds", "*", "results.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                values.append(float(json.load(f)[key]))
        except (OSError, ValueError, KeyError):
            raise Failure("%s: no number %s in it" % (path, key))
    return values


def table_side_by_side(out_dir, readme):
    rows, n_seeds = [], set()
    for chapter, idea, data, before, after, lower in SIDE_BY_SIDE:
        b = side_value(out_dir, before[1], before[2], readme)
        a = side_value(out_dir, after[1], after[2], readme)
        show = (lambda x: "%.3f" % x) if lower else pct
        # the spread: the range of each side over its seeds (the make-run run is seed 1); a win needs the two
        # ranges apart
        bs, as_ = [b] + seed_values(out_dir, before[1], before[2]), [a] + seed_values(out_dir, after[1], after[2])
        if len(bs) > 1 and len(bs) == len(as_):
            n_seeds.add(len(bs))
            better = (max(as_) < min(bs)) if lower else (min(as_) > max(bs))
            worse = (min(as_) > max(bs)) if lower else (max(as_) < min(bs))
            verdict = "**win**" if better else ("loss" if worse else "tie")
            spread = "%s-%s / %s-%s" % (show(min(bs)), show(max(bs)), show(min(as_)), show(max(as_)))
        else:
            verdict, spread = "one seed", "-"
        rows.append("| %s | %s | %s | %s %s | %s %s | %s | %s |" % (chapter, idea, data, before[0] + ":", show(b),
                                                                 after[0] + ":", show(a), spread, verdict))
    table = ["| chapter | idea | data | without | with | seeds' range | verdict |",
             "|---|---|---|---|---|---|---|"] + rows
    if n_seeds:
        seeds = ("%d seeds each (`bash tools/side_by_side.sh --seeds`): a win (or a loss) when the ranges do not overlap, "
                 "otherwise a tie" % max(n_seeds))
    else:
        seeds = "one seed each: no verdict without the seed runs (`bash tools/side_by_side.sh --seeds`)"
    caption = ("From `make run`'s `out/*/results.json` (the chapters' quick defaults and `tools/side_by_side.sh`'s "
               "runs); %s. `make readme` rewrites this table." % seeds)
    return table, caption


# make run's reverse 5-40 runs (tools/side_by_side.sh): the same task, steps and batch for chapters 01, 02 and 03,
# and chapter 03's layer in chapter 02's placement.
REVERSE40 = [("01: fixed context", "side_by_side/01_reverse40"), ("02: additive attention", "side_by_side/02_reverse40"),
             ("03: scaled dot", "side_by_side/03_reverse40"),
             ("03: scaled dot, chapter 02's placement", "side_by_side/03_reverse40_bahdanau")]


def table_reverse40(out_dir, readme):
    found = []
    for label, directory in REVERSE40:
        path, d = read_results(os.path.join(out_dir, directory, "results.json"), "reverse40", readme,
                               "run `make run` first")
        found.append((label, path, d))
    buckets = length_buckets(found[0][2])
    lines = ["| input length | " + " | ".join(label for label, _, _ in found) + " |",
             "|---|" + "---|" * len(found)]
    for lo, hi in buckets:
        lines.append("| %d - %d | " % (lo, hi) + " | ".join(
            pct(number(d, "test_exact_len_%d_%d" % (lo, hi), path)) for _, path, d in found) + " |")
    lines.append("| **all** | " + " | ".join("**%s**" % pct(number(d, "test_exact_match", path))
                                             for _, path, d in found) + " |")
    lines.append("| parameters | " + " | ".join("{:,}".format(int(number(d, "parameters", path)))
                                               for _, path, d in found) + " |")
    caption = ("Reverse, strings of 5-40 letters: test exact match by input length, %d steps of %d, seed %d. From "
               "`make run`'s `out/side_by_side/{%s}/results.json` (`tools/side_by_side.sh`; %s). "
               "`make readme` rewrites this table."
               % (int(number(found[0][2], "steps", found[0][1])), int(number(found[0][2], "batch", found[0][1])),
                  int(number(found[0][2], "seed", found[0][1])), ",".join(dr.split("/")[-1] for _, dr in REVERSE40),
                  conditions([d for _, _, d in found])))
    return lines, caption


def table_model_size(readme):
    """build/tools/model_size's table (it reads no run: the counts follow from the configurations)."""
    tool = os.path.join(ROOT, "build", "tools", "model_size")
    if not os.access(tool, os.X_OK):
        raise Missing("%s: build/tools/model_size not found (needed by <!-- results:model-size -->): run "
                      "`make build/tools/model_size` first" % readme)
    done = subprocess.run([tool], capture_output=True, text=True)
    if done.returncode != 0:
        raise Failure("%s: build/tools/model_size failed: %s" % (readme, done.stderr.strip()))
    caption = ("Parameters as the code counts them (`tools/model_size.c`, which `make test` checks against "
               "`gpt_create`'s own count), FLOPs a token as 2 per multiplied weight plus 4 N D a layer for "
               "attention over a context of N; training about 3 times the forward. From `./build/tools/model_size`; "
               "`make readme` rewrites this table.")
    return done.stdout.rstrip("\n").split("\n"), caption


def make_table(name, out_dir, readme):
    if name == "model-size":
        return table_model_size(readme)
    if name == "make-run":
        return table_make_run(out_dir, readme)
    if name == "side-by-side":
        return table_side_by_side(out_dir, readme)
    if name == "reverse40":
        return table_reverse40(out_dir, readme)
    if name == "compare-06":
        return table_compare(out_dir, readme)
    if name == "compare-06-length":
        return table_compare_length(out_dir, readme)
    if name == "length-ood":
        return table_length_ood(out_dir, readme)
    if name == "translate":
        return table_translate(out_dir, readme)
    if name == "translate-long":
        return table_translate(out_dir, readme, long=True)
    if name == "gpt":
        return table_gpt(out_dir, readme)
    if name == "gpt-long":
        return table_gpt(out_dir, readme, long=True)
    if name == "vit-07-long":
        return table_vit(out_dir, readme, long=True)
    if name == "01-reverse":
        return table_01_reverse(out_dir, readme)
    if name == "01-g2p":
        return table_01_g2p(out_dir, readme)
    if name == "g2p-02":
        return table_g2p_02(out_dir, readme)
    if name == "scores-03":
        return table_scores_03(out_dir, readme)
    if name == "norm-06":
        return table_norm_06(out_dir, readme)
    if name == "gpt-variants":
        return table_gpt_variants(out_dir, readme)
    if name == "gpt-moe":
        return table_gpt_moe(out_dir, readme)
    if name == "gpt-mlp":
        return table_gpt_mlp(out_dir, readme)
    if name == "attention-quality":
        return table_attention_quality(out_dir, readme)
    if name == "attention-cost":
        return table_attention_cost(out_dir, readme)
    if name == "vit-norms":
        return table_vit_norms(out_dir, readme)
    if name == "vit-linformer":
        return table_vit_linformer(out_dir, readme)
    if name == "vit-data-size":
        return table_vit_data_size(out_dir, readme)
    if name == "caption-encoders":
        return table_caption_encoders(out_dir, readme)
    if name == "gpt-genre":
        return table_gpt_genre(out_dir, readme)
    if name == "gpt-genre-run":
        return table_gpt_genre_run(out_dir, readme)
    if name == "caption-07":
        return table_caption(out_dir, readme)
    if name == "vit-07":
        return table_vit(out_dir, readme)
    if re.fullmatch(r"[0-9][0-9]", name):
        return table_chapter(name, out_dir, readme)
    if name.startswith("teacher-"):
        # the model answers' figures (tests/coursework/TEACHER.md), from the runs the questions name
        import teacher_tables
        return teacher_tables.make_table(name, out_dir, readme, sys.modules[__name__])
    raise Failure("%s: unknown table <!-- results:%s --> (known: %s)" % (readme, name, TABLES))


def rewrite(text, out_dir, readme):
    """The README's text with every marked block regenerated; names of the blocks."""
    lines = text.splitlines(keepends=True)
    out, names, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        m = OPEN.match(line.rstrip("\r\n"))
        if CLOSE.match(line.rstrip("\r\n")):
            raise Failure("%s:%d: <!-- /results --> without an opening <!-- results:NAME -->" % (readme, i + 1))
        out.append(line)
        i += 1
        if not m:
            continue
        start = i
        while i < len(lines) and not CLOSE.match(lines[i].rstrip("\r\n")):
            if OPEN.match(lines[i].rstrip("\r\n")):
                raise Failure("%s:%d: <!-- results:... --> inside the block opened on line %d"
                              % (readme, i + 1, start))
            i += 1
        if i == len(lines):
            raise Failure("%s:%d: <!-- results:%s --> is never closed by <!-- /results -->"
                          % (readme, start, m.group(1)))
        eol = "\r\n" if line.endswith("\r\n") else "\n"
        if m.group(1).startswith("compare-") and not os.path.isdir(os.path.join(out_dir, "compare")):
            # the comparison is a separate 30-minute run (make compare)
            keep = "%s/compare not found (make compare)" % out_dir.rstrip("/")
        else:
            keep = None
            try:
                table, caption = make_table(m.group(1), out_dir, readme)
            except Missing as e:
                if m.group(1) in MAKE_RUN_TABLES or re.fullmatch(r"[0-9][0-9]", m.group(1)):
                    raise
                keep = str(e).split(" (needed by")[0]
        if keep:
            # a run of its own, not made yet: the block keeps the table it has
            print("readme_tables: %s: %s: <!-- results:%s --> kept as it is" % (readme, keep, m.group(1)))
            out.extend(lines[start:i + 1])
            i += 1
            names.append(m.group(1) + " (kept)")
            continue
        body = [""] + table + ["", caption, ""]
        out.extend(b + eol for b in body)
        out.append(lines[i])          # the closing marker, as it was
        i += 1
        names.append(m.group(1))
    return "".join(out), names


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".readme_tables.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv):
    out_dir, check, readmes, prints = "out", False, [], []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--out" or a.startswith("--out="):
            if a == "--out" and not args:
                raise Failure("--out: expected a directory after the flag")
            out_dir = a[len("--out="):] if a.startswith("--out=") else args.pop(0)
        elif a == "--print" or a.startswith("--print="):
            if a == "--print" and not args:
                raise Failure("--print: expected a table name after the flag (%s)" % TABLES)
            prints.append(a[len("--print="):] if a.startswith("--print=") else args.pop(0))
        elif a == "--data":
            if not args or args[0] not in ("length-ood", "translate", "translate-long", "vit-data-size", "gpt-genre"):
                raise Failure("--data: expected length-ood, translate, translate-long, vit-data-size or gpt-genre "
                              "after the flag")
            which = args.pop(0)
            sys.stdout.write(data_length_ood(out_dir) if which == "length-ood" else
                             data_vit_data_size(out_dir) if which == "vit-data-size" else
                             data_gpt_genre(out_dir) if which == "gpt-genre" else
                             data_translate(out_dir, long=which == "translate-long"))
            return 0
        elif a == "--check":
            check = True
        elif a.startswith("-"):
            raise Failure("unknown flag '%s' (see --help)" % a)
        else:
            readmes.append(a)
    if prints:
        if check or readmes:
            raise Failure("--print goes alone (with --out DIR): no --check, no README names")
        tables = [make_table(name, out_dir, "--print") for name in prints]
        print("\n\n".join("\n".join(table + ["", caption]) for table, caption in tables))
        return 0
    if not readmes:
        readmes = [os.path.relpath(p) for p in
                   [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "chapters", "*", "*.md")))
                   + [os.path.join(ROOT, "tests", "coursework", "TEACHER.md")]]

    updates = []                  # every README is rewritten in memory first
    for readme in readmes:
        try:
            with open(readme, encoding="utf-8", newline="") as f:
                text = f.read()
        except OSError as e:
            raise Failure("cannot read %s: %s" % (readme, e.strerror))
        new, names = rewrite(text, out_dir, readme)
        if names:
            updates.append((readme, text, new, names))

    changed = 0
    for readme, old, new, names in updates:
        state = "unchanged" if new == old else ("would change" if check else "updated")
        print("readme_tables: %s: %s (%s)" % (readme, state, ", ".join(names)))
        if new != old:
            changed += 1
            if not check:
                write_atomically(readme, new)
    if not updates:
        print("readme_tables: no <!-- results:NAME --> blocks in %s" % ", ".join(readmes))
    return 1 if check and changed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print("readme_tables: error: %s" % e, file=sys.stderr)
        sys.exit(1)
