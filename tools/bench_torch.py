#!/usr/bin/python3
"""bench_torch.py - the chapters' default models in PyTorch, one training step timed.

    /usr/bin/python3 tools/bench_torch.py [--results bench/results] [--reps 7] [--threads 1,2,4]
    /usr/bin/python3 tools/bench_torch.py --profile 06_gpt_nanogpt_cpu --threads 1 [--capability avx512]

The PyTorch side of bench/bench_train_step.c. That program writes
RESULTS/train_step_batches.txt: for every chapter the model sizes and the
exact batch it timed. This script builds the same models (same sizes, same
batch shapes and ids) with standard PyTorch modules, and times one training
step the way the C chapters do it: zero the gradients, forward, backward,
clip the gradient norm to 1, torch.optim.Adam step. Median of --reps steps
after two warm-up steps. It appends rows `chapter torch threads ms` to
RESULTS/train_step.tsv and prints them.

Threads: --threads lists the thread counts (default 1, 2 and all cores;
0 in the list means all cores). Each runs in a fresh subprocess, because
PyTorch fixes its OpenMP pool when it is imported: torch.set_num_threads(n),
with OMP_WAIT_POLICY=passive in the environment before the import for more
than one (an OpenMP thread that spins while waiting takes a whole core from
the other thread on a 2-core machine).

A fair PyTorch, at its best: the subprocesses run with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE removed from the environment. Some machines set them (for
old OpenBLAS builds that misdetect new CPUs), and OPENBLAS_CORETYPE=Haswell
makes OpenBLAS run its AVX2 kernels on an AVX-512 CPU; without them it picks
the kernels it would pick itself. glibc's malloc is told to keep freed memory
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_): by default each tensor over
128 KiB is a fresh mmap whose pages fault in again at every step, which made
the GPT's PyTorch step 2-3x slower in a fresh process (PyTorch's CPU tuning
guides preload jemalloc or tcmalloc for the same reason). On a CPU with
AVX-512 every thread count runs twice, with PyTorch's own kernels at its
default CPU capability (AVX2 for 1.13) and at ATEN_CPU_CAPABILITY=avx512, and
each figure is the faster of the two (the table marks the AVX-512 ones with
*). Which BLAS PyTorch was built with and which library it loaded are written
to RESULTS/torch_config.txt (and printed), so the tables can name the PyTorch
they were measured against.

The models (see each chapter's header for the equations):
  01  nn.GRU encoder (packed, so padding is skipped), context c = h_T;
      nn.GRU decoder with teacher forcing on [embed(y_{t-1}) ; c], s_0 = c.
  02  the same encoder; a Python loop over decoder steps with additive
      attention v^T tanh(W_1 h_i + W_2 s_{t-1}) and an nn.GRUCell on
      [embed(y_{t-1}) ; c_t].
  03  the same encoder; nn.GRU decoder on embed(y_{t-1}); scaled dot-product
      attention of all decoder states at once; tanh([c_t ; s_t] W_c + b_c).
  04  digit model: embedding + positions, per layer single-head
      self-attention (Q, K, V without bias) + residual, ReLU MLP + residual.
  05  the same with multi-head attention (W_QKV without bias, W_O with bias).
  06  encoder-decoder transformer from nn.TransformerEncoderLayer and
      nn.TransformerDecoderLayer (norm_first=True, GELU, dropout 0,
      batch_first), their Q/K/V in-projection biases removed (the C model has
      none; W_O keeps its bias); embeddings times sqrt(D) plus sinusoidal
      positions; a final LayerNorm on the encoder's and the decoder's outputs;
      the output nn.Linear; CrossEntropyLoss(ignore_index=<pad>,
      label_smoothing=eps). Source padding is masked in the encoder's and the
      cross-attention's keys, the decoder's self-attention is causal. Its
      parameter count must equal the C model's (train_step_batches.txt's
      params=): both are printed, and a mismatch skips the chapter with an error.
  06_gpt, 06_gpt_nanogpt_cpu  chapter 06's GPT (its default, and nanoGPT's
      CPU setting): token embedding plus learned positions, a stack of
      nn.TransformerEncoderLayer (norm_first=True, GELU, dropout 0,
      batch_first, Q/K/V in-projection biases removed) given a causal mask, a
      final LayerNorm, logits = Z E^T (the output layer tied to the token
      embedding, no bias); the mean cross-entropy over every position. The
      same parameter count check as 06.
  07  the ViT: nn.Conv2d(1, D, P, stride=P) patches, a class token and learned
      positions (nn.Parameter), nn.TransformerEncoderLayer blocks (norm_first,
      GELU, dropout 0, batch_first, no Q/K/V in-projection bias), a final
      LayerNorm, the class token's row through nn.Linear, cross_entropy. The
      batch's labels are C's; its images are random (the step's time does not
      depend on their values). The parameter count is checked as for 06.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

PAD_ID = 0


def read_batches(path):
    """One dict per line of train_step_batches.txt: key=value, lists as int lists."""
    chapters = []
    with open(path) as f:
        for line in f:
            entry = {}
            for token in line.split():
                key, _, value = token.partition("=")
                if "," in value or key in ("src", "src_lens", "tgt_in", "tgt_out", "x", "y"):
                    entry[key] = [int(v) for v in value.split(",")]
                elif value.lstrip("-").isdigit():
                    entry[key] = int(value)
                else:
                    entry[key] = value
            if "chapter" in entry:
                chapters.append(entry)
    return chapters


def build_models():
    """The model classes; defined after torch is imported (in the child process)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    def sinusoids(N, D):
        """Chapter 04's table: P[t, 2k] = sin(t / 10000^(2k/D)), P[t, 2k+1] = cos(...)."""
        position = torch.arange(N, dtype=torch.float32)[:, None]
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, D, 2, dtype=torch.float32) / D)
        table = torch.zeros(N, D)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)[:, : D // 2]
        return table

    class Encoder(nn.Module):
        """Embedding + GRU over a padded batch; returns all states [B,T,H] and h_T [B,H]."""

        def __init__(self, V, E, H):
            super().__init__()
            self.emb = nn.Embedding(V, E)
            self.rnn = nn.GRU(E, H, batch_first=True)

        def forward(self, src, lens):
            packed = pack_padded_sequence(self.emb(src), lens, batch_first=True, enforce_sorted=False)
            states, h_last = self.rnn(packed)
            states, _ = pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
            return states, h_last[0]

    class RnnSeq2Seq(nn.Module):  # chapter 01
        def __init__(self, V_src, V_tgt, E, H):
            super().__init__()
            self.enc = Encoder(V_src, E, H)
            self.dec_emb = nn.Embedding(V_tgt, E)
            self.dec = nn.GRU(E + H, H, batch_first=True)
            self.out = nn.Linear(H, V_tgt)

        def forward(self, src, lens, tgt_in):
            _, context = self.enc(src, lens)
            B, Tt = tgt_in.shape
            dec_in = torch.cat([self.dec_emb(tgt_in), context[:, None, :].expand(B, Tt, -1)], dim=2)
            S, _ = self.dec(dec_in, context[None].contiguous())
            return self.out(S)

    class Bahdanau(nn.Module):  # chapter 02
        def __init__(self, V_src, V_tgt, E, H, A):
            super().__init__()
            self.enc = Encoder(V_src, E, H)
            self.W_1 = nn.Linear(H, A, bias=False)
            self.W_2 = nn.Linear(H, A, bias=False)
            self.v = nn.Parameter(torch.randn(A) / math.sqrt(A))
            self.dec_emb = nn.Embedding(V_tgt, E)
            self.cell = nn.GRUCell(E + H, H)
            self.out = nn.Linear(H, V_tgt)

        def forward(self, src, lens, tgt_in):
            ann, s = self.enc(src, lens)
            keys = self.W_1(ann)                                          # [B, T, A]
            pad = torch.arange(src.shape[1])[None, :] >= lens[:, None]    # [B, T]
            emb = self.dec_emb(tgt_in)
            states = []
            for t in range(tgt_in.shape[1]):
                feat = torch.tanh(keys + self.W_2(s)[:, None, :])
                scores = (feat @ self.v).masked_fill(pad, float("-inf"))
                weights = torch.softmax(scores, dim=1)
                context = torch.bmm(weights[:, None, :], ann)[:, 0]
                s = self.cell(torch.cat([emb[:, t], context], dim=1), s)
                states.append(s)
            return self.out(torch.stack(states, dim=1))

    class LuongDot(nn.Module):  # chapter 03, scaled dot score, Luong placement
        def __init__(self, V_src, V_tgt, E, H):
            super().__init__()
            self.enc = Encoder(V_src, E, H)
            self.dec_emb = nn.Embedding(V_tgt, E)
            self.dec = nn.GRU(E, H, batch_first=True)
            self.comb = nn.Linear(2 * H, H)
            self.out = nn.Linear(H, V_tgt)

        def forward(self, src, lens, tgt_in):
            ann, h_last = self.enc(src, lens)
            S, _ = self.dec(self.dec_emb(tgt_in), h_last[None].contiguous())    # [B, Tt, H]
            pad = torch.arange(src.shape[1])[None, None, :] >= lens[:, None, None]
            scores = (S @ ann.transpose(1, 2) / math.sqrt(S.shape[2])).masked_fill(pad, float("-inf"))
            C = torch.softmax(scores, dim=2) @ ann
            return self.out(torch.tanh(self.comb(torch.cat([C, S], dim=2))))

    class DigitModel(nn.Module):  # chapters 04 (heads=1, W_O = I) and 05
        def __init__(self, N, D, F_, L, C, heads, pos):
            super().__init__()
            self.heads = heads
            self.emb = nn.Embedding(10, D)
            if pos == "learned":
                self.pos = nn.Parameter(torch.randn(N, D) * 0.7)
            else:
                self.register_buffer("pos", sinusoids(N, D))
            self.qkv = nn.ModuleList([nn.Linear(D, 3 * D, bias=False) for _ in range(L)])
            self.proj = nn.ModuleList([nn.Linear(D, D) for _ in range(L)]) if heads > 1 else None
            self.mlp_in = nn.ModuleList([nn.Linear(D, F_) for _ in range(L)])
            self.mlp_out = nn.ModuleList([nn.Linear(F_, D) for _ in range(L)])
            self.out = nn.Linear(D, C)

        def forward(self, x):
            X = self.emb(x) + self.pos
            B, N, D = X.shape
            h, d = self.heads, D // self.heads
            for l in range(len(self.qkv)):
                Q, K, V = self.qkv[l](X).view(B, N, 3, h, d).permute(2, 0, 3, 1, 4)   # [B, h, N, d]
                A = torch.softmax(Q @ K.transpose(2, 3) / math.sqrt(d), dim=3)
                Y = (A @ V).transpose(1, 2).reshape(B, N, D)
                if self.proj is not None:
                    Y = self.proj[l](Y)
                H = X + Y
                X = H + self.mlp_out[l](torch.relu(self.mlp_in[l](H)))
            return self.out(X)

    class Transformer(nn.Module):  # chapter 06, pre-norm
        def __init__(self, V_src, V_tgt, T, Tt, D, H, F_, L):
            super().__init__()
            self.scale = math.sqrt(D)
            self.src_emb = nn.Embedding(V_src, D)
            self.tgt_emb = nn.Embedding(V_tgt, D)
            self.register_buffer("pos", sinusoids(max(T, Tt), D))

            def layer_args():
                return dict(d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0, activation="gelu",
                            batch_first=True, norm_first=True)
            self.enc = nn.ModuleList([nn.TransformerEncoderLayer(**layer_args()) for _ in range(L)])
            self.dec = nn.ModuleList([nn.TransformerDecoderLayer(**layer_args()) for _ in range(L)])
            # The C model's Q, K, V projections have no bias (its W_O has one).
            for attn in [l.self_attn for l in self.enc] + [a for l in self.dec for a in (l.self_attn, l.multihead_attn)]:
                attn.register_parameter("in_proj_bias", None)
            self.enc_norm = nn.LayerNorm(D)
            self.dec_norm = nn.LayerNorm(D)
            self.out = nn.Linear(D, V_tgt)
            self.register_buffer("causal", torch.triu(torch.ones(Tt, Tt, dtype=torch.bool), diagonal=1))

        def forward(self, src, src_pad, tgt_in):
            X = self.src_emb(src) * self.scale + self.pos[: src.shape[1]]
            for layer in self.enc:
                X = layer(X, src_key_padding_mask=src_pad)
            M = self.enc_norm(X)
            Y = self.tgt_emb(tgt_in) * self.scale + self.pos[: tgt_in.shape[1]]
            for layer in self.dec:
                Y = layer(Y, M, tgt_mask=self.causal, memory_key_padding_mask=src_pad)
            return self.out(self.dec_norm(Y))

    class Gpt(nn.Module):  # chapter 06's GPT, pre-norm
        def __init__(self, V, N, D, H, F_, L):
            super().__init__()
            self.tok_emb = nn.Embedding(V, D)
            self.pos_emb = nn.Parameter(torch.randn(N, D) * 0.02)
            self.layers = nn.ModuleList([
                nn.TransformerEncoderLayer(d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True) for _ in range(L)])
            for layer in self.layers:   # the C model's Q, K, V projections have no bias
                layer.self_attn.register_parameter("in_proj_bias", None)
            self.norm = nn.LayerNorm(D)
            self.register_buffer("causal", torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1))

        def forward(self, x):
            X = self.tok_emb(x) + self.pos_emb[: x.shape[1]]
            for layer in self.layers:
                X = layer(X, src_mask=self.causal)
            return self.norm(X) @ self.tok_emb.weight.t()   # tied output layer

    class Vit(nn.Module):  # chapter 07, pre-norm, class token, learned positions
        def __init__(self, P, D, H, F_, L, C):
            super().__init__()
            N = (28 // P) ** 2
            self.patch = nn.Conv2d(1, D, P, stride=P)
            self.cls = nn.Parameter(torch.zeros(1, 1, D))
            self.pos = nn.Parameter(torch.zeros(1, N + 1, D))
            self.layers = nn.ModuleList([nn.TransformerEncoderLayer(
                d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0, activation="gelu", batch_first=True,
                norm_first=True) for _ in range(L)])
            for layer in self.layers:
                layer.self_attn.register_parameter("in_proj_bias", None)
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, C)

        def forward(self, images):
            x = self.patch(images).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x)[:, 0])

    def make(entry):
        """(model, loss function of the model) for one line of train_step_batches.txt."""
        ch = entry["chapter"][:2]
        if entry["chapter"].startswith("06_gpt"):
            B, N, V = entry["B"], entry["N"], entry["V"]
            switches = (entry["norm"], entry["norm_type"], entry["mlp"], entry["pos"], float(entry["dropout"]))
            if switches != ("pre", "layernorm", "gelu", "learned", 0.0):
                raise ValueError(f"{entry['chapter']}: only pre-norm, LayerNorm, GELU, learned positions, dropout 0 "
                                 f"are built here, not {switches}")
            x = torch.tensor(entry["x"]).view(B, N)
            y = torch.tensor(entry["y"]).view(-1)
            model = Gpt(V, N, entry["dim"], entry["heads"], entry["ff"], entry["layers"])

            def loss_fn():
                return F.cross_entropy(model(x).reshape(-1, V), y)
            return model, loss_fn
        if ch == "07":
            if (entry["pool"], entry["pos"]) != ("cls", "learned"):
                raise ValueError("07_vision_transformer: only the class token with learned positions is built here")
            B = entry["B"]
            images = torch.rand(B, 1, 28, 28) * 2 - 1
            y = torch.tensor(entry["y"])
            model = Vit(entry["P"], entry["D"], entry["heads"], entry["F"], entry["L"], entry["C"])

            def loss_fn():
                return F.cross_entropy(model(images), y)
            return model, loss_fn
        if ch in ("01", "02", "03"):
            B, T, Tt = entry["B"], entry["T"], entry["Tt"]
            src = torch.tensor(entry["src"]).view(B, T)
            lens = torch.tensor(entry["src_lens"])
            tgt_in = torch.tensor(entry["tgt_in"]).view(B, Tt)
            tgt_out = torch.tensor(entry["tgt_out"]).view(B, Tt)
            V_src, V_tgt, E, H = entry["V_src"], entry["V_tgt"], entry["embed"], entry.get("state", entry.get("hidden"))
            if ch == "01":
                model = RnnSeq2Seq(V_src, V_tgt, E, H)
            elif ch == "02":
                model = Bahdanau(V_src, V_tgt, E, H, entry["attn"])
            else:
                model = LuongDot(V_src, V_tgt, E, H)

            def loss_fn():
                logits = model(src, lens, tgt_in)
                return F.cross_entropy(logits.reshape(-1, V_tgt), tgt_out.reshape(-1), ignore_index=PAD_ID)
            return model, loss_fn
        if ch == "06":
            B, T, Tt, V_tgt = entry["B"], entry["T"], entry["Tt"], entry["V_tgt"]
            switches = (entry["norm"], entry["norm_type"], entry["mlp"], entry["pos"], float(entry["dropout"]))
            if switches != ("pre", "layernorm", "gelu", "sinusoidal", 0.0):
                raise ValueError("06_transformer: only the default switches (pre-norm, LayerNorm, GELU, "
                                 f"sinusoidal, dropout 0) are built here, not {switches}")
            src = torch.tensor(entry["src"]).view(B, T)
            src_pad = torch.arange(T)[None, :] >= torch.tensor(entry["src_lens"])[:, None]   # True: padding
            tgt_in = torch.tensor(entry["tgt_in"]).view(B, Tt)
            tgt_out = torch.tensor(entry["tgt_out"]).view(-1)
            model = Transformer(entry["V_src"], V_tgt, T, Tt, entry["dim"], entry["heads"], entry["ff"], entry["layers"])
            criterion = nn.CrossEntropyLoss(ignore_index=PAD_ID, label_smoothing=float(entry["label_smoothing"]))

            def loss_fn():
                return criterion(model(src, src_pad, tgt_in).reshape(-1, V_tgt), tgt_out)
            return model, loss_fn
        if ch in ("04", "05"):
            B, N, C = entry["B"], entry["N"], entry["C"]
            x = torch.tensor(entry["x"]).view(B, N)
            y = torch.tensor(entry["y"]).view(B, N)
            model = DigitModel(N, entry["D"], entry["F"], entry["L"], C, entry["heads"], entry["pos"])

            def loss_fn():
                return F.cross_entropy(model(x).reshape(-1, C), y.reshape(-1))
            return model, loss_fn
        return None, None

    return make


def child(results, threads, reps, profile=None):
    """Runs in the subprocess: time every chapter on `threads` threads, print TSV rows;
    with profile (a chapter's name), that chapter only, then its steps under torch.profiler."""
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    make = build_models()
    failed = False
    for entry in read_batches(os.path.join(results, "train_step_batches.txt")):
        if profile and entry["chapter"] != profile:
            continue
        try:
            model, loss_fn = make(entry)
        except ValueError as e:
            print(f"bench_torch: {e}; skipped", file=sys.stderr)
            failed = True
            continue
        if model is None:
            print(f"bench_torch: no PyTorch model for {entry['chapter']}; skipped", file=sys.stderr)
            continue
        if entry["chapter"][:2] in ("06", "07"):   # the same model: as many parameters as the C one
            ours = sum(p.numel() for p in model.parameters())
            if threads == 1:
                print(f"bench_torch: {entry['chapter']} parameters: C {entry['params']}, PyTorch {ours}",
                      file=sys.stderr)
            if ours != entry["params"]:
                print(f"bench_torch: {entry['chapter']}: PyTorch has {ours} parameters, the C model "
                      f"{entry['params']}: not the same model; skipped", file=sys.stderr)
                failed = True
                continue
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return (time.perf_counter() - t0) * 1e3

        for _ in range(2):   # warm-up: allocator, thread pool
            step()
        ms = statistics.median(step() for _ in range(reps))
        print(f"{entry['chapter']}\ttorch\t{threads}\t{ms:.3f}", flush=True)
        if profile:
            from torch.profiler import ProfilerActivity
            with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(reps):
                    step()
            print(f"torch.profiler, {reps} steps of {profile} on {threads} thread(s) (self CPU time: the op alone, "
                  "not what it calls):")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
            return 0
    if profile:
        print(f"bench_torch: no chapter '{profile}' in train_step_batches.txt", file=sys.stderr)
        return 2
    return 1 if failed else 0


def fair_environment(threads, capability=None):
    """The environment of a timing subprocess: PyTorch at its best (see the header)."""
    env = dict(os.environ)
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ATEN_CPU_CAPABILITY"):
        env.pop(name, None)
    env["MALLOC_MMAP_THRESHOLD_"] = env["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    env["OMP_NUM_THREADS"] = str(threads)
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "passive"
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    return env


def capabilities():
    """PyTorch's CPU capabilities to try: its default, and avx512 where the CPU has it."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    return [None, "avx512"] if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq")) else [None]


def child_config():
    """Runs in a subprocess: the lines that say which PyTorch and which BLAS."""
    import ctypes
    import torch
    torch.randn(64, 64) @ torch.randn(64, 64)          # a product, so the BLAS library is loaded
    lines = ["torch %s" % torch.__version__]
    for line in torch.__config__.show().splitlines():
        line = line.strip().lstrip("- ")
        if line.startswith(("CPU capability", "LAPACK is", "Intel(R) Math Kernel Library", "OpenBLAS")):
            lines.append(line)
        for item in line.split(", "):
            if item.startswith(("BLAS_INFO=", "LAPACK_INFO=", "TORCH_VERSION=")) or "BLAS_INFO=" in item:
                lines.append(item.split("Build settings: ")[-1])
    libraries = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            name = os.path.basename(path)
            if path.startswith("/") and any(k in name for k in ("blas", "lapack", "mkl")) and path not in libraries:
                libraries.append(path)
    for path in libraries:
        lines.append("loaded: %s" % os.path.realpath(path))
    for path in libraries:
        try:
            lib = ctypes.CDLL(path)
            get_config, get_core = lib.openblas_get_config, lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        get_config.restype = get_core.restype = ctypes.c_char_p
        lines.append("OpenBLAS: %s; kernels for core %s" % (get_config().decode().strip(), get_core().decode()))
        break
    if not any(line.startswith("OpenBLAS: ") for line in lines) and any("/blas/libblas" in p for p in libraries):
        lines.append("WARNING: the reference BLAS (netlib): PyTorch's products are unoptimised here; "
                     "install OpenBLAS (make deps-bench) for a fair comparison")
    lines.append("OPENBLAS_CORETYPE %s, OPENBLAS_L2_SIZE %s in the timing processes' environment" % (
        os.environ.get("OPENBLAS_CORETYPE", "unset"), os.environ.get("OPENBLAS_L2_SIZE", "unset")))
    lines.append("glibc malloc keeps freed memory (MALLOC_MMAP_THRESHOLD_=%s, MALLOC_TRIM_THRESHOLD_=%s)" % (
        os.environ.get("MALLOC_MMAP_THRESHOLD_", "unset"), os.environ.get("MALLOC_TRIM_THRESHOLD_", "unset")))
    lines.append("timed at CPU capabilities: %s; each figure the faster" % " and ".join(
        (c.upper() if c else "default") for c in capabilities()))
    print("\n".join(lines))
    return 0


def thread_list(text):
    """--threads "1,2,0": positive counts, 0 = all cores; duplicates dropped, order kept."""
    counts = []
    for item in text.split(","):
        try:
            n = int(item)
        except ValueError:
            n = -1
        if n < 0 or n > 256:
            raise argparse.ArgumentTypeError(
                "expected thread counts from 0 (all cores) to 256 separated by commas, got '%s'" % text)
        n = n or (os.cpu_count() or 1)
        if n not in counts:
            counts.append(n)
    return counts


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default="bench/results", help="directory of train_step.tsv (default bench/results)")
    parser.add_argument("--reps", type=int, default=7, help="timed steps per figure, median reported (default 7)")
    parser.add_argument("--threads", type=thread_list, default=None,
                        help="thread counts, comma-separated, 0 = all cores (default 1,2,all cores)")
    parser.add_argument("--profile", metavar="CHAPTER", default=None,
                        help="time one chapter (e.g. 06_gpt_nanogpt_cpu) at the first of --threads, then print "
                             "torch.profiler's table of its ops (the other side of tools/profile_step.sh)")
    parser.add_argument("--capability", choices=("default", "avx512"), default="default",
                        help="with --profile: PyTorch's CPU capability (default: its own choice)")
    parser.add_argument("--child-threads", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--child-config", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error(f"--reps expects a positive number, got {args.reps}")
    if args.child_config:
        return child_config()
    if args.child_threads:
        return child(args.results, args.child_threads, args.reps, args.profile)
    threads_list = args.threads or thread_list("1,2,0")

    batches = os.path.join(args.results, "train_step_batches.txt")
    tsv = os.path.join(args.results, "train_step.tsv")
    if not os.path.exists(batches) or not os.path.exists(tsv):
        print(f"bench_torch: {batches} or {tsv} missing: run build/bench/bench_train_step first", file=sys.stderr)
        return 1
    if args.profile:
        capability = None if args.capability == "default" else args.capability
        command = [sys.executable, os.path.abspath(__file__), "--results", args.results, "--reps", str(args.reps),
                   "--child-threads", str(threads_list[0]), "--profile", args.profile]
        return subprocess.run(command, env=fair_environment(threads_list[0], capability)).returncode
    load = load_average()
    print(f"PyTorch, one training step, ms: median of {args.reps} steps after 2 warm-ups; load average {load:.2f}")
    if load > 0.5:
        print(f"WARNING: load average {load:.2f}: figures are slow and noisy, 2-thread ones most")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-config"], env=fair_environment(1),
                          stdout=subprocess.PIPE, text=True)
    if done.returncode == 0:
        with open(os.path.join(args.results, "torch_config.txt"), "w") as f:
            f.write(done.stdout)
        print("PyTorch's build and BLAS (written to %s):" % os.path.join(args.results, "torch_config.txt"))
        print("".join("  " + line + "\n" for line in done.stdout.splitlines()), end="")
    else:
        print("bench_torch: could not read PyTorch's configuration (status %d)" % done.returncode, file=sys.stderr)
    best = {}   # (chapter, threads) -> (ms, capability)
    for threads in threads_list:
        for capability in capabilities():
            command = [sys.executable, os.path.abspath(__file__), "--results", args.results,
                       "--reps", str(args.reps), "--child-threads", str(threads)]
            done = subprocess.run(command, env=fair_environment(threads, capability), stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                print(f"bench_torch: the {threads}-thread run ({capability or 'default capability'}) failed "
                      f"(status {done.returncode})", file=sys.stderr)
            for line in done.stdout.splitlines():
                if line.count("\t") == 3:
                    chapter, _, t, ms = line.split("\t")
                    key = (chapter, int(t))
                    if key not in best or float(ms) < best[key][0]:
                        best[key] = (float(ms), capability)
    rows = [(chapter, "torch", str(t), "%.3f" % ms) for (chapter, t), (ms, _) in best.items()]
    with open(tsv, "a") as f:
        for row in rows:
            f.write("\t".join(row) + "\n")
    print(f"{'chapter':26s}" + "".join(f" {'torch %dt' % t:>10s}" for t in threads_list))
    for chapter in dict.fromkeys(c for c, _ in best):
        cells = []
        for t in threads_list:
            ms, capability = best.get((chapter, t), (float("nan"), None))
            cells.append(f" {ms:9.2f}{'*' if capability else ' '}")
        print(f"{chapter:26s}" + "".join(cells))
    if len(capabilities()) > 1:
        print("each figure the faster of PyTorch's default CPU capability and AVX-512 (*)")
    print(f"appended {len(rows)} rows to {tsv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
