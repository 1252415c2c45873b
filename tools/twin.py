#!/usr/bin/python3
"""twin.py - every chapter's whole model against its PyTorch twin (make twin).

    /usr/bin/python3 tools/twin.py [--build build] [--chapters 01 02] [--steps 200] [--keep]

For each chapter with a twin module (tools/twin_NN.py) and a built binary,
and each of the module's RUNS:
  1. train the C model briefly (./build/NN_name --steps 200 ... --out TMP),
     so there is a checkpoint with non-trivial weights, from a clean clone;
  2. run build/tools/twin_dump on it: one test batch, forward + backward,
     greedy decoding -> a tensor file (logits, loss, every gradient, outputs);
  3. read the checkpoint in Python (tools/ckpt.py), check that writing it back
     gives the same bytes, build the twin (standard torch modules, float64),
     and run the same batch with autograd;
  4. print one table row: the max relative difference of logits, loss and
     gradients, and whether the greedy predictions agree.
Exits non-zero if any row is out of tolerance.

Relative difference of a tensor: max |c - t| / max |t| (the largest error
against the tensor's scale, so elements that happen to be near zero do not
blow it up). The twin computes in float64 from the float32 weights, so the
difference measures the C code's float32 rounding (or a bug).

Adding a chapter: tools/twin_NN.py with CHAPTER, MODEL, RUNS, build(cfg,
tensors) returning a module with forward(src, lens, tgt_in) -> logits
[B,Tt,V], loss(logits, tgt_out) (the value C reports), c_grads() and
greedy(src, max_out), and optionally objective(logits, tgt_out) when the C
gradient is of another loss than the one reported (chapter 06's label
smoothing); and a MODELS[] line in tools/twin_dump.c. (KIND = "digits": forward(x) -> logits
[B,N,C], loss(logits, y), c_grads(), predict(x); a CLASSIFIERS[] line.
KIND = "lm", the GPT: forward(x), loss(logits, y), c_grads(), greedy(prompt, n);
twin_dump.c's dump_gpt. KIND = "images", chapter 07: as "digits" with float
images [B, n_in] in, logits [B,C] out. KIND = "caption", chapter 07's captions: as
seq2seq with forward(images, tgt_in) and greedy(image, max_out), the dump's
images [B, side side] as the sources.) A chapter's second program has its own
module, tools/twin_NN_name.py with BINARY = "NN_name" (the program build/NN_name); PRETRAIN =
(program, flags) trains the model its RUNS start from, once, and "{pretrained}" in their flags is its
model.ckpt (06_gpt_genre: a GPT of build/06_gpt).
"""
import argparse
import glob
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
import ckpt      # noqa: E402
import goldfile  # noqa: E402

# Tolerances on the relative difference (see the docstring). Float32 forward
# passes agree with float64 to ~1e-6; gradients go back through every time
# step of the encoder and the decoder (BPTT over ~30 steps, sums over the
# batch), which costs about an order of magnitude more.
TOL_LOGITS = 1e-5
TOL_LOSS = 1e-5
TOL_GRADS = 1e-4
# Training steps before the comparison, unless a module asks for more (STEPS:
# the GPT's greedy continuations are all spaces after 200 steps).
DEFAULT_STEPS = 200


def rel_diff(c, t):
    c, t = np.asarray(c, np.float64), np.asarray(t, np.float64)
    scale = np.abs(t).max() if t.size else 0.0
    err = np.abs(c - t).max() if t.size else 0.0
    return err / scale if scale > 0 else err


def run(cmd, what):
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{tail}")
    return p.stdout


def read_checkpoint(module, path, out_dir):
    """(config dict, tensors, whether ckpt.py writes back the exact bytes C wrote)."""
    config_text, tensors = ckpt.read(path)
    cfg = ckpt.parse_config(config_text)
    if cfg.get("model") != module.MODEL:
        raise RuntimeError(f"{path}: model={cfg.get('model')}, expected {module.MODEL}")
    copy = os.path.join(out_dir, "roundtrip.ckpt")          # the Python writer is byte-exact
    ckpt.write(copy, config_text, tensors)
    with open(path, "rb") as a, open(copy, "rb") as b:
        roundtrip_ok = a.read() == b.read()
    return cfg, tensors, roundtrip_ok


def compare_grads(row, model, d):
    grads = model.c_grads()
    missing = [k[5:] for k in d if k.startswith("grad/") and k[5:] not in grads]
    if missing:
        raise RuntimeError(f"twin has no gradient for C tensors {missing}")
    extra = [n for n in grads if "grad/" + n not in d]
    if extra:
        raise RuntimeError(f"C dump has no gradient for twin tensors {extra}")
    worst = max(((rel_diff(d["grad/" + n], g.detach().numpy()), n) for n, g in grads.items()))
    row["grads"], row["grads_worst"] = worst


def compare(module, binary, dump_tool, label, flags, args, tmp):
    """One row of the table: train, dump, twin, compare."""
    kind = getattr(module, "KIND", "seq2seq")
    if kind in ("digits", "images"):
        return compare_digits(module, binary, dump_tool, label, flags, args, tmp)
    if kind == "lm":
        return compare_lm(module, binary, dump_tool, label, flags, args, tmp)
    out_dir = os.path.join(tmp, module.CHAPTER[:2] + "_" + label.replace(" ", "_"))
    run([binary, "--steps", str(args.steps), "--quiet", "--samples", "0", "--max-eval", "20",
         "--threads", "1", "--out", out_dir] + flags, f"training {module.CHAPTER} ({label})")
    path = os.path.join(out_dir, "model.ckpt")
    dump_path = os.path.join(out_dir, "twin_dump.bin")
    run([dump_tool, path, dump_path, "--batch", str(args.batch)], "twin_dump")
    cfg, tensors, roundtrip_ok = read_checkpoint(module, path, out_dir)

    d = goldfile.read(dump_path)
    model = module.build(cfg, tensors)
    src, lens = torch.as_tensor(d["src"]).long(), torch.as_tensor(d["src_lens"]).long()
    tgt_in, tgt_out = torch.as_tensor(d["tgt_in"]).long(), torch.as_tensor(d["tgt_out"]).long()
    # KIND = "caption" (chapter 07's captions): the sources are images, src holds no tokens
    images = torch.as_tensor(d["images"]).double() if kind == "caption" else None
    model.zero_grad()
    logits = model(src, lens, tgt_in) if images is None else model(images, tgt_in)
    loss = model.loss(logits, tgt_out)
    # A model whose gradient is not that of the loss it reports (chapter 06:
    # label smoothing) differentiates its objective() instead.
    objective = model.objective(logits, tgt_out) if hasattr(model, "objective") else loss
    objective.backward()

    row = {"label": label, "roundtrip": roundtrip_ok}
    row["logits"] = rel_diff(d["logits"], logits.detach().numpy())
    row["loss"] = rel_diff(d["loss"], [loss.item()])
    compare_grads(row, model, d)

    max_out = int(d["max_out"][0])
    agree = 0
    for b in range(src.shape[0]):
        c_pred = [int(x) for x in d["greedy"][b][:d["greedy_len"][b]]]
        t_pred = model.greedy(src[b, :lens[b]], max_out) if images is None else model.greedy(images[b], max_out)
        agree += c_pred == t_pred
    row["agree"], row["n"] = agree, src.shape[0]
    return finish(row)


def compare_digits(module, binary, dump_tool, label, flags, args, tmp):
    """Chapters 04, 05 (digits) and 07 (images): the models of the per-position
    driver. The chapter's binary trains one model and saves it
    (model_<run>.ckpt), then twin_dump dumps one test batch; "greedy" counts
    the examples whose predictions (argmax at every position) all agree."""
    out_dir = os.path.join(tmp, module.CHAPTER[:2] + "_" + label.replace(" ", "_").replace("=", ""))
    run([binary, "--steps", str(args.steps), "--quiet", "--test-size", "8", "--threads", "1",
         "--out", out_dir] + flags, f"training {module.CHAPTER} ({label})")
    checkpoints = sorted(glob.glob(os.path.join(out_dir, "model_*.ckpt")))
    if len(checkpoints) != 1:
        raise RuntimeError(f"{module.CHAPTER} ({label}): expected one checkpoint in {out_dir}, got {checkpoints}")
    path = checkpoints[0]
    dump_path = os.path.join(out_dir, "twin_dump.bin")
    run([dump_tool, path, dump_path, "--batch", str(args.batch)], "twin_dump")
    cfg, tensors, roundtrip_ok = read_checkpoint(module, path, out_dir)

    d = goldfile.read(dump_path)
    model = module.build(cfg, tensors)
    row, x = per_position_row(model, d, label, roundtrip_ok, getattr(module, "KIND", ""))
    pred = model.predict(x).numpy().reshape(d["pred"].shape)
    row["agree"] = int((pred == d["pred"]).all(axis=1).sum())
    row["n"] = x.shape[0]
    return finish(row)


def per_position_row(model, d, label, roundtrip_ok, kind=""):
    """Inputs x [B,N] (float images with kind "images") and targets y of the
    dump through the twin: the row's logits, loss and gradient differences
    (and x)."""
    if kind == "images":
        x = torch.as_tensor(d["images"]).double()
    else:
        x = torch.as_tensor(d["x"]).long()
    y = torch.as_tensor(d["y"]).long()
    model.zero_grad()
    logits = model(x)
    loss = model.loss(logits, y)
    # as in compare(): a model trained with label smoothing differentiates its objective()
    objective = model.objective(logits, y) if hasattr(model, "objective") else loss
    objective.backward()
    row = {"label": label, "roundtrip": roundtrip_ok}
    row["logits"] = rel_diff(d["logits"], logits.detach().numpy().reshape(d["logits"].shape))
    row["loss"] = rel_diff(d["loss"], [loss.item()])
    compare_grads(row, model, d)
    return row, x


def compare_lm(module, binary, dump_tool, label, flags, args, tmp):
    """Chapter 06's GPT (build/06_gpt). The program trains on the Brown
    corpus and saves model.ckpt; twin_dump dumps the first windows of the
    test part and, from each window's first tokens, a greedy continuation
    generated with the KV cache, which the twin recomputes over the whole
    prefix; "greedy" counts the windows whose continuations agree."""
    out_dir = os.path.join(tmp, os.path.basename(binary) + "_" + label.replace(" ", "_"))
    run([binary, "--steps", str(args.steps), "--quiet", "--threads", "1", "--out", out_dir] + flags,
        f"training {os.path.basename(binary)} ({label})")
    path = os.path.join(out_dir, "model.ckpt")
    dump_path = os.path.join(out_dir, "twin_dump.bin")
    run([dump_tool, path, dump_path, "--batch", str(args.batch)], "twin_dump")
    cfg, tensors, roundtrip_ok = read_checkpoint(module, path, out_dir)

    d = goldfile.read(dump_path)
    model = module.build(cfg, tensors)
    row, x = per_position_row(model, d, label, roundtrip_ok)
    prompts, c_greedy = d["prompt"], d["greedy"]
    row["agree"] = sum(model.greedy(prompts[b], c_greedy.shape[1]) == [int(t) for t in c_greedy[b]]
                       for b in range(prompts.shape[0]))
    row["n"] = prompts.shape[0]
    return finish(row)


def finish(row):
    row["ok"] = (row["logits"] <= TOL_LOGITS and row["loss"] <= TOL_LOSS and row["grads"] <= TOL_GRADS
                 and row["agree"] == row["n"] and row["roundtrip"])
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory (default build)")
    ap.add_argument("--chapters", nargs="*", help="chapter numbers to check (default: every twin)")
    ap.add_argument("--steps", type=int, help=f"training steps before the comparison (default {DEFAULT_STEPS}, "
                    "or a module's STEPS)")
    ap.add_argument("--batch", type=int, default=8, help="test examples in the compared batch")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    torch.set_num_threads(1)
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    dump_tool = os.path.join(build, "tools", "twin_dump")
    if not os.path.exists(dump_tool):
        print(f"twin: {dump_tool} is missing; run make twin (it builds it)", file=sys.stderr)
        return 2

    modules = []
    for path in sorted(glob.glob(os.path.join(TOOLS, "twin_[0-9][0-9].py")) +
                       glob.glob(os.path.join(TOOLS, "twin_[0-9][0-9]_*.py"))):
        name = os.path.basename(path)[:-3]
        if args.chapters and name[5:7] not in args.chapters:
            continue
        modules.append(importlib.import_module(name))
    tmp = tempfile.mkdtemp(prefix="attn_twin_")
    rows, failed, steps_seen = [], False, {}
    try:
        for m in modules:
            program = getattr(m, "BINARY", m.CHAPTER)     # the chapter's program, or its second one
            binary = os.path.join(build, program)
            if not os.path.exists(binary):
                print(f"twin: skipping {program}: {binary} not built")
                continue
            margs = argparse.Namespace(**vars(args))
            margs.steps = args.steps or getattr(m, "STEPS", DEFAULT_STEPS)
            steps_seen[program] = margs.steps
            pretrained = None   # PRETRAIN: the model a module's runs start from ({pretrained} in their flags)
            for label, flags in m.RUNS:
                try:
                    if hasattr(m, "PRETRAIN") and pretrained is None:
                        pre_program, pre_flags = m.PRETRAIN
                        pre_dir = os.path.join(tmp, program + "_pretrain")
                        run([os.path.join(build, pre_program), "--quiet", "--threads", "1", "--out", pre_dir]
                            + pre_flags, f"pretraining {pre_program} for {program}")
                        pretrained = os.path.join(pre_dir, "model.ckpt")
                    flags = [pretrained if f == "{pretrained}" else f for f in flags]
                    row = compare(m, binary, dump_tool, label, flags, margs, tmp)
                except Exception as e:  # report the row as failed, go on with the others
                    print(f"twin: {m.CHAPTER} ({label}): {e}", file=sys.stderr)
                    row = {"label": label, "error": True, "ok": False}
                row["chapter"] = program
                rows.append(row)
                failed |= not row["ok"]
    finally:
        if args.keep:
            print(f"twin: files kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    steps = args.steps or DEFAULT_STEPS
    others = ", ".join(f"{p} {n}" for p, n in steps_seen.items() if n != steps)
    print(f"\nPyTorch twin: one test batch of {args.batch}, after {steps} training steps{' (' + others + ')' if others else ''} "
          f"(max relative difference; tolerances: logits {TOL_LOGITS:g}, loss {TOL_LOSS:g}, gradients {TOL_GRADS:g})")
    head = f"{'chapter':<24} {'run':<18} {'logits':>9} {'loss':>9} {'gradients':>9}  {'(worst tensor)':<17} {'greedy':>8}  {'ckpt':<5} result"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r.get("error"):
            print(f"{r['chapter']:<24} {r['label']:<18} {'(error, see above)':>44}{'':>27} FAIL")
            continue
        print(f"{r['chapter']:<24} {r['label']:<18} {r['logits']:9.2e} {r['loss']:9.2e} {r['grads']:9.2e}  "
              f"{'(' + r['grads_worst'] + ')':<17} {r['agree']:>3}/{r['n']:<3}  "
              f"{'same' if r['roundtrip'] else 'DIFF':<5} {'ok' if r['ok'] else 'FAIL'}")
    if any(r["chapter"][:2] in ("04", "05") for r in rows):
        print("(chapters 04, 05: greedy = sequences whose argmax digits all agree)")
    if any(getattr(m, "KIND", "") == "lm" for m in modules):
        print("(06_gpt: windows of the Brown test part; greedy = continuations of each window's first quarter, "
              "C with its KV cache, that agree token for token)")
    if any(r["chapter"] == "06_gpt_genre" for r in rows):
        print("(06_gpt_genre: test passages of the Brown genres; greedy = passages whose predicted genre agrees)")
    if any(r["chapter"] == "07_vision_transformer" for r in rows):
        print("(chapter 07: greedy = test images whose predicted class agrees)")
    if any(r["chapter"] == "07_caption" for r in rows):
        print("(07_caption: greedy = test scenes whose greedy captions agree word for word)")
    if not rows:
        print("(no chapter with a twin is built)")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
