#!/bin/bash
# stacks_bench.sh: the rescale benchmarks on both supported stacks in one run, side by side.
#
#   tests/elastic_mpi/stacks_bench.sh BUILD_DIR ROOT
#
# BUILD_DIR: this machine's build tree (Debian 12 here: Slurm 22.05, Open MPI 4.1, ompi-server).
# ROOT: a Debian 13 root (Slurm 24.11, Open MPI 5, the PRRTE DVM) with the project built in
# /root/elastic-slurm/build, as `scripts/test --fresh trixie --keep-root` leaves it (it prints the
# root's path). In each, in turn, ctest runs elastic_mpi.bench (grow1, grow4 and shrink by spawn
# with 100 MB of state; the merged/launched allreduce ratio over two nodes: run_bench.sh) and
# elastic_mpi.join_pause_bench (grow1, grow4, shrink1, shrink4 through the job's rendezvous, as
# extension jobs join: join_pause_bench.sh). The root runs in its own PID and mount namespaces
# (scripts/lib/fresh_root.sh, fresh_enter), so nothing of it outlives the run.
#
# Output, JSON lines: every benchmark line prefixed by its stack ({"stack": "...", ...}), then one
# summary line per stack: {"summary": STACK, "grow1_s", "grow4_s", "shrink_s", "merged_ratio",
# "join_grow1_s", "join_grow4_s", "met": true|false}. Exit status 1 when a benchmark failed or
# missed a target on either stack (both still run), 2 on a usage error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ ${1:-} == -h || ${1:-} == --help ]]; then usage; exit 0; fi
if [[ $# -ne 2 ]]; then usage >&2; exit 2; fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "stacks_bench.sh: no build directory $1" >&2; exit 2; }
root=$2
root_build=/root/elastic-slurm/build
[[ -f $build/CTestTestfile.cmake ]] || { echo "stacks_bench.sh: $build is not a build tree (configure and build first)" >&2; exit 2; }
[[ -f $root$root_build/CTestTestfile.cmake ]] || {
  echo "stacks_bench.sh: $root has no build in $root_build: make one with scripts/test --fresh trixie --keep-root" >&2
  exit 2
}
[[ -x $root/root/elastic-slurm/tests/elastic_mpi/as_node.sh ]] || {
  echo "stacks_bench.sh: $root holds an older source (no tests/elastic_mpi/as_node.sh, so no fair merged/launched comparison): make a new root" >&2
  exit 2
}
[[ $(id -u) == 0 ]] || { echo "stacks_bench.sh: needs root (it enters $root)" >&2; exit 2; }
# shellcheck source=../../scripts/lib/fresh_root.sh
source "$here/../../scripts/lib/fresh_root.sh"

tests='^elastic_mpi\.(bench|join_pause_bench)$'
# The stack's name: its Debian release, Open MPI and Slurm versions (run where the stack is).
describe='echo "Debian $(cat /etc/debian_version), $(mpirun --version 2>/dev/null | head -n 1 | sed "s/^mpirun (\(.*\))/\1/"), Slurm $(dpkg-query -W -f "\${Version}" slurm-client 2>/dev/null)"'
status=0

# stack_run NAME OUTPUT: prefixes the benchmark lines of OUTPUT with the stack, prints the
# summary line; sets status when a test failed.
stack_run() {
  local name=$1 out=$2 line met=true
  while IFS= read -r line; do
    [[ $line =~ ^[0-9]+:\ (\{.*\})$ ]] && echo "{\"stack\": \"$name\", ${BASH_REMATCH[1]#\{}"
  done <<<"$out"
  grep -qE '100% tests passed' <<<"$out" || { met=false; status=1; }
  pick() {  # pick CASE FIELD: FIELD of the line of CASE
    grep -E "\"case\": \"$1\"" <<<"$out" | head -n 1 | sed -n -E "s/.*\"$2\": ([0-9.e+-]+).*/\1/p"
  }
  joined() { grep -E '"bench": "join_pause"' <<<"$out" | sed -n -E "s/.*\"$1\": ([0-9.e+-]+).*/\1/p"; }
  echo "{\"summary\": \"$name\", \"grow1_s\": $(pick grow1 pause_s), \"grow4_s\": $(pick grow4 pause_s)," \
    "\"shrink_s\": $(pick shrink pause_s), \"merged_ratio\": $(pick merged_allreduce ratio)," \
    "\"join_grow1_s\": $(joined grow1_pause_s), \"join_grow4_s\": $(joined grow4_pause_s), \"met\": $met}" \
    | sed -E 's/: ,/: null,/g'
  if [[ $met == false ]]; then
    grep -E 'missed target|FAIL|run_bench.sh:' <<<"$out" | sed "s/^/stacks_bench.sh: $name: /" >&2
  fi
}

host_name=$(bash -c "$describe")
echo "stacks_bench.sh: $host_name: ctest -R '$tests' in $build" >&2
host_out=$(ctest --test-dir "$build" -R "$tests" -V 2>&1)
root_name=$(fresh_enter "$root" "$FRESH_PORT_BASE" "$describe" 2>/dev/null)
echo "stacks_bench.sh: $root_name: ctest -R '$tests' in $root$root_build" >&2
root_out=$(fresh_enter "$root" "$FRESH_PORT_BASE" \
  "cd /root/elastic-slurm && ctest --test-dir $root_build -R '$tests' -V" 2>&1)
stack_run "$host_name" "$host_out"
stack_run "$root_name" "$root_out"
exit "$status"
