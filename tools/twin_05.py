"""twin_05.py - chapter 05's multi-head digit model, rebuilt from standard PyTorch modules.

The model is chapter 04's (tools/twin_04.py) with the self-attention replaced by
the multi-head layer (chapters/05_multi_head_attention/multi_head.h), which maps
onto torch.nn.MultiheadAttention(D, H) exactly:
    in_proj_weight  = W_QKV^T     [3 H D_H, D]: rows 0..HD-1 = W_Q^T, then W_K^T, W_V^T;
                                  torch's head h reads rows h*D_H.. of each block, the
                                  C layer columns h*D_H.. of W_Q: the same split
    in_proj_bias    = 0           (frozen: the C layer has no Q/K/V bias)
    out_proj.weight = W_O^T       [D, H D_H]
    out_proj.bias   = b_O
This needs H * D_H = D (torch's embed_dim = num_heads * head_dim), as the chapter
builds it (D_H = D / H). The scale is 1/sqrt(D_H) on both sides.
"""
import twin_04

CHAPTER = "05_multi_head_attention"
MODEL = "ch05_digit_multi_head"
KIND = "digits"

_SMALL = ["--scale-max-len", "0", "--len", "8", "--ff", "32", "--layers", "2", "--batch", "32"]
RUNS = [
    ("neighbours H=2", ["--task", "neighbours", "--pos", "learned", "--dim", "16", "--heads", "2"] + _SMALL),
    ("count_next H=3 c", ["--task", "count_next", "--pos", "sinusoidal", "--dim", "15", "--heads", "3",
                          "--causal"] + _SMALL),
    ("reverse H=1", ["--task", "reverse", "--pos", "sinusoidal", "--dim", "16", "--heads", "1"] + _SMALL),
    ("sort H=4", ["--task", "sort", "--pos", "none", "--dim", "16", "--heads", "4"] + _SMALL),
]


class MultiHeadTwin(twin_04.DigitTwin):
    def attention_layout(self, l):
        p = f"layers.{l}.attn"
        return [(f"layer{l}.W_QKV", f"{p}.in_proj_weight", True, None),
                (f"layer{l}.W_O", f"{p}.out_proj.weight", True, None),
                (f"layer{l}.b_O", f"{p}.out_proj.bias", False, None)]


def build(cfg, tensors, dtype=twin_04.torch.float64):
    H = int(cfg["heads"])
    D = tensors["emb"].shape[1]
    HD = tensors["layer0.W_O"].shape[0]
    if HD != D:
        raise ValueError(f"H * D_H = {HD} != D = {D}: nn.MultiheadAttention cannot hold this layer")
    return MultiHeadTwin(cfg, tensors, H=H, dtype=dtype)
