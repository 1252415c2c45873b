#!/usr/bin/python3
"""bench_torch_generate.py - chapter 06's GPT generating with a KV cache, in PyTorch.

    /usr/bin/python3 tools/bench_torch_generate.py [--results bench/results] [--reps 5] [--threads 1]
                                                   [--max-n 512] [--vocab 86]

The PyTorch side of bench/bench_generate.c's KV-cache figures: the same model
(4 pre-norm blocks, D = 128, H = 4 heads of D_H = 32, F = 512, exact GELU,
learned positions, a context of 512, a final LayerNorm, logits Z E^T with the
output layer tied to the token embedding; W_QKV without bias, W_O, W_1, W_2
with bias; untrained weights: the work per token does not depend on them)
draws n tokens greedily from a prompt of one token, n = 64, 128, 256, 512.

The loop is what a PyTorch user would write for fast generation: under
torch.inference_mode, the keys and values of every block in preallocated
tensors [L, H, context, D_H]; each new token is one row through every block:
LayerNorm, x W_QKV, its k and v written at the token's position, softmax of
q K^T / sqrt(D_H) over the positions so far, times V, W_O, the residual, the
MLP; then the final LayerNorm, the logits and their argmax. (PyTorch 1.13 has
no scaled_dot_product_attention: the attention is written out.)

OpenBLAS's environment: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed
before torch is imported, so OpenBLAS runs the kernels it picks for this CPU
(some machines set them for old OpenBLAS builds; with OPENBLAS_CORETYPE=Haswell
an AVX-512 CPU runs AVX2 kernels). The BLAS and version torch reports are
printed.

Appends rows `kv_cache_torch n ms tokens_per_s` to RESULTS/generate_torch.tsv
(creating it with its header) and prints them; bench/run.sh runs this and
bench_generate in turns and prints the ratio.
"""
import argparse
import os
import statistics
import sys
import time

for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(name, None)   # before torch loads OpenBLAS

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SIZES = (64, 128, 256, 512)
L, D, H, FF, CONTEXT = 4, 128, 4, 512, 512
D_H = D // H


def blas_lines():
    """The lines of torch.__config__.show() that name the BLAS, and the version."""
    lines = [f"torch {torch.__version__}"]
    for line in torch.__config__.show().splitlines():
        line = line.strip(" -")
        if line.startswith("CPU capability"):
            lines.append(line)
        elif line.startswith("Build settings"):
            items = line.split(":", 1)[1].split(",")
            lines += [item.strip() for item in items if item.strip().startswith(("BLAS_INFO", "LAPACK_INFO"))]
    return lines


class Gpt:
    """The weights, as plain tensors (the loop below reads them directly)."""

    def __init__(self, V, seed=1):
        g = torch.Generator().manual_seed(seed)

        def w(*shape):
            return torch.randn(*shape, generator=g) * 0.02

        self.E = w(V, D)                       # token embedding, also the output layer
        self.P = w(CONTEXT, D)                 # learned positions
        self.blocks = []
        for _ in range(L):
            self.blocks.append({
                "ln1_w": torch.ones(D), "ln1_b": torch.zeros(D),
                "W_QKV": w(3 * D, D),
                "W_O": w(D, D), "b_O": torch.zeros(D),
                "ln2_w": torch.ones(D), "ln2_b": torch.zeros(D),
                "W_1": w(FF, D), "b_1": torch.zeros(FF),
                "W_2": w(D, FF), "b_2": torch.zeros(D),
            })
        self.lnf_w, self.lnf_b = torch.ones(D), torch.zeros(D)


def generate(m, prompt, n):
    """n tokens, greedy, with the KV cache; returns them."""
    K = torch.zeros(L, H, CONTEXT, D_H)
    Vc = torch.zeros(L, H, CONTEXT, D_H)
    scale = 1.0 / D_H ** 0.5
    token, out = prompt, []
    for t in range(n):
        x = m.E[token] + m.P[t]                                     # [D]
        for l, b in enumerate(m.blocks):
            h = F.layer_norm(x, (D,), b["ln1_w"], b["ln1_b"])
            q, k, v = F.linear(h, b["W_QKV"]).view(3, H, D_H)       # [H, D_H] each
            K[l, :, t] = k
            Vc[l, :, t] = v
            s = torch.einsum("hd,htd->ht", q, K[l, :, :t + 1]) * scale   # [H, t + 1]
            a = torch.softmax(s, dim=-1)
            o = torch.einsum("ht,htd->hd", a, Vc[l, :, :t + 1]).reshape(D)
            x = x + F.linear(o, b["W_O"], b["b_O"])
            h = F.layer_norm(x, (D,), b["ln2_w"], b["ln2_b"])
            x = x + F.linear(F.gelu(F.linear(h, b["W_1"], b["b_1"])), b["W_2"], b["b_2"])
        z = F.layer_norm(x, (D,), m.lnf_w, m.lnf_b)
        token = int(torch.argmax(m.E @ z))
        out.append(token)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default="bench/results", help="where generate_torch.tsv goes")
    parser.add_argument("--reps", type=int, default=5, help="runs per figure, the median is reported")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1, as bench_generate)")
    parser.add_argument("--max-n", type=int, default=512, help="the longest generation, among 64, 128, 256, 512")
    parser.add_argument("--vocab", type=int, default=86, help="V: the Brown corpus's characters (86)")
    args = parser.parse_args()
    if args.reps < 1 or args.threads < 1 or args.vocab < 2 or args.max_n not in SIZES:
        parser.error("--reps and --threads expect positive numbers, --vocab at least 2, --max-n one of 64, 128, 256, 512")
    torch.set_num_threads(args.threads)
    m = Gpt(args.vocab)
    print("PyTorch GPT generation with a KV cache, greedy, 1-token prompt; " + "; ".join(blas_lines()))
    print(f"{args.threads} thread(s); ms for n tokens, median of {args.reps} runs")
    rows = []
    with torch.inference_mode():
        generate(m, 1, SIZES[0])   # warm-up
        for n in (s for s in SIZES if s <= args.max_n):
            times = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                generate(m, 1, n)
                times.append((time.perf_counter() - t0) * 1e3)
            ms = statistics.median(times)
            rows.append(("kv_cache_torch", n, ms, n / (ms * 1e-3)))
            print(f"  n {n:4d}: {ms:9.1f} ms, {n / (ms * 1e-3):8.0f} tokens/s")
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "generate_torch.tsv")
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write("mode\tn\tms\ttokens_per_s\n")
        for mode, n, ms, tps in rows:
            f.write(f"{mode}\t{n}\t{ms:.3f}\t{tps:.1f}\n")
    print(f"appended {len(rows)} rows to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
