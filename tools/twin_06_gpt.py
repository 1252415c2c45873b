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
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap
from twin_04 import sinusoidal
from twin_06 import block_layout, block_pieces, block_settings, make_layer, make_norm, split_block

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
]


class GptTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        L, D, H, F_, place, norm, mlp = block_settings(cfg)
        N, V = int(cfg["context"]), int(cfg["vocab"])
        self.N, self.learned, self.rope = N, cfg["pos"] == "learned", cfg["pos"] == "rope"
        self.tok_emb = nn.Embedding(V, D)
        if self.learned:
            self.pos_emb = nn.Parameter(torch.zeros(N, D))
        elif not self.rope:
            self.register_buffer("P_sin", sinusoidal(N, D, dtype))
        self.layers = nn.ModuleList(make_layer(False, D, H, F_, place, norm, mlp, self.rope) for _ in range(L))
        self.final_norm = place == "pre" and norm != "none"
        if self.final_norm:
            self.norm = make_norm(norm, D)
        self.to(dtype)

        self.layout = [("tok_emb", "tok_emb.weight", False, None)]
        if self.learned:
            self.layout.append(("pos_emb", "pos_emb", False, None))
        self.pieces = block_pieces(D, F_, norm, mlp, cross=False)
        pieces_in = dict(tensors)
        for l in range(L):
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
        n = x.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)   # True = j > i: not attended
        X = self.tok_emb(x)
        if not self.rope:
            X = X + (self.pos_emb[:n] if self.learned else self.P_sin[:n])
        for layer in self.layers:
            X = layer(X, src_mask=causal)
        Z = self.norm(X) if self.final_norm else X
        return Z @ self.tok_emb.weight.t()     # the tied output layer

    @staticmethod
    def loss(logits, y):
        """The mean cross-entropy per scored target (target -1: not scored)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-1)

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

