#!/usr/bin/env bash
# reuse_run.sh - sourced by the experiment scripts (length_ood.sh, gpt_moe.sh, gpt_variants.sh,
# compare_seq2seq.sh, compare_caption.sh): whether a run they would start is already done.
#
#   source tools/reuse_run.sh
#   if reuse_run "$DIR/$name" --steps "$STEPS" --pos rope; then ...skip...; else ...train...; fi
#
# reuse_run RUN_DIR FLAGS...: 0 when RUN_DIR/results.json exists and every --flag VALUE of FLAGS
# that the file records (the key is the flag's name with _ for -: --min-len 5 -> "min_len") has
# that value; it prints "NAME: reusing RUN_DIR (steps 2000, ...)" so the table's source is said.
# 1 otherwise: no file (nothing printed), or a file of other settings (it prints which, and the
# run is done again into the same directory). Flags that do not decide the figures (--out,
# --load, --threads, --quiet, --samples, --backend) and flags without a value are not compared.
reuse_run() {
  local dir=$1
  shift
  [ -f "$dir/results.json" ] || return 1
  local said
  if said=$(/usr/bin/python3 - "$dir/results.json" "$@" <<'PY'
import json, sys

path, args = sys.argv[1], sys.argv[2:]
try:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
except (OSError, ValueError) as e:
    print("cannot read %s (%s)" % (path, e))
    sys.exit(1)
skip = {"out", "load", "threads", "quiet", "samples", "backend"}
same, other = [], []
i = 0
while i < len(args):
    flag = args[i]
    if not flag.startswith("--"):
        i += 1
        continue
    if i + 1 >= len(args) or args[i + 1].startswith("--"):
        i += 1                                     # a flag without a value: not recorded as given
        continue
    key, want = flag[2:].replace("-", "_"), args[i + 1]
    i += 2
    if key in skip or key not in data or (key == "mlp" and want == "moe"):   # moe: the experts' keys say it
        continue
    have = data[key]
    try:
        equal = isinstance(have, (int, float)) and not isinstance(have, bool) and float(want) == float(have)
    except ValueError:
        equal = False
    if equal or str(have) == want:
        same.append("%s %s" % (key, want))
    else:
        other.append("%s %s there, %s now" % (key, have, want))
if other:
    print("; ".join(other))
    sys.exit(1)
print(", ".join(same) if same else "no settings recorded to compare")
PY
  ); then
    echo "$(basename "$dir"): reusing $dir ($said; delete the directory to run it again)"
    return 0
  fi
  echo "$(basename "$dir"): $dir/results.json is of other settings ($said): running it again"
  return 1
}
