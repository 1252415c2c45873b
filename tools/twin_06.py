"""twin_06.py - chapter 06's encoder-decoder transformer, rebuilt in PyTorch.

The C model (chapters/06_transformer/transformer.h, block.h):
    encoder  X_0 = sqrt(D) E_src[x] + P       X_l = EncoderBlock_l(X_{l-1})   M = Norm(X_L) (pre-norm only)
    decoder  Y_0 = sqrt(D) E_tgt[y] + P       Y_l = DecoderBlock_l(Y_{l-1}, M)
    logits = Norm(Y_L) W_out + b_out          (the final norm again only for pre-norm stacks)
An encoder block: self-attention over the real source positions, then the MLP;
a decoder block: causal self-attention, cross-attention to M (padded source
positions masked), the MLP; each sublayer wrapped as
    post-norm  Z = Norm(X + F(X))            pre-norm  Z = X + F(Norm(X))
The loss REPORTED is the plain mean cross-entropy over non-pad target tokens;
the gradient is that of the label-smoothed loss (target (1 - eps) one-hot +
eps / V), which is torch's cross_entropy(label_smoothing=eps, ignore_index=0).
So loss() gives the value compared with C's loss and objective() the one whose
gradients are compared.

Here, LayerNorm with a GELU or ReLU MLP is torch.nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer themselves (dropout 0, norm_first for pre-norm);
the other blocks (RMSNorm, SwiGLU, no norm, no MLP, which torch 1.13 lacks)
are WrittenEncoderLayer / WrittenDecoderLayer below: the same wiring over
nn.MultiheadAttention, nn.Linear and nn.LayerNorm or a written-out RMSNorm,
with torch's attribute names, so one layout table serves both. Every
nn.MultiheadAttention has its in_proj_bias frozen at 0 (the C attention has no
Q/K/V biases). The sinusoidal table is computed in float64 by the twin
(twin_04.sinusoidal), not read from C. With pos=rope nothing is added to the
embeddings and every self-attention is RopeAttention below (the written
layers around it): queries and keys rotated by golden.rope_rotate, written out
by hand (torch 1.13 has no RoPE); the cross-attention has no positions.

Each C block is ONE flat tensor (enc<l>, dec<l>) in the order of block.h's
block_weights_view; split_blocks() cuts it into pieces ("enc0.W_QKV", ...) that
the layout maps, and c_grads() glues the pieces' gradients back together.
The mapping is the chapter 06 table of tools/README.md.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap
from golden import rope_rotate
from twin_04 import sinusoidal

CHAPTER = "06_transformer"
MODEL = "transformer"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
NORM_EPS = float(np.float32(1e-5))   # BLOCK_NORM_EPS (block.h), the float32 the C code uses
SIN_ROWS = 512                       # rows of the sinusoidal table (sliced to the lengths used)

_SMALL = ["--layers", "2", "--dim", "32", "--heads", "4", "--ff", "64", "--batch", "16"]
_REVERSE = ["--task", "reverse", "--min-len", "3", "--max-len", "12"]
RUNS = [
    ("pre ln gelu sin", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "sinusoidal",
                         "--task", "dates"] + _SMALL),
    ("post ln relu learn", ["--norm", "post", "--norm-type", "layernorm", "--mlp", "relu", "--pos", "learned"]
     + _REVERSE + _SMALL),
    ("pre rms swiglu lrn", ["--norm", "pre", "--norm-type", "rmsnorm", "--mlp", "swiglu", "--pos", "learned",
                            "--task", "dates"] + _SMALL),
    ("post rms gelu ls0", ["--norm", "post", "--norm-type", "rmsnorm", "--mlp", "gelu", "--pos", "sinusoidal",
                           "--label-smoothing", "0"] + _REVERSE + _SMALL),
    ("pre ln gelu rope", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "rope"]
     + _REVERSE + _SMALL),
]


# ------------------------------------------------------------------ the blocks

class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, D):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + NORM_EPS) * self.weight


def make_norm(norm, D):
    if norm == "layernorm":
        return nn.LayerNorm(D, eps=NORM_EPS)
    if norm == "rmsnorm":
        return RMSNorm(D)
    return nn.Identity()


class RopeAttention(nn.Module):
    """Self-attention with rotary positions, named as nn.MultiheadAttention (in_proj_weight,
    in_proj_bias, out_proj) so the layout table serves it: [Q|K|V] = X W_in^T, Q and K of
    each head rotated at positions 0..N-1 (golden.rope_rotate), then softmax(Q K^T / sqrt(D_H)) V
    per head with the causal and padding masks, and out_proj."""

    def __init__(self, D, H):
        super().__init__()
        self.H = H
        self.in_proj_weight = nn.Parameter(torch.zeros(3 * D, D))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * D))
        self.out_proj = nn.Linear(D, D)

    def forward(self, query, key, value, attn_mask=None, key_padding_mask=None, need_weights=False):
        B, N, D = query.shape
        H, D_H = self.H, D // self.H
        Q, K, V = F.linear(query, self.in_proj_weight, self.in_proj_bias).split(D, dim=-1)
        positions = torch.arange(N)
        Q, K = rope_rotate(Q, H, D_H, positions), rope_rotate(K, H, D_H, positions)
        Q, K, V = (T.reshape(B, N, H, D_H).transpose(1, 2) for T in (Q, K, V))
        E = Q @ K.transpose(-1, -2) / math.sqrt(D_H)                 # [B, H, N, N]
        blocked = torch.zeros(B, 1, N, N, dtype=torch.bool)
        if attn_mask is not None:
            blocked = blocked | attn_mask.view(1, 1, N, N)
        if key_padding_mask is not None:
            blocked = blocked | key_padding_mask.view(B, 1, 1, N)
        A = torch.softmax(E.masked_fill(blocked, -math.inf), dim=-1)
        Y = (A @ V).transpose(1, 2).reshape(B, N, D)
        return self.out_proj(Y), None


class WrittenLayer(nn.Module):
    """A block of block.h from torch modules, named as torch's transformer layers:
    self_attn, multihead_attn (decoder), linear1/linear2 (+ linear3: SwiGLU's gate),
    norm1, norm2 (+ norm3 in a decoder: norm1 after self-attention, norm2 after
    cross-attention, the last after the MLP)."""

    def __init__(self, D, H, F_, place, norm, mlp, cross, rope=False):
        super().__init__()
        self.pre, self.mlp = place == "pre", mlp
        self.self_attn = RopeAttention(D, H) if rope else nn.MultiheadAttention(D, H, batch_first=True)
        norms = ["norm1"]
        if cross:
            self.multihead_attn = nn.MultiheadAttention(D, H, batch_first=True)
            norms.append("norm2")
        if mlp != "none":
            swiglu = mlp == "swiglu"
            self.linear1 = nn.Linear(D, F_, bias=not swiglu)
            if swiglu:
                self.linear3 = nn.Linear(D, F_, bias=False)
            self.linear2 = nn.Linear(F_, D, bias=not swiglu)
            norms.append(f"norm{len(norms) + 1}")
        for name in norms:
            setattr(self, name, make_norm(norm, D))
        self.norm_names = norms

    def ff(self, U):
        if self.mlp == "swiglu":
            return self.linear2(F.silu(self.linear1(U)) * self.linear3(U))
        act = F.gelu if self.mlp == "gelu" else F.relu
        return self.linear2(act(self.linear1(U)))

    def run(self, X, branches):
        """branches: the sublayers' F, in order; each gets the next norm."""
        for branch, norm_name in zip(branches, self.norm_names):
            norm = getattr(self, norm_name)
            X = X + branch(norm(X)) if self.pre else norm(X + branch(X))
        return X


class WrittenEncoderLayer(WrittenLayer):
    def __init__(self, D, H, F_, place, norm, mlp, rope=False):
        super().__init__(D, H, F_, place, norm, mlp, cross=False, rope=rope)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        def sa(U):
            return self.self_attn(U, U, U, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                  need_weights=False)[0]
        return self.run(src, [sa] + ([self.ff] if self.mlp != "none" else []))


class WrittenDecoderLayer(WrittenLayer):
    def __init__(self, D, H, F_, place, norm, mlp, rope=False):
        super().__init__(D, H, F_, place, norm, mlp, cross=True, rope=rope)

    def forward(self, tgt, memory, tgt_mask=None, memory_key_padding_mask=None):
        def sa(U):
            return self.self_attn(U, U, U, attn_mask=tgt_mask, need_weights=False)[0]

        def ca(U):
            return self.multihead_attn(U, memory, memory, key_padding_mask=memory_key_padding_mask,
                                       need_weights=False)[0]
        return self.run(tgt, [sa, ca] + ([self.ff] if self.mlp != "none" else []))


def make_layer(cross, D, H, F_, place, norm, mlp, rope=False):
    """torch's own layer where it has one (LayerNorm, GELU or ReLU, no rope), else the written one."""
    if norm == "layernorm" and mlp in ("gelu", "relu") and not rope:
        cls = nn.TransformerDecoderLayer if cross else nn.TransformerEncoderLayer
        layer = cls(d_model=D, nhead=H, dim_feedforward=F_, dropout=0.0, activation=mlp, layer_norm_eps=NORM_EPS,
                    batch_first=True, norm_first=(place == "pre"))
    else:
        cls = WrittenDecoderLayer if cross else WrittenEncoderLayer
        layer = cls(D, H, F_, place, norm, mlp, rope)
    twinmap.freeze(layer.self_attn.in_proj_bias, 0.0)
    if cross:
        twinmap.freeze(layer.multihead_attn.in_proj_bias, 0.0)
    return layer


# ------------------------------------------------ the C blocks' flat tensors

def block_pieces(D, F_, norm, mlp, cross):
    """(piece, C shape) of one block's flat tensor, in block_weights_view's order:
    attn | norm1 | cross | normc | W_1 | b_1 | W_3 | W_2 | b_2 | norm2 (absent ones left out)."""
    norm_of = {"layernorm": ["gamma", "beta"], "rmsnorm": ["gamma"], "none": []}[norm]
    swiglu = mlp == "swiglu"
    pieces = [("W_QKV", (D, 3 * D)), ("W_O", (D, D)), ("b_O", (D,))]
    pieces += [(f"norm1_{n}", (D,)) for n in norm_of]
    if cross:
        pieces += [("cross_W_Q", (D, D)), ("cross_W_KV", (D, 2 * D)), ("cross_W_O", (D, D)), ("cross_b_O", (D,))]
        pieces += [(f"normc_{n}", (D,)) for n in norm_of]
    if mlp != "none":
        pieces.append(("W_1", (D, F_)))
        if not swiglu:
            pieces.append(("b_1", (F_,)))
        if swiglu:
            pieces.append(("W_3", (D, F_)))
        pieces.append(("W_2", (F_, D)))
        if not swiglu:
            pieces.append(("b_2", (D,)))
        pieces += [(f"norm2_{n}", (D,)) for n in norm_of]
    return pieces


def block_layout(c_prefix, t_prefix, pieces, cross):
    """C piece "<c_prefix>.<piece>" -> torch parameter of layer t_prefix."""
    D = dict(pieces)["W_O"][0]
    last_norm = "norm3" if cross else "norm2"
    torch_of = {
        "W_QKV": ("self_attn.in_proj_weight", True, None),
        "W_O": ("self_attn.out_proj.weight", True, None),
        "b_O": ("self_attn.out_proj.bias", False, None),
        "norm1_gamma": ("norm1.weight", False, None),
        "norm1_beta": ("norm1.bias", False, None),
        # in_proj_weight rows 0..D-1 = W_q, rows D..3D-1 = [W_k ; W_v]: the C [W_K | W_V] transposed
        "cross_W_Q": ("multihead_attn.in_proj_weight", True, (slice(0, D),)),
        "cross_W_KV": ("multihead_attn.in_proj_weight", True, (slice(D, 3 * D),)),
        "cross_W_O": ("multihead_attn.out_proj.weight", True, None),
        "cross_b_O": ("multihead_attn.out_proj.bias", False, None),
        "normc_gamma": ("norm2.weight", False, None),
        "normc_beta": ("norm2.bias", False, None),
        "W_1": ("linear1.weight", True, None),
        "b_1": ("linear1.bias", False, None),
        "W_3": ("linear3.weight", True, None),
        "W_2": ("linear2.weight", True, None),
        "b_2": ("linear2.bias", False, None),
        "norm2_gamma": (f"{last_norm}.weight", False, None),
        "norm2_beta": (f"{last_norm}.bias", False, None),
    }
    layout = []
    for piece, _ in pieces:
        t_name, transpose, index = torch_of[piece]
        layout.append((f"{c_prefix}.{piece}", f"{t_prefix}.{t_name}", transpose, index))
    return layout


def split_block(flat, pieces):
    """One block's flat C tensor -> {piece: array of its C shape}."""
    out, at = {}, 0
    for piece, shape in pieces:
        n = int(np.prod(shape))
        out[piece] = np.asarray(flat[at:at + n]).reshape(shape)
        at += n
    if at != flat.size:
        raise ValueError(f"block tensor has {flat.size} floats, the layout {at}: block.h's order changed?")
    return out


# ------------------------------------------------------------------ the model

def block_settings(cfg):
    """(L, D, H, F, norm place, norm type, MLP) of a chapter 06 checkpoint's
    config (the encoder-decoder's or the GPT's); dropout must be off."""
    if float(cfg["dropout"]) != 0.0 or float(cfg.get("attn_dropout", 0)) != 0.0:
        raise ValueError("dropout and attn_dropout must be 0: twin_dump's pass is a training pass, "
                         "its masks are not dumped")
    return (int(cfg["layers"]), int(cfg["dim"]), int(cfg["heads"]), int(cfg["ff"]), cfg["norm"],
            cfg["norm_type"], cfg["mlp"])


class TransformerTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        L, D, H, F_, place, norm, mlp = block_settings(cfg)
        self.L, self.D, self.learned, self.rope = L, D, cfg["pos"] == "learned", cfg["pos"] == "rope"
        self.eps = float(cfg["label_smoothing"])
        V_src, V_tgt = tensors["src_emb"].shape[0], tensors["tgt_emb"].shape[0]
        self.src_emb, self.tgt_emb = nn.Embedding(V_src, D), nn.Embedding(V_tgt, D)
        if self.learned:
            self.src_pos = nn.Parameter(torch.zeros(tensors["src_pos"].shape))
            self.tgt_pos = nn.Parameter(torch.zeros(tensors["tgt_pos"].shape))
        else:
            self.register_buffer("P_sin", sinusoidal(SIN_ROWS, D, dtype))
        self.enc_layers = nn.ModuleList(make_layer(False, D, H, F_, place, norm, mlp, self.rope) for _ in range(L))
        self.dec_layers = nn.ModuleList(make_layer(True, D, H, F_, place, norm, mlp, self.rope) for _ in range(L))
        self.final_norm = place == "pre" and norm != "none"
        if self.final_norm:
            self.enc_norm, self.dec_norm = make_norm(norm, D), make_norm(norm, D)
        self.out = nn.Linear(D, V_tgt)
        self.to(dtype)

        # the layout: whole tensors, then each block's pieces
        self.layout = [("src_emb", "src_emb.weight", False, None), ("tgt_emb", "tgt_emb.weight", False, None)]
        if self.learned:
            self.layout += [("src_pos", "src_pos", False, None), ("tgt_pos", "tgt_pos", False, None)]
        self.blocks = []            # (C tensor, its pieces)
        pieces_in = dict(tensors)
        for kind, cross in (("enc", False), ("dec", True)):
            pieces = block_pieces(D, F_, norm, mlp, cross)
            for l in range(L):
                c_name = f"{kind}{l}"
                self.blocks.append((c_name, pieces))
                self.layout += block_layout(c_name, f"{kind}_layers.{l}", pieces, cross)
                for piece, value in split_block(tensors[c_name], pieces).items():
                    pieces_in[f"{c_name}.{piece}"] = value
        if self.final_norm:
            for which in ("enc_norm", "dec_norm"):
                self.layout.append((f"{which}.gamma", f"{which}.weight", False, None))
                if norm == "layernorm":
                    self.layout.append((f"{which}.beta", f"{which}.bias", False, None))
        self.layout += [("out.W", "out.weight", True, None), ("out.b", "out.bias", False, None)]
        twinmap.load_c(self, self.layout, pieces_in)

    def embed(self, ids, emb, pos):
        """sqrt(D) E[ids] + P[0..N) (rope: no P)."""
        N = ids.shape[1]
        if self.rope:
            return emb(ids) * math.sqrt(self.D)
        P = pos[:N] if self.learned else self.P_sin[:N]
        return emb(ids) * math.sqrt(self.D) + P

    def encode(self, src, lens):
        """-> the memory M [B, T, D] and its padding mask [B, T] (True = padding)."""
        T = src.shape[1]
        pad = torch.arange(T).view(1, T) >= lens.view(-1, 1)
        X = self.embed(src, self.src_emb, self.src_pos if self.learned else None)
        for layer in self.enc_layers:
            X = layer(X, src_key_padding_mask=pad)
        return (self.enc_norm(X) if self.final_norm else X), pad

    def decode(self, tgt_in, M, pad):
        """-> logits [B, Tt, V] of every teacher-forced position."""
        Tt = tgt_in.shape[1]
        causal = torch.triu(torch.ones(Tt, Tt, dtype=torch.bool), diagonal=1)   # True = j > i: not attended
        Y = self.embed(tgt_in, self.tgt_emb, self.tgt_pos if self.learned else None)
        for layer in self.dec_layers:
            Y = layer(Y, M, tgt_mask=causal, memory_key_padding_mask=pad)
        return self.out(self.dec_norm(Y) if self.final_norm else Y)

    def forward(self, src, lens, tgt_in):
        M, pad = self.encode(src, lens)
        return self.decode(tgt_in, M, pad)

    @staticmethod
    def loss(logits, tgt_out):
        """The loss C reports: the plain mean cross-entropy per non-pad target token."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID)

    def objective(self, logits, tgt_out):
        """The loss C differentiates: with label smoothing eps (torch spreads eps / V over
        every class, as the C code)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID,
                               label_smoothing=self.eps)

    def c_grads(self):
        """Gradients by C tensor: each block's pieces flattened back into its one tensor."""
        grads = twinmap.c_grads(self, self.layout)
        for c_name, pieces in self.blocks:
            grads[c_name] = torch.cat([grads.pop(f"{c_name}.{piece}").reshape(-1) for piece, _ in pieces])
        return grads

    @torch.no_grad()
    def greedy(self, src, max_out):
        """Greedy decoding, the whole prefix again at every step (no KV cache)."""
        M, pad = self.encode(src.unsqueeze(0), torch.tensor([src.shape[0]]))
        tokens, out = [BOS_ID], []
        for _ in range(max_out):
            logits = self.decode(torch.tensor([tokens]), M, pad)[0, -1]
            tok = int(torch.argmax(logits))
            if tok == EOS_ID:
                break
            out.append(tok)
            tokens.append(tok)
        return out


def build(cfg, tensors, dtype=torch.float64):
    return TransformerTwin(cfg, tensors, dtype)
