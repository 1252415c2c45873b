"""twin_07_cnn.py - chapter 07's convolutional baseline, rebuilt from standard PyTorch modules.

The C model (chapters/07_vision_transformer/cnn.h):
    h_1 = ReLU(conv(x, W_1) + b_1), 3 x 3 filters, padding 1;  p_1 = maxpool 2 x 2
    h_2 = ReLU(conv(p_1, W_2) + b_2), 2F filters;               p_2 = maxpool 2 x 2
    logits = flatten(p_2) W_out + b_out
Here: nn.Conv2d(channels, F, 3, padding=1), nn.ReLU, nn.MaxPool2d(2), nn.Conv2d(F, 2F, 3, padding=1),
nn.ReLU, nn.MaxPool2d(2), nn.Flatten (channel, row, column order, as the C map is laid out), nn.Linear.
conv1.W and conv2.W are torch's conv.weight as they are ([out, in, 3, 3], common/nn/conv2d.h's layout
promise); out.W [2F (rows/4) (cols/4), C] is nn.Linear's weight transposed. The dump's batch is the
first B test images; "greedy" counts the images whose predicted class agrees.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import twinmap

CHAPTER = "07_vision_transformer"
BINARY = "07_cnn"
MODEL = "ch07_cnn"
KIND = "images"

RUNS = [
    ("F 4", ["--filters", "4", "--batch", "32"]),
    ("F 8", ["--filters", "8", "--batch", "32"]),
]


class CnnTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        self.ch, self.rows, self.cols, F_, C = (int(cfg[k]) for k in ("channels", "rows", "cols", "filters",
                                                                      "classes"))
        self.features = nn.Sequential(nn.Conv2d(self.ch, F_, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(F_, 2 * F_, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Flatten())
        self.head = nn.Linear(2 * F_ * (self.rows // 4) * (self.cols // 4), C)
        self.to(dtype)
        self.layout = [("conv1.W", "features.0.weight", False, None), ("conv1.b", "features.0.bias", False, None),
                       ("conv2.W", "features.3.weight", False, None), ("conv2.b", "features.3.bias", False, None),
                       ("out.W", "head.weight", True, None), ("out.b", "head.bias", False, None)]
        twinmap.load_c(self, self.layout, tensors)

    def forward(self, images):
        """images [B, channels * rows * cols] (as the C Examples hold them) -> logits [B, C]"""
        return self.head(self.features(images.reshape(images.shape[0], self.ch, self.rows, self.cols)))

    @staticmethod
    def loss(logits, y):
        return F.cross_entropy(logits, y.reshape(-1))

    def c_grads(self):
        return twinmap.c_grads(self, self.layout)

    @torch.no_grad()
    def predict(self, images):
        return torch.argmax(self(images), dim=-1)


def build(cfg, tensors, dtype=torch.float64):
    return CnnTwin(cfg, {k: np.asarray(v) for k, v in tensors.items()}, dtype)
