#!/usr/bin/python3
"""bench_tables.py - rewrite the result tables of bench/README.md from bench/results/.

    /usr/bin/python3 tools/bench_tables.py [--results DIR] [--check] [README]
    /usr/bin/python3 tools/bench_tables.py [--results DIR] --print NAME [--print NAME ...]

README defaults to bench/README.md, DIR to bench/results (what `make bench`
writes). A generated table sits between two lines of their own:

    <!-- bench:NAME -->
    ... anything: replaced by a fresh table ...
    <!-- /bench -->

NAME, and the file of DIR it is made from (the program that writes it):

    machine        machine.txt         bench/run.sh: the CPU, its caches, the compiler
    sgemm          sgemm.tsv           bench_sgemm: GFLOP/s per shape, ours against OpenBLAS
    train-step     train_step.tsv      bench_train_step + tools/bench_torch.py: ms per step
    busy           train_step_busy.tsv bench_train_step --busy: 1 and 2 threads beside a busy core
    transformer    transformer_peak.tsv  bench_transformer: chapter 06's step at D 256 against the FMA peak
    vecmath        vecmath.tsv         bench_vecmath: ns per element, naive against AVX2
    data-parallel  data_parallel.tsv   bench_data_parallel: one model or two replicas on 2 cores
    bf16           bf16.tsv            bench_bf16: float against bf16 products
    fetch          fetch.tsv           bench_fetch: fetching the next block on and off
    direct         direct.tsv          bench_direct: A read in place or packed (its first line names its CPU)
    flash          flash.tsv           bench_flash: plain against fused attention
    generate       generate.tsv        bench_generate: the GPT generating with and without its KV cache

A block whose file is missing is left as it is, with a note on standard error
(a benchmark the CPU cannot run writes nothing). Everything outside the markers
stays byte-identical; the README is written to a temporary file beside it and
renamed. With --check nothing is written: the exit status is 1 when the README
would change. --print writes one table to standard output and touches nothing.
Standard library only; the figures are formatted as tools/perf_table.sh formats them.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Failure(Exception):
    pass


class Missing(Exception):
    pass


def read_tsv(results, name):
    """Rows of DIR/name as lists of strings, header and '#' lines skipped."""
    path = os.path.join(results, name)
    if not os.path.isfile(path):
        raise Missing(path)
    rows, header = [], True
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if header:              # the first other line names the columns
                header = False
                continue
            rows.append(line.split("\t"))
    return rows


def first_comment(results, name):
    with open(os.path.join(results, name), encoding="utf-8") as f:
        line = f.readline().strip()
    return line[len("# machine: "):] if line.startswith("# machine: ") else ""


def ordered(keys):
    seen, out = set(), []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


def table(header, rows, align=None):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(align or ["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def f1(x):
    return "%.1f" % x


def t_machine(results):
    path = os.path.join(results, "machine.txt")
    if not os.path.isfile(path):
        raise Missing(path)
    with open(path, encoding="utf-8") as f:
        machine = f.read().strip()
    return ["Measured by one `make bench` on: %s, -O2 (`bench/results/machine.txt`)." % machine]


def t_sgemm(results):
    g, frac, vs, peak, shapes = {}, {}, {}, {}, []
    for impl, t, m, n, k, gf, op, pf, v in read_tsv(results, "sgemm.tsv"):
        if impl.startswith("fma-peak"):
            peak[impl, int(t)] = float(gf)
            continue
        shape = "%s %sx%sx%s" % (op, m, n, k)
        shapes.append(shape)
        g[impl, int(t), shape] = float(gf)
        frac[impl, int(t), shape] = float(pf)
        vs[impl, int(t), shape] = v

    def cell(i, t, s):
        return f1(g[i, t, s]) if (i, t, s) in g else "-"

    def ratio(i, t, s):
        return "%.2fx" % float(vs[i, t, s]) if vs.get((i, t, s), "-") != "-" else "-"

    rows = []
    for t in (1, 2):
        for s in ordered(shapes):
            a2 = "avx2-paired" if ("avx2-paired", t, s) in g else "avx2"
            share = "%.0f%%" % (100 * frac["avx512", t, s]) if ("avx512", t, s) in frac else "-"
            rows.append([s, str(t), cell("naive", t, s), cell(a2, t, s), cell("openblas-avx2", t, s), ratio(a2, t, s),
                         cell("avx512", t, s), cell("openblas", t, s), ratio("avx512", t, s), share])
    out = table(["op, M x N x K", "threads", "naive", "avx2", "ob-avx2", "avx2 / ob-avx2", "avx512", "ob",
                 "avx512 / ob", "of peak"], rows)
    if ("fma-peak-avx2", 1) in peak:
        line = "FMA peak (register-only loop): AVX2 %.1f GFLOP/s on 1 thread, %.1f on 2" % (
            peak["fma-peak-avx2", 1], peak.get(("fma-peak-avx2", 2), 0))
        if ("fma-peak-avx512", 1) in peak:
            line += "; AVX-512 %.1f and %.1f" % (peak["fma-peak-avx512", 1], peak.get(("fma-peak-avx512", 2), 0))
        out += ["", line + "."]
    return out


def torch_config_line(results):
    """The PyTorch the ratios are against (tools/bench_torch.py's torch_config.txt), in one sentence."""
    path = os.path.join(results, "torch_config.txt")
    if not os.path.isfile(path):
        return "PyTorch's BLAS: not recorded."
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    first = lambda prefix: next((line[len(prefix):] for line in lines if line.startswith(prefix)), None)
    parts = ["PyTorch %s" % (first("torch ") or "?")]
    openblas = first("OpenBLAS: ")
    if openblas:   # "OpenBLAS 0.3.21 NO_LAPACKE ... ; kernels for core Cooperlake"
        parts.append("on %s (its %s kernels)" % (" ".join(openblas.split()[:2]), openblas.split()[-1]))
    else:
        library = first("loaded: ")
        parts.append("on %s" % (os.path.basename(library) if library else "an unrecorded BLAS"))
    coretype = first("OPENBLAS_CORETYPE ")
    if coretype:
        parts.append("OPENBLAS_CORETYPE " + coretype.split(",")[0])
    if first("glibc malloc keeps freed memory"):
        parts.append("malloc keeping freed memory")
    capabilities = first("timed at CPU capabilities: ")
    if capabilities:
        parts.append("each figure the faster of its CPU capabilities " + capabilities.split(";")[0])
    warning = first("WARNING: ")
    if warning:
        parts.append("WARNING: " + warning)
    return "%s (`bench/results/torch_config.txt`)." % ", ".join(parts)


def t_train_step(results):
    ms, chapters, threads = {}, [], set()
    for ch, impl, t, v in read_tsv(results, "train_step.tsv"):
        chapters.append(ch)
        ms[ch, impl, int(t)] = float(v)
        threads.add(int(t))
    fixed = sorted(t for t in threads if t > 0)

    def cell(ch, i, t):
        return f1(ms[ch, i, t]) if (ch, i, t) in ms else "-"

    def best(ch, impls, counts):
        """(ms, impl, threads) of the fastest of impls at any of counts, or (0, "-", 0)."""
        found = [(ms[ch, i, t], i, t) for i in impls for t in counts if (ch, i, t) in ms]
        return min(found) if found else (0.0, "-", 0)

    # the backend whose thread curve the table shows: the widest SIMD measured
    widest = next((i for i in ("avx512", "neon", "avx2") if any(k[1] == i for k in ms)), "avx2")
    rows, ratios, checks = [], [], []
    for ch in ordered(chapters):
        ours, impl, ours_t = best(ch, ("avx512", "avx2", "neon"), sorted(threads))
        tb, _, tb_t = best(ch, ("torch",), fixed)
        speed = "%.1fx" % (ms[ch, "naive", 1] / ms[ch, "avx2", 1]) \
            if (ch, "naive", 1) in ms and (ch, "avx2", 1) in ms else "-"
        vs = tb / ours if ours > 0 and tb > 0 else 0.0
        if vs:
            ratios.append(vs)
        fixed_best, _, _ = best(ch, (widest,), fixed)
        if (ch, widest, 0) in ms and fixed_best > 0:
            checks.append(ms[ch, widest, 0] / fixed_best)
        rows.append([ch, cell(ch, "naive", 1), cell(ch, "avx2", 1)] + [cell(ch, widest, t) for t in fixed] +
                    [cell(ch, widest, 0)] + [cell(ch, "torch", t) for t in fixed] +
                    [speed, "%.2fx (%s / %dt)" % (vs, "%dt" % ours_t if ours_t else "default", tb_t)
                     if vs else "-"])
    out = table(["chapter", "naive 1t", "avx2 1t"] + ["%s %dt" % (widest, t) for t in fixed] +
                ["%s default" % widest] + ["torch %dt" % t for t in fixed] +
                ["naive / avx2 (1t)", "torch / ours, each at its best (ours / torch threads)"], rows)
    counts = ", ".join([str(t) for t in fixed] + (["the default (all cores, each region's threads from the cost "
                                                   "model)"] if 0 in threads else []))
    summary = []
    if ratios:
        summary.append("Ours at its best against PyTorch at its best: %.2f-%.2fx faster; %d of %d chapters at least 2x."
                       % (min(ratios), max(ratios), sum(r >= 2.0 for r in ratios), len(ratios)))
    if checks:
        summary.append("The default thread count against the best fixed count: %.2f-%.2fx the time, %d of %d "
                       "chapters within 10%%." % (min(checks), max(checks), sum(c <= 1.10 for c in checks), len(checks)))
    return out + ["", "Threads: %s. %s" % (counts, torch_config_line(results))] + (["", " ".join(summary)] if summary else [])


def t_busy(results):
    ms, chapters, impl = {}, [], ""
    for ch, i, t, v in read_tsv(results, "train_step_busy.tsv"):
        chapters.append(ch)
        ms[ch, int(t)] = float(v)
        impl = i
    rows = [[ch, f1(ms[ch, 1]), f1(ms[ch, 2]), "%.2fx" % (ms[ch, 2] / ms[ch, 1])] for ch in ordered(chapters)]
    return table(["chapter (%s)" % impl, "1 thread", "2 threads", "2 threads / 1 thread"], rows)


def t_transformer(results):
    rows, config = [], ""
    for r in read_tsv(results, "transformer_peak.tsv"):
        config = r[0]
        v = [float(x) for x in r[3:]]
        # gflop_per_step ms gflops peak_gflops peak_fraction fwd_bwd_ms optim_ms proj_ms attn_ms other_ms
        # proj_gflops attn_gflops reps
        rows.append([r[1], r[2], f1(v[1]), f1(v[2]), "%.0f%%" % (100 * v[4]), f1(v[5]), f1(v[6]),
                     "%.1f (%.1f)" % (v[7], v[10]), "%.1f (%.1f)" % (v[8], v[11]), f1(v[9])])
        gflop, reps = v[0], int(v[12])
    out = ["`%s`, %.1f GFLOP per step, median of %d steps:" % (config, gflop, reps), ""]
    return out + table(["backend", "threads", "ms per step", "GFLOP/s", "of peak", "fwd + bwd ms", "optimizer ms",
                        "proj ms (GFLOP/s)", "attn ms (GFLOP/s)", "other ms"], rows)


def t_vecmath(results):
    ns, kernels = {}, []
    for k, impl, n, v in read_tsv(results, "vecmath.tsv"):
        kernels.append(k)
        ns[k, impl] = float(v)
    rows = [[k, "%.2f" % ns[k, "naive"], "%.2f" % ns[k, "avx2"], "%.1fx" % (ns[k, "naive"] / ns[k, "avx2"])]
            for k in ordered(kernels) if (k, "avx2") in ns]
    return table(["kernel", "naive", "avx2", "naive / avx2"], rows)


def t_data_parallel(results):
    ms, ips, models = {}, {}, []
    for m, cfg, v, i in read_tsv(results, "data_parallel.tsv"):
        models.append(m)
        ms[m, cfg], ips[m, cfg] = float(v), float(i)
    rows = []
    for m in ordered(models):
        cells = ["%.1f (%.0f)" % (ms[m, c], ips[m, c]) for c in ("one_model_1_thread", "one_model_2_threads",
                                                                 "two_replicas")]
        rows.append([m] + cells + ["%.2fx" % (ms[m, "one_model_2_threads"] / ms[m, "two_replicas"])])
    return table(["model", "1 model, 1 thread: ms (images/s)", "1 model, 2 threads", "2 replicas, 1 thread each",
                  "2 replicas / 1 model on 2 threads"], rows)


def ms_cell(x):
    return "%.1f" % x if x >= 10 else ("%.3f" % x if x >= 0.01 else "%.4f" % x)


def t_bf16(results):
    rows, peak = [], None
    for what, m, n, k, op, fl, bf in read_tsv(results, "bf16.tsv"):
        fl, bf = float(fl), float(bf)
        if what.startswith("peak"):
            peak = (fl, bf)
            continue
        shape = "" if m == "0" else "%s %sx%sx%s" % (op, m, n, k)
        rows.append([what, shape, ms_cell(fl), ms_cell(bf), "%.2fx" % (fl / bf)])
    out = table(["product", "op, M x N x K", "float ms", "bf16 ms", "float / bf16"], rows)
    if peak:
        out += ["", "Register-only loops, 1 thread: float FMA %.1f GFLOP/s, VDPBF16PS %.1f (%.2fx)."
                % (peak[0], peak[1], peak[1] / peak[0])]
    return out


def t_fetch(results):
    rows = [[m, f1(float(on)), f1(float(off)), "%.3fx" % (float(off) / float(on))]
            for m, on, off in read_tsv(results, "fetch.tsv")]
    return table(["model", "on: ms/step", "off: ms/step", "off / on"], rows)


def t_direct(results):
    rows = []
    for op, m, n, k, kernel, d, p, auto in read_tsv(results, "direct.tsv"):
        d, p = float(d), float(p)
        right = d >= p if auto == "direct" else p >= d
        rows.append(["%s %sx%sx%s" % (op, m, n, k), kernel, f1(d), f1(p), "%.2fx" % (p / d),
                     auto + ("" if right else " (the slower here)")])
    out = ["On %s:" % first_comment(results, "direct.tsv"), ""] if first_comment(results, "direct.tsv") else []
    return out + table(["op, M x N x K", "kernel", "direct", "packed", "packed / direct", "auto"], rows)


def size(b):
    return "%.1f MiB" % (b / 2.0 ** 20) if b >= 2 ** 19 else "%.1f KiB" % (b / 1024.0)


def t_flash(results):
    ms, extra, ns = {}, {}, []
    for impl, n, v, b in read_tsv(results, "flash.tsv"):
        ns.append(int(n))
        ms[impl, int(n)], extra[impl, int(n)] = float(v), int(b)
    rows = []
    for n in ordered(ns):
        p, f = ms.get(("plain", n)), ms.get(("fused", n))
        rows.append([str(n), ms_cell(p) if p else "-", ms_cell(f) if f else "-", "%.2fx" % (p / f) if p and f else "-",
                     size(extra["plain", n]) if ("plain", n) in extra else "-",
                     size(extra["fused", n]) if ("fused", n) in extra else "-"])
    return table(["N", "plain ms", "fused ms", "plain / fused", "plain extra", "fused extra"], rows,
                 ["---:"] * 6)


def t_generate(results):
    """bench_generate's two modes, and (when bench/run.sh ran it) the same model's PyTorch KV-cache loop."""
    ms, tps, ns = {}, {}, []
    for mode, n, v, t in read_tsv(results, "generate.tsv"):
        ns.append(int(n))
        ms[mode, int(n)], tps[mode, int(n)] = float(v), float(t)
    if os.path.exists(os.path.join(results, "generate_torch.tsv")):
        for mode, n, v, t in read_tsv(results, "generate_torch.tsv"):
            ms[mode, int(n)], tps[mode, int(n)] = float(v), float(t)

    def torch_cells(n):
        if ("kv_cache_torch", n) not in ms:
            return ["-", "-"]
        return ["%.0f" % tps["kv_cache_torch", n], "%.1fx" % (ms["kv_cache_torch", n] / ms["kv_cache", n])]
    rows = [[str(n), f1(ms["kv_cache", n]), "%.0f" % tps["kv_cache", n], f1(ms["no_cache", n]),
             "%.0f" % tps["no_cache", n], "%.1fx" % (ms["no_cache", n] / ms["kv_cache", n])] + torch_cells(n)
            for n in ordered(ns)]
    return table(["context n", "KV cache ms", "tokens/s", "no cache ms", "tokens/s", "cache speed-up",
                  "PyTorch KV cache tokens/s", "ours / PyTorch"], rows, ["---:"] * 8)


TABLES = {"machine": t_machine, "sgemm": t_sgemm, "train-step": t_train_step, "busy": t_busy,
          "transformer": t_transformer, "vecmath": t_vecmath, "data-parallel": t_data_parallel, "bf16": t_bf16,
          "fetch": t_fetch, "direct": t_direct, "flash": t_flash, "generate": t_generate}
BLOCK = re.compile(r"^<!-- bench:([a-z0-9-]+) -->\n(.*?)^<!-- /bench -->$", re.M | re.S)


def make(name, results):
    if name not in TABLES:
        raise Failure("unknown table '%s' (one of %s)" % (name, ", ".join(TABLES)))
    try:
        return TABLES[name](results)
    except (ValueError, KeyError, IndexError, ZeroDivisionError) as e:
        raise Failure("%s: cannot read its figures (%s: %s)" % (name, type(e).__name__, e))


def rewrite(text, results):
    names = []

    def repl(m):
        name = m.group(1)
        names.append(name)
        try:
            body = make(name, results)
        except Missing as e:
            print("bench_tables: %s: %s not found, block kept as it is" % (name, e), file=sys.stderr)
            return m.group(0)
        return "<!-- bench:%s -->\n\n%s\n\n<!-- /bench -->" % (name, "\n".join(body))
    return BLOCK.sub(repl, text), names


def main(argv):
    results, check, prints, readme = os.path.join(ROOT, "bench", "results"), False, [], None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a in ("--results", "--print"):
            if not args:
                raise Failure("%s: expected a value after the flag" % a)
            if a == "--results":
                results = args.pop(0)
            else:
                prints.append(args.pop(0))
        elif a == "--check":
            check = True
        elif a.startswith("-"):
            raise Failure("unknown flag '%s' (see --help)" % a)
        elif readme is None:
            readme = a
        else:
            raise Failure("one README at most")
    if prints:
        try:
            print("\n\n".join("\n".join(make(n, results)) for n in prints))
        except Missing as e:
            raise Failure("%s not found (run make bench)" % e)
        return 0
    readme = readme or os.path.relpath(os.path.join(ROOT, "bench", "README.md"))
    try:
        with open(readme, encoding="utf-8", newline="") as f:
            old = f.read()
    except OSError as e:
        raise Failure("cannot read %s: %s" % (readme, e.strerror))
    new, names = rewrite(old, results)
    if not names:
        print("bench_tables: no <!-- bench:NAME --> blocks in %s" % readme)
        return 0
    state = "unchanged" if new == old else ("would change" if check else "updated")
    print("bench_tables: %s: %s (%s)" % (readme, state, ", ".join(names)))
    if new != old and not check:
        tmp = "%s.tmp.%d" % (readme, os.getpid())
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(new)
        os.replace(tmp, readme)
    return 1 if check and new != old else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print("bench_tables: error: %s" % e, file=sys.stderr)
        sys.exit(2)
