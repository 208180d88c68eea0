#!/bin/sh
# The reproduction study of docs/results.md: every policy variant on the Pollux workloads at 1.0x
# and 2.0x load (8 workloads each), once with every policy at the checkpoint-restart cost (30 s)
# and once at the stop-free cost (grow 1 s, shrink 0.1 s). One JSON line per run ("kind": "run")
# and one per (load, policy, mechanism) mean over the workloads ("kind": "mean").
#   simulator/study.sh [BUILD_DIR] [extra elastic-sim study options] > study.jsonl
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
[ $# -gt 0 ] && shift
# The defaults of `elastic-sim study` are the study: loads 1.0,2.0; workloads 1-8; mechanisms
# restart,stop-free; policies dp,dp-frozen,dp-srpt,dp-srpt-frozen,greedy,evolutionary,pollux,
# optimus,static,fifo; horizon 8 h. Options given here override them.
exec "$build/bin/elastic-sim" study --data-dir "${ELASTIC_DATA_DIR:-$here/../shared/data}" "$@"
