"""twin_03.py - chapter 03's encoder-decoder with the general attention layer,
rebuilt from standard PyTorch modules.

The C model (chapters/03_dot_product_attention/attn_seq2seq.h): chapter 01's
encoder; its states X = [h_1 ; ... ; h_T] are the keys and values (K = V = X), or
with project_kv K = X W_K, V = X W_V; padded positions are masked. Scores:
    dot q.k,  scaled_dot q.k / sqrt(H),  multiplicative q W k^T,  additive v . tanh(k W_1 + q W_2)
Placement "luong": the decoder RNN runs on its own (s_t from embed(y_{t-1}) and
s_{t-1}), attention with query s_t, h~_t = tanh([c_t ; s_t] W_c + b_c), logits from h~_t.
Placement "bahdanau": attention with query s_{t-1}, s_t = cell([embed(y_{t-1}) ; c_t], s_{t-1}),
logits from s_t. Both start from s_0 = h_T (LSTM: c_0 = c_T).

Here: encoder nn.Embedding + nn.GRU/LSTM/RNN on a packed sequence; Luong's decoder
one nn.GRU/LSTM/RNN over the whole teacher-forced target (all queries at once, as
the C code's matrix form), Bahdanau's an nn.GRUCell/LSTMCell/RNNCell stepped in
Python; W, W_1, W_2, W_K, W_V nn.Linear(bias=False) (weight = the C matrix
transposed), v a vector, W_c nn.Linear(2H, H), the output nn.Linear(H, V). The
score formulas are written out with torch matrix products.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import twinmap
from twin_02 import CELL, RNN, masked_softmax, no_hidden_bias

CHAPTER = "03_dot_product_attention"
MODEL = "attn_seq2seq"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

_SMALL = ["--state", "32", "--embed", "16", "--attn", "16", "--batch", "16"]
_REVERSE = ["--task", "reverse", "--min-len", "3", "--max-len", "12"]
RUNS = [
    ("luong scaled gru", ["--cell", "gru", "--score", "scaled_dot", "--placement", "luong",
                          "--task", "dates"] + _SMALL),
    ("luong dot kv rnn", ["--cell", "rnn", "--score", "dot", "--placement", "luong", "--project-kv"]
     + _REVERSE + _SMALL),
    ("bahd. mult lstm", ["--cell", "lstm", "--score", "multiplicative", "--placement", "bahdanau",
                         "--task", "dates"] + _SMALL),
    ("bahd. additive kv", ["--cell", "gru", "--score", "additive", "--placement", "bahdanau",
                           "--project-kv"] + _REVERSE + _SMALL),
]


class AttnSeq2SeqTwin(nn.Module):
    def __init__(self, cfg, tensors, dtype=torch.float64):
        super().__init__()
        self.cell, self.score = cfg["cell"], cfg["score"]
        self.luong = cfg["placement"] == "luong"
        self.kv = int(cfg["project_kv"]) != 0
        V_src, E = tensors["enc.emb"].shape
        V_tgt = tensors["dec.emb"].shape[0]
        H, A = int(cfg.get("state", cfg.get("hidden"))), int(cfg["attn"])
        self.H = H
        extra = {"nonlinearity": "tanh"} if self.cell == "rnn" else {}
        self.enc_emb = nn.Embedding(V_src, E)
        self.enc_rnn = RNN[self.cell](E, H, batch_first=True, **extra)
        no_hidden_bias(self.enc_rnn, ["bias_hh_l0"])
        self.dec_emb = nn.Embedding(V_tgt, E)
        if self.luong:
            self.dec_rnn = RNN[self.cell](E, H, batch_first=True, **extra)
            no_hidden_bias(self.dec_rnn, ["bias_hh_l0"])
            self.comb = nn.Linear(2 * H, H)
        else:
            self.dec_cell = CELL[self.cell](E + H, H, **extra)
            no_hidden_bias(self.dec_cell, ["bias_hh"])
        self.out = nn.Linear(H, V_tgt)
        if self.score == "multiplicative":
            self.att_W = nn.Linear(H, H, bias=False)
        if self.score == "additive":
            self.att_W1 = nn.Linear(H, A, bias=False)
            self.att_W2 = nn.Linear(H, A, bias=False)
            self.att_v = nn.Parameter(torch.zeros(A))
        if self.kv:
            self.att_WK = nn.Linear(H, H, bias=False)
            self.att_WV = nn.Linear(H, H, bias=False)
        self.to(dtype)
        self.layout = self.make_layout()
        twinmap.load_c(self, self.layout, tensors)

    def make_layout(self):
        lay = [("enc.emb", "enc_emb.weight", False, None)] + twinmap.rnn_layout("enc", "enc_rnn")
        lay += [("dec.emb", "dec_emb.weight", False, None)]
        if self.luong:
            lay += twinmap.rnn_layout("dec", "dec_rnn")
        else:
            lay += [("dec.W_x", "dec_cell.weight_ih", True, None), ("dec.W_h", "dec_cell.weight_hh", True, None),
                    ("dec.b", "dec_cell.bias_ih", False, None)]
        lay += [("out.W", "out.weight", True, None), ("out.b", "out.bias", False, None)]
        if self.luong:
            lay += [("comb.W_c", "comb.weight", True, None), ("comb.b_c", "comb.bias", False, None)]
        if self.score == "multiplicative":
            lay += [("att.W", "att_W.weight", True, None)]
        if self.score == "additive":
            lay += [("att.W_1", "att_W1.weight", True, None), ("att.W_2", "att_W2.weight", True, None),
                    ("att.v", "att_v", False, None)]
        if self.kv:
            lay += [("att.W_K", "att_WK.weight", True, None), ("att.W_V", "att_WV.weight", True, None)]
        return lay

    # ------------------------------------------------------------ the model
    def encode(self, src, lens):
        """-> keys, values [B, T, H] and the initial decoder state (h_T, or (h_T, c_T))."""
        packed = pack_padded_sequence(self.enc_emb(src), lens, batch_first=True, enforce_sorted=False)
        out, state = self.enc_rnn(packed)
        X, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        K, V = (self.att_WK(X), self.att_WV(X)) if self.kv else (X, X)
        return K, V, state

    def attend(self, Q, K, V, lens):
        """Q [B, N_Q, H] over K, V [B, T, H] -> contexts [B, N_Q, H]."""
        if self.score == "dot":
            E = Q @ K.transpose(1, 2)
        elif self.score == "scaled_dot":
            E = Q @ K.transpose(1, 2) / math.sqrt(self.H)
        elif self.score == "multiplicative":
            E = self.att_W(Q) @ K.transpose(1, 2)                 # (q W) . k
        else:                                                     # v . tanh(k W_1 + q W_2)
            E = torch.tanh(self.att_W1(K).unsqueeze(1) + self.att_W2(Q).unsqueeze(2)) @ self.att_v
        return masked_softmax(E, lens) @ V

    def forward(self, src, lens, tgt_in):
        K, V, state = self.encode(src, lens)
        if self.luong:      # all Tt queries at once
            S, _ = self.dec_rnn(self.dec_emb(tgt_in), state)     # [B, Tt, H], from s_0 = h_T
            C = self.attend(S, K, V, lens)
            return self.out(torch.tanh(self.comb(torch.cat([C, S], dim=2))))
        state = (state[0][0], state[1][0]) if self.cell == "lstm" else state[0]
        states = []
        for t in range(tgt_in.shape[1]):
            state, s = self.bahdanau_step(K, V, lens, state, tgt_in[:, t])
            states.append(s)
        return self.out(torch.stack(states, dim=1))

    def bahdanau_step(self, K, V, lens, state, prev):
        s_prev = state[0] if self.cell == "lstm" else state
        c = self.attend(s_prev.unsqueeze(1), K, V, lens).squeeze(1)
        state = self.dec_cell(torch.cat([self.dec_emb(prev), c], dim=1), state)
        return state, (state[0] if self.cell == "lstm" else state)

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
        K, V, state = self.encode(src.unsqueeze(0), lens)
        if not self.luong:
            state = (state[0][0], state[1][0]) if self.cell == "lstm" else state[0]
        prev, out = BOS_ID, []
        for _ in range(max_out):
            if self.luong:
                S, state = self.dec_rnn(self.dec_emb(torch.tensor([[prev]])), state)
                C = self.attend(S, K, V, lens)
                top = torch.tanh(self.comb(torch.cat([C, S], dim=2)))[0, 0]
            else:
                state, s = self.bahdanau_step(K, V, lens, state, torch.tensor([prev]))
                top = s[0]
            tok = int(torch.argmax(F.log_softmax(self.out(top), dim=-1)))
            if tok == EOS_ID:
                break
            out.append(tok)
            prev = tok
        return out


def build(cfg, tensors, dtype=torch.float64):
    return AttnSeq2SeqTwin(cfg, tensors, dtype)
