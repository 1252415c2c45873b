#!/usr/bin/python3
"""golden.py - golden vectors for every layer, from PyTorch (an independent implementation).

    /usr/bin/python3 tools/golden.py            (or: make golden)
    /usr/bin/python3 tools/golden.py --check    regenerate in memory, compare with the files

For each layer it writes tests/golden/<layer>.bin (format: tests/golden/README.md):
several cases at odd shapes (1, 3, 7, 17, ...), each with the inputs, the
parameters, an upstream gradient, the outputs and every input and parameter
gradient. tests/test_golden.c runs the C layers on the same inputs and compares.

Precision: every input, parameter and upstream gradient is drawn as a float32
number (so the C side sees exactly these values); PyTorch then computes in
float64 on those exact values, and the results are rounded ONCE to float32 for
storage. The stored answers are therefore within half a float32 ulp of the
exact answers for the given inputs, and any difference the C test sees is the
C code's own float32 rounding (or a bug), not the reference's.

Gradients come from torch.autograd (loss = sum(output * upstream gradient)),
never from re-derived formulas, and the cells are torch.nn.RNNCell/GRUCell/
LSTMCell with the weights mapped from the C layout (tools/README.md).

Adding a layer: write a function decorated with @layer("name") that returns
a list of (case_name, {tensor_name: array}) and a check function in
tests/test_golden.c. Later chapters' layers are skipped here (with a note)
until their C code exists.
"""
import argparse
import math
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goldfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "golden")
PAD_ID = 0  # common/data/vocab.h

LAYERS = OrderedDict()


def layer(name):
    def register(fn):
        LAYERS[name] = fn
        return fn
    return register


class Draw:
    """Seeded random float32 numbers, handed out as float64 tensors that require grad."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def uniform(self, *shape, lo=-1.0, hi=1.0, grad=True):
        x = (torch.rand(*shape, generator=self.g, dtype=torch.float32) * (hi - lo) + lo)
        return x.double().requires_grad_(grad)

    def normal(self, *shape, std=1.0, grad=True):
        x = torch.randn(*shape, generator=self.g, dtype=torch.float32) * std
        return x.double().requires_grad_(grad)

    def ints(self, low, high, *shape):
        return torch.randint(low, high, shape, generator=self.g)


def np32(t):
    return t.detach().double().numpy().astype(np.float32)


def backward(out, dout):
    """Autograd of L = sum(out * dout)."""
    (out * dout).sum().backward()


# --------------------------------------------------------------------- layers

@layer("linear")
def gen_linear():
    cases = []
    for seed, (N, I, O, bias) in enumerate([(1, 1, 1, True), (3, 7, 17, True), (17, 3, 7, True),
                                            (7, 33, 5, True), (3, 7, 17, False), (1, 5, 1, False)]):
        r = Draw(100 + seed)
        x, W = r.uniform(N, I), r.uniform(I, O)
        b = r.uniform(O) if bias else None
        dy = r.uniform(N, O, grad=False)
        y = F.linear(x, W.t(), b)              # torch stores weight as [O, I]: ours is its transpose
        backward(y, dy)
        t = OrderedDict(x=np32(x), W=np32(W))
        if bias:
            t["b"] = np32(b)
        t.update(dy=np32(dy), y=np32(y), dx=np32(x.grad), dW=np32(W.grad))
        if bias:
            t["db"] = np32(b.grad)
        cases.append((f"n{N}_i{I}_o{O}{'' if bias else '_nobias'}", t))
    return cases


@layer("embedding")
def gen_embedding():
    cases = []
    for seed, (V, D, N) in enumerate([(1, 1, 1), (7, 3, 17), (17, 7, 5), (3, 33, 7)]):
        r = Draw(200 + seed)
        table = r.uniform(V, D)
        ids = r.ints(0, V, N)
        if N > 2:
            ids[1] = ids[0]                    # a repeated id: its gradients must add up
        dy = r.uniform(N, D, grad=False)
        y = F.embedding(ids, table)
        backward(y, dy)
        cases.append((f"v{V}_d{D}_n{N}", OrderedDict(
            ids=ids.numpy().astype(np.int32), table=np32(table), dy=np32(dy),
            y=np32(y), dtable=np32(table.grad))))
    return cases


def activation_cases(fn, base_seed, extremes):
    cases = []
    for seed, n in enumerate([1, 7, 33]):
        r = Draw(base_seed + seed)
        x = r.uniform(n, lo=-4.0, hi=4.0)
        if n == 33:                            # large magnitudes and exact zeros
            with torch.no_grad():
                x[:len(extremes)] = torch.tensor(extremes, dtype=torch.float32).double()
        dy = r.uniform(n, grad=False)
        y = fn(x)
        backward(y, dy)
        cases.append((f"n{n}", OrderedDict(x=np32(x), dy=np32(dy), y=np32(y), dx=np32(x.grad))))
    return cases


@layer("tanh")
def gen_tanh():
    return activation_cases(torch.tanh, 300, [0.0, 20.0, -20.0, 1e-4, -1e-4, 0.5])


@layer("sigmoid")
def gen_sigmoid():
    return activation_cases(torch.sigmoid, 310, [0.0, 30.0, -30.0, 100.0, -100.0, 1e-4])


@layer("relu")
def gen_relu():
    # torch's relu has gradient 0 at x == 0, as does relu_backward (x > 0 only).
    return activation_cases(torch.relu, 320, [0.0, -0.0, 1e-30, -1e-30, 50.0, -50.0])


@layer("gelu")
def gen_gelu():
    # PyTorch's float64 GELU is 0.5 x (1 + erf(x / sqrt 2)), which cancels for
    # very negative x (exactly 0 from about x = -8.3 on); |x| <= 5 keeps every
    # stored value within half a float32 ulp of the exact one.
    return activation_cases(F.gelu, 330, [0.0, 5.0, -5.0, -0.75, 1e-4, -1e-4, 3.0, -3.0])


@layer("gelu_tanh")
def gen_gelu_tanh():
    # As for gelu: torch's 1 + tanh(u) cancels below about x = -7; |x| <= 5 is exact enough.
    return activation_cases(lambda x: F.gelu(x, approximate="tanh"), 340,
                            [0.0, 5.0, -5.0, -0.75, 1e-4, -1e-4, 3.0, -3.0])


def masked_logits(r, N, C):
    """[N, C] logits; row 1 partially masked (-inf), row 2 with huge values (stability)."""
    x = r.uniform(N, C, lo=-3.0, hi=3.0, grad=False)
    if N >= 3 and C >= 3:
        x[1, 0] = -math.inf
        x[1, C - 1] = -math.inf
        x[2, :] += 1000.0
    return x.float().double()   # back to float32 values: the C side sees exactly these


@layer("softmax")
def gen_softmax():
    cases = []
    for seed, (N, C) in enumerate([(1, 1), (3, 7), (5, 17), (4, 3)]):
        r = Draw(400 + seed)
        x = masked_logits(r, N, C)
        full_mask_row = N >= 4                 # the last row entirely -inf
        if full_mask_row:
            x[N - 1, :] = -math.inf
        dy = r.uniform(N, C, grad=False)
        # A fully masked row is all zeros with zero gradient by the C contract
        # (layers.h); PyTorch gives NaN there, so that row is left out of torch.
        live = N - 1 if full_mask_row else N
        xl = x[:live].clone().requires_grad_(True)
        yl = torch.softmax(xl, dim=1)
        backward(yl, dy[:live])
        y = torch.zeros(N, C, dtype=torch.float64)
        dx = torch.zeros(N, C, dtype=torch.float64)
        y[:live], dx[:live] = yl.detach(), xl.grad
        cases.append((f"n{N}_c{C}", OrderedDict(x=np32(x), dy=np32(dy), y=np32(y), dx=np32(dx))))
    return cases


@layer("log_softmax")
def gen_log_softmax():
    cases = []
    for seed, (N, C) in enumerate([(1, 1), (3, 7), (5, 17)]):
        r = Draw(450 + seed)
        x = masked_logits(r, N, C)
        y = torch.log_softmax(x, dim=1)        # masked entries stay -inf
        cases.append((f"n{N}_c{C}", OrderedDict(x=np32(x), y=np32(y))))
    return cases


@layer("cross_entropy")
def gen_cross_entropy():
    """loss_sum = sum over counted rows of -log softmax(logits)[target];
    dlogits = d(scale * loss_sum)/d logits, as cross_entropy_backward(scale)."""
    cases = []
    specs = [  # N, C, ignore_id, scale, which rows are padding
        (1, 3, PAD_ID, 1.0, []),
        (7, 5, PAD_ID, None, [2, 5]),          # scale None = 1 / n_counted (mean per token)
        (17, 33, PAD_ID, None, [0, 16, 9]),
        (5, 7, -100, 0.5, []),                 # nothing ignored; target 0 is a real class
        (3, 4, PAD_ID, 1.0, [0, 1, 2]),        # every row ignored: loss 0, gradient 0
    ]
    for seed, (N, C, ignore_id, scale, pads) in enumerate(specs):
        r = Draw(500 + seed)
        logits = r.uniform(N, C, lo=-4.0, hi=4.0)
        low = 0 if ignore_id != PAD_ID else 1
        targets = r.ints(low, C, N)
        if ignore_id == -100:
            targets[0] = 0
        for p in pads:
            targets[p] = ignore_id
        counted = int((targets != ignore_id).sum())
        if scale is None:
            scale = 1.0 / counted
        scale32 = float(np.float32(scale))
        loss_sum = F.cross_entropy(logits, targets, ignore_index=ignore_id, reduction="sum")
        (scale32 * loss_sum).backward()
        probs = torch.softmax(logits.detach(), dim=1)
        cases.append((f"n{N}_c{C}_ign{ignore_id}", OrderedDict(
            logits=np32(logits), targets=targets.numpy().astype(np.int32),
            ignore_id=np.array([ignore_id], np.int32), scale=np.array([scale32], np.float32),
            loss_sum=np.array([loss_sum.item()], np.float32), n_counted=np.array([counted], np.int32),
            probs=np32(probs), dlogits=np32(logits.grad))))
    return cases


def norm_rows(r, N, D, rows):
    """The input x [N, D] of a norm's case: uniform in [-2, 2]; "offset" rows are
    centred at 30, "constant" makes row 1 all 0.7 (variance 0), "zero" all 0.
    Float32 values, so the C side sees exactly these."""
    x = r.uniform(N, D, lo=-2.0, hi=2.0, grad=False)
    if rows == "offset":
        x += 30.0
    if rows == "constant":
        x[1, :] = 0.7
    if rows == "zero":
        x[1, :] = 0.0
    return x.float().double().requires_grad_(True)


@layer("layernorm")
def gen_layernorm():
    """layernorm_forward/backward (layers.h): F.layer_norm over the last axis (biased
    variance), out = (x - mean) rstd gamma + beta, with the saved mean[N] and
    rstd[N] = 1 / sqrt(var + eps). eps is stored as the float32 the C code is given."""
    cases = []
    specs = [  # N, D, eps, rows
        (1, 1, 1e-5, "plain"),       # D = 1: out = beta, dx = 0
        (3, 7, 1e-5, "plain"),
        (5, 17, 1e-5, "offset"),     # rows centred at 30, not 0
        (4, 33, 1e-6, "plain"),      # the eps of ViT
        (2, 64, 1e-5, "constant"),   # row 1 constant: variance 0, out = beta
    ]
    for seed, (N, D, eps, rows) in enumerate(specs):
        r = Draw(1600 + seed)
        x = norm_rows(r, N, D, rows)
        gamma, beta = r.uniform(D, lo=-1.5, hi=1.5), r.uniform(D)
        dout = r.uniform(N, D, grad=False)
        eps32 = float(np.float32(eps))
        out = F.layer_norm(x, (D,), gamma, beta, eps32)
        backward(out, dout)
        xd = x.detach()
        mean = xd.mean(dim=1)
        rstd = 1.0 / torch.sqrt(xd.var(dim=1, unbiased=False) + eps32)
        cases.append((f"n{N}_d{D}{'' if rows == 'plain' else '_' + rows}", OrderedDict(
            x=np32(x), gamma=np32(gamma), beta=np32(beta), eps=np.array([eps32], np.float32),
            dout=np32(dout), out=np32(out), mean=np32(mean), rstd=np32(rstd),
            dx=np32(x.grad), dgamma=np32(gamma.grad), dbeta=np32(beta.grad))))
    return cases


@layer("batchnorm")
def gen_batchnorm():
    """batchnorm_forward/backward (nn/batchnorm.h): torch.nn.BatchNorm1d(D) over the
    real rows [M, D] of x [B, N, D] (row (b, n) is real when n < lens[b]; lens[b] = 0:
    all N), in training for three batches x0, x1, x2 (each normalised with its own
    biased statistics; the running averages, momentum 0.1, unbiased variance, from
    0 and 1), then in evaluation on x_eval (the running statistics). A padded row is
    normalised with the real rows' statistics too, written out from them in torch
    (so its output, and its gradient through those statistics, are checked as well).
    Gradients: autograd of sum(out2 * dout) (training, step 2) and of
    sum(out_eval * dout_eval) (evaluation: the statistics are constants)."""
    cases = []
    specs = [  # B, N, D, lens, rows
        (2, 3, 5, None, "plain"),
        (3, 4, 7, [2, 0, 1], "plain"),    # padding; sequence 1 all real (0: all N)
        (2, 5, 70, [3, 5], "plain"),      # D above the C code's block of 64 features
        (4, 2, 3, None, "offset"),        # features centred at 30: the two-pass variance
    ]
    for seed, (B, N, D, lens, rows) in enumerate(specs):
        r = Draw(4100 + seed)
        eps32 = float(np.float32(1e-5))
        bn = torch.nn.BatchNorm1d(D, eps=eps32, momentum=0.1).double()
        with torch.no_grad():
            bn.weight.copy_(r.uniform(D, lo=-1.5, hi=1.5, grad=False))
            bn.bias.copy_(r.uniform(D, grad=False))
        real = torch.tensor([[(lens is None or lens[b] == 0 or n < lens[b]) for n in range(N)] for b in range(B)])
        real = real.reshape(-1)
        t = OrderedDict()
        if lens is not None:
            t["lens"] = np.array(lens, np.int32)
        t.update(gamma=np32(bn.weight), beta=np32(bn.bias), eps=np.array([eps32], np.float32))
        bn.train()
        for k in range(3):
            x = r.uniform(B, N, D, lo=-2.0, hi=2.0, grad=False)
            if rows == "offset":
                x += 30.0
            x = x.float().double().requires_grad_(True)
            flat = x.reshape(B * N, D)
            xr = flat[real]
            out_real = bn(xr)                                   # torch's own batch norm, training
            mu, var = xr.mean(dim=0), xr.var(dim=0, unbiased=False)
            out_all = (flat - mu) / torch.sqrt(var + eps32) * bn.weight + bn.bias
            out = torch.where(real[:, None], torch.zeros(1, dtype=torch.float64), out_all)
            out = out.clone()
            out[real] = out_real
            t[f"x{k}"] = np32(x)
            t[f"out{k}"] = np32(out.reshape(B, N, D))
            if k == 2:
                dout = r.uniform(B, N, D, grad=False)
                backward(out.reshape(B, N, D), dout)
                t.update(dout=np32(dout), mean=np32(mu), rstd=np32(1.0 / torch.sqrt(var.detach() + eps32)),
                         dx=np32(x.grad), dgamma=np32(bn.weight.grad), dbeta=np32(bn.bias.grad))
        t.update(running_mean=np32(bn.running_mean), running_var=np32(bn.running_var))
        bn.eval()
        bn.weight.grad, bn.bias.grad = None, None
        x = r.uniform(B, N, D, lo=-2.0, hi=2.0, grad=False)
        if rows == "offset":
            x += 30.0
        x = x.float().double().requires_grad_(True)
        out = bn(x.reshape(B * N, D)).reshape(B, N, D)
        dout = r.uniform(B, N, D, grad=False)
        backward(out, dout)
        t.update(x_eval=np32(x), out_eval=np32(out), dout_eval=np32(dout), dx_eval=np32(x.grad),
                 dgamma_eval=np32(bn.weight.grad), dbeta_eval=np32(bn.bias.grad))
        cases.append((f"b{B}_n{N}_d{D}{'' if lens is None else '_lens'}{'' if rows == 'plain' else '_' + rows}", t))
    return cases


@layer("conv2d")
def gen_conv2d():
    """conv2d_forward/backward (nn/conv2d.h): F.conv2d(images, W, b, stride, padding) with
    W [channels_out, channels_in, K, K] as the C code stores it (PyTorch's own layout), b
    absent in one case; padding 0, 1, 2, stride 1, 2 (one that leaves the last row unread),
    K 1, 3, 5 (one as large as the padded image), 1-3 input channels, non-square images, and
    a 16 x 20 image of 3 channels into 8. dimages, dW, db by autograd.
    config = {channels_in, rows, cols, channels_out, K, stride, pad}."""
    cases = []
    specs = [  # B, channels_in, rows, cols, channels_out, K, stride, pad, bias
        (2, 1, 7, 5, 2, 3, 1, 0, True), (2, 3, 6, 9, 4, 3, 2, 1, True), (1, 1, 8, 6, 3, 5, 1, 2, True),
        (2, 3, 5, 7, 2, 1, 1, 0, False), (2, 3, 9, 6, 2, 5, 2, 2, True), (1, 2, 3, 3, 2, 5, 1, 1, True),
        (2, 3, 10, 7, 5, 3, 2, 0, True), (2, 3, 16, 20, 8, 3, 1, 1, True)]
    for seed, (B, ch_in, rows, cols, ch_out, K, stride, pad, bias) in enumerate(specs):
        r = Draw(4200 + seed)
        images, W = r.uniform(B, ch_in, rows, cols), r.uniform(ch_out, ch_in, K, K, lo=-0.5, hi=0.5)
        b = r.uniform(ch_out) if bias else None
        out = F.conv2d(images, W, b, stride=stride, padding=pad)
        dout = r.uniform(*out.shape, grad=False)
        backward(out, dout)
        t = OrderedDict(config=np.array([ch_in, rows, cols, ch_out, K, stride, pad], np.int32), images=np32(images),
                        W=np32(W))
        if bias:
            t["b"] = np32(b)
        t.update(dout=np32(dout), out=np32(out), dimages=np32(images.grad), dW=np32(W.grad))
        if bias:
            t["db"] = np32(b.grad)
        cases.append((f"b{B}_c{ch_in}_{rows}x{cols}_o{ch_out}_k{K}_s{stride}_p{pad}{'' if bias else '_nobias'}", t))
    return cases


@layer("maxpool2d")
def gen_maxpool2d():
    """maxpool2d_forward/backward (nn/conv2d.h): F.max_pool2d(images, K, stride,
    return_indices=True) (no padding, rounding down), its indices (y cols + x in the channel's
    plane) as argmax, dimages by autograd. Windows that overlap, that leave gaps, as tall as
    the image; in the "ties" cases the pixels take five values (-1, -0.5, 0, 0.5, 1), so most
    windows hold a tie, which PyTorch's CPU kernel gives to the first pixel in row-major order,
    as the C code does. config = {channels, rows, cols, K, stride}."""
    cases = []
    specs = [  # B, channels, rows, cols, K, stride, ties
        (2, 2, 6, 8, 2, 2, False), (2, 3, 7, 5, 3, 2, True), (1, 1, 5, 9, 3, 1, True), (2, 2, 7, 7, 2, 3, False),
        (1, 3, 4, 6, 4, 1, True), (2, 4, 12, 16, 2, 2, True)]
    for seed, (B, ch, rows, cols, K, stride, ties) in enumerate(specs):
        r = Draw(4300 + seed)
        images = r.uniform(B, ch, rows, cols, grad=not ties)
        if ties:
            images = (torch.round(images * 2.0) / 2.0).requires_grad_(True)
        out, argmax = F.max_pool2d(images, K, stride, return_indices=True)
        dout = r.uniform(*out.shape, grad=False)
        backward(out, dout)
        cases.append((f"b{B}_c{ch}_{rows}x{cols}_k{K}_s{stride}{'_ties' if ties else ''}", OrderedDict(
            config=np.array([ch, rows, cols, K, stride], np.int32), images=np32(images), dout=np32(dout),
            out=np32(out), argmax=argmax.numpy().astype(np.int32), dimages=np32(images.grad))))
    return cases


# ---------------------------------------------------------------------- cells

def torch_cell(kind, I, H, W_x, W_h, b):
    """A torch cell holding the C weights: weight_ih = W_x^T, weight_hh = W_h^T,
    bias_ih = b, bias_hh = 0 (the C cells have one bias; for the GRU this puts
    b_n outside the r product, as cells.h says)."""
    cls = {"rnn": torch.nn.RNNCell, "gru": torch.nn.GRUCell, "lstm": torch.nn.LSTMCell}[kind]
    cell = cls(I, H, bias=True).double()
    with torch.no_grad():
        cell.weight_ih.copy_(W_x.t())
        cell.weight_hh.copy_(W_h.t())
        cell.bias_ih.copy_(b)
        cell.bias_hh.zero_()
    return cell


def gen_cell(kind, base_seed):
    G = {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    cases = []
    shapes = [(1, 1, 1, False), (3, 7, 5, False), (4, 17, 3, True), (5, 3, 7, True), (2, 1, 17, False)]
    for seed, (B, I, H, masked) in enumerate(shapes):
        r = Draw(base_seed + seed)
        x, h_prev = r.uniform(B, I), r.uniform(B, H)
        c_prev = r.uniform(B, H, lo=-2.0, hi=2.0) if kind == "lstm" else None
        W_x, W_h, b = r.uniform(I, G * H), r.uniform(H, G * H), r.uniform(G * H)
        dh = r.uniform(B, H, grad=False)
        dc = r.uniform(B, H, grad=False) if kind == "lstm" else None
        mask = torch.ones(B, dtype=torch.int64)
        if masked:
            mask[1] = 0
            mask[B - 1] = 0
        cell = torch_cell(kind, I, H, W_x.detach(), W_h.detach(), b.detach())
        keep = (mask != 0).unsqueeze(1)
        if kind == "lstm":
            h_new, c_new = cell(x, (h_prev, c_prev))
            c = torch.where(keep, c_new, c_prev)   # a masked row keeps its state
        else:
            h_new = cell(x, h_prev)
        h = torch.where(keep, h_new, h_prev)
        loss = (h * dh).sum() + ((c * dc).sum() if kind == "lstm" else 0.0)
        loss.backward()
        t = OrderedDict(x=np32(x), h_prev=np32(h_prev))
        if kind == "lstm":
            t["c_prev"] = np32(c_prev)
        t.update(W_x=np32(W_x), W_h=np32(W_h), b=np32(b))
        if masked:
            t["mask"] = mask.numpy().astype(np.int32)
        t["dh"] = np32(dh)
        if kind == "lstm":
            t["dc"] = np32(dc)
        t["h"] = np32(h)
        if kind == "lstm":
            t["c"] = np32(c)
        t.update(dx=np32(x.grad), dh_prev=np32(h_prev.grad))
        if kind == "lstm":
            t["dc_prev"] = np32(c_prev.grad)
        # torch's gradients are for its [G*H, I] layout: transpose back to ours.
        t.update(dW_x=np32(cell.weight_ih.grad.t()), dW_h=np32(cell.weight_hh.grad.t()),
                 db=np32(cell.bias_ih.grad))
        cases.append((f"b{B}_i{I}_h{H}{'_mask' if masked else ''}", t))
    return cases


@layer("rnn_cell")
def gen_rnn_cell():
    return gen_cell("rnn", 600)


@layer("gru_cell")
def gen_gru_cell():
    return gen_cell("gru", 700)


@layer("lstm_cell")
def gen_lstm_cell():
    return gen_cell("lstm", 800)


# ------------------------------------------------- chapter 03: attention layer

SCORES = ["dot", "scaled_dot", "multiplicative", "additive"]   # = ScoreType order in attention.h


def masked_softmax(E, blocked):
    """softmax over the last axis with blocked entries at weight 0; a row with
    every entry blocked is all zeros (the C contract; torch alone gives NaN)."""
    E = E.masked_fill(blocked, -math.inf)
    dead = blocked.all(dim=-1, keepdim=True)
    A = torch.softmax(E.masked_fill(dead, 0.0), dim=-1)
    return A.masked_fill(dead, 0.0)


@layer("attention")
def gen_attention():
    """attention_forward/backward for every score function, with and without a mask
    (E = score(Q, K), A = softmax(E), Y = A V; attention.h)."""
    cases = []
    shapes = [  # N_Q, N_X, D_Q, D_V, D_A, mask
        (1, 1, 1, 1, 1, None),
        (3, 7, 5, 4, 6, None),
        (5, 5, 3, 7, 2, "causal"),
        (4, 6, 4, 3, 5, "allowed"),        # row 2 fully blocked: A = 0, Y = 0
        (3, 6, 2, 5, 3, "key_len"),
    ]
    seed = 900
    for score in SCORES:
        for (N_Q, N_X, D_Q, D_V, D_A, mask) in shapes:
            seed += 1
            r = Draw(seed)
            D_K = D_Q if score in ("dot", "scaled_dot") else D_Q + 2
            Q, K, V = r.uniform(N_Q, D_Q), r.uniform(N_X, D_K), r.uniform(N_X, D_V)
            params = OrderedDict()
            if score == "multiplicative":
                params["W"] = r.uniform(D_Q, D_K)
            if score == "additive":
                params["W_1"], params["W_2"], params["v"] = r.uniform(D_K, D_A), r.uniform(D_Q, D_A), r.uniform(D_A)
            dY = r.uniform(N_Q, D_V, grad=False)
            if score == "dot":
                E = Q @ K.t()
            elif score == "scaled_dot":
                E = Q @ K.t() / math.sqrt(D_Q)
            elif score == "multiplicative":
                E = Q @ params["W"] @ K.t()
            else:   # v . tanh(k_j W_1 + q_i W_2)
                Hid = torch.tanh((K @ params["W_1"]).unsqueeze(0) + (Q @ params["W_2"]).unsqueeze(1))
                E = Hid @ params["v"]
            blocked = torch.zeros(N_Q, N_X, dtype=torch.bool)
            extra = OrderedDict(causal=np.array([0], np.int32), key_len=np.array([0], np.int32))
            if mask == "causal":
                blocked = torch.triu(torch.ones(N_Q, N_X, dtype=torch.bool), diagonal=1)
                extra["causal"][0] = 1
            elif mask == "key_len":
                blocked[:, 4:] = True
                extra["key_len"][0] = 4
            elif mask == "allowed":
                allowed = (r.ints(0, 3, N_Q, N_X) != 0)
                allowed[0, 0] = True
                allowed[2, :] = False
                blocked = ~allowed
                extra["allowed"] = allowed.numpy().astype(np.int32)
            A = masked_softmax(E, blocked)
            Y = A @ V
            backward(Y, dY)
            t = OrderedDict(score=np.array([SCORES.index(score)], np.int32), Q=np32(Q), K=np32(K), V=np32(V))
            t.update((k, np32(v)) for k, v in params.items())
            t.update(extra)
            t.update(dY=np32(dY), Y=np32(Y), A=np32(A), dQ=np32(Q.grad), dK=np32(K.grad), dV=np32(V.grad))
            t.update((f"d{k}", np32(v.grad)) for k, v in params.items())
            cases.append((f"{score}_q{N_Q}_x{N_X}_d{D_Q}{'_' + mask if mask else ''}", t))
    return cases


# ------------------------------------------------- chapter 04: self-attention

@layer("self_attention")
def gen_self_attention():
    """Q, K, V = X W_Q, X W_K, X W_V; scaled-dot attention per sequence, with
    an optional causal mask and padded keys (j >= lens[b]); self_attention.h."""
    cases = []
    for seed, (B, N, D_in, D, causal, padded) in enumerate([
            (1, 1, 1, 1, False, False), (2, 5, 3, 4, False, False), (3, 4, 7, 2, True, False),
            (2, 7, 5, 3, False, True), (3, 6, 4, 5, True, True)]):
        r = Draw(1000 + seed)
        X = r.uniform(B, N, D_in)
        W_Q, W_K, W_V = r.uniform(D_in, D), r.uniform(D_in, D), r.uniform(D_in, D)
        dY = r.uniform(B, N, D, grad=False)
        lens = torch.full((B,), N, dtype=torch.int64)
        if padded:
            lens = r.ints(1, N + 1, B)
            lens[0] = 1
        Q, K, V = X @ W_Q, X @ W_K, X @ W_V
        E = Q @ K.transpose(1, 2) / math.sqrt(D)
        j = torch.arange(N)
        blocked = (j.view(1, 1, N) >= lens.view(B, 1, 1)).expand(B, N, N)
        if causal:
            blocked = blocked | (j.view(1, 1, N) > j.view(1, N, 1))
        A = masked_softmax(E, blocked)
        Y = A @ V
        backward(Y, dY)
        t = OrderedDict(X=np32(X), W_Q=np32(W_Q), W_K=np32(W_K), W_V=np32(W_V),
                        causal=np.array([int(causal)], np.int32))
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dY=np32(dY), Y=np32(Y), A=np32(A), dX=np32(X.grad),
                 dW_Q=np32(W_Q.grad), dW_K=np32(W_K.grad), dW_V=np32(W_V.grad))
        cases.append((f"b{B}_n{N}_din{D_in}_d{D}{'_causal' if causal else ''}{'_padded' if padded else ''}", t))
    return cases


@layer("cross_attention")
def gen_cross_attention():
    """cross_attention_forward/backward (chapter 03): Q = Q_in W_Q (project_q) or
    Q = Q_in, K = X W_K, V = X W_V, then the attention layer with any score."""
    cases = []
    specs = [  # score, N_Q, N_X, D_in_Q, D_X, D_Q(=D_K), D_V, D_A, project_q, key_len
        ("scaled_dot", 3, 5, 4, 6, 3, 2, 0, 1, 0),
        ("dot", 1, 1, 1, 1, 1, 1, 0, 0, 0),
        ("multiplicative", 4, 6, 5, 3, 5, 4, 0, 0, 4),
        ("additive", 2, 7, 3, 5, 3, 6, 4, 1, 5),
    ]
    for seed, (score, N_Q, N_X, D_in_Q, D_X, D_Q, D_V, D_A, project_q, key_len) in enumerate(specs):
        r = Draw(1100 + seed)
        if not project_q:
            D_in_Q = D_Q
        Q_in, X = r.uniform(N_Q, D_in_Q), r.uniform(N_X, D_X)
        params = OrderedDict()
        if project_q:
            params["W_Q"] = r.uniform(D_in_Q, D_Q)
        params["W_K"], params["W_V"] = r.uniform(D_X, D_Q), r.uniform(D_X, D_V)
        if score == "multiplicative":
            params["W"] = r.uniform(D_Q, D_Q)
        if score == "additive":
            params["W_1"], params["W_2"], params["v"] = r.uniform(D_Q, D_A), r.uniform(D_Q, D_A), r.uniform(D_A)
        dY = r.uniform(N_Q, D_V, grad=False)
        Q = Q_in @ params["W_Q"] if project_q else Q_in
        K, V = X @ params["W_K"], X @ params["W_V"]
        if score == "dot":
            E = Q @ K.t()
        elif score == "scaled_dot":
            E = Q @ K.t() / math.sqrt(D_Q)
        elif score == "multiplicative":
            E = Q @ params["W"] @ K.t()
        else:
            E = torch.tanh((K @ params["W_1"]).unsqueeze(0) + (Q @ params["W_2"]).unsqueeze(1)) @ params["v"]
        blocked = torch.zeros(N_Q, N_X, dtype=torch.bool)
        if key_len:
            blocked[:, key_len:] = True
        A = masked_softmax(E, blocked)
        Y = A @ V
        backward(Y, dY)
        t = OrderedDict(score=np.array([SCORES.index(score)], np.int32),
                        project_q=np.array([project_q], np.int32), key_len=np.array([key_len], np.int32),
                        Q_in=np32(Q_in), X=np32(X))
        t.update((k, np32(v)) for k, v in params.items())
        t.update(dY=np32(dY), Y=np32(Y), A=np32(A), dQ_in=np32(Q_in.grad), dX=np32(X.grad))
        t.update((f"d{k}", np32(v.grad)) for k, v in params.items())
        cases.append((f"{score}_q{N_Q}_x{N_X}{'_projq' if project_q else ''}{f'_len{key_len}' if key_len else ''}", t))
    return cases


# ------------------------------------------------- chapter 02: additive attention kernels

@layer("additive_attention")
def gen_additive_attention():
    """chapter 02's additive_attention_forward/backward, batched over B decoder rows:
    weights[b] = softmax_i(v . tanh(keys[b, i] + query[b])) over i < lens[b]
    (padded positions: weight 0, feat and dkeys 0). feat = tanh(keys + query)."""
    cases = []
    for seed, (B, T, A, short) in enumerate([(1, 1, 1, False), (2, 5, 3, False), (3, 7, 4, True),
                                             (4, 3, 17, True)]):
        r = Draw(1200 + seed)
        keys, query, v = r.uniform(B, T, A, lo=-2, hi=2), r.uniform(B, A, lo=-2, hi=2), r.uniform(A)
        lens = torch.full((B,), T, dtype=torch.int64)
        if short:
            lens = r.ints(1, T + 1, B)
            lens[0] = 1
            lens[-1] = T
        dweights = r.uniform(B, T, grad=False)
        blocked = torch.arange(T).view(1, T) >= lens.view(B, 1)
        feat = torch.tanh(keys + query.unsqueeze(1))
        feat = feat.masked_fill(blocked.unsqueeze(2), 0.0)    # C leaves padded rows of feat unwritten (0 here)
        weights = masked_softmax(feat @ v, blocked)
        backward(weights, dweights)
        cases.append((f"b{B}_t{T}_a{A}{'_padded' if short else ''}", OrderedDict(
            keys=np32(keys), query=np32(query), v=np32(v), lens=lens.numpy().astype(np.int32),
            dweights=np32(dweights), weights=np32(weights), feat=np32(feat),
            dkeys=np32(keys.grad), dquery=np32(query.grad), dv=np32(v.grad))))
    return cases


@layer("attention_context")
def gen_attention_context():
    """chapter 02's attention_context_forward/backward: context[b] = sum_i weights[b,i] values[b,i]
    (weights 0 at padded positions, as the additive attention leaves them)."""
    cases = []
    for seed, (B, T, D) in enumerate([(1, 1, 1), (2, 5, 3), (3, 7, 17)]):
        r = Draw(1300 + seed)
        weights = torch.softmax(r.uniform(B, T, lo=-3, hi=3, grad=False), dim=1)
        if T > 2:
            weights[0, T - 2:] = 0.0                        # padding
        weights = weights.float().double().requires_grad_(True)
        values, dcontext = r.uniform(B, T, D), r.uniform(B, D, grad=False)
        context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)
        backward(context, dcontext)
        cases.append((f"b{B}_t{T}_d{D}", OrderedDict(
            weights=np32(weights), values=np32(values), dcontext=np32(dcontext), context=np32(context),
            dweights=np32(weights.grad), dvalues=np32(values.grad))))
    return cases


# ------------------------------------------------- chapter 04: positional encodings

@layer("positional_encoding")
def gen_positional_encoding():
    """positional_encoding_sinusoidal (P[t, 2k] = sin(t / 10000^(2k/D)), P[t, 2k+1] = cos(...),
    odd D included) and add_positional_encoding/backward (X + P over the batch; dP = sum_b dY)."""
    cases = []
    for seed, (B, N, D) in enumerate([(1, 1, 1), (2, 7, 4), (3, 17, 5), (1, 64, 3)]):
        r = Draw(1400 + seed)
        t = torch.arange(N, dtype=torch.float64).unsqueeze(1)
        k2 = torch.arange(0, D, 2, dtype=torch.float64)          # 2k
        angle = t / torch.pow(10000.0, k2 / D)                   # [N, ceil(D/2)]
        P_sin = torch.zeros(N, D, dtype=torch.float64)
        P_sin[:, 0::2] = torch.sin(angle)
        P_sin[:, 1::2] = torch.cos(angle[:, :D // 2])
        X, P = r.uniform(B, N, D), r.uniform(N, D)
        dY = r.uniform(B, N, D, grad=False)
        Y = X + P                                               # broadcast over the batch
        backward(Y, dY)
        cases.append((f"b{B}_n{N}_d{D}", OrderedDict(
            P_sin=np32(P_sin), X=np32(X), P=np32(P), dY=np32(dY), Y=np32(Y), dP=np32(P.grad))))
    return cases


# ------------------------------------------------- chapter 05: multi-head attention

@layer("multi_head")
def gen_multi_head():
    """multi_head_forward/backward: [Q|K|V] = X W_QKV, per head h (columns h*D_H..) scaled-dot
    attention with 1/sqrt(D_H), Y = heads side by side, O = Y W_O + b_O.
    When H*D_H == D == D_out the reference is torch.nn.MultiheadAttention itself, with
    in_proj_weight = W_QKV^T, in_proj_bias = 0, out_proj.weight = W_O^T, out_proj.bias = b_O,
    attn_mask = causal, key_padding_mask = padding; otherwise (shapes MultiheadAttention
    cannot take) the same formulas written out per head."""
    cases = []
    specs = [  # B, N, D, H, D_H, D_out, causal, padded, bias
        (1, 1, 1, 1, 1, 1, False, False, True),
        (2, 5, 6, 2, 3, 6, False, False, True),
        (2, 4, 6, 3, 2, 6, True, False, True),
        (3, 6, 9, 3, 3, 9, True, True, True),
        (3, 6, 5, 3, 3, 7, False, True, True),     # H*D_H = 9 != D: written out
        (2, 7, 4, 1, 5, 3, True, True, False),     # one head, odd D_H, no bias
        (2, 5, 7, 2, 5, 4, False, False, False),
    ]
    for seed, (B, N, D, H, D_H, D_out, causal, padded, bias) in enumerate(specs):
        r = Draw(1500 + seed)
        HD = H * D_H
        X = r.uniform(B, N, D)
        W_QKV, W_O = r.uniform(D, 3 * HD), r.uniform(HD, D_out)
        b_O = r.uniform(D_out) if bias else None
        dO = r.uniform(B, N, D_out, grad=False)
        lens = torch.zeros(B, dtype=torch.int64)               # 0 = the whole N (multi_head.h)
        if padded:
            lens = r.ints(1, N + 1, B)
            lens[0] = 1
            if B > 2:
                lens[2] = 0
        key_len = torch.where(lens > 0, lens, torch.full_like(lens, N))
        j = torch.arange(N)
        pad_mask = j.view(1, N) >= key_len.view(B, 1)         # [B, N] True = padding
        causal_mask = (j.view(1, N) > j.view(N, 1)) if causal else torch.zeros(N, N, dtype=torch.bool)
        if HD == D == D_out:
            mha = torch.nn.MultiheadAttention(D, H, bias=True, batch_first=True).double()
            with torch.no_grad():
                mha.in_proj_weight.copy_(W_QKV.detach().t())
                mha.in_proj_bias.zero_()
                mha.out_proj.weight.copy_(W_O.detach().t())
                if bias:
                    mha.out_proj.bias.copy_(b_O.detach())
                else:
                    mha.out_proj.bias.zero_()
            O, A = mha(X, X, X, key_padding_mask=pad_mask if padded else None,
                       attn_mask=causal_mask if causal else None, need_weights=True,
                       average_attn_weights=False)
            backward(O, dO)
            grads = dict(dW_QKV=mha.in_proj_weight.grad.t(), dW_O=mha.out_proj.weight.grad.t())
            if bias:
                grads["db_O"] = mha.out_proj.bias.grad
        else:
            QKV = X @ W_QKV                                     # [B, N, 3 H D_H]
            Q, K, V = (QKV[..., i * HD:(i + 1) * HD].reshape(B, N, H, D_H).transpose(1, 2) for i in range(3))
            E = Q @ K.transpose(-1, -2) / math.sqrt(D_H)        # [B, H, N, N]
            blocked = pad_mask.view(B, 1, 1, N) | causal_mask.view(1, 1, N, N)
            A = torch.softmax(E.masked_fill(blocked, -math.inf), dim=-1)
            Y = (A @ V).transpose(1, 2).reshape(B, N, HD)
            O = Y @ W_O + (b_O if bias else 0.0)
            backward(O, dO)
            grads = dict(dW_QKV=W_QKV.grad, dW_O=W_O.grad)
            if bias:
                grads["db_O"] = b_O.grad
        t = OrderedDict(X=np32(X), W_QKV=np32(W_QKV), W_O=np32(W_O))
        if bias:
            t["b_O"] = np32(b_O)
        t["heads"] = np.array([H], np.int32)
        t["causal"] = np.array([int(causal)], np.int32)
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dO=np32(dO), O=np32(O), A=np32(A), dX=np32(X.grad))
        t.update((k, np32(v)) for k, v in grads.items())
        name = f"b{B}_n{N}_d{D}_h{H}_dh{D_H}_o{D_out}"
        name += ("_causal" if causal else "") + ("_padded" if padded else "") + ("" if bias else "_nobias")
        cases.append((name, t))
    return cases


# ------------------------------------------------- chapter 06: sparse attention (part 5)

def sparse_block_mask(N, P, window, n_global, causal):
    """sparse_attention.h's window and global rules (no random blocks) as a [N, N] mask, True = blocked:
    query block bi = i // P sees key block bj when |bi - bj| <= window (causal: 0 <= bi - bj <= window),
    or bi < n_global, or bj < n_global; causal also blocks every j > i."""
    b = torch.arange(N) // P
    bi, bj = b.view(N, 1), b.view(1, N)
    d = bi - bj
    window_ok = ((d >= 0) & (d <= window)) if causal else (d.abs() <= window)
    seen = window_ok | (bi < n_global) | (bj < n_global)
    if causal:
        seen = seen & (torch.arange(N).view(1, N) <= torch.arange(N).view(N, 1))
    return ~seen


@layer("sparse_attention")
def gen_sparse_attention():
    """The block's sparse self-attention (sparse_attention_hook): chapter 05's layer with the scores outside
    the pattern blocked before the softmax: [Q|K|V] = X W_QKV, per head softmax(Q K^T / sqrt(D_H) + mask) V,
    O = Y W_O + b_O; the mask a tensor from the window and global rules (random blocks 0: their draw is the
    C library's, tested against dense attention there). A padding query that sees no real key gives 0."""
    cases = []
    specs = [  # B, N, D, H, D_H, P, window, global, causal, padded
        (2, 13, 6, 2, 3, 3, 1, 0, True, False),
        (2, 13, 6, 2, 3, 3, 0, 1, True, False),
        (2, 11, 5, 1, 4, 2, 1, 1, False, True),
        (3, 16, 8, 2, 4, 4, 0, 0, False, True),
        (1, 9, 4, 2, 2, 5, 2, 1, True, False),
    ]
    for seed, (B, N, D, H, D_H, P, window, n_global, causal, padded) in enumerate(specs):
        r = Draw(4100 + seed)
        HD = H * D_H
        X = r.uniform(B, N, D)
        W_QKV, W_O, b_O = r.uniform(D, 3 * HD), r.uniform(HD, D), r.uniform(D)
        dO = r.uniform(B, N, D, grad=False)
        lens = torch.full((B,), N, dtype=torch.int64)
        if padded:
            lens = r.ints(1, N + 1, B)
        j = torch.arange(N)
        pad_mask = j.view(1, N) >= lens.view(B, 1)                # [B, N] True = padding key
        blocked = sparse_block_mask(N, P, window, n_global, causal).view(1, 1, N, N) | pad_mask.view(B, 1, 1, N)
        QKV = X @ W_QKV
        Q, K, V = (QKV[..., i * HD:(i + 1) * HD].reshape(B, N, H, D_H).transpose(1, 2) for i in range(3))
        E = (Q @ K.transpose(-1, -2) / math.sqrt(D_H)).masked_fill(blocked, -math.inf)
        sees = ~blocked.all(dim=-1, keepdim=True)                 # a row with no key: weights 0, output 0
        A = torch.where(sees, torch.softmax(E.masked_fill(~sees, 0.0), dim=-1), torch.zeros_like(E))
        Y = (A @ V).transpose(1, 2).reshape(B, N, HD)
        O = Y @ W_O + b_O
        backward(O, dO)
        t = OrderedDict(X=np32(X), W_QKV=np32(W_QKV), W_O=np32(W_O), b_O=np32(b_O))
        t["heads"] = np.array([H], np.int32)
        t["pattern"] = np.array([P, window, n_global, int(causal)], np.int32)
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dO=np32(dO), O=np32(O), dX=np32(X.grad), dW_QKV=np32(W_QKV.grad), dW_O=np32(W_O.grad),
                 db_O=np32(b_O.grad))
        name = f"b{B}_n{N}_d{D}_h{H}_dh{D_H}_p{P}_w{window}_g{n_global}"
        name += ("_causal" if causal else "") + ("_padded" if padded else "")
        cases.append((name, t))
    return cases


# ------------------------------------------------- chapter 06: Linformer (part 5)

@layer("linformer")
def gen_linformer():
    """The block's Linformer self-attention (linformer_hook): [Q|K|V] = X W_QKV; the keys and values squeezed
    along the sequence, K~ = E[:, :n] K[:n], V~ = F[:, :n] V[:n] (n = lens[b]: padding left out), shared by the
    heads; per head softmax(Q K~^T / sqrt(D_H)) V~; O = Y W_O + b_O. E, F [k, N_E] with N_E >= N (a shorter
    sequence reads their first columns)."""
    cases = []
    specs = [  # B, N, N_E, D, H, D_H, k, padded
        (2, 9, 9, 6, 2, 3, 3, False),
        (2, 9, 12, 6, 2, 3, 4, True),
        (1, 7, 7, 4, 1, 4, 7, False),
        (3, 16, 16, 8, 2, 4, 1, True),
    ]
    for seed, (B, N, N_E, D, H, D_H, k, padded) in enumerate(specs):
        r = Draw(4300 + seed)
        HD = H * D_H
        X = r.uniform(B, N, D)
        W_QKV, W_O, b_O = r.uniform(D, 3 * HD), r.uniform(HD, D), r.uniform(D)
        E, F = r.uniform(k, N_E), r.uniform(k, N_E)
        dO = r.uniform(B, N, D, grad=False)
        lens = r.ints(1, N + 1, B) if padded else torch.full((B,), N, dtype=torch.int64)
        QKV = X @ W_QKV
        Ys = []
        for b in range(B):
            n = int(lens[b])
            Q, K, V = (QKV[b, :, i * HD:(i + 1) * HD] for i in range(3))
            Kt, Vt = E[:, :n] @ K[:n], F[:, :n] @ V[:n]                      # [k, HD]
            heads = []
            for h in range(H):
                c = slice(h * D_H, (h + 1) * D_H)
                A = torch.softmax(Q[:, c] @ Kt[:, c].T / math.sqrt(D_H), dim=-1)   # [N, k]
                heads.append(A @ Vt[:, c])
            Ys.append(torch.cat(heads, dim=-1))
        O = torch.stack(Ys) @ W_O + b_O
        backward(O, dO)
        t = OrderedDict(X=np32(X), W_QKV=np32(W_QKV), W_O=np32(W_O), b_O=np32(b_O), E=np32(E), F=np32(F))
        t["heads"] = np.array([H], np.int32)
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dO=np32(dO), O=np32(O), dX=np32(X.grad), dW_QKV=np32(W_QKV.grad), dW_O=np32(W_O.grad),
                 db_O=np32(b_O.grad), dE=np32(E.grad), dF=np32(F.grad))
        name = f"b{B}_n{N}_ne{N_E}_d{D}_h{H}_dh{D_H}_k{k}" + ("_padded" if padded else "")
        cases.append((name, t))
    return cases


# ------------------------------------------------- chapter 06: rotary positions (RoPE)

ROPE_BASE = 10000.0   # common/nn/rope.h


def rope_rotate(X, H, D_H, positions):
    """RoPE written out (torch 1.13 has none): X [..., n, H D_H], row n at positions[n];
    in every head pair i = (entries 2i, 2i+1) turned by the angle positions[n] theta_i,
    theta_i = ROPE_BASE^(-2i / D_H):  x'_2i = x_2i cos - x_2i+1 sin,  x'_2i+1 = x_2i sin + x_2i+1 cos."""
    i = torch.arange(D_H // 2, dtype=torch.float64)
    theta = ROPE_BASE ** (-2.0 * i / D_H)                          # [D_H/2]
    angle = positions.double().view(-1, 1) * theta.view(1, -1)    # [n, D_H/2]
    cos, sin = torch.cos(angle), torch.sin(angle)
    pairs = X.reshape(*X.shape[:-1], H, D_H // 2, 2)               # [..., n, H, D_H/2, 2]
    a, b = pairs[..., 0], pairs[..., 1]
    cos, sin = cos.view(-1, 1, D_H // 2), sin.view(-1, 1, D_H // 2)   # broadcast over the heads
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(X.shape)


@layer("rope")
def gen_rope():
    """rope_forward/backward: X [N, H D_H] with row n at position pos0 + n, Y = the rotation
    (rope_rotate), dX = autograd's gradient through it."""
    cases = []
    for seed, (N, H, D_H, pos0) in enumerate([(1, 1, 2, 0), (5, 2, 4, 0), (7, 3, 6, 11), (3, 1, 16, 1000),
                                              (4, 2, 8, 4093)]):
        r = Draw(2600 + seed)
        X = r.uniform(N, H * D_H)
        dY = r.uniform(N, H * D_H, grad=False)
        Y = rope_rotate(X, H, D_H, torch.arange(N) + pos0)
        backward(Y, dY)
        cases.append((f"n{N}_h{H}_dh{D_H}_pos{pos0}", OrderedDict(
            X=np32(X), dims=np.array([H, D_H, pos0], np.int32), dY=np32(dY), Y=np32(Y), dX=np32(X.grad))))
    return cases


@layer("multi_head_rope")
def gen_multi_head_rope():
    """multi_head_forward/backward with spec.rope = 1: gen_multi_head's formulas written out
    per head, with Q and K of each sequence rotated by rope_rotate at positions 0..N-1 before
    the scores. fused = 1 runs the C layer's fused path on the same case."""
    cases = []
    specs = [  # B, N, D, H, D_H, D_out, causal, padded, fused
        (1, 1, 2, 1, 2, 2, False, False, False),
        (2, 5, 6, 2, 4, 6, False, False, False),
        (2, 6, 8, 2, 4, 8, True, False, False),
        (3, 7, 9, 3, 2, 5, True, True, False),
        (3, 7, 9, 3, 2, 5, True, True, True),
        (2, 9, 6, 1, 6, 6, False, True, True),
    ]
    for seed, (B, N, D, H, D_H, D_out, causal, padded, fused) in enumerate(specs):
        r = Draw(2700 + seed)
        HD = H * D_H
        X = r.uniform(B, N, D)
        W_QKV, W_O, b_O = r.uniform(D, 3 * HD), r.uniform(HD, D_out), r.uniform(D_out)
        dO = r.uniform(B, N, D_out, grad=False)
        lens = torch.zeros(B, dtype=torch.int64)
        if padded:
            lens = r.ints(1, N + 1, B)
            lens[0] = 1
        key_len = torch.where(lens > 0, lens, torch.full_like(lens, N))
        j = torch.arange(N)
        pad_mask = j.view(1, N) >= key_len.view(B, 1)
        causal_mask = (j.view(1, N) > j.view(N, 1)) if causal else torch.zeros(N, N, dtype=torch.bool)
        QKV = X @ W_QKV
        Qr = rope_rotate(QKV[..., :HD], H, D_H, j)                   # [B, N, H D_H], rotated
        Kr = rope_rotate(QKV[..., HD:2 * HD], H, D_H, j)
        Q, K, V = (T.reshape(B, N, H, D_H).transpose(1, 2) for T in (Qr, Kr, QKV[..., 2 * HD:]))
        E = Q @ K.transpose(-1, -2) / math.sqrt(D_H)
        blocked = pad_mask.view(B, 1, 1, N) | causal_mask.view(1, 1, N, N)
        A = torch.softmax(E.masked_fill(blocked, -math.inf), dim=-1)
        Y = (A @ V).transpose(1, 2).reshape(B, N, HD)
        O = Y @ W_O + b_O
        backward(O, dO)
        t = OrderedDict(X=np32(X), W_QKV=np32(W_QKV), W_O=np32(W_O), b_O=np32(b_O))
        t["heads"] = np.array([H], np.int32)
        t["causal"] = np.array([int(causal)], np.int32)
        t["rope"] = np.array([1], np.int32)
        t["fused"] = np.array([int(fused)], np.int32)
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dO=np32(dO), O=np32(O), A=np32(A), dX=np32(X.grad), dW_QKV=np32(W_QKV.grad),
                 dW_O=np32(W_O.grad), db_O=np32(b_O.grad))
        name = f"b{B}_n{N}_d{D}_h{H}_dh{D_H}_o{D_out}"
        name += ("_causal" if causal else "") + ("_padded" if padded else "") + ("_fused" if fused else "")
        cases.append((name, t))
    return cases


# ------------------------------------------------- chapter 06: the transformer block

NORM_EPS = float(np.float32(1e-5))   # BLOCK_NORM_EPS (block.h), as the float32 the C code uses


@layer("rmsnorm")
def gen_rmsnorm():
    """rmsnorm_forward/backward (transformer_layers.h), written out in torch (1.13 has no
    nn.RMSNorm): rstd = 1 / sqrt(mean(x^2) + eps), out = x rstd gamma."""
    cases = []
    specs = [  # N, D, eps, rows
        (1, 1, 1e-5, "plain"),
        (3, 7, 1e-5, "plain"),
        (5, 17, 1e-6, "offset"),     # rows centred at 30: RMSNorm does not subtract the mean
        (2, 64, 1e-5, "zero"),       # row 1 all zero: out = 0
    ]
    for seed, (N, D, eps, rows) in enumerate(specs):
        r = Draw(1700 + seed)
        x = norm_rows(r, N, D, rows)
        gamma = r.uniform(D, lo=-1.5, hi=1.5)
        dout = r.uniform(N, D, grad=False)
        eps32 = float(np.float32(eps))
        rstd = torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + eps32)
        out = x * rstd * gamma
        backward(out, dout)
        cases.append((f"n{N}_d{D}{'' if rows == 'plain' else '_' + rows}", OrderedDict(
            x=np32(x), gamma=np32(gamma), eps=np.array([eps32], np.float32), dout=np32(dout),
            out=np32(out), rstd=np32(rstd.squeeze(1)), dx=np32(x.grad), dgamma=np32(gamma.grad))))
    return cases


@layer("swiglu")
def gen_swiglu():
    """swiglu_forward/backward (transformer_layers.h): h = silu(a) g, silu = F.silu."""
    cases = []
    for seed, n in enumerate([1, 7, 33]):
        r = Draw(1800 + seed)
        a, g = r.uniform(n, lo=-6.0, hi=6.0), r.uniform(n, lo=-2.0, hi=2.0)
        if n == 33:                            # zero, large and very negative gates
            with torch.no_grad():
                a[:5] = torch.tensor([0.0, 30.0, -30.0, 1e-4, -1e-4], dtype=torch.float64)
        dh = r.uniform(n, grad=False)
        h = F.silu(a) * g
        backward(h, dh)
        cases.append((f"n{n}", OrderedDict(a=np32(a), g=np32(g), dh=np32(dh), h=np32(h),
                                           da=np32(a.grad), dg=np32(g.grad))))
    return cases


@layer("moe")
def gen_moe():
    """moe_forward/backward (chapters/06_transformer/moe.h), written out: p =
    softmax(U W_r), the k largest (torch.topk), g = p or p renormalised over
    the k, each pair through its expert's MLP, out = sum g MLP_e(u); with a
    capacity (training), ceil(c R k / E) pairs per expert, first choices
    first, rows in order. L = sum(out * dout) + alpha E sum_e f_e P_e.
    config = {E, k, renorm, mlp (BlockMlp), train}; experts: the C layout,
    W_1 | b_1 | W_3 | W_2 | b_2 of expert 0, then 1, ..."""
    cases = []
    for seed, (R, D, F_, E, k, renorm, mlp, alpha, cap) in enumerate([
            (7, 5, 6, 4, 1, 0, "gelu", 0.1, 0.0), (9, 6, 4, 4, 2, 1, "swiglu", 0.05, 0.0),
            (11, 4, 5, 3, 2, 0, "gelu", 0.0, 1.0), (5, 3, 4, 6, 3, 1, "relu", 0.2, 0.0)]):
        r = Draw(2600 + seed)
        U, W_r = r.uniform(R, D), r.uniform(D, E)
        swiglu = mlp == "swiglu"
        experts = []
        for e in range(E):
            x = OrderedDict(W_1=r.uniform(D, F_))
            if not swiglu:
                x["b_1"] = r.uniform(F_, lo=-0.5, hi=0.5)
            else:
                x["W_3"] = r.uniform(D, F_)
            x["W_2"] = r.uniform(F_, D)
            if not swiglu:
                x["b_2"] = r.uniform(D, lo=-0.5, hi=0.5)
            experts.append(x)
        dout = r.uniform(R, D, grad=False)

        def expert(x, u):
            a = u @ x["W_1"] + (x["b_1"] if "b_1" in x else 0)
            h = F.silu(a) * (u @ x["W_3"]) if swiglu else (F.gelu(a) if mlp == "gelu" else F.relu(a))
            return h @ x["W_2"] + (x["b_2"] if "b_2" in x else 0)

        p = F.softmax(U @ W_r, dim=-1)                          # [R, E]
        top_p, top_e = torch.topk(p, k, dim=-1)                 # [R, k], the most likely first
        g = top_p / top_p.sum(-1, keepdim=True) if renorm else top_p
        limit = math.ceil(cap * R * k / E) if cap > 0 else R
        taken, keep = [0] * E, torch.zeros(R, k, dtype=torch.bool)
        for j in range(k):                                      # first choices first, rows in order
            for t in range(R):
                e = int(top_e[t, j])
                if taken[e] < limit:
                    taken[e] += 1
                    keep[t, j] = True
        rows = []
        for t in range(R):
            y = torch.zeros(D, dtype=torch.float64)
            for j in range(k):
                if keep[t, j]:
                    y = y + g[t, j] * expert(experts[int(top_e[t, j])], U[t])
            rows.append(y)
        out = torch.stack(rows)
        f = torch.tensor([float((top_e == e).sum()) / (R * k) for e in range(E)], dtype=torch.float64)
        aux = E * (f * p.mean(0)).sum()
        ((out * dout).sum() + alpha * aux).backward()
        flat = torch.cat([v.reshape(-1) for x in experts for v in x.values()])
        dflat = torch.cat([(v.grad if v.grad is not None else torch.zeros_like(v)).reshape(-1)   # idle: 0
                           for x in experts for v in x.values()])
        t = OrderedDict(config=np.array([E, k, renorm, MLPS.index(mlp), 1 if cap > 0 else 0], np.int32),
                        alpha=np.array([alpha], np.float32), capacity=np.array([cap], np.float32),
                        U=np32(U), W_r=np32(W_r), experts=np32(flat), dout=np32(dout), out=np32(out),
                        P=np32(p), choice=top_e.numpy().astype(np.int32),
                        aux=np.array([aux.item()], np.float32), dropped=np.array([int((~keep).sum())], np.int32),
                        dU=np32(U.grad), dW_r=np32(W_r.grad), dexperts=np32(dflat))
        cases.append((f"r{R}_e{E}_k{k}_{mlp}{'_renorm' if renorm else ''}{'_capacity' if cap else ''}", t))
    return cases


# = BlockNormPlace, BlockNorm, BlockMlp in block.h
PLACES = ["post", "pre"]
NORMS = ["layernorm", "rmsnorm", "none"]
MLPS = ["gelu", "relu", "swiglu", "none"]


def block_written_out(X, p, H, place, norm, mlp, blocked, M=None, mem_blocked=None):
    """The block of block.h in torch formulas: attention as in gen_multi_head (scaled dot
    per head over column blocks of X W_QKV), then the norms, the MLP and the residuals.
    p: tensor name -> tensor; blocked [B, 1 or H, N, N] True = not attended.
    A decoder block (M, the memory [B, N_M, D], given) has the cross-attention sublayer
    between the two: queries U cross_W_Q, keys and values M cross_W_KV = [K | V],
    mem_blocked [B, 1, 1, N_M] True = padding; its norm is normc."""
    B, N, D = X.shape
    HD = p["W_O"].shape[0]
    D_H = HD // H

    def heads(T):        # [B, n, H D_H] -> [B, H, n, D_H]
        return T.reshape(B, T.shape[1], H, D_H).transpose(1, 2)

    def attend(Q, K, V, mask):   # per head: softmax(Q K^T / sqrt(D_H)) V, heads concatenated
        E = Q @ K.transpose(-1, -2) / math.sqrt(D_H)
        A = torch.softmax(E.masked_fill(mask, -math.inf), dim=-1)
        return (A @ V).transpose(1, 2).reshape(B, Q.shape[2], HD)

    def attention(U):
        QKV = U @ p["W_QKV"]
        Q, K, V = (heads(QKV[..., i * HD:(i + 1) * HD]) for i in range(3))
        return attend(Q, K, V, blocked) @ p["W_O"] + p["b_O"]

    def cross(U):
        KV = M @ p["cross_W_KV"]
        Q, K, V = heads(U @ p["cross_W_Q"]), heads(KV[..., :HD]), heads(KV[..., HD:])
        return attend(Q, K, V, mem_blocked) @ p["cross_W_O"] + p["cross_b_O"]

    def normed(x, which):
        if norm == "layernorm":
            return F.layer_norm(x, (D,), p[which + "_gamma"], p[which + "_beta"], NORM_EPS)
        if norm == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + NORM_EPS) * p[which + "_gamma"]
        return x

    def mlp_of(U):
        if mlp == "swiglu":
            return (F.silu(U @ p["W_1"]) * (U @ p["W_3"])) @ p["W_2"]
        act = F.gelu if mlp == "gelu" else torch.relu
        return act(U @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]

    sublayers = [(attention, "norm1")]            # (branch, its norm), in order
    if M is not None:
        sublayers.append((cross, "normc"))
    if mlp != "none":
        sublayers.append((mlp_of, "norm2"))
    Z = X
    for branch, which in sublayers:
        Z = Z + branch(normed(Z, which)) if place == "pre" else normed(Z + branch(Z), which)
    return Z


def block_encoder_layer(X, p, H, place, F_, src_mask, pad_mask):
    """The same block as torch.nn.TransformerEncoderLayer (LayerNorm, exact GELU, dropout 0),
    with the C weights mapped in: in_proj_weight = W_QKV^T (in_proj_bias 0), out_proj = W_O^T
    and b_O, linear1 = W_1^T and b_1, linear2 = W_2^T and b_2, norm1, norm2. Returns Y and the
    gradients' mapping back to the C layout (call after backward)."""
    D = X.shape[2]
    tel = torch.nn.TransformerEncoderLayer(d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0,
                                           activation="gelu", layer_norm_eps=NORM_EPS, batch_first=True,
                                           norm_first=(place == "pre")).double()
    with torch.no_grad():
        tel.self_attn.in_proj_weight.copy_(p["W_QKV"].t())
        tel.self_attn.in_proj_bias.zero_()
        tel.self_attn.out_proj.weight.copy_(p["W_O"].t())
        tel.self_attn.out_proj.bias.copy_(p["b_O"])
        tel.linear1.weight.copy_(p["W_1"].t())
        tel.linear1.bias.copy_(p["b_1"])
        tel.linear2.weight.copy_(p["W_2"].t())
        tel.linear2.bias.copy_(p["b_2"])
        for which, module in (("norm1", tel.norm1), ("norm2", tel.norm2)):
            module.weight.copy_(p[which + "_gamma"])
            module.bias.copy_(p[which + "_beta"])
    Y = tel(X, src_mask=src_mask, src_key_padding_mask=pad_mask)

    def grads():
        return OrderedDict(
            dW_QKV=tel.self_attn.in_proj_weight.grad.t(), dW_O=tel.self_attn.out_proj.weight.grad.t(),
            db_O=tel.self_attn.out_proj.bias.grad, dnorm1_gamma=tel.norm1.weight.grad,
            dnorm1_beta=tel.norm1.bias.grad, dW_1=tel.linear1.weight.grad.t(), db_1=tel.linear1.bias.grad,
            dW_2=tel.linear2.weight.grad.t(), db_2=tel.linear2.bias.grad,
            dnorm2_gamma=tel.norm2.weight.grad, dnorm2_beta=tel.norm2.bias.grad)
    return Y, grads


@layer("block")
def gen_block():
    """block_forward/backward (chapter 06, block.h). LayerNorm + GELU blocks (post- and
    pre-norm) are torch.nn.TransformerEncoderLayer itself (checked here against the written-out
    formulas too); the other combinations (RMSNorm, SwiGLU, ReLU, no norm, no MLP, H D_H != D)
    are written out in torch (block_written_out). Dropout 0."""
    cases = []
    specs = [  # B, N, D, H, D_H, F, place, norm, mlp, causal, padded
        (1, 1, 4, 1, 4, 8, "post", "layernorm", "gelu", False, False),
        (2, 5, 6, 2, 3, 10, "post", "layernorm", "gelu", False, False),
        (2, 6, 8, 2, 4, 16, "pre", "layernorm", "gelu", True, True),
        (3, 7, 9, 3, 3, 12, "pre", "layernorm", "gelu", False, True),
        (2, 5, 6, 2, 3, 10, "post", "layernorm", "gelu", True, True),
        (2, 5, 6, 2, 3, 10, "pre", "rmsnorm", "swiglu", True, False),
        (2, 6, 8, 2, 4, 12, "post", "rmsnorm", "swiglu", False, True),
        (2, 5, 6, 3, 3, 7, "pre", "rmsnorm", "gelu", True, False),      # H D_H = 9 != D
        (2, 4, 6, 2, 3, 9, "post", "layernorm", "relu", False, False),
        (1, 6, 5, 1, 5, 11, "post", "rmsnorm", "relu", True, False),
        (2, 5, 6, 2, 3, 8, "pre", "none", "swiglu", True, True),
        (2, 5, 6, 2, 3, 0, "post", "none", "none", True, False),        # = X + chapter 05
        (2, 5, 6, 2, 3, 0, "pre", "layernorm", "none", False, True),
    ]
    for seed, (B, N, D, H, D_H, F_, place, norm, mlp, causal, padded) in enumerate(specs):
        r = Draw(1900 + seed)
        HD = H * D_H
        X = r.uniform(B, N, D)
        p = OrderedDict(W_QKV=r.uniform(D, 3 * HD), W_O=r.uniform(HD, D), b_O=r.uniform(D))
        norm_tensors = []
        if norm != "none":
            norm_tensors = ["norm1_gamma"] + (["norm1_beta"] if norm == "layernorm" else [])
        for name in norm_tensors:
            p[name] = r.uniform(D, lo=0.5, hi=1.5) if name.endswith("gamma") else r.uniform(D)
        if mlp != "none":
            p["W_1"] = r.uniform(D, F_)
            if mlp == "swiglu":
                p["W_3"] = r.uniform(D, F_)
            else:
                p["b_1"] = r.uniform(F_)
            p["W_2"] = r.uniform(F_, D)
            if mlp != "swiglu":
                p["b_2"] = r.uniform(D)
            for name in norm_tensors:
                name2 = name.replace("norm1", "norm2")
                p[name2] = r.uniform(D, lo=0.5, hi=1.5) if name.endswith("gamma") else r.uniform(D)
        dY = r.uniform(B, N, D, grad=False)
        lens = torch.zeros(B, dtype=torch.int64)                # 0 = the whole N (block.h)
        if padded:
            lens = r.ints(1, N + 1, B)
            lens[0] = max(1, N - 2)
            if B > 2:
                lens[2] = 0
        key_len = torch.where(lens > 0, lens, torch.full_like(lens, N))
        j = torch.arange(N)
        pad_mask = j.view(1, N) >= key_len.view(B, 1)          # [B, N] True = padding
        causal_mask = (j.view(1, N) > j.view(N, 1)) if causal else torch.zeros(N, N, dtype=torch.bool)
        blocked = pad_mask.view(B, 1, 1, N) | causal_mask.view(1, 1, N, N)

        if norm == "layernorm" and mlp == "gelu" and HD == D:
            Y, grads_of = block_encoder_layer(X, p, H, place, F_, causal_mask if causal else None,
                                              pad_mask if padded else None)
            with torch.no_grad():                               # the written-out formulas agree
                Y_w = block_written_out(X, p, H, place, norm, mlp, blocked)
                assert torch.allclose(Y, Y_w, rtol=1e-12, atol=1e-12), "TransformerEncoderLayer != written out"
            backward(Y, dY)
            grads = grads_of()
        else:
            Y = block_written_out(X, p, H, place, norm, mlp, blocked)
            backward(Y, dY)
            grads = OrderedDict((f"d{k}", v.grad) for k, v in p.items())
        t = OrderedDict(X=np32(X))
        t.update((k, np32(v)) for k, v in p.items())
        t["config"] = np.array([H, PLACES.index(place), NORMS.index(norm), MLPS.index(mlp), int(causal)],
                               np.int32)
        if padded:
            t["lens"] = lens.numpy().astype(np.int32)
        t.update(dY=np32(dY), Y=np32(Y), dX=np32(X.grad))
        t.update((k, np32(v)) for k, v in grads.items())
        name = f"b{B}_n{N}_d{D}_h{H}_dh{D_H}_f{F_}_{place}_{norm}_{mlp}"
        name += ("_causal" if causal else "") + ("_padded" if padded else "")
        cases.append((name, t))
    return cases


def block_decoder_layer(X, M, p, H, place, F_, tgt_mask, tgt_pad_mask, mem_pad_mask):
    """The decoder block as torch.nn.TransformerDecoderLayer (LayerNorm, exact GELU, dropout 0),
    with the C weights mapped in: self_attn as the encoder layer's (in_proj_weight = W_QKV^T,
    in_proj_bias 0), multihead_attn.in_proj_weight = [cross_W_Q | cross_W_KV]^T (rows 0..D-1
    the queries', rows D..3D-1 the keys' and values'), its in_proj_bias 0, out_proj =
    cross_W_O^T and cross_b_O. torch's three norms, in order: norm1 after self-attention,
    norm2 after cross-attention, norm3 after the MLP = the C block's norm1, normc, norm2.
    Returns Y and the gradients' mapping back to the C layout (call after backward)."""
    D = X.shape[2]
    tdl = torch.nn.TransformerDecoderLayer(d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0,
                                           activation="gelu", layer_norm_eps=NORM_EPS, batch_first=True,
                                           norm_first=(place == "pre")).double()
    norms = (("norm1", tdl.norm1), ("normc", tdl.norm2), ("norm2", tdl.norm3))
    with torch.no_grad():
        tdl.self_attn.in_proj_weight.copy_(p["W_QKV"].t())
        tdl.self_attn.in_proj_bias.zero_()
        tdl.self_attn.out_proj.weight.copy_(p["W_O"].t())
        tdl.self_attn.out_proj.bias.copy_(p["b_O"])
        tdl.multihead_attn.in_proj_weight.copy_(torch.cat([p["cross_W_Q"], p["cross_W_KV"]], dim=1).t())
        tdl.multihead_attn.in_proj_bias.zero_()
        tdl.multihead_attn.out_proj.weight.copy_(p["cross_W_O"].t())
        tdl.multihead_attn.out_proj.bias.copy_(p["cross_b_O"])
        tdl.linear1.weight.copy_(p["W_1"].t())
        tdl.linear1.bias.copy_(p["b_1"])
        tdl.linear2.weight.copy_(p["W_2"].t())
        tdl.linear2.bias.copy_(p["b_2"])
        for which, module in norms:
            module.weight.copy_(p[which + "_gamma"])
            module.bias.copy_(p[which + "_beta"])
    Y = tdl(X, M, tgt_mask=tgt_mask, tgt_key_padding_mask=tgt_pad_mask, memory_key_padding_mask=mem_pad_mask)

    def grads():
        g = OrderedDict(dW_QKV=tdl.self_attn.in_proj_weight.grad.t(), dW_O=tdl.self_attn.out_proj.weight.grad.t(),
                        db_O=tdl.self_attn.out_proj.bias.grad)
        cross_in = tdl.multihead_attn.in_proj_weight.grad.t()       # [D, 3D] = [W_Q | W_K | W_V]
        g.update(dcross_W_Q=cross_in[:, :D], dcross_W_KV=cross_in[:, D:],
                 dcross_W_O=tdl.multihead_attn.out_proj.weight.grad.t(),
                 dcross_b_O=tdl.multihead_attn.out_proj.bias.grad,
                 dW_1=tdl.linear1.weight.grad.t(), db_1=tdl.linear1.bias.grad,
                 dW_2=tdl.linear2.weight.grad.t(), db_2=tdl.linear2.bias.grad)
        for which, module in norms:
            g[f"d{which}_gamma"], g[f"d{which}_beta"] = module.weight.grad, module.bias.grad
        return g
    return Y, grads


def padding_lens(r, B, N):
    """lens [B] of a padded batch (0 = the whole N, block.h): row 0 of length N - 2 (at
    least 1), row 2 (if any) whole, the others drawn from 1..N."""
    lens = r.ints(1, N + 1, B)
    lens[0] = max(1, N - 2)
    if B > 2:
        lens[2] = 0
    return lens


def padding_mask(lens, N):
    """[B, N] True = padding, for lens as padding_lens gives them."""
    key_len = torch.where(lens > 0, lens, torch.full_like(lens, N))
    return torch.arange(N).view(1, N) >= key_len.view(-1, 1)


@layer("decoder_block")
def gen_decoder_block():
    """block_forward/backward of a DECODER block (spec.cross = 1, block.h): causal
    self-attention, cross-attention to a memory M [B, N_M, D] (padded: mem_lens), the MLP.
    Y, dX, dM and every parameter's gradient. LayerNorm + GELU blocks with H D_H = D are
    torch.nn.TransformerDecoderLayer itself (checked against the written-out formulas too);
    the others are written out in torch (block_written_out with M). Dropout 0."""
    cases = []
    specs = [  # B, N, N_M, D, H, D_H, F, place, norm, mlp, tgt_padded, mem_padded
        (1, 1, 1, 4, 1, 4, 8, "post", "layernorm", "gelu", False, False),
        (2, 5, 4, 6, 2, 3, 10, "post", "layernorm", "gelu", False, True),
        (2, 6, 7, 8, 2, 4, 16, "pre", "layernorm", "gelu", False, True),
        (3, 4, 6, 9, 3, 3, 12, "pre", "layernorm", "gelu", True, True),    # padded target too
        (2, 5, 3, 6, 2, 3, 10, "post", "layernorm", "gelu", True, False),  # N_M < N
        (2, 5, 4, 6, 2, 3, 10, "pre", "rmsnorm", "swiglu", False, True),
        (2, 6, 5, 8, 2, 4, 12, "post", "rmsnorm", "swiglu", False, True),
        (2, 4, 5, 6, 3, 3, 7, "pre", "rmsnorm", "gelu", False, True),      # H D_H = 9 != D
        (2, 4, 3, 6, 2, 3, 9, "post", "layernorm", "relu", False, True),
        (2, 5, 4, 6, 2, 3, 8, "pre", "none", "swiglu", False, True),
        (2, 5, 4, 6, 2, 3, 0, "pre", "layernorm", "none", False, True),
    ]
    for seed, (B, N, N_M, D, H, D_H, F_, place, norm, mlp, tgt_padded, mem_padded) in enumerate(specs):
        r = Draw(2000 + seed)
        HD = H * D_H

        def weight(I, O):
            # uniform with variance 1 / I (LeCun): each branch's output stays of size ~1. With
            # U(-1, 1) matrices the three un-normalised branches of a pre-norm decoder block
            # sum to |Y| ~ 15, and where those terms cancel the float32 rounding of them
            # (~15 x 1e-7 each) is the error, not the C code's: nearly all of Y's atol.
            a = math.sqrt(3.0 / I)
            return r.uniform(I, O, lo=-a, hi=a)
        X, M = r.uniform(B, N, D), r.uniform(B, N_M, D)
        p = OrderedDict(W_QKV=weight(D, 3 * HD), W_O=weight(HD, D), b_O=r.uniform(D))

        def add_norm(which):
            if norm != "none":
                p[which + "_gamma"] = r.uniform(D, lo=0.5, hi=1.5)
            if norm == "layernorm":
                p[which + "_beta"] = r.uniform(D)
        add_norm("norm1")
        p.update(cross_W_Q=weight(D, HD), cross_W_KV=weight(D, 2 * HD), cross_W_O=weight(HD, D),
                 cross_b_O=r.uniform(D))
        add_norm("normc")
        if mlp != "none":
            p["W_1"] = weight(D, F_)
            if mlp == "swiglu":
                p["W_3"] = weight(D, F_)
            else:
                p["b_1"] = r.uniform(F_)
            p["W_2"] = weight(F_, D)
            if mlp != "swiglu":
                p["b_2"] = r.uniform(D)
            add_norm("norm2")
        dY = r.uniform(B, N, D, grad=False)
        lens = padding_lens(r, B, N) if tgt_padded else torch.zeros(B, dtype=torch.int64)
        mem_lens = padding_lens(r, B, N_M) if mem_padded else torch.zeros(B, dtype=torch.int64)
        pad_mask, mem_pad_mask = padding_mask(lens, N), padding_mask(mem_lens, N_M)
        j = torch.arange(N)
        causal_mask = j.view(1, N) > j.view(N, 1)
        blocked = pad_mask.view(B, 1, 1, N) | causal_mask.view(1, 1, N, N)
        mem_blocked = mem_pad_mask.view(B, 1, 1, N_M)

        if norm == "layernorm" and mlp == "gelu" and HD == D:
            Y, grads_of = block_decoder_layer(X, M, p, H, place, F_, causal_mask, pad_mask if tgt_padded else None,
                                              mem_pad_mask if mem_padded else None)
            with torch.no_grad():                               # the written-out formulas agree
                Y_w = block_written_out(X, p, H, place, norm, mlp, blocked, M, mem_blocked)
                assert torch.allclose(Y, Y_w, rtol=1e-12, atol=1e-12), "TransformerDecoderLayer != written out"
            backward(Y, dY)
            grads = grads_of()
        else:
            Y = block_written_out(X, p, H, place, norm, mlp, blocked, M, mem_blocked)
            backward(Y, dY)
            grads = OrderedDict((f"d{k}", v.grad) for k, v in p.items())
        t = OrderedDict(X=np32(X), M=np32(M))
        t.update((k, np32(v)) for k, v in p.items())
        t["config"] = np.array([H, PLACES.index(place), NORMS.index(norm), MLPS.index(mlp), 1], np.int32)
        if tgt_padded:
            t["lens"] = lens.numpy().astype(np.int32)
        if mem_padded:
            t["mem_lens"] = mem_lens.numpy().astype(np.int32)
        t.update(dY=np32(dY), Y=np32(Y), dX=np32(X.grad), dM=np32(M.grad))
        t.update((k, np32(v)) for k, v in grads.items())
        name = f"b{B}_n{N}_m{N_M}_d{D}_h{H}_dh{D_H}_f{F_}_{place}_{norm}_{mlp}"
        name += ("_padded" if tgt_padded else "") + ("_mempadded" if mem_padded else "")
        cases.append((name, t))
    return cases


# ------------------------------------------------- chapter 07: the Vision Transformer

@layer("patch_embed")
def gen_patch_embed():
    """patch_embed_forward/backward (chapter 07, patch_embed.h): F.conv2d with stride P,
    kernel K and padding (K - P) / 2 (K = P: the ViT's non-overlapping patches), its weight
    [D, channels, K, K] = W^T reshaped (W [D_in, D]); out = conv.flatten(2).transpose(1, 2)
    [B, N, D]; dimages, dW, db by autograd. config = {channels, rows, cols, P, K}."""
    cases = []
    specs = [(1, 1, 28, 28, 7, 7, 5), (2, 1, 28, 28, 4, 4, 3), (3, 1, 28, 28, 14, 14, 2), (2, 3, 12, 8, 4, 4, 6),
             (1, 2, 5, 5, 1, 1, 3), (2, 1, 28, 28, 4, 8, 4), (2, 3, 12, 8, 4, 6, 3), (1, 1, 6, 6, 3, 5, 2)]
    for seed, (B, ch, rows, cols, P, K, D) in enumerate(specs):
        r = Draw(2100 + seed)
        D_in = ch * K * K
        N = (rows // P) * (cols // P)
        images, W, b = r.uniform(B, ch, rows, cols), r.uniform(D_in, D), r.uniform(D)
        dout = r.uniform(B, N, D, grad=False)
        out = F.conv2d(images, W.t().reshape(D, ch, K, K), b, stride=P, padding=(K - P) // 2)
        out = out.flatten(2).transpose(1, 2)
        backward(out, dout)
        cases.append((f"b{B}_c{ch}_{rows}x{cols}_p{P}_k{K}_d{D}", OrderedDict(
            config=np.array([ch, rows, cols, P, K], np.int32), images=np32(images), W=np32(W), b=np32(b),
            dout=np32(dout), out=np32(out), dimages=np32(images.grad), dW=np32(W.grad), db=np32(b.grad))))
    return cases


def sinusoids_2d(grid_rows, grid_cols, D, has_cls):
    """vit_positions_2d (vit.h): chapter 04's 1-D sinusoids of the row in the first D/2
    numbers, of the column in the last D/2; the class token's row is 0."""
    def sinusoids(n, d):
        t = torch.arange(n, dtype=torch.float64).unsqueeze(1)
        angle = t / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
        P = torch.zeros(n, d, dtype=torch.float64)
        P[:, 0::2] = torch.sin(angle)
        P[:, 1::2] = torch.cos(angle[:, :d // 2])
        return P
    half = D // 2
    Pr, Pc = sinusoids(grid_rows, half), sinusoids(grid_cols, half)
    rows = [torch.cat([Pr[i // grid_cols], Pc[i % grid_cols]]) for i in range(grid_rows * grid_cols)]
    P = torch.stack(rows)
    return torch.cat([torch.zeros(1, D, dtype=torch.float64), P]) if has_cls else P


@layer("vit")
def gen_vit():
    """The whole chapter 07 ViT (vit.h), forward and backward: F.conv2d patches (stride =
    kernel), the class token or none, learned or 2-D sinusoidal positions, L pre-norm
    torch.nn.TransformerEncoderLayer blocks (GELU, dropout 0, in_proj_bias 0, weights mapped
    as in block.bin), a final F.layer_norm, class-token or mean pooling, a linear head and
    F.cross_entropy (the mean over the batch). Tensors carry the C parameter names
    (vit_create's params_add order): patch.W, patch.b, cls, pos, enc<l> (block l's whole
    flat buffer in block_weights_view order), enc_norm.gamma/beta, head.W, head.b; the
    gradient of each is d<name>. config = {channels, rows, cols, P, D, layers, heads, F,
    pool (0 cls, 1 mean), pos (0 learned, 1 sinusoidal2d), classes, K (the patch kernel)}."""
    cases = []
    specs = [  # B, channels, rows, cols, P, K, D, L, H, F, pool, pos, C
        (3, 1, 8, 8, 4, 4, 8, 2, 2, 12, "cls", "learned", 3),
        (2, 1, 12, 8, 4, 4, 8, 2, 2, 16, "mean", "sinusoidal2d", 4),
        (2, 3, 8, 8, 2, 2, 12, 1, 3, 10, "cls", "sinusoidal2d", 5),
        (4, 1, 28, 28, 7, 7, 8, 2, 4, 16, "mean", "learned", 10),
        (3, 1, 12, 12, 4, 8, 8, 2, 2, 12, "cls", "learned", 4),
    ]
    for seed, (B, ch, rows, cols, P, K, D, L, H, F_, pool, pos, C) in enumerate(specs):
        r = Draw(2200 + seed)
        D_in, g_r, g_c = ch * K * K, rows // P, cols // P
        N = g_r * g_c
        T = N + (pool == "cls")
        images = r.uniform(B, ch, rows, cols, grad=False)
        targets = r.ints(0, C, B)
        prm = OrderedDict()
        prm["patch.W"] = r.uniform(D_in, D, lo=-1 / math.sqrt(D_in), hi=1 / math.sqrt(D_in))
        prm["patch.b"] = r.uniform(D, lo=-0.1, hi=0.1)
        if pool == "cls":
            prm["cls"] = r.uniform(D, lo=-0.5, hi=0.5)
        if pos == "learned":
            prm["pos"] = r.uniform(T, D, lo=-0.5, hi=0.5)
        blocks = []
        for _ in range(L):
            s_d, s_f = 1 / math.sqrt(D), 1 / math.sqrt(F_)
            p = OrderedDict(W_QKV=r.uniform(D, 3 * D, lo=-s_d, hi=s_d), W_O=r.uniform(D, D, lo=-s_d, hi=s_d),
                            b_O=r.uniform(D, lo=-0.1, hi=0.1), norm1_gamma=r.uniform(D, lo=0.5, hi=1.5),
                            norm1_beta=r.uniform(D, lo=-0.1, hi=0.1), W_1=r.uniform(D, F_, lo=-s_d, hi=s_d),
                            b_1=r.uniform(F_, lo=-0.1, hi=0.1), W_2=r.uniform(F_, D, lo=-s_f, hi=s_f),
                            b_2=r.uniform(D, lo=-0.1, hi=0.1), norm2_gamma=r.uniform(D, lo=0.5, hi=1.5),
                            norm2_beta=r.uniform(D, lo=-0.1, hi=0.1))
            blocks.append(p)
        prm["enc_norm.gamma"] = r.uniform(D, lo=0.5, hi=1.5)
        prm["enc_norm.beta"] = r.uniform(D, lo=-0.1, hi=0.1)
        prm["head.W"] = r.uniform(D, C)
        prm["head.b"] = r.uniform(C, lo=-0.1, hi=0.1)

        x = F.conv2d(images, prm["patch.W"].t().reshape(D, ch, K, K), prm["patch.b"], stride=P,
                     padding=(K - P) // 2)
        x = x.flatten(2).transpose(1, 2)                                   # [B, N, D]
        if pool == "cls":
            x = torch.cat([prm["cls"].expand(B, 1, D), x], dim=1)
        x = x + (prm["pos"] if pos == "learned" else sinusoids_2d(g_r, g_c, D, pool == "cls"))
        grad_fns = []
        for p in blocks:
            x, grads_of = block_encoder_layer(x, p, H, "pre", F_, None, None)
            grad_fns.append(grads_of)
        z = F.layer_norm(x, (D,), prm["enc_norm.gamma"], prm["enc_norm.beta"], NORM_EPS)
        u = z[:, 0] if pool == "cls" else z.mean(dim=1)
        logits = u @ prm["head.W"] + prm["head.b"]
        loss = F.cross_entropy(logits, targets)
        loss.backward()

        order = ["W_QKV", "W_O", "b_O", "norm1_gamma", "norm1_beta", "W_1", "b_1", "W_2", "b_2",
                 "norm2_gamma", "norm2_beta"]
        t = OrderedDict(config=np.array([ch, rows, cols, P, D, L, H, F_, ["cls", "mean"].index(pool),
                                         ["learned", "sinusoidal2d"].index(pos), C, K], np.int32),
                        images=np32(images), targets=targets.numpy().astype(np.int32))
        grads = OrderedDict()
        for name in ["patch.W", "patch.b", "cls", "pos"]:
            if name in prm:
                t[name] = np32(prm[name])
                grads["d" + name] = np32(prm[name].grad)
        for l, (p, grads_of) in enumerate(zip(blocks, grad_fns)):
            t[f"enc{l}"] = np.concatenate([np32(p[k]).ravel() for k in order])
            gl = grads_of()
            grads[f"denc{l}"] = np.concatenate([np32(gl["d" + k]).ravel() for k in order])
        for name in ["enc_norm.gamma", "enc_norm.beta", "head.W", "head.b"]:
            t[name] = np32(prm[name])
            grads["d" + name] = np32(prm[name].grad)
        t.update(logits=np32(logits), loss=np.array([loss.item()], np.float32))
        t.update(grads)
        cases.append((f"b{B}_c{ch}_{rows}x{cols}_p{P}_k{K}_d{D}_l{L}_h{H}_{pool}_{pos}", t))
    return cases


# ------------------------------------------------------------------------ main

def generate(only=None):
    """{layer: OrderedDict of 'case/tensor' -> array}."""
    torch.set_grad_enabled(True)
    files = OrderedDict()
    for name, fn in LAYERS.items():
        if only and name not in only:
            continue
        tensors = OrderedDict()
        for case, t in fn():
            for k, v in t.items():
                tensors[f"{case}/{k}"] = v
        files[name] = tensors
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT_DIR, help="output directory (default tests/golden)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; compare a fresh generation with the stored files")
    ap.add_argument("layers", nargs="*", help="only these layers (default all)")
    args = ap.parse_args()
    files = generate(args.layers)
    os.makedirs(args.out, exist_ok=True)
    total, bad = 0, 0
    for name, tensors in files.items():
        path = os.path.join(args.out, f"{name}.bin")
        if args.check:
            if not os.path.exists(path):
                print(f"{path}: MISSING")
                bad += 1
                continue
            stored = goldfile.read(path)
            same = list(stored) == list(tensors) and all(
                np.array_equal(stored[k], tensors[k], equal_nan=True) for k in tensors)
            print(f"{path}: {'same' if same else 'DIFFERENT'}")
            bad += not same
            continue
        goldfile.write(path, tensors)
        size = os.path.getsize(path)
        total += size
        n_cases = len({k.split("/")[0] for k in tensors})
        print(f"wrote {os.path.relpath(path, ROOT)}: {n_cases} cases, {len(tensors)} tensors, {size} bytes")
    if args.check:
        return 1 if bad else 0
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
