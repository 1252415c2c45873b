#!/usr/bin/env python3
"""fashion_mnist_stats.py - the Fashion-MNIST figures of data/README.md, measured with Python's standard
library alone, independently of the C reader (tests/test_idx.c checks that the C loader finds the same):
each file's header, the first labels, the images per class of each split (and of the first 1,000, 5,000 and
20,000 training images, chapter 07's --train-size), and the pixels' mean, std and share of zeros.

    python3 tools/fashion_mnist_stats.py [DIR]      (DIR: default /usr/share/datasets/fashion-mnist; about 6 s)
"""
import collections
import gzip
import math
import sys

d = (sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist").rstrip("/") + "/"
ti, tl, si, sl = (gzip.open(d + n).read() for n in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                                    "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"))
for b in (ti, tl, si, sl):
    print(b[:4].hex(), [int.from_bytes(b[4 + 4 * k:8 + 4 * k], "big") for k in range(b[3])], len(b))
print("first train label", tl[8], "first test label", sl[8])
for n in (1000, 5000, 20000, 55000):
    print("train, first %d, per class" % n, sorted(collections.Counter(tl[8:8 + n]).items()))
print("valid per class", sorted(collections.Counter(tl[8 + 55000:]).items()))
print("test per class", sorted(collections.Counter(sl[8:]).items()))


def stats(px):
    h = collections.Counter(px)
    n = len(px)
    m = sum(v / 255 * c for v, c in h.items()) / n
    var = sum(c * (v / 255 - m) ** 2 for v, c in h.items()) / n
    return m, math.sqrt(var), h[0] / n


print("train 55000 mean std frac0", stats(ti[16:16 + 55000 * 784]))
print("all 60000 mean std frac0", stats(ti[16:]))
print("test mean std frac0", stats(si[16:]))
