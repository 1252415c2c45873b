"""twin_07.py - chapter 07's Vision Transformer, rebuilt from standard PyTorch modules.

The C model (chapters/07_vision_transformer/vit.h):
    X_0 = [x_cls;] Conv2d(images, kernel K, stride P, padding (K - P) / 2).flatten(2).transpose(1, 2) + E_pos
          (K = P: the ViT's own non-overlapping patches; K > P: overlapping ones)
          with a stem of S channels (--stem S), the patches read GELU(Conv2d(images, S, 4, stride=2, padding=1))
          with kernel K / 2, stride P / 2, padding (K - P) / 4
    Z   = LayerNorm(Block_L(.. Block_1(X_0)))      pre-norm blocks (chapter 06), no mask
    u   = Z[:, 0] (pool cls) or Z.mean(1) (pool mean)
          or softmax(Z w, dim=1)-weighted sum of Z (pool attention, one learned query w);
    logits = u W_head + b_head
    loss = mean cross-entropy over the batch (printed); with --label-smoothing eps
           the gradient is that of the smoothed cross-entropy (objective())
Here: nn.Conv2d(channels, D, K, stride=P, padding=(K - P) // 2) with weight = patch.W^T
reshaped to [D, channels, K, K] (patch_embed.h's layout promise), the class token and a
learned E_pos as parameters (the 2-D sinusoids computed in float64 here, from
chapter 04's twin's 1-D table), nn.TransformerEncoderLayer(norm_first=True,
activation="gelu", dropout=0) for each block with the C weights mapped by
twin_06's table, nn.LayerNorm, nn.Linear. The dump's batch is the first B test
images; "greedy" counts the images whose predicted class agrees.
With --locality (chapter 07's locality_attention.c), each block is twin_06's
written pre-norm layer whose attention is computed by hand from the same
nn.MultiheadAttention weights: head h's scores exp(log_scale[h]) q k^T, the diagonal
masked to -inf before the softmax. With --linformer k (chapter 06's linformer.c), each block's
attention is computed by hand the same way from the keys and values projected along the tokens,
E K and F V (E, F [k, T] learned), with the scale 1/sqrt(D_H).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import twin_06
import twinmap
from twin_04 import sinusoidal

CHAPTER = "07_vision_transformer"
MODEL = "ch07_vit"
KIND = "images"

_SMALL = ["--dim", "16", "--heads", "2", "--ff", "32", "--layers", "2", "--batch", "32", "--pictures", "1"]
RUNS = [
    ("p7 cls learned", ["--patch", "7", "--pool", "cls", "--pos", "learned"] + _SMALL),
    ("p4 mean sin2d", ["--patch", "4", "--pool", "mean", "--pos", "sinusoidal2d"] + _SMALL),
    ("p14 cls s2d aug ls", ["--patch", "14", "--pool", "cls", "--pos", "sinusoidal2d", "--augment",
                            "--label-smoothing", "0.2"] + _SMALL),
    ("p4 kernel 8 cls", ["--patch", "4", "--kernel", "8", "--pool", "cls", "--pos", "learned"] + _SMALL),
    ("p7 locality", ["--patch", "7", "--pool", "cls", "--pos", "learned", "--locality"] + _SMALL),
    ("p4 kernel 8 stem", ["--patch", "4", "--kernel", "8", "--stem", "6", "--pool", "cls", "--pos", "learned"]
     + _SMALL),
    ("p4 k8 attention", ["--patch", "4", "--kernel", "8", "--pool", "attention", "--pos", "learned"]
     + _SMALL),
    ("p7 attention s2d", ["--patch", "7", "--pool", "attention", "--pos", "sinusoidal2d"] + _SMALL),
    ("p7 linformer 6", ["--patch", "7", "--pool", "cls", "--pos", "learned", "--linformer", "6"] + _SMALL),
]


def sinusoids_2d(grid_rows, grid_cols, D, has_cls, dtype):
    half = D // 2
    Pr, Pc = sinusoidal(grid_rows, half, dtype), sinusoidal(grid_cols, half, dtype)
    P = torch.stack([torch.cat([Pr[i // grid_cols], Pc[i % grid_cols]]) for i in range(grid_rows * grid_cols)])
    return torch.cat([torch.zeros(1, D, dtype=dtype), P]) if has_cls else P


class LocalityEncoderLayer(twin_06.WrittenEncoderLayer):
    """A pre-norm GELU block whose self-attention is locality self-attention (locality_attention.h):
    self_attn's in_proj and out_proj, used by hand, and log_scale [H]."""

    def __init__(self, D, H, F_):
        super().__init__(D, H, F_, "pre", "layernorm", "gelu")
        self.H = H
        self.log_scale = nn.Parameter(torch.zeros(H))
        twinmap.freeze(self.self_attn.in_proj_bias, 0.0)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        def locality_attention(U):
            B, T, D = U.shape
            q, k, v = (x.reshape(B, T, self.H, D // self.H).transpose(1, 2)
                       for x in F.linear(U, self.self_attn.in_proj_weight).chunk(3, dim=-1))
            scores = (q @ k.transpose(-2, -1)) * self.log_scale.exp().view(1, self.H, 1, 1)
            scores = scores.masked_fill(torch.eye(T, dtype=torch.bool), float("-inf"))
            Y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
            return self.self_attn.out_proj(Y)
        return self.run(src, [locality_attention, self.ff])


class LinformerEncoderLayer(twin_06.WrittenEncoderLayer):
    """A pre-norm GELU block whose self-attention is Linformer's (linformer.h): self_attn's in_proj and
    out_proj, used by hand, and the projections lin_E, lin_F [k, T] of the keys and values."""

    def __init__(self, D, H, F_, k, T):
        super().__init__(D, H, F_, "pre", "layernorm", "gelu")
        self.H = H
        self.lin_E = nn.Parameter(torch.zeros(k, T))
        self.lin_F = nn.Parameter(torch.zeros(k, T))
        twinmap.freeze(self.self_attn.in_proj_bias, 0.0)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        def linformer_attention(U):
            B, T, D = U.shape
            q, k, v = F.linear(U, self.self_attn.in_proj_weight).chunk(3, dim=-1)
            k, v = self.lin_E[:, :T] @ k, self.lin_F[:, :T] @ v        # [B, k, D]: mixtures of the tokens
            q, k, v = (x.reshape(B, x.shape[1], self.H, D // self.H).transpose(1, 2) for x in (q, k, v))
            scores = (q @ k.transpose(-2, -1)) / (D // self.H) ** 0.5
            Y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
            return self.self_attn.out_proj(Y)
        return self.run(src, [linformer_attention, self.ff])


class VitTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        if float(cfg["dropout"]) != 0.0:
            raise ValueError("dropout must be 0: twin_dump's pass is a training pass, its masks are not dumped")
        if float(cfg.get("drop_path", 0)) != 0.0:   # (a checkpoint from before drop path has no line)
            raise ValueError("drop_path must be 0: twin_dump's pass is a training pass, its masks are not dumped")
        if float(cfg.get("keep", 0)) not in (0.0, 1.0):   # patch dropout; a checkpoint from before it has no line
            raise ValueError("keep must be 0 or 1: twin_dump's pass is a training pass, its kept patches are not dumped")
        self.ch, self.rows, self.cols, P = (int(cfg[k]) for k in ("channels", "rows", "cols", "patch"))
        D, L, H, F_ = (int(cfg[k]) for k in ("dim", "layers", "heads", "ff"))
        self.P, self.D, self.cls_pool = P, D, cfg["pool"] == "cls"
        self.attention_pool = cfg["pool"] == "attention"
        self.learned = cfg["pos"] == "learned"
        C = int(cfg["classes"])
        self.eps = float(cfg.get("label_smoothing", 0))   # a checkpoint from before smoothing has no line
        K = int(cfg.get("kernel", 0)) or P   # a checkpoint from before overlapping patches has no line
        self.stem_S = int(cfg.get("stem", 0))   # nor one from before the stem
        if self.stem_S:
            # a 4 x 4 convolution of stride 2 and GELU; the patches then read its map, patch and kernel halved
            self.stem = nn.Conv2d(self.ch, self.stem_S, 4, stride=2, padding=1)
            self.patch = nn.Conv2d(self.stem_S, D, K // 2, stride=P // 2, padding=(K - P) // 4)
        else:
            self.patch = nn.Conv2d(self.ch, D, K, stride=P, padding=(K - P) // 2)
        T = (self.rows // P) * (self.cols // P) + self.cls_pool
        if self.cls_pool:
            self.cls = nn.Parameter(torch.zeros(D))
        if self.learned:
            self.pos = nn.Parameter(torch.zeros(T, D))
        else:
            self.register_buffer("P_fixed", sinusoids_2d(self.rows // P, self.cols // P, D, self.cls_pool, dtype))
        if self.attention_pool:
            self.pool_w = nn.Parameter(torch.zeros(D))
        self.locality = int(cfg.get("locality", 0))   # a checkpoint from before locality has no line
        self.linformer = int(cfg.get("linformer", 0))   # no line: full attention
        self.layers = nn.ModuleList(LocalityEncoderLayer(D, H, F_) if self.locality else
                                    LinformerEncoderLayer(D, H, F_, self.linformer, T) if self.linformer else
                                    twin_06.make_layer(False, D, H, F_, "pre", "layernorm", "gelu")
                                    for _ in range(L))
        self.norm = nn.LayerNorm(D, eps=twin_06.NORM_EPS)
        self.head = nn.Linear(D, C)
        self.to(dtype)

        # patch.W [D_in, D] is conv.weight [D, channels, K, K] transposed and reshaped: by hand
        with torch.no_grad():
            self.patch.weight.copy_(torch.as_tensor(tensors["patch.W"]).t().reshape(self.patch.weight.shape))
            if self.stem_S:
                self.stem.weight.copy_(torch.as_tensor(tensors["stem.W"]).t().reshape(self.stem.weight.shape))
        self.layout = [("patch.b", "patch.bias", False, None)]
        if self.stem_S:
            self.layout.append(("stem.b", "stem.bias", False, None))
        if self.cls_pool:
            self.layout.append(("cls", "cls", False, None))
        if self.learned:
            self.layout.append(("pos", "pos", False, None))
        if self.attention_pool:
            self.layout.append(("pool.w", "pool_w", False, None))
        pieces = twin_06.block_pieces(D, F_, "layernorm", "gelu", False)
        # locality: the H learned log-scales follow the attention's b_O in the block's tensor
        at = [name for name, _ in pieces].index("b_O") + 1
        own = [("log_scale", (H,))] if self.locality else \
            [("lin_E", (self.linformer, T)), ("lin_F", (self.linformer, T))] if self.linformer else []
        self.pieces = pieces[:at] + own + pieces[at:]
        self.blocks = [f"enc{l}" for l in range(L)]
        pieces_in = dict(tensors)
        for l, c_name in enumerate(self.blocks):
            self.layout += twin_06.block_layout(c_name, f"layers.{l}", pieces, False)
            for piece, _ in own:   # the attention's own parameters
                self.layout.append((f"{c_name}.{piece}", f"layers.{l}.{piece}", False, None))
            for piece, value in twin_06.split_block(tensors[c_name], self.pieces).items():
                pieces_in[f"{c_name}.{piece}"] = value
        self.layout += [("enc_norm.gamma", "norm.weight", False, None), ("enc_norm.beta", "norm.bias", False, None),
                        ("head.W", "head.weight", True, None), ("head.b", "head.bias", False, None)]
        twinmap.load_c(self, self.layout, pieces_in)

    def forward(self, images):
        """images [B, channels * rows * cols] (as the C Examples hold them) -> logits [B, C]"""
        B = images.shape[0]
        x = images.reshape(B, self.ch, self.rows, self.cols)
        if self.stem_S:
            x = F.gelu(self.stem(x))
        x = self.patch(x).flatten(2).transpose(1, 2)
        if self.cls_pool:
            x = torch.cat([self.cls.expand(B, 1, self.D), x], dim=1)
        x = x + (self.pos if self.learned else self.P_fixed)
        for layer in self.layers:
            x = layer(x)
        z = self.norm(x)
        if self.attention_pool:   # one query w over the outputs: a = softmax(Z w) over the tokens, u = a Z
            a = torch.softmax(z @ self.pool_w, dim=1)
            return self.head(torch.einsum("bt,btd->bd", a, z))
        return self.head(z[:, 0] if self.cls_pool else z.mean(dim=1))

    @staticmethod
    def loss(logits, y):
        return F.cross_entropy(logits, y.reshape(-1))

    def objective(self, logits, y):
        """The loss C differentiates: with label smoothing eps (torch spreads eps / C over every class, as the C
        code does)."""
        return F.cross_entropy(logits, y.reshape(-1), label_smoothing=self.eps)

    def c_grads(self):
        grads = twinmap.c_grads(self, self.layout)
        grads["patch.W"] = self.patch.weight.grad.reshape(self.D, -1).t()
        if self.stem_S:
            grads["stem.W"] = self.stem.weight.grad.reshape(self.stem_S, -1).t()
        for c_name in self.blocks:
            grads[c_name] = torch.cat([grads.pop(f"{c_name}.{piece}").reshape(-1) for piece, _ in self.pieces])
        return grads

    @torch.no_grad()
    def predict(self, images):
        return torch.argmax(self(images), dim=-1)


def build(cfg, tensors, dtype=torch.float64):
    return VitTwin(cfg, {k: np.asarray(v) for k, v in tensors.items()}, dtype)
