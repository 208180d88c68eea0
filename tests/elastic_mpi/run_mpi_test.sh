#!/bin/bash
# Driver of the mpi-labelled elastic_mpi tests. Every process runs under `timeout`, so a hang
# fails the test (ctest's TIMEOUT is the outer limit). Usage:
#   run_mpi_test.sh rescale MPIEXEC BIN SCHEDULE LR_RULE
#   run_mpi_test.sh capi    MPIEXEC BIN
#   run_mpi_test.sh join    BIN            two separate launches join through one ompi-server
#   run_mpi_test.sh badtoken BIN           a joiner with a wrong token is refused
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
*)
  fail "unknown mode $mode"
  ;;
esac
echo PASS
