"""goldfile.py - read and write the golden tensor files (tests/golden/README.md).

One file is a list of named tensors:

    offset 0   8 bytes  magic "ATTNGOLD"
           8   u32      format version (1)
          12   u32      number of tensors T
    then T times:
               u32      name length n, then n bytes of name (ASCII, no NUL)
               u32      dtype: 0 = float32, 1 = int32
               u32      ndim (0..4), then ndim x u32 dims
               count x 4 bytes of values, row-major (count = product of dims)

All integers and values are little-endian. Names are "<case>/<tensor>" in the
golden files (tests/golden/*.bin), and plain names in the twin dumps.

The C side of the same format is tests/golden.{h,c}.
"""
import struct
from collections import OrderedDict

import numpy as np

MAGIC = b"ATTNGOLD"
VERSION = 1
DTYPES = {0: np.float32, 1: np.int32}


def write(path, tensors):
    """tensors: an ordered mapping name -> numpy array (float* -> float32, int* -> int32)."""
    out = bytearray(MAGIC)
    out += struct.pack("<II", VERSION, len(tensors))
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        if arr.dtype.kind == "f":
            code, arr = 0, arr.astype("<f4")
        elif arr.dtype.kind in "iub":
            code, arr = 1, arr.astype("<i4")
        else:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        if arr.ndim > 4:
            raise ValueError(f"{name}: at most 4 dimensions, got {arr.shape}")
        raw = name.encode("ascii")
        out += struct.pack("<I", len(raw)) + raw
        out += struct.pack("<II", code, arr.ndim)
        out += struct.pack(f"<{arr.ndim}I", *arr.shape)
        out += np.ascontiguousarray(arr).tobytes()
    with open(path, "wb") as f:
        f.write(out)


def read(path):
    """Returns an OrderedDict name -> numpy array (float32 or int32)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a golden tensor file (magic {data[:8]!r}, expected {MAGIC!r})")
    version, count = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise ValueError(f"{path}: format version {version}, expected {VERSION}")
    pos = 16
    tensors = OrderedDict()
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode("ascii")
        pos += 4 + n
        code, ndim = struct.unpack_from("<II", data, pos)
        pos += 8
        dims = struct.unpack_from(f"<{ndim}I", data, pos)
        pos += 4 * ndim
        count_values = int(np.prod(dims)) if ndim else 1
        dtype = np.dtype(DTYPES[code]).newbyteorder("<")
        arr = np.frombuffer(data, dtype=dtype, count=count_values, offset=pos).reshape(dims)
        pos += 4 * count_values
        tensors[name] = arr.astype(DTYPES[code])
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} unexpected bytes after the last tensor")
    return tensors
