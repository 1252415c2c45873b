#!/usr/bin/env python3
"""call_circles.py - no two source files call each other: for every object of
a build's libraries (BUILD/lib*.a, read with nm), the functions and data it
defines and the ones it uses; two objects that each use something the other
defines are a circle, printed as

    circle: lib06.a:block.o calls moe_forward of lib06.a:moe.o, and lib06.a:moe.o calls mlp_forward of lib06.a:block.o

and the script exits 1 (2: no libraries). A reader can then start from one
file and follow its calls down without meeting it again; the ladder rule
(tools/ladder.sh) is the same idea between chapters.

    python3 tools/call_circles.py [BUILD]     (tests/test_ladder.sh runs it)
"""
import glob
import itertools
import os
import subprocess
import sys


def objects(lib):
    """[(name, defined, used)] for each member of the archive lib, as nm lists them."""
    out = subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout
    members, name, defined, used = [], None, set(), set()
    for line in out.splitlines():
        if line.endswith(":") and " " not in line:   # "block.o:" starts a member
            if name is not None:
                members.append((name, defined, used))
            name, defined, used = line[:-1], set(), set()
            continue
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    if name is not None:
        members.append((name, defined, used))
    return [(os.path.basename(lib) + ":" + n, d, u) for n, d, u in members]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    libs = sorted(glob.glob(os.path.join(build, "lib*.a")))
    if not libs:
        print(f"call_circles: no libraries in {build}/ (run make first)", file=sys.stderr)
        return 2
    objs = [o for lib in libs for o in objects(lib)]
    circles = 0
    for (a, def_a, use_a), (b, def_b, use_b) in itertools.combinations(objs, 2):
        a_to_b, b_to_a = sorted(use_a & def_b), sorted(use_b & def_a)
        if a_to_b and b_to_a:
            print(f"circle: {a} calls {a_to_b[0]} of {b}, and {b} calls {b_to_a[0]} of {a}")
            circles += 1
    if circles == 0:
        print(f"call_circles: {len(objs)} objects of {len(libs)} libraries, no two calling each other")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
