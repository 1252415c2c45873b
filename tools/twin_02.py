"""twin_02.py - chapter 02's encoder-decoder with additive (Bahdanau) attention,
rebuilt from standard PyTorch modules.

The C model (chapters/02_bahdanau_attention/bahdanau.h):
    encoder   h_i = cell(embed(x_i), h_{i-1}) over the real tokens (chapter 01's)
              --bidirectional: a second encoder with its own embedding reads
              x_T..x_1, h_i = [h_fwd_i ; h_bwd_i]
    step t    e_{t,i} = v . tanh(h_i W_1 + s_{t-1} W_2),  a_t = softmax over real i
              c_t = sum_i a_{t,i} h_i,   s_t = cell([embed(y_{t-1}) ; c_t], s_{t-1})
    s_0       h_T (and c_T, LSTM), or tanh([h_fwd_T ; h_bwd_1] W_s + b_s) (c_0 = 0)
    output    logits_t = s_t W_out + b_out; loss = mean cross-entropy over non-<pad> targets

Here: the encoder is nn.Embedding + nn.GRU/LSTM/RNN on a packed sequence (its
outputs are the h_i, zeros past each row's length); bidirectional, ONE
nn.GRU(bidirectional=True), which does the reversal itself, reading
[enc.emb(x) ; enc_bwd.emb(x)] (2E inputs): its forward direction's weight_ih
has the C enc.W_x^T in columns 0..E-1 and zeros in E..2E-1, the reverse
direction's has enc_bwd.W_x^T in columns E..2E-1 and zeros in 0..E-1, so each
direction sees only its own embedding. The decoder is nn.GRUCell/LSTMCell/RNNCell
stepped in Python; W_1, W_2 are nn.Linear(bias=False), v a vector; the bridge
nn.Linear(2H, H); the output nn.Linear(H, V). LAYOUT (built per model) is the
whole mapping (tools/README.md).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import twinmap

CHAPTER = "02_bahdanau_attention"
MODEL = "bahdanau"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

_SMALL = ["--state", "32", "--embed", "16", "--attn", "16", "--batch", "16"]
RUNS = [
    ("gru dates", ["--cell", "gru", "--task", "dates"] + _SMALL),
    ("lstm bidir reverse", ["--cell", "lstm", "--bidirectional", "--task", "reverse", "--min-len", "3",
                            "--max-len", "12"] + _SMALL),
    ("rnn bidir dates", ["--cell", "rnn", "--bidirectional", "--task", "dates"] + _SMALL),
]

RNN = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
CELL = {"rnn": nn.RNNCell, "gru": nn.GRUCell, "lstm": nn.LSTMCell}


def no_hidden_bias(rnn, names):
    for n in names:             # the C cells have one bias: torch's bias_hh stays 0
        twinmap.freeze(getattr(rnn, n), 0.0)


def masked_softmax(e, lens):
    """softmax over the last axis [B, ..., T], positions >= lens[b] at weight 0."""
    T = e.shape[-1]
    pad = torch.arange(T).view(1, T) >= lens.view(-1, 1)
    pad = pad.view(pad.shape[0], *([1] * (e.dim() - 2)), T)
    return torch.softmax(e.masked_fill(pad, float("-inf")), dim=-1)


class BahdanauTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        self.cell = cfg["cell"]
        self.bidir = int(cfg["bidirectional"]) != 0
        V_src, E = tensors["enc.emb"].shape
        V_tgt = tensors["dec.emb"].shape[0]
        H, A = int(cfg.get("state", cfg.get("hidden"))), int(cfg["attn"])
        self.E, self.H, self.Hc = E, H, 2 * H if self.bidir else H
        extra = {"nonlinearity": "tanh"} if self.cell == "rnn" else {}
        self.enc_emb = nn.Embedding(V_src, E)
        if self.bidir:
            self.enc_bwd_emb = nn.Embedding(V_src, E)
            self.enc_rnn = RNN[self.cell](2 * E, H, batch_first=True, bidirectional=True, **extra)
            no_hidden_bias(self.enc_rnn, ["bias_hh_l0", "bias_hh_l0_reverse"])
            self.bridge = nn.Linear(2 * H, H)
        else:
            self.enc_rnn = RNN[self.cell](E, H, batch_first=True, **extra)
            no_hidden_bias(self.enc_rnn, ["bias_hh_l0"])
        self.dec_emb = nn.Embedding(V_tgt, E)
        self.dec_cell = CELL[self.cell](E + self.Hc, H, **extra)
        no_hidden_bias(self.dec_cell, ["bias_hh"])
        self.out = nn.Linear(H, V_tgt)
        self.att_W1 = nn.Linear(self.Hc, A, bias=False)
        self.att_W2 = nn.Linear(H, A, bias=False)
        self.att_v = nn.Parameter(torch.zeros(A))
        self.to(dtype)
        if self.bidir:   # each direction reads only its own embedding's columns
            twinmap.freeze(self.enc_rnn.weight_ih_l0, 0.0)
            twinmap.freeze(self.enc_rnn.weight_ih_l0_reverse, 0.0)
            self.enc_rnn.weight_ih_l0.requires_grad_(True)
            self.enc_rnn.weight_ih_l0_reverse.requires_grad_(True)
        self.layout = self.make_layout()
        twinmap.load_c(self, self.layout, tensors)

    def make_layout(self):
        E = self.E
        lay = [("enc.emb", "enc_emb.weight", False, None)]
        if self.bidir:
            lay += twinmap.rnn_layout("enc", "enc_rnn", "_l0", cols=slice(0, E))
            lay += [("enc_bwd.emb", "enc_bwd_emb.weight", False, None)]
            lay += twinmap.rnn_layout("enc_bwd", "enc_rnn", "_l0_reverse", cols=slice(E, 2 * E))
        else:
            lay += twinmap.rnn_layout("enc", "enc_rnn", "_l0")
        lay += [("dec.emb", "dec_emb.weight", False, None),
                ("dec.W_x", "dec_cell.weight_ih", True, None),
                ("dec.W_h", "dec_cell.weight_hh", True, None),
                ("dec.b", "dec_cell.bias_ih", False, None),
                ("out.W", "out.weight", True, None), ("out.b", "out.bias", False, None),
                ("att.W_1", "att_W1.weight", True, None), ("att.W_2", "att_W2.weight", True, None),
                ("att.v", "att_v", False, None)]
        if self.bidir:
            lay += [("bridge.W_s", "bridge.weight", True, None), ("bridge.b_s", "bridge.bias", False, None)]
        return lay

    # ------------------------------------------------------------ the model
    def encode(self, src, lens):
        """-> ann [B, T, Hc] (zeros past each length), the decoder's initial state."""
        x = self.enc_emb(src)
        if self.bidir:
            x = torch.cat([x, self.enc_bwd_emb(src)], dim=2)
        packed = pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        out, state = self.enc_rnn(packed)
        ann, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        h_n = state[0] if self.cell == "lstm" else state          # [directions, B, H]
        if self.bidir:                       # s_0 = tanh([h_fwd_T ; h_bwd_1] W_s + b_s), c_0 = 0
            s0 = torch.tanh(self.bridge(torch.cat([h_n[0], h_n[1]], dim=1)))
            state0 = (s0, torch.zeros_like(s0)) if self.cell == "lstm" else s0
        else:                                # s_0 = h_T (c_0 = c_T)
            state0 = (state[0][0], state[1][0]) if self.cell == "lstm" else h_n[0]
        return ann, state0

    def step(self, ann, keys, lens, state, prev):
        """One decoder step for every row: -> (new state, s_t)."""
        s = state[0] if self.cell == "lstm" else state
        e = torch.tanh(keys + self.att_W2(s).unsqueeze(1)) @ self.att_v       # [B, T]
        a = masked_softmax(e, lens)
        c = torch.bmm(a.unsqueeze(1), ann).squeeze(1)                         # [B, Hc]
        state = self.dec_cell(torch.cat([self.dec_emb(prev), c], dim=1), state)
        return state, (state[0] if self.cell == "lstm" else state)

    def forward(self, src, lens, tgt_in):
        ann, state = self.encode(src, lens)
        keys = self.att_W1(ann)                                               # h_i W_1, once
        states = []
        for t in range(tgt_in.shape[1]):
            state, s = self.step(ann, keys, lens, state, tgt_in[:, t])
            states.append(s)
        return self.out(torch.stack(states, dim=1))

    @staticmethod
    def loss(logits, tgt_out):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID)

    def c_grads(self):
        return twinmap.c_grads(self, self.layout)

    def to_c(self):
        return twinmap.to_c(self, self.layout)

    @torch.no_grad()
    def greedy(self, src, max_out):
        lens = torch.tensor([src.shape[0]])
        ann, state = self.encode(src.unsqueeze(0), lens)
        keys = self.att_W1(ann)
        prev, out = BOS_ID, []
        for _ in range(max_out):
            state, s = self.step(ann, keys, lens, state, torch.tensor([prev]))
            tok = int(torch.argmax(F.log_softmax(self.out(s[0]), dim=-1)))
            if tok == EOS_ID:
                break
            out.append(tok)
            prev = tok
        return out


def build(cfg, tensors, dtype=torch.float64):
    return BahdanauTwin(cfg, tensors, dtype)
