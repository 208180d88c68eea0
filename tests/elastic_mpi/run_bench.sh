#!/bin/bash
# elastic-mpi-bench, label bench: allreduce in a world launched at 4 ranks, then the rescale
# cases from a 2-rank world (the merged_allreduce ratio compares the two). JSON lines on stdout.
set -uo pipefail
mpiexec=$1 bin=$2
launched=$(timeout -k 10 60 "$mpiexec" --oversubscribe -np 4 "$bin/elastic-mpi-bench" --allreduce-only) || exit 1
echo "$launched"
seconds=$(echo "$launched" | sed -E 's/.*"launched_allreduce_s": ([0-9.e+-]+).*/\1/')
timeout -k 10 200 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-mpi-bench" --launched-allreduce-s "$seconds"
