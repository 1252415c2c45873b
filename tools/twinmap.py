"""twinmap.py - move tensors between a C checkpoint and a torch module by a layout table.

A layout is a list of (C name, torch parameter name, transpose, index):
    transpose  the C matrix is the transpose of torch's (C computes x W, torch x W^T)
    index      None, or a tuple of slices: the C tensor is that block of the torch
               parameter (e.g. W_Q is rows 0..D-1 of MultiheadAttention.in_proj_weight)
load_c() copies the C tensors in; c_grads() reads the gradients back in the C layout.
Torch parameters not named in the layout (a frozen zero bias, an identity output
projection) keep what the module set them to.
"""
import torch


def _block(param, index):
    return param if index is None else param[index]


def load_c(module, layout, tensors):
    params = dict(module.named_parameters())
    for c_name, t_name, transpose, index in layout:
        target = _block(params[t_name], index)
        value = torch.as_tensor(tensors[c_name], dtype=target.dtype)
        value = value.t() if transpose else value
        if value.shape != target.shape:
            raise ValueError(f"{c_name} {tuple(tensors[c_name].shape)} does not fit {t_name}"
                             f"{'' if index is None else str(index)} {tuple(target.shape)}")
        with torch.no_grad():
            target.copy_(value)


def to_c(module, layout):
    params = dict(module.named_parameters())
    out = {}
    for c_name, t_name, transpose, index in layout:
        v = _block(params[t_name].detach(), index)
        out[c_name] = (v.t() if transpose else v).float().numpy()
    return out


def c_grads(module, layout):
    params = dict(module.named_parameters())
    out = {}
    for c_name, t_name, transpose, index in layout:
        g = params[t_name].grad
        if g is None:
            g = torch.zeros_like(params[t_name])
        g = _block(g, index)
        out[c_name] = g.t() if transpose else g
    return out


def freeze(param, value=0.0):
    """A torch parameter the C model does not have: pinned (zero bias, identity matrix)."""
    with torch.no_grad():
        if isinstance(value, torch.Tensor):
            param.copy_(value)
        else:
            param.fill_(value)
    param.requires_grad_(False)


def rnn_layout(c_prefix, t_prefix, suffix="_l0", cols=None):
    """C cell weights -> torch nn.RNN/GRU/LSTM direction (see twin_01.cell_layout):
    weight_ih = W_x^T, weight_hh = W_h^T, bias_ih = b (bias_hh frozen at 0).
    cols: the C W_x is only these input columns of weight_ih (the other columns are 0)."""
    ih_index = None if cols is None else (slice(None), cols)
    return [(f"{c_prefix}.W_x", f"{t_prefix}.weight_ih{suffix}", True, ih_index),
            (f"{c_prefix}.W_h", f"{t_prefix}.weight_hh{suffix}", True, None),
            (f"{c_prefix}.b", f"{t_prefix}.bias_ih{suffix}", False, None)]
