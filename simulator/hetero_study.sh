#!/bin/sh
# The heterogeneous study of docs/results.md: Sia's default cluster (simulator/clusters/
# sia-default.txt, 64 GPUs of three types) on Sia's published workloads (philly 1-8, saturn 1-10),
# policies sia, dp, dp-srpt (both solved exactly), pollux and optimus (type-unaware). One JSON line
# per run, with "trace" and "variant" added; runs one at a time.
#   simulator/hetero_study.sh [BUILD_DIR] [TRACES] [VARIANTS] > hetero.jsonl
#   e.g. simulator/hetero_study.sh build "philly" "sia pollux"
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
traces=${2:-philly saturn}
variants=${3:-sia dp dp-srpt pollux optimus}
data=${ELASTIC_DATA_DIR:-$here/../shared/data}
cluster=${ELASTIC_CLUSTER:-$here/simulator/clusters/sia-default.txt}
for trace in $traces; do
  for w in "$data/sia-sosp23/workloads/$trace"/workload-*.csv; do
    for v in $variants; do
      case $v in
        dp) args="--policy dp --solver exact" ;;
        dp-srpt) args="--policy dp --weights remaining --solver exact" ;;
        *) args="--policy $v" ;;
      esac
      # shellcheck disable=SC2086
      "$build/bin/elastic-sim" -q --data-dir "$data" --cluster "$cluster" --workload "$w" $args --json |
        sed "s|^{|{\"trace\":\"$trace\",\"variant\":\"$v\",|"
    done
  done
done
