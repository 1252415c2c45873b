"""variants.py - next to each seed FILE, write FILE-trunc (its first half)
and FILE-flip (one bit flipped in each 64-byte stretch, from a fixed seed):
the damaged files a loader must refuse with one clear error.

    /usr/bin/python3 tests/fuzz/variants.py FILE [FILE ...]
"""
import random
import sys

for path in sys.argv[1:]:
    data = open(path, "rb").read()
    open(path + "-trunc", "wb").write(data[: len(data) // 2])
    rng = random.Random(len(data))
    flipped = bytearray(data)
    # keep the first byte (the targets' mode byte, or a magic) so the flips land in the body
    for start in range(1, len(flipped), 64):
        i = rng.randrange(start, min(start + 64, len(flipped)))
        flipped[i] ^= 1 << rng.randrange(8)
    open(path + "-flip", "wb").write(bytes(flipped))
