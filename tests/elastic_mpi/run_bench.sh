#!/bin/bash
# elastic-mpi-bench, label bench: the rescale cases from a 2-rank world (grow1, grow4, shrink, ...)
# and merged_allreduce, the allreduce of a merged world (2 launched ranks + 2 spawned) against a
# world launched at 4 ranks. JSON lines on stdout; exits 1 when a case misses its target
# (elastic-mpi-bench names it on stderr; docs/results.md, "Benchmark targets";
# ELASTIC_BENCH_TIGHTEN tightens every target).
#
# The comparison is made over the same nodes and transports (docs/runtime.md, "merged_allreduce"):
# two "nodes" of this machine, made separate by as_node.sh (each daemon under its own host name,
# so Open MPI connects ranks on different ones over TCP, loopback here, as across hosts, and knows
# the world spans two nodes). The merged world: 2 ranks launched on the first node, 2 spawned onto
# the second (the free slots); the launched world: 2 ranks on each. The two are measured in turn,
# ROUNDS pairs (ELASTIC_BENCH_ROUNDS, default 5), and compared by their medians, so that a burst
# of load on the shared cores does not decide the ratio. The launched world on one node (all
# shared memory) is printed for information only: ranks of different launches never share memory
# (Open MPI 4.1 and 5 alike), so no merged world can match it on one host. The rescale cases
# (pauses) run on one node, as before.
# Usage: run_bench.sh MPIEXEC BIN_DIR
set -uo pipefail
mpiexec=$1 bin=$2
rounds=${ELASTIC_BENCH_ROUNDS:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "run_bench.sh: ELASTIC_BENCH_ROUNDS must be a whole number >= 1, not '$rounds'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
major=$("$mpiexec" --version 2>/dev/null | sed -n -E 's/.*\(Open MPI\) ([0-9]+).*/\1/p' | head -n 1)
if [[ ${major:-4} -ge 5 ]]; then
  agent=(--prtemca plm_ssh_agent "$here/as_node.sh")  # PRRTE's name for the remote-shell agent
else
  agent=(--mca plm_rsh_agent "$here/as_node.sh")
fi
errors=$(mktemp /tmp/elastic-run-bench.XXXXXX)
trap 'rm -f "$errors"' EXIT
fail() {  # fail WHY: the reason, the failed run's last messages, exit 1
  echo "run_bench.sh: $*" >&2
  [[ -s $errors ]] && { echo "run_bench.sh: its last messages:" >&2; tail -n 15 "$errors" >&2; }
  exit 1
}
run() {  # run SECONDS MPIRUN-ARGUMENTS...: the bench's JSON lines (its messages: $errors)
  local limit=$1
  shift
  timeout -k 10 "$limit" "$mpiexec" "$@" 2>"$errors" | grep '^{'
}
figure() {  # figure KEY: KEY's value on the line read, a positive number, else fail
  local v
  v=$(sed -n -E "s/.*\"$1\": ([0-9.e+-]+).*/\1/p")
  [[ $v =~ ^[0-9.]+(e[+-]?[0-9]+)?$ ]] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "no positive $1 in the bench's output"
  echo "$v"
}
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }  # the lower middle for an even count

one_node=$(run 60 --oversubscribe -np 4 "$bin/elastic-mpi-bench" --allreduce-only) || fail "the 4-rank world on one node failed"
echo "$one_node"
# Two slots on each node and no oversubscription: the spawned ranks go to the second node's free
# slots (Open MPI 5 puts them next to their parents when it may oversubscribe).
two_nodes=(--map-by ppr:2:node --host elastic-bench-a:2,elastic-bench-b:2 "${agent[@]}")
unset OMPI_MCA_rmaps_base_oversubscribe
launched=() merged=()
for ((i = 0; i < rounds; ++i)); do
  line=$(run 60 -np 4 "${two_nodes[@]}" "$bin/elastic-mpi-bench" --allreduce-only) ||
    fail "the 4-rank world on two nodes failed (as_node.sh needs root, or user namespaces: unshare --uts)"
  echo "$line"
  [[ $line == *'"nodes": 2'* ]] || fail "the launched world does not span two nodes: no fair comparison"
  value=$(figure launched_allreduce_s <<<"$line") || exit 1
  launched+=("$value")
  line=$(run 60 -np 2 "${two_nodes[@]}" "$bin/elastic-mpi-bench" --merged-only) || fail "the merged world (2 + 2 spawned) failed"
  echo "$line"
  [[ $line == *'"nodes": 2'* ]] || fail "the merged world does not span two nodes: no fair comparison"
  value=$(figure merged_allreduce_s <<<"$line") || exit 1
  merged+=("$value")
done
OMPI_MCA_rmaps_base_oversubscribe=1 timeout -k 10 200 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-mpi-bench" \
  --launched-allreduce-s "$(median "${launched[@]}")" --merged-allreduce-s "$(median "${merged[@]}")"
status=$?
[[ $status -eq 0 ]] || fail "elastic-mpi-bench exited $status (a missed target is named above)"
