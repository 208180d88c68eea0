#!/bin/bash
# The pauses of grows and shrinks through the job's rendezvous (separately launched groups, as
# extension jobs join), for whichever MPI stack the build uses (src/mpi_stack.h): a parent of 2
# ranks holding STATE_MB of state; a group of 1 joins (grow1) and leaves by a shrink command; a
# group of 4 joins (grow4) and leaves (shrink, 4 ranks). As elasticd does, the grow command goes to
# the parent once the group is up (its runtime says so: the `ready` message to elasticd, here the
# verbose log line "group G is up" that comes right after it), so the parent trains on while the
# group starts. Prints one JSON line with the parent's pause of each change (grow: from the
# command to training on, state hand-over included), and per grow the time from starting the
# group's launcher to its being up (launch_to_ready_s) and to the join's end (launch_to_join_s).
# Usage:
#   join_pause_bench.sh BIN [STATE_MB]
set -uo pipefail
bin=$1 state_mb=${2:-100}
work=$(mktemp -d /tmp/elastic-join-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }
good=0123456789abcdef0123456789abcdef
mkdir -p "$work/commands"
export ELASTIC_JOB_ID=jbench$$ ELASTIC_POLL_INTERVAL_S=0.05 ELASTIC_CONNECT_TIMEOUT_S=30
args=(--sleep-ms 20 --samples 1000000 --epochs 1000 --state-mb "$state_mb")
ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_METRICS_FILE="$work/metrics.jsonl" \
  timeout -k 10 170 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
  "$bin/elastic-train-logreg" "${args[@]}" >"$work/parent.log" 2>&1 &
parent=$!; pids+=($parent)
for _ in $(seq 200); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
[[ -s $work/run/rendezvous.uri ]] || fail "no rendezvous URI"
sleep 2  # the parent trains
count() { grep -c "\"what\":\"$1\"" "$work/metrics.jsonl" 2>/dev/null; }
await() {  # await WHAT N: the N-th rescale record of kind WHAT (at most 60 s)
  for _ in $(seq 1200); do (( $(count "$1") >= $2 )) && return 0; sleep 0.05; done
  fail "no $1 number $2 within 60 s"
}
now() { date +%s.%N; }
since() { awk -v t="$(now)" -v s="$1" 'BEGIN { printf "%.6f", t - s }'; }  # seconds since $1
declare -A launch_s ready_s
n=0
for spec in 1:1 2:4; do
  g=${spec%%:*} ranks=${spec##*:}
  start=$(now)
  ELASTIC_LOG_LEVEL=verbose ELASTIC_GROUP_ID=$g ELASTIC_JOIN_TOKEN=$good timeout -k 10 120 "$bin/elastic-launch" --join -n "$ranks" \
    --oversubscribe --uri "$work/run/rendezvous.uri" -- "$bin/elastic-train-logreg" "${args[@]}" \
    >"$work/group$g.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1200); do grep -q "group $g is up" "$work/group$g.log" 2>/dev/null && break; sleep 0.05; done
  grep -q "group $g is up" "$work/group$g.log" || fail "group $g did not come up within 60 s"
  ready_s[$g]=$(since "$start")
  echo "{\"action\":\"grow\",\"group\":$g,\"join_token\":\"$good\"}" >"$work/commands/00$((++n)).json"
  await join "$g"
  launch_s[$g]=$(since "$start")
  sleep 1
  echo "{\"action\":\"shrink\",\"group\":$g}" >"$work/commands/00$((++n)).json"
  await shrink "$g"
  sleep 1
done
kill -TERM "$parent"; wait "$parent" 2>/dev/null
pause() { grep "\"what\":\"$1\"" "$work/metrics.jsonl" | sed -n "${2}p" | sed -E 's/.*"pause_s":([0-9.e+-]+).*/\1/'; }
kind=$("$bin/elastic-launch" --help | sed -n -E 's/.*MPI rendezvous \(([a-z-]+)\).*/\1/p')
echo "{\"bench\": \"join_pause\", \"rendezvous\": \"$kind\", \"state_mb\": $state_mb," \
  "\"grow1_pause_s\": $(pause join 1), \"grow1_launch_to_ready_s\": ${ready_s[1]}, \"grow1_launch_to_join_s\": ${launch_s[1]}," \
  "\"shrink1_pause_s\": $(pause shrink 1)," \
  "\"grow4_pause_s\": $(pause join 2), \"grow4_launch_to_ready_s\": ${ready_s[2]}, \"grow4_launch_to_join_s\": ${launch_s[2]}," \
  "\"shrink4_pause_s\": $(pause shrink 2)}"
