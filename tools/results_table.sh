#!/usr/bin/env bash
# results_table.sh - a Markdown table from the flat results.json files that
# the chapter programs write, e.g.
#   bash tools/results_table.sh out/*/results.json
# make run prints it; make readme (tools/readme_tables.py) puts it into the top README.
set -u
if [ "$#" -eq 0 ]; then
  echo "usage: tools/results_table.sh out/*/results.json" >&2
  exit 2
fi
echo "| chapter | task | model | test exact match | WER | PER | LM test | train s | command settings |"
echo "|---|---|---|---|---|---|---|---|---|"
for f in "$@"; do
  [ -f "$f" ] || { echo "results_table: no such file: $f" >&2; continue; }
  # One JSON object of "key": value pairs, no nesting: split on commas that
  # precede a quoted key, strip quotes.
  tr -d '\n{}' < "$f" | sed 's/, *"/\n"/g' | sed 's/^ *"\([^"]*\)": *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1\t\2/' |
  awk -F'\t' '
    { v[$1] = $2 }
    function pct(x) { return (x == "" ? "-" : sprintf("%.2f%%", 100 * x)) }
    function get(k) { return (k in v ? v[k] : "") }
    END {
      model = get("model")
      if (get("cell") != "") model = model " " get("cell")
      if (get("score") != "") model = model " " get("score")
      S = (get("state") != "" ? get("state") : get("hidden"))                           # the RNN state size
      if (get("cell") != "" && S != "") model = model " S=" S                           # (hidden= before)
      if (get("heads") != "") model = model " H=" get("heads")                          # attention heads
      if (get("pos") != "") model = model ", " get("pos") " positions"
      if (get("variant") != "") model = model " " get("variant")
      if (get("model") == "gpt") model = "gpt L=" get("layers") " D=" get("dim") " H=" get("heads") ", " get("tokens") "s"
      if (get("model") == "ch06_gpt_genre") model = "gpt L=" get("layers") " D=" get("dim") " H=" get("heads") " + a head, " get("headline")
      lm = "-"                                                                          # language models
      if (get("test_bpc") != "") lm = sprintf("%.3f bpc", get("test_bpc"))
      if (get("test_perplexity") != "") lm = sprintf("ppl %.1f", get("test_perplexity"))
      if (model == "") model = "-"
      settings = "steps " get("steps")
      if (get("max_len") != "" && get("task") == "reverse") settings = settings ", len " get("min_len") "-" get("max_len")
      if (get("beam") != "" && get("beam") != "1") settings = settings ", beam " get("beam")
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", get("chapter"), get("task"), model,
             pct(get("test_exact_match")), pct(get("test_wer")), pct(get("test_per")), lm,
             (get("train_seconds") == "" ? "-" : sprintf("%.0f", get("train_seconds"))), settings
    }'
done
