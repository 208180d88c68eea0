#!/bin/sh
# The heterogeneous study of docs/results.md: Sia's default cluster (simulator/clusters/
# sia-default.txt, 64 GPUs of three types) on Sia's published workloads (philly 1-8, saturn 1-10,
# taken in turn: philly 1, saturn 1, philly 2, ...), policies sia (solved exactly), dp (the dp
# policy), dp-srpt (solved exactly), pollux and optimus (type-unaware); dp-srpt-pm (Sia's power
# mean, p = -0.5, with dp-srpt's weights) on request. One JSON line per run,
# with "trace", "index" and "variant" added; runs one at a time. A variant ending in "-sf" runs
# under the stop-free mechanism (e.g. dp-srpt-sf, sia-sf: resizes on a job's type are pauses of
# --grow-cost / --shrink-cost, starts and moves to another type restarts); the others under
# checkpoint-restart, Sia's.
#   simulator/hetero_study.sh [BUILD_DIR] [TRACES] [VARIANTS] [INDICES] > hetero.jsonl
#   e.g. simulator/hetero_study.sh build "philly" "sia pollux" "1 2"
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
traces=${2:-philly saturn}
variants=${3:-sia dp dp-srpt pollux optimus}
indices=${4:-1 2 3 4 5 6 7 8 9 10}
data=${ELASTIC_DATA_DIR:-$here/../shared/data}
cluster=${ELASTIC_CLUSTER:-$here/simulator/clusters/sia-default.txt}
for i in $indices; do
  for trace in $traces; do
    w="$data/sia-sosp23/workloads/$trace/workload-$i.csv"
    [ -f "$w" ] || continue
    for v in $variants; do
      case $v in
        *-sf) base=${v%-sf} mechanism="--rescale stop-free" ;;
        *) base=$v mechanism="" ;;
      esac
      case $base in
        dp-srpt) args="--policy dp --weights remaining --solver exact" ;;
        dp-srpt-pm) args="--policy dp --weights remaining --objective power-mean --p -0.5 --solver exact" ;;
        dp-exact) args="--policy dp --solver exact" ;;
        *) args="--policy $base" ;;
      esac
      args="$args $mechanism"
      # shellcheck disable=SC2086
      "$build/bin/elastic-sim" -q --data-dir "$data" --cluster "$cluster" --workload "$w" $args --json |
        sed "s|^{|{\"trace\":\"$trace\",\"index\":$i,\"variant\":\"$v\",|"
    done
  done
done
