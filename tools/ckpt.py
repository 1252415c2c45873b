"""ckpt.py - read and write the C checkpoints (format: common/io/checkpoint.h) from Python.

    config_text, tensors = read("out/01_rnn_seq2seq/model.ckpt")
    cfg = parse_config(config_text)          # {"cell": "gru", "hidden": "256", ...}
    write("copy.ckpt", config_text, tensors) # byte-identical to what C writes

Layout (little-endian):
    "ATTNCKPT" | u32 version (1) | u32 L | L bytes config "key=value\\n" lines
    | u32 T | T x (u32 n, name, u32 ndim, ndim x u32 dims, f32 values)
    | version 2 only (a checkpoint so far): u32 S, S bytes of training state (skipped here)
    | u32 CRC-32 (zlib) of every byte before it
"""
import struct
import zlib
from collections import OrderedDict

import numpy as np

MAGIC = b"ATTNCKPT"
VERSION = 1
VERSION_STATE = 2   # the same, and a training state after the tensors (a run's checkpoint so far)


def read(path):
    """Returns (config_text, OrderedDict name -> float32 array with its dims)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a checkpoint (magic {data[:8]!r}, expected {MAGIC!r})")
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(data[:-4]) & 0xFFFFFFFF != crc:
        raise ValueError(f"{path}: CRC mismatch (file damaged or truncated)")
    version, L = struct.unpack_from("<II", data, 8)
    if version not in (VERSION, VERSION_STATE):
        raise ValueError(f"{path}: checkpoint version {version}, expected {VERSION} or {VERSION_STATE}")
    config = data[16:16 + L].decode("utf-8")
    pos = 16 + L
    (T,) = struct.unpack_from("<I", data, pos)
    pos += 4
    tensors = OrderedDict()
    for _ in range(T):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode("ascii")
        pos += 4 + n
        (ndim,) = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from(f"<{ndim}I", data, pos + 4)
        pos += 4 + 4 * ndim
        count = int(np.prod(dims))
        tensors[name] = np.frombuffer(data, dtype="<f4", count=count, offset=pos).reshape(dims).astype(np.float32)
        pos += 4 * count
    if version == VERSION_STATE:
        (S,) = struct.unpack_from("<I", data, pos)
        pos += 4 + S
    if pos != len(data) - 4:
        raise ValueError(f"{path}: {len(data) - 4 - pos} unexpected bytes before the CRC")
    return config, tensors


def write(path, config_text, tensors):
    """Write a checkpoint the C programs can --load (tensor names, order and
    dims must match what the chapter's model declares)."""
    raw = config_text.encode("utf-8")
    out = bytearray(MAGIC) + struct.pack("<II", VERSION, len(raw)) + raw
    out += struct.pack("<I", len(tensors))
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
        nm = name.encode("ascii")
        out += struct.pack("<I", len(nm)) + nm + struct.pack("<I", arr.ndim)
        out += struct.pack(f"<{arr.ndim}I", *arr.shape) + arr.tobytes()
    out += struct.pack("<I", zlib.crc32(bytes(out)) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(out)


def parse_config(text):
    """'key=value' lines -> dict of strings."""
    cfg = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            cfg[k] = v
    return cfg
