"""twin_04.py - chapter 04's digit model, rebuilt from standard PyTorch modules.

The C model (chapters/04_self_attention/digit_model.h):
    X_0 = embed(x) + P                  P: none, sinusoidal, or a learned table [N, D]
    per layer:  H = X + SelfAttention(X);   X' = H + relu(H W_1 + b_1) W_2 + b_2
    logits = X_L W_out + b_out;  loss = mean cross-entropy over all positions

Here: nn.Embedding, a learned nn.Parameter or the sinusoidal table computed in
float64 (independently of the C code), and per layer a torch.nn.MultiheadAttention
with ONE head as the self-attention:
    in_proj_weight = [W_Q^T ; W_K^T ; W_V^T]   ([3D, D]; torch computes x W^T)
    in_proj_bias   = 0      (frozen: the C layer has no bias)
    out_proj       = identity, bias 0 (frozen: chapter 04 has no output projection)
MultiheadAttention scales by 1/sqrt(head_dim) = 1/sqrt(D), as the C layer; the
causal mask is its attn_mask (True = blocked). The MLP is nn.Linear, nn.ReLU,
nn.Linear; the output layer nn.Linear. LAYOUT is the whole mapping (tools/README.md).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap

CHAPTER = "04_self_attention"
MODEL = "ch04_digit_self_attention"
KIND = "digits"          # a per-position model: x [B,N] -> a class per position

_SMALL = ["--len", "8", "--dim", "16", "--ff", "32", "--layers", "2", "--batch", "32"]
RUNS = [
    ("reverse learned", ["--task", "reverse", "--pos", "learned"] + _SMALL),
    ("sort sin causal", ["--task", "sort", "--pos", "sinusoidal", "--causal"] + _SMALL),
    ("count no pos", ["--task", "count", "--pos", "none"] + _SMALL),
]


def sinusoidal(N, D, dtype=torch.float64):
    """P[t, 2k] = sin(t / 10000^(2k/D)), P[t, 2k+1] = cos(t / 10000^(2k/D))."""
    t = torch.arange(N, dtype=dtype).unsqueeze(1)
    angle = t / torch.pow(torch.tensor(10000.0, dtype=dtype), torch.arange(0, D, 2, dtype=dtype) / D)
    P = torch.zeros(N, D, dtype=dtype)
    P[:, 0::2] = torch.sin(angle)
    P[:, 1::2] = torch.cos(angle[:, :D // 2])
    return P


class Block(nn.Module):
    """One layer: Z = X + MHA(X); X' = Z + MLP(Z)."""

    def __init__(self, D, F_, H):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, H, bias=True, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, F_), nn.ReLU(), nn.Linear(F_, D))
        twinmap.freeze(self.attn.in_proj_bias, 0.0)

    def forward(self, X, mask):
        Z = X + self.attn(X, X, X, attn_mask=mask, need_weights=False)[0]
        return Z + self.mlp(Z)


class DigitTwin(nn.Module):
    def __init__(self, cfg, tensors, H=1, dtype=torch.float64):
        super().__init__()
        V, D = tensors["emb"].shape
        self.N, self.D = int(cfg["len"]), D
        self.L = int(cfg["layers"])
        F_ = tensors["layer0.W_1"].shape[1]
        C = tensors["b_out"].shape[0]
        self.pos = cfg["pos"]
        self.causal = int(cfg["causal"]) != 0
        self.emb = nn.Embedding(V, D)
        if self.pos == "learned":
            self.pos_table = nn.Parameter(torch.zeros(self.N, D))
        self.layers = nn.ModuleList(Block(D, F_, H) for _ in range(self.L))
        self.out = nn.Linear(D, C)
        self.to(dtype)
        if self.pos == "sinusoidal":
            self.register_buffer("P_sin", sinusoidal(self.N, D, dtype))
        self.layout = self.make_layout()
        twinmap.load_c(self, self.layout, tensors)

    def attention_layout(self, l):
        """Chapter 04: W_Q, W_K, W_V are the three row blocks of in_proj_weight;
        out_proj is a frozen identity."""
        D, p = self.D, f"layers.{l}.attn"
        twinmap.freeze(self.layers[l].attn.out_proj.weight, torch.eye(D, dtype=self.out.weight.dtype))
        twinmap.freeze(self.layers[l].attn.out_proj.bias, 0.0)
        return [(f"layer{l}.W_{n}", f"{p}.in_proj_weight", True, (slice(i * D, (i + 1) * D),))
                for i, n in enumerate("QKV")]

    def make_layout(self):
        lay = [("emb", "emb.weight", False, None)]
        if self.pos == "learned":
            lay.append(("pos", "pos_table", False, None))
        for l in range(self.L):
            lay += self.attention_layout(l)
            lay += [(f"layer{l}.W_1", f"layers.{l}.mlp.0.weight", True, None),
                    (f"layer{l}.b_1", f"layers.{l}.mlp.0.bias", False, None),
                    (f"layer{l}.W_2", f"layers.{l}.mlp.2.weight", True, None),
                    (f"layer{l}.b_2", f"layers.{l}.mlp.2.bias", False, None)]
        return lay + [("W_out", "out.weight", True, None), ("b_out", "out.bias", False, None)]

    def forward(self, x):
        """x [B, N] digits -> logits [B, N, C]."""
        X = self.emb(x)
        if self.pos == "learned":
            X = X + self.pos_table
        elif self.pos == "sinusoidal":
            X = X + self.P_sin
        N = x.shape[1]
        mask = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1) if self.causal else None
        for block in self.layers:
            X = block(X, mask)
        return self.out(X)

    @staticmethod
    def loss(logits, y):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def c_grads(self):
        return twinmap.c_grads(self, self.layout)

    def to_c(self):
        return twinmap.to_c(self, self.layout)

    @torch.no_grad()
    def predict(self, x):
        return self.forward(x).argmax(dim=-1)


def build(cfg, tensors, dtype=torch.float64):
    return DigitTwin(cfg, tensors, H=1, dtype=dtype)


