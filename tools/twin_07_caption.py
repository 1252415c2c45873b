"""twin_07_caption.py - chapter 07's transformer captioner (model 3), rebuilt from standard PyTorch modules.

The C model (chapters/07_vision_transformer/caption.h, build/07_caption --model transformer):
    encoder  X_0 = Conv2d(images, kernel = stride = P).flatten(2).transpose(1, 2) + E_pos (fixed 2-D sinusoids)
             M   = LayerNorm(Block_L(.. Block_1(X_0)))          pre-norm blocks (chapter 06), no mask
    or (--encoder cnn)
             G   = chapter 07's CNN without its head (twin_07_cnn's features) on the scene, [B, 2F, g, g]
             M   = G.flatten(2).transpose(1, 2) W_proj + b_proj + E_pos      one position per 4 x 4 pixels
    decoder  Y_0 = sqrt(D) E[y] + P                              chapter 04's sinusoids
             Y_l = DecoderBlock_l(Y_{l-1}, M)                    causal self-attention, cross-attention to M, MLP
             logits = LayerNorm(Y_L) W_out + b_out;   loss = mean cross-entropy over non-pad words
Here: the ViT twin's patch convolution and 2-D table (twin_07), torch's own
nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (norm_first, GELU,
dropout 0) with the C block tensors mapped by twin_06's table, nn.LayerNorm,
nn.Linear. The dump's batch is the first B test scenes (their images);
"greedy" counts the scenes whose greedy captions agree word for word (the
twin recomputes the whole prefix at every step, as the C model does).
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import twin_06
import twinmap
from twin_04 import sinusoidal
from twin_07 import sinusoids_2d

CHAPTER = "07_vision_transformer"
BINARY = "07_caption"
MODEL = "ch07_caption"
KIND = "caption"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

_SMALL = ["--model", "transformer", "--dim", "16", "--heads", "2", "--ff", "32", "--layers", "1", "--batch", "16",
          "--train-scenes", "400", "--valid-scenes", "20", "--test-scenes", "20", "--pictures", "0",
          "--eval-every", "100"]
RUNS = [
    ("2x2 p7 dec1", ["--grid", "2", "--patch", "7", "--dec-layers", "1"] + _SMALL),
    ("3x3 p14 dec2", ["--grid", "3", "--patch", "14", "--dec-layers", "2"] + _SMALL),
    ("2x2 cnn F4 dec1", ["--grid", "2", "--encoder", "cnn", "--filters", "4", "--dec-layers", "1"]
     + [a for a in _SMALL if a not in ("--layers", "1")]),
]


class CaptionTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        if cfg["caption_model"] != "transformer":
            raise ValueError("the twin covers --model transformer (model 3)")
        self.side, P = int(cfg["side"]), int(cfg["patch"])
        D, L, H, F_, L_dec = (int(cfg[k]) for k in ("dim", "layers", "heads", "ff", "dec_layers"))
        V = tensors["tgt_emb"].shape[0]
        self.D = D
        self.cnn = cfg.get("encoder", "vit") == "cnn"
        g = self.side // P
        self.register_buffer("E_pos", sinusoids_2d(g, g, D, False, dtype))
        self.register_buffer("P_sin", sinusoidal(64, D, dtype))
        if self.cnn:
            F_cnn = int(cfg["filters"])
            self.features = nn.Sequential(nn.Conv2d(1, F_cnn, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                          nn.Conv2d(F_cnn, 2 * F_cnn, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.proj = nn.Linear(2 * F_cnn, D)
            L = 0
        else:
            self.patch = nn.Conv2d(1, D, P, stride=P)
        self.enc_layers = nn.ModuleList(twin_06.make_layer(False, D, H, F_, "pre", "layernorm", "gelu")
                                        for _ in range(L))
        self.enc_norm = nn.LayerNorm(D, eps=twin_06.NORM_EPS)
        self.tgt_emb = nn.Embedding(V, D)
        self.dec_layers = nn.ModuleList(twin_06.make_layer(True, D, H, F_, "pre", "layernorm", "gelu")
                                        for _ in range(L_dec))
        self.dec_norm = nn.LayerNorm(D, eps=twin_06.NORM_EPS)
        self.out = nn.Linear(D, V)
        self.to(dtype)

        if self.cnn:   # conv*.W as torch keeps them ([out, in, 3, 3]); proj.W [2F, D] is the Linear's transposed
            self.layout = [("conv1.W", "features.0.weight", False, None), ("conv1.b", "features.0.bias", False, None),
                           ("conv2.W", "features.3.weight", False, None), ("conv2.b", "features.3.bias", False, None),
                           ("proj.W", "proj.weight", True, None), ("proj.b", "proj.bias", False, None)]
        else:
            # patch.W [D_in, D] is conv.weight [D, 1, P, P] transposed and reshaped: by hand
            with torch.no_grad():
                self.patch.weight.copy_(torch.as_tensor(tensors["patch.W"]).t().reshape(self.patch.weight.shape))
            self.layout = [("patch.b", "patch.bias", False, None)]
        self.blocks, pieces_in = [], dict(tensors)
        for kind, cross, n in (("enc", False, L), ("dec", True, L_dec)):
            pieces = twin_06.block_pieces(D, F_, "layernorm", "gelu", cross)
            for l in range(n):
                c_name = f"{kind}{l}"
                self.blocks.append((c_name, pieces))
                self.layout += twin_06.block_layout(c_name, f"{kind}_layers.{l}", pieces, cross)
                for piece, value in twin_06.split_block(tensors[c_name], pieces).items():
                    pieces_in[f"{c_name}.{piece}"] = value
            if kind == "enc":
                if not self.cnn:
                    self.layout += [("enc_norm.gamma", "enc_norm.weight", False, None),
                                    ("enc_norm.beta", "enc_norm.bias", False, None)]
                self.layout += [("tgt_emb", "tgt_emb.weight", False, None)]
        self.layout += [("dec_norm.gamma", "dec_norm.weight", False, None),
                        ("dec_norm.beta", "dec_norm.bias", False, None),
                        ("out.W", "out.weight", True, None), ("out.b", "out.bias", False, None)]
        twinmap.load_c(self, self.layout, pieces_in)

    def encode(self, images):
        """images [B, side * side] -> the grid M [B, N, D]"""
        B = images.shape[0]
        if self.cnn:
            G = self.features(images.reshape(B, 1, self.side, self.side)).flatten(2).transpose(1, 2)
            return self.proj(G) + self.E_pos
        x = self.patch(images.reshape(B, 1, self.side, self.side)).flatten(2).transpose(1, 2) + self.E_pos
        for layer in self.enc_layers:
            x = layer(x)
        return self.enc_norm(x)

    def decode(self, tgt_in, M):
        Tt = tgt_in.shape[1]
        causal = torch.triu(torch.ones(Tt, Tt, dtype=torch.bool), diagonal=1)   # True = not attended
        Y = self.tgt_emb(tgt_in) * math.sqrt(self.D) + self.P_sin[:Tt]
        for layer in self.dec_layers:
            Y = layer(Y, M, tgt_mask=causal)
        return self.out(self.dec_norm(Y))

    def forward(self, images, tgt_in):
        return self.decode(tgt_in, self.encode(images))

    @staticmethod
    def loss(logits, tgt_out):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID)

    def c_grads(self):
        grads = twinmap.c_grads(self, self.layout)
        if not self.cnn:
            grads["patch.W"] = self.patch.weight.grad.reshape(self.D, -1).t()
        for c_name, pieces in self.blocks:
            grads[c_name] = torch.cat([grads.pop(f"{c_name}.{piece}").reshape(-1) for piece, _ in pieces])
        return grads

    @torch.no_grad()
    def greedy(self, image, max_out):
        M = self.encode(image.unsqueeze(0))
        tokens, out = [BOS_ID], []
        for _ in range(max_out):
            tok = int(torch.argmax(self.decode(torch.tensor([tokens]), M)[0, -1]))
            if tok == EOS_ID:
                break
            out.append(tok)
            tokens.append(tok)
        return out


def build(cfg, tensors, dtype=torch.float64):
    return CaptionTwin(cfg, {k: np.asarray(v) for k, v in tensors.items()}, dtype)
