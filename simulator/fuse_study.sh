#!/bin/bash
# The fused-sweep table of docs/results.md: the 8-hour Philly window (663 jobs) on 16 x 4 GPUs,
# without fusion (fifo, dp), with sweeps but no fusion (--fuse 1), and fused up to 16 trials per
# GPU under each profile (docs/simulator.md, "Fused sweeps"). Prints one markdown row per run.
#   [FUSE_STUDY_START="YYYY-MM-DD HH:MM:SS"] simulator/fuse_study.sh [BUILD_DIR] [DATA_DIR]
set -euo pipefail
build=${1:-build}
data=${2:-$(dirname "$0")/../../shared/data}
trace=$data/pollux-adaptdl-osdi21/traces/philly.csv
window=(--format philly --philly-start "${FUSE_STUDY_START:-2017-10-10 08:00:00}" --philly-hours 8 --data-dir "$data" -q --json)
echo "| policy | fusion | avg JCT [s] | p99 JCT [s] | makespan [s] | GPU-hours | rescales per job |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
run() {  # POLICY LABEL [ARGS...]
  local policy=$1 label=$2
  shift 2
  "$build/bin/elastic-sim" --workload "$trace" "${window[@]}" --policy "$policy" "$@" |
    /usr/bin/python3 -c 'import json, sys; s = json.load(sys.stdin); print("| %s | %s | %.0f | %.0f | %.0f | %.1f | %.2f |" % (sys.argv[1], sys.argv[2], s["avg_jct_s"], s["p99_jct_s"], s["makespan_s"], s["gpu_hours"], s["rescales_per_job"]))' "$policy" "$label"
}
run fifo "off"
run dp "off"
run dp "sweeps, 1 trial per GPU (--fuse 1)" --fuse 1
run dp "--fuse 16, each model's step times" --fuse 16
run dp "--fuse 16 --fuse-profile cpu-cnn" --fuse 16 --fuse-profile cpu-cnn
run dp "--fuse 16 --fuse-profile cpu-mlp" --fuse 16 --fuse-profile cpu-mlp
