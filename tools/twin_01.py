"""twin_01.py - chapter 01's RNN encoder-decoder, rebuilt from standard PyTorch modules.

The C model (chapters/01_rnn_seq2seq/rnn_seq2seq.h):
    encoder   h_t = cell(embed(x_t), h_{t-1}),  h_0 = 0; padded steps keep the state
    context   c = h_T (the state after each row's real last token)
    decoder   s_t = cell([embed(y_{t-1}) ; c], s_{t-1}),  s_0 = c  (LSTM: cell state too)
    output    logits_t = s_t W_out + b_out;  loss = mean cross-entropy over non-<pad> targets

Here the same thing is nn.Embedding + nn.GRU/nn.LSTM/nn.RNN + nn.Linear, with
pack_padded_sequence for the padded source (its final state is exactly
"padded steps keep the state"). LAYOUT below is the whole mapping between the
C checkpoint and these modules (tools/README.md has it as a table).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

CHAPTER = "01_rnn_seq2seq"
MODEL = "rnn_seq2seq"             # the checkpoint config's model= line
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # common/data/vocab.h

# The runs make twin trains and compares: a label and the chapter binary's flags.
_SMALL = ["--state", "32", "--embed", "16", "--batch", "16"]
RUNS = [
    ("gru dates", ["--cell", "gru", "--task", "dates"] + _SMALL),
    ("lstm reverse", ["--cell", "lstm", "--task", "reverse", "--min-len", "3", "--max-len", "12"] + _SMALL),
    ("rnn dates", ["--cell", "rnn", "--task", "dates"] + _SMALL),
]

RNN_CLASSES = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def cell_layout(c_prefix, t_prefix):
    """C cell weights -> a torch nn.RNN/GRU/LSTM (single layer).
    The C cell computes x W_x + h W_h + b with W_x [I, G*H]: torch computes
    x weight_ih^T + b_ih + h weight_hh^T + b_hh with weight_ih [G*H, I], so
    weight_ih = W_x^T, weight_hh = W_h^T, bias_ih = b, bias_hh = 0 (frozen).
    Gate order is the same: GRU [r|z|n], LSTM [i|f|g|o]."""
    return [(f"{c_prefix}.W_x", f"{t_prefix}.weight_ih_l0", True),
            (f"{c_prefix}.W_h", f"{t_prefix}.weight_hh_l0", True),
            (f"{c_prefix}.b", f"{t_prefix}.bias_ih_l0", False)]


# (C tensor name, torch parameter name, transposed?) in checkpoint order.
LAYOUT = ([("enc.emb", "enc_emb.weight", False)] + cell_layout("enc", "enc_rnn") +
          [("dec.emb", "dec_emb.weight", False)] + cell_layout("dec", "dec_rnn") +
          [("out.W", "out.weight", True), ("out.b", "out.bias", False)])


class RnnSeq2SeqTwin(nn.Module):
    def __init__(self, cell, V_src, V_tgt, E, H):
        super().__init__()
        self.cell = cell
        rnn = RNN_CLASSES[cell]
        extra = {"nonlinearity": "tanh"} if cell == "rnn" else {}
        self.enc_emb = nn.Embedding(V_src, E)
        self.enc_rnn = rnn(E, H, batch_first=True, **extra)
        self.dec_emb = nn.Embedding(V_tgt, E)
        self.dec_rnn = rnn(E + H, H, batch_first=True, **extra)   # input [embed(y) ; c]
        self.out = nn.Linear(H, V_tgt)
        for r in (self.enc_rnn, self.dec_rnn):   # the C cells have one bias: b_hh stays 0
            nn.init.zeros_(r.bias_hh_l0)
            r.bias_hh_l0.requires_grad_(False)

    # -------------------------------------------------------- C <-> torch
    def load_c(self, tensors):
        """Copy C checkpoint tensors (name -> array) into the modules."""
        params = dict(self.named_parameters())
        for c_name, t_name, transpose in LAYOUT:
            value = torch.as_tensor(tensors[c_name], dtype=params[t_name].dtype)
            value = value.t() if transpose else value
            if value.shape != params[t_name].shape:
                raise ValueError(f"{c_name} {tuple(tensors[c_name].shape)} does not fit {t_name} "
                                 f"{tuple(params[t_name].shape)}")
            with torch.no_grad():
                params[t_name].copy_(value)

    def to_c(self):
        """Parameters in the C layout and checkpoint order (for ckpt.write)."""
        params = dict(self.named_parameters())
        return {c: (params[t].detach().t() if tr else params[t].detach()).float().numpy()
                for c, t, tr in LAYOUT}

    def c_grads(self):
        """Gradients in the C layout: C name -> tensor."""
        params = dict(self.named_parameters())
        return {c: (params[t].grad.t() if tr else params[t].grad) for c, t, tr in LAYOUT}

    # -------------------------------------------------------- the model
    def encode(self, src, lens):
        """src [B, T] padded ids, lens [B] -> the encoder's final state (h [1,B,H], or (h, c))."""
        packed = pack_padded_sequence(self.enc_emb(src), lens.cpu(), batch_first=True, enforce_sorted=False)
        _, state = self.enc_rnn(packed)
        return state

    def decode(self, state, tgt_in):
        """Teacher forcing: tgt_in [B, Tt] -> logits [B, Tt, V]."""
        context = state[0] if self.cell == "lstm" else state      # [1, B, H]
        ctx = context[0].unsqueeze(1).expand(-1, tgt_in.shape[1], -1)
        inputs = torch.cat([self.dec_emb(tgt_in), ctx], dim=2)
        states, _ = self.dec_rnn(inputs, state)                    # s_0 = c
        return self.out(states)

    def forward(self, src, lens, tgt_in):
        return self.decode(self.encode(src, lens), tgt_in)

    @staticmethod
    def loss(logits, tgt_out):
        """Mean cross-entropy per non-<pad> target token (as rnn_seq2seq_train_step)."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID)

    @torch.no_grad()
    def greedy(self, src, max_out):
        """One unpadded source [T] -> token list (without <eos>), as decode_greedy."""
        state = self.encode(src.unsqueeze(0), torch.tensor([src.shape[0]]))
        context = (state[0] if self.cell == "lstm" else state)[0]   # [1, H]
        prev, out = BOS_ID, []
        for _ in range(max_out):
            x = torch.cat([self.dec_emb(torch.tensor([[prev]])), context.unsqueeze(1)], dim=2)
            s, state = self.dec_rnn(x, state)
            tok = int(torch.argmax(F.log_softmax(self.out(s[0, 0]), dim=-1)))
            if tok == EOS_ID:
                break
            out.append(tok)
            prev = tok
        return out


def build(cfg, tensors, dtype=torch.float64):
    """A twin from a checkpoint's config (dict) and tensors."""
    V_src, E = tensors["enc.emb"].shape
    V_tgt = tensors["dec.emb"].shape[0]
    model = RnnSeq2SeqTwin(cfg["cell"], V_src, V_tgt, E, int(cfg.get("state", cfg.get("hidden")))).to(dtype)
    model.load_c(tensors)
    return model
