"""twin_06_gpt_genre.py - chapter 06 part 6's genre model (build/06_gpt_genre), rebuilt in PyTorch.

The C model (chapters/06_transformer/genre.h): a passage x_1 .. x_n (the dump's row, -1 after it) is cut
into windows of the GPT's context N, each starting at position 0, the last padded with token 0; each
window goes through the GPT up to its last norm (twin_06_gpt.GptTwin.features, no tied output layer):
    Z = Norm(X_L)                  [windows, N, D]
    f = (1/n) sum_{t=1..n} Z[t]    the mean over the passage's real positions (the pads come after them,
                                   so causal attention keeps them out of every real position)
    logits = f W + b               head.W [D, C] (nn.Linear's weight transposed), head.b [C]
    loss = mean cross-entropy over the batch
The run fine-tunes (--runs finetune), so every tensor has a gradient; the GPT under it is trained first
by build/06_gpt (PRETRAIN, twin.py). "greedy" counts the passages whose predicted genre agrees.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap
from twin_06_gpt import GptTwin

CHAPTER = "06_transformer"
BINARY = "06_gpt_genre"   # the chapter's third program (chapters/06_transformer/main_gpt_genre.c)
MODEL = "ch06_gpt_genre"
KIND = "digits"           # twin.py's per-example driver: forward(x) -> logits [B, 1, C]

# The GPT the runs start from: build/06_gpt, small, into twin.py's temporary directory ({pretrained}).
PRETRAIN = ("06_gpt", ["--steps", "200", "--tokens", "char", "--layers", "2", "--dim", "32", "--heads", "2",
                       "--ff", "64", "--context", "32", "--batch", "8", "--eval-every", "0", "--max-new", "1",
                       "--eval-max-tokens", "2000"])
RUNS = [
    ("finetune 50", ["--gpt", "{pretrained}", "--runs", "finetune", "--per-genre", "50", "--batch", "8",
                     "--eval-every", "0"]),
]


class GenreTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        self.gpt = GptTwin(cfg, tensors, dtype)
        D, C = int(cfg["dim"]), int(cfg["classes"])
        self.N = int(cfg["context"])
        self.head = nn.Linear(D, C).to(dtype)
        self.head_layout = [("head.W", "weight", True, None), ("head.b", "bias", False, None)]
        twinmap.load_c(self.head, self.head_layout, tensors)

    def forward(self, x):
        """tokens [B, T] (-1 after each passage) -> logits [B, 1, C]"""
        feats = []
        for row in x:
            n = int((row != -1).sum())
            tokens = torch.zeros(max(1, -(-n // self.N)) * self.N, dtype=torch.long)
            tokens[:n] = row[:n]
            Z = self.gpt.features(tokens.view(-1, self.N)).reshape(-1, self.gpt.tok_emb.weight.shape[1])
            feats.append(Z[:n].mean(0))
        return self.head(torch.stack(feats)).unsqueeze(1)

    @staticmethod
    def loss(logits, y):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def c_grads(self):
        grads = self.gpt.c_grads()
        grads.update(twinmap.c_grads(self.head, self.head_layout))
        return grads

    @torch.no_grad()
    def predict(self, x):
        return torch.argmax(self(x), dim=-1)


def build(cfg, tensors, dtype=torch.float64):
    return GenreTwin(cfg, tensors, dtype)
