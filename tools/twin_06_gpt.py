"""twin_06_gpt.py - chapter 06 part 2's GPT (build/06_gpt), rebuilt in PyTorch.

The C model (chapters/06_transformer/gpt.h):
    X_0 = E[x_t] + P[t]                E tok_emb [V, D]; P pos_emb [N, D] (learned) or sinusoidal
                                       (rope: X_0 = E[x_t], queries and keys rotated: twin_06.RopeAttention)
    X_l = Block_l(X_{l-1})             chapter 06's block, causal self-attention, no cross-attention
    Z   = Norm(X_L)                    pre-norm stacks only (norm.gamma, norm.beta)
    logits = Z E^T                     tied embeddings, no output bias
    loss = mean cross-entropy over the B N next-token targets
The blocks are twin_06's encoder layers (torch's nn.TransformerEncoderLayer for
LayerNorm with GELU or ReLU, twin_06.WrittenEncoderLayer for RMSNorm or SwiGLU)
given a causal mask; each C block blk<l> is one flat tensor cut into pieces by
twin_06.block_pieces / split_block, mapped by twin_06.block_layout. There is no
sqrt(D) factor on the embeddings (unlike the encoder-decoder).

twin.py's KIND "lm": build(cfg, tensors) -> a module with forward(x) -> logits
[B, N, V], loss(logits, y), c_grads(), and greedy(prompt, n): n tokens, each the
argmax after running the whole prefix again (C generates with its KV cache).

With experts=E > 0 in the checkpoint (--mlp moe, chapters/06_transformer/moe.h)
each block's MLP is MoeLayer's mixture, written here: router p = softmax(U W_r),
torch.topk's k experts, weights p (Switch) or p renormalised over the k
(moe_renorm=1), and the objective adds moe_aux * E sum_e f_e P_e per block.
The run keeps the capacity off: twin_dump's pass is a training pass, and a
dropped pair would depend on the order C fills the experts.

With sparse_block=P > 0 (--sparse P,w,g,r, chapters/06_transformer/sparse_attention.h)
the causal mask also blocks every key outside the pattern's window and global
blocks, written here as a mask; r must be 0 (the random blocks' draw is the C
library's own: tests/test_sparse_attention.c checks it against dense attention).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap
from twin_04 import sinusoidal
from twin_06 import (WrittenEncoderLayer, block_layout, block_pieces, block_settings, make_layer, make_norm,
                     split_block)

CHAPTER = "06_transformer"
BINARY = "06_gpt"        # the chapter's second program (chapters/06_transformer/main_gpt.c)
MODEL = "gpt"
KIND = "lm"
STEPS = 600              # after twin.py's usual 200, greedy continues every window with spaces only

_SMALL = ["--tokens", "char", "--layers", "2", "--dim", "32", "--heads", "2", "--ff", "64", "--context", "32",
          "--batch", "8", "--eval-every", "0", "--max-new", "1", "--eval-max-tokens", "2000"]
RUNS = [
    ("pre ln gelu lrn", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "learned"]
     + _SMALL),
    ("post rms swglu sin", ["--norm", "post", "--norm-type", "rmsnorm", "--mlp", "swiglu", "--pos", "sinusoidal"]
     + _SMALL),
    ("pre rms relu lrn", ["--norm", "pre", "--norm-type", "rmsnorm", "--mlp", "relu", "--pos", "learned"]
     + _SMALL),
    ("post ln gelu sin", ["--norm", "post", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "sinusoidal"]
     + _SMALL),
    ("pre ln gelu rope", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "rope"]
     + _SMALL),
    ("pre ln moe E4 k2", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "moe", "--experts", "4",
                          "--moe-top-k", "2", "--moe-aux", "0.05", "--pos", "learned"] + _SMALL),
    ("post rms moe E3 k1", ["--norm", "post", "--norm-type", "rmsnorm", "--mlp", "moe", "--experts", "3",
                            "--moe-top-k", "1", "--moe-aux", "0.05", "--pos", "sinusoidal"] + _SMALL),
    ("pre ln sparse 4,1,1", ["--norm", "pre", "--norm-type", "layernorm", "--mlp", "gelu", "--pos", "learned",
                             "--sparse", "4,1,1,0"] + _SMALL),
    ("pre rms sparse rope", ["--norm", "pre", "--norm-type", "rmsnorm", "--mlp", "gelu", "--pos", "rope",
                             "--sparse", "8,0,1,0"] + _SMALL),
]


def sparse_blocked(n, P, window, n_global):
    """[n, n] True where the causal pattern of window and global blocks of P blocks query i from key j."""
    b = torch.arange(n) // P
    d = b.view(n, 1) - b.view(1, n)
    seen = ((d >= 0) & (d <= window)) | (b.view(n, 1) < n_global) | (b.view(1, n) < n_global)
    return ~seen


class Expert(nn.Module):
    """One expert: the block's GELU MLP (the names of torch's layers)."""

    def __init__(self, D, F_):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(D, F_), nn.Linear(F_, D)

    def forward(self, x):
        return self.linear2(F.gelu(self.linear1(x)))


class Mixture(nn.Module):
    """U [B, N, D] -> sum over each position's k experts of g_e MLP_e(u); self.aux = E sum_e f_e P_e."""

    def __init__(self, D, F_, E, k, renorm):
        super().__init__()
        self.E, self.k, self.renorm = E, k, renorm
        self.router = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(Expert(D, F_) for _ in range(E))
        self.aux = None

    def forward(self, U):
        x = U.reshape(-1, U.shape[-1])
        p = F.softmax(self.router(x), dim=-1)                       # [R, E]
        top_p, top_e = torch.topk(p, self.k, dim=-1)                # [R, k]
        g = top_p / top_p.sum(-1, keepdim=True) if self.renorm else top_p
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            chosen = top_e == e                                     # [R, k]
            rows = chosen.any(-1)
            if rows.any():
                out[rows] = out[rows] + (g * chosen).sum(-1)[rows, None] * expert(x[rows])
        f = torch.stack([(top_e == e).sum() for e in range(self.E)]).to(p.dtype) / top_e.numel()
        self.aux = self.E * (f * p.mean(0)).sum()
        return out.reshape(U.shape)


class MoeLayer(WrittenEncoderLayer):
    """The written block with a Mixture as its MLP sublayer."""

    def __init__(self, D, H, F_, place, norm, E, k, renorm):
        super().__init__(D, H, F_, place, norm, "gelu")
        del self.linear1, self.linear2
        self.moe = Mixture(D, F_, E, k, renorm)
        twinmap.freeze(self.self_attn.in_proj_bias, 0.0)

    def ff(self, U):
        return self.moe(U)


def moe_pieces(D, F_, norm, E):
    """The C block's flat tensor with experts: attn | norm1 | W_r | expert 0 .. E-1 | norm2."""
    pieces = block_pieces(D, F_, norm, "none", cross=False)
    pieces.append(("W_r", (D, E)))
    for e in range(E):
        pieces += [(f"e{e}_W_1", (D, F_)), (f"e{e}_b_1", (F_,)), (f"e{e}_W_2", (F_, D)), (f"e{e}_b_2", (D,))]
    norm_of = {"layernorm": ["gamma", "beta"], "rmsnorm": ["gamma"], "none": []}[norm]
    return pieces + [(f"norm2_{n}", (D,)) for n in norm_of]


def moe_layout(c_prefix, t_prefix, pieces, D, E):
    """block_layout's entries for the attention and norm1, then the mixture's and norm2's."""
    attn = [pc for pc in pieces if not pc[0].startswith(("W_r", "e", "norm2"))]
    layout = block_layout(c_prefix, t_prefix, attn, cross=False)
    layout.append((f"{c_prefix}.W_r", f"{t_prefix}.moe.router.weight", True, None))
    for e in range(E):
        for c, t, tr in (("W_1", "linear1.weight", True), ("b_1", "linear1.bias", False),
                         ("W_2", "linear2.weight", True), ("b_2", "linear2.bias", False)):
            layout.append((f"{c_prefix}.e{e}_{c}", f"{t_prefix}.moe.experts.{e}.{t}", tr, None))
    torch_of = {"norm2_gamma": "norm2.weight", "norm2_beta": "norm2.bias"}
    layout += [(f"{c_prefix}.{piece}", f"{t_prefix}.{torch_of[piece]}", False, None)
               for piece, _ in pieces if piece in torch_of]
    return layout


class GptTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        L, D, H, F_, place, norm, mlp = block_settings(cfg)
        N, V = int(cfg["context"]), int(cfg["vocab"])
        self.N, self.learned, self.rope = N, cfg["pos"] == "learned", cfg["pos"] == "rope"
        self.sparse = tuple(int(cfg.get(k, 0)) for k in ("sparse_block", "sparse_window", "sparse_global"))
        if self.sparse[0] > 0 and int(cfg.get("sparse_random", 0)) != 0:
            raise ValueError("sparse_random must be 0 for the twin (see above)")
        self.tok_emb = nn.Embedding(V, D)
        if self.learned:
            self.pos_emb = nn.Parameter(torch.zeros(N, D))
        elif not self.rope:
            self.register_buffer("P_sin", sinusoidal(N, D, dtype))
        E = int(cfg.get("experts", 0))
        self.moe_aux = float(cfg.get("moe_aux", 0))
        if E > 0:
            if float(cfg.get("capacity", 0)) != 0.0:
                raise ValueError("capacity must be 0 for the twin (see above)")
            k, renorm = int(cfg["moe_top_k"]), int(cfg["moe_renorm"])
            self.layers = nn.ModuleList(MoeLayer(D, H, F_, place, norm, E, k, renorm) for _ in range(L))
        else:
            self.layers = nn.ModuleList(make_layer(False, D, H, F_, place, norm, mlp, self.rope) for _ in range(L))
        self.final_norm = place == "pre" and norm != "none"
        if self.final_norm:
            self.norm = make_norm(norm, D)
        self.to(dtype)

        self.layout = [("tok_emb", "tok_emb.weight", False, None)]
        if self.learned:
            self.layout.append(("pos_emb", "pos_emb", False, None))
        self.pieces = moe_pieces(D, F_, norm, E) if E > 0 else block_pieces(D, F_, norm, mlp, cross=False)
        pieces_in = dict(tensors)
        for l in range(L):
            if E > 0:
                self.layout += moe_layout(f"blk{l}", f"layers.{l}", self.pieces, D, E)
            else:
                self.layout += block_layout(f"blk{l}", f"layers.{l}", self.pieces, cross=False)
            for piece, value in split_block(tensors[f"blk{l}"], self.pieces).items():
                pieces_in[f"blk{l}.{piece}"] = value
        if self.final_norm:
            self.layout.append(("norm.gamma", "norm.weight", False, None))
            if norm == "layernorm":
                self.layout.append(("norm.beta", "norm.bias", False, None))
        twinmap.load_c(self, self.layout, pieces_in)

    def forward(self, x):
        """tokens [B, n] (n <= N) -> logits [B, n, V]."""
        return self.features(x) @ self.tok_emb.weight.t()     # the tied output layer

    def features(self, x):
        """tokens [B, n] (n <= N) -> Z [B, n, D], the last norm's output (chapter 06 part 6's features)."""
        n = x.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)   # True = j > i: not attended
        if self.sparse[0] > 0:
            causal = causal | sparse_blocked(n, *self.sparse)
        X = self.tok_emb(x)
        if not self.rope:
            X = X + (self.pos_emb[:n] if self.learned else self.P_sin[:n])
        for layer in self.layers:
            X = layer(X, src_mask=causal)
        return self.norm(X) if self.final_norm else X

    @staticmethod
    def loss(logits, y):
        """The mean cross-entropy per scored target (target -1: not scored)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-1)

    def objective(self, logits, y):
        """What C differentiates: the loss, plus moe_aux times each block's aux (experts only)."""
        loss = self.loss(logits, y)
        for layer in self.layers:
            if isinstance(layer, MoeLayer):
                loss = loss + self.moe_aux * layer.moe.aux
        return loss

    def c_grads(self):
        grads = twinmap.c_grads(self, self.layout)
        for l in range(len(self.layers)):
            grads[f"blk{l}"] = torch.cat([grads.pop(f"blk{l}.{piece}").reshape(-1) for piece, _ in self.pieces])
        return grads

    @torch.no_grad()
    def greedy(self, prompt, n):
        """n tokens after prompt [P] (P + n <= N + 1), each the argmax given the whole prefix."""
        tokens = [int(t) for t in prompt]
        out = []
        for _ in range(n):
            tok = int(torch.argmax(self(torch.tensor([tokens]))[0, -1]))
            out.append(tok)
            tokens.append(tok)
        return out


def build(cfg, tensors, dtype=torch.float64):
    return GptTwin(cfg, tensors, dtype)

