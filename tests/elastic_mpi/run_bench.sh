#!/bin/bash
# elastic-mpi-bench, label bench: allreduce in a world launched at 4 ranks, then the rescale
# cases from a 2-rank world (the merged_allreduce ratio compares the two, side by side in one
# run). JSON lines on stdout; exits 1 when a case misses its target (elastic-mpi-bench names it on
# stderr; docs/results.md, "Benchmark targets"; ELASTIC_BENCH_TIGHTEN tightens every target).
set -uo pipefail
mpiexec=$1 bin=$2
launched=$(timeout -k 10 60 "$mpiexec" --oversubscribe -np 4 "$bin/elastic-mpi-bench" --allreduce-only) || {
  echo "run_bench.sh: the 4-rank allreduce run failed (exit $?)" >&2
  exit 1
}
echo "$launched"
seconds=$(echo "$launched" | sed -E 's/.*"launched_allreduce_s": ([0-9.e+-]+).*/\1/')
timeout -k 10 200 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-mpi-bench" --launched-allreduce-s "$seconds"
status=$?
if [[ $status -ne 0 ]]; then
  echo "run_bench.sh: elastic-mpi-bench exited $status (a missed target is named above)" >&2
  exit 1
fi
