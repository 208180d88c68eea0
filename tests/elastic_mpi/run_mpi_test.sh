#!/bin/bash
# Driver of the mpi-labelled elastic_mpi tests. Every process runs under `timeout`, so a hang
# fails the test (ctest's TIMEOUT is the outer limit). Usage:
#   run_mpi_test.sh rescale MPIEXEC BIN SCHEDULE LR_RULE
#   run_mpi_test.sh capi    MPIEXEC BIN
#   run_mpi_test.sh join    BIN            two separate launches join through one ompi-server
#   run_mpi_test.sh badtoken BIN           a joiner with a wrong token is refused
#   run_mpi_test.sh sigterm BIN            a joined group that gets SIGTERM leaves at a step boundary
set -uo pipefail
mode=$1; shift
work=$(mktemp -d /tmp/elastic-mpi-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The tolerance of the model comparison (docs/runtime.md explains it): relative max difference.
TOLERANCE=1e-9
SAMPLES=4096 EPOCHS=3

case $mode in
rescale)
  mpiexec=$1 bin=$2 schedule=$3 rule=$4
  # The reference: 2 ranks throughout, the same global batch schedule (sizes replaced by 2).
  reference=$(echo "$schedule" | sed -E 's/(^|->)[0-9]+/\12/g')
  mkdir -p "$work/ref" "$work/el"
  echo "elastic: $schedule   reference: $reference   lr rule: $rule"
  ELASTIC_SCHEDULE=$reference ELASTIC_SCHEDULE_EVERY=20 ELASTIC_LR_SCALING=$rule \
    timeout -k 10 90 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS --model-out "$work/ref/model" --ids-dir "$work/ref" \
    || fail "reference run failed"
  ELASTIC_SCHEDULE=$schedule ELASTIC_SCHEDULE_EVERY=20 ELASTIC_LR_SCALING=$rule \
    ELASTIC_METRICS_FILE="$work/el/metrics.jsonl" \
    timeout -k 10 150 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS --model-out "$work/el/model" --ids-dir "$work/el" \
    || fail "elastic run failed"
  # The schedule really ran: one rescale record per change, reaching its maximum size.
  grep '"type":"rescale"' "$work/el/metrics.jsonl"
  max=$(echo "$schedule" | tr -s '>-' '\n' | cut -d: -f1 | sort -n | tail -1)
  grep -q "\"gpus\":$max,\"pause_s\"" "$work/el/metrics.jsonl" || fail "never reached $max ranks"
  "$bin/elastic-train-logreg" --verify-ids "$work/el" --samples $SAMPLES --epochs $EPOCHS \
    || fail "samples not processed exactly once"
  "$bin/elastic-train-logreg" --compare "$work/ref/model" "$work/el/model" --tolerance $TOLERANCE \
    || fail "model differs from the reference"
  ;;
capi)
  mpiexec=$1 bin=$2
  out=$(ELASTIC_SCHEDULE="2->3->2" ELASTIC_SCHEDULE_EVERY=5 \
    timeout -k 10 60 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-c-api-example") || fail "C API example failed"
  echo "$out"
  [[ $out == "steps 20 world 2" ]] || fail "unexpected output"
  ;;
join|badtoken|sigterm)
  # Two separately launched groups join through the parent's ompi-server (connect/accept), as an
  # extension job would; the test plays elasticd by writing command files.
  bin=$1
  good=0123456789abcdef0123456789abcdef
  sent=$good
  [[ $mode == badtoken ]] && sent=fedcba9876543210fedcba9876543210
  mkdir -p "$work/commands"
  export ELASTIC_JOB_ID=test$$ ELASTIC_POLL_INTERVAL_S=0.2 ELASTIC_CONNECT_TIMEOUT_S=30
  ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_METRICS_FILE="$work/metrics.jsonl" \
    timeout -k 10 120 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 30 --samples $SAMPLES --epochs $EPOCHS --ids-dir "$work" \
    >"$work/parent.log" 2>&1 &
  parent=$!; pids+=($parent)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  [[ -s $work/run/rendezvous.uri ]] || fail "no rendezvous URI"
  ELASTIC_GROUP_ID=1 ELASTIC_JOIN_TOKEN=$sent \
    timeout -k 10 90 "$bin/elastic-launch" --join -n 1 --uri "$work/run/rendezvous.uri" -- \
    "$bin/elastic-train-logreg" --sleep-ms 30 --samples $SAMPLES --epochs $EPOCHS --ids-dir "$work" \
    >"$work/joiner.log" 2>&1 &
  joiner=$!; pids+=($joiner)
  echo "{\"action\":\"grow\",\"group\":1,\"join_token\":\"$good\"}" >"$work/commands/001.json"
  if [[ $mode != badtoken ]]; then
    for _ in $(seq 300); do grep -q '"what":"join"' "$work/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    if [[ $mode == join ]]; then
      echo '{"action":"shrink","group":1}' >"$work/commands/002.json"
    else  # scancel of the extension job: SIGTERM through timeout and elastic-launch to the rank
      kill -TERM $joiner
    fi
  fi
  wait $joiner; joiner_rc=$?
  wait $parent; parent_rc=$?
  pids=()
  echo "--- parent"; cat "$work/parent.log"; echo "--- joiner"; cat "$work/joiner.log"
  echo "--- rescales"; grep rescale "$work/metrics.jsonl"
  [[ $parent_rc == 0 ]] || fail "parent exited with $parent_rc"
  if [[ $mode != badtoken ]]; then
    [[ $mode == sigterm ]] && { grep -q "group 1 got SIGTERM: it leaves" "$work/parent.log" || fail "no SIGTERM leave"; }
    [[ $joiner_rc == 0 ]] || fail "joiner exited with $joiner_rc"
    grep -q '"gpus":3,"pause_s":[0-9.e-]*,"type":"rescale","what":"join"' "$work/metrics.jsonl" || fail "no join"
    grep -q '"gpus":2,"pause_s":[0-9.e-]*,"type":"rescale","what":"shrink"' "$work/metrics.jsonl" || fail "no shrink"
  else
    [[ $joiner_rc == 77 ]] || fail "refused joiner exited with $joiner_rc, expected 77"
    grep -q "refused by the running world (bad-token)" "$work/joiner.log" || fail "joiner did not report bad-token"
    grep -q "group 1 refused: bad-token" "$work/parent.log" || fail "parent did not refuse"
    grep -q '"what":"join"' "$work/metrics.jsonl" && grep -q '"gpus":3' "$work/metrics.jsonl" && fail "refused group merged"
  fi
  "$bin/elastic-train-logreg" --verify-ids "$work" --samples $SAMPLES --epochs $EPOCHS \
    || fail "samples not processed exactly once"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo PASS
