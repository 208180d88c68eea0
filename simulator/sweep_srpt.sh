#!/bin/sh
# The sweep behind elastic-sim's --weights remaining defaults (docs/results.md): dp-srpt on the
# study's workloads (1.0x and 2.0x load, both mechanisms) for each srpt exponent and rescale
# payback (0: Pollux's age-based penalty alone; otherwise the remaining-time penalty on top of it).
# Prints a markdown table of average JCT per setting.
#   simulator/sweep_srpt.sh [BUILD_DIR] > sweep.md
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
data=${ELASTIC_DATA_DIR:-$here/../shared/data}
for x in ${SWEEP_EXPONENTS:-0.25 0.5 0.75 1}; do
  for k in ${SWEEP_PAYBACKS:-0 1 3 5}; do
    "$build/bin/elastic-sim" study --data-dir "$data" --policies dp-srpt \
      --srpt-exponent "$x" --rescale-payback "$k"
  done
done | /usr/bin/python3 -c '
import json, sys
rows = {}
for line in sys.stdin:
    d = json.loads(line)
    if d.get("kind") != "mean":
        continue
    key = (d["srpt_exponent"], d["rescale_payback"])
    rows.setdefault(key, {})[(d["load"], d["mechanism"])] = d["avg_jct_s"]
cols = [("1.0", "restart"), ("1.0", "stop-free"), ("2.0", "restart"), ("2.0", "stop-free")]
print("| srpt exponent | rescale payback | " + " | ".join(f"{l}x {m} [s]" for l, m in cols) + " |")
print("| ---: | ---: | " + " | ".join("---:" for _ in cols) + " |")
for (x, k), v in sorted(rows.items()):
    print(f"| {x:g} | {k:g} | " + " | ".join(f"{v[c]:.0f}" if c in v else "" for c in cols) + " |")
'
