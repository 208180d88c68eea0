#!/bin/bash
# Reproducers of what the rendezvous meets on Open MPI 5 (docs/interfaces.md section 6, "The
# rendezvous on Open MPI 5"). Each case prints its result and exits 0 when Open MPI behaves as
# documented there (so a change in a later release shows up as a failure here); exit 77 when the
# MPI found is not Open MPI 5 or later. Usage (as root: OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 and
# PRTE_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 are set here; loopback only):
#   repro.sh BUILD_DIR separate   two separately started mpiruns: MPI_Lookup_name fails (no name
#                                 server between them; Open MPI 5 has no ompi-server)
#   repro.sh BUILD_DIR dvm        both jobs launched into one PRRTE DVM (prte, mpirun --dvm):
#                                 lookup, connect/accept, merge and allreduce work (timed)
#   repro.sh BUILD_DIR sigterm    SIGTERM to `mpirun --dvm` does not reach the job's processes
#                                 (why the launcher signals its ranks by pid)
set -uo pipefail
build=$1 case=$2
prog=$build/bin/elastic-ompi5-connect-accept
major=$(sed -n -E 's/^#define OMPI_MAJOR_VERSION ([0-9]+).*/\1/p' "$(mpicc --showme:incdirs | tr ' ' '\n' | head -1)/mpi.h" 2>/dev/null)
if [[ -z $major || $major -lt 5 ]]; then echo "SKIP: not Open MPI 5 or later (found '${major:-none}')"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PRTE_ALLOW_RUN_AS_ROOT=1 \
  PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
work=$(mktemp -d /tmp/elastic-ompi5-repro.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
service=repro.$$
start_dvm() {
  mkdir -p "$work/session"  # its own session directory (a killed prte leaves it behind)
  prte --report-uri "$work/dvm.uri" --tmpdir "$work/session" >"$work/prte.log" 2>&1 &
  dvm=$!; pids+=($dvm)
  for _ in $(seq 100); do [[ -s $work/dvm.uri ]] && return 0; sleep 0.05; done
  echo "FAIL: the DVM wrote no URI"; cat "$work/prte.log"; exit 1
}
case $case in
separate)
  timeout -k 2 30 mpirun --oversubscribe -np 2 "$prog" accept "$service" 2>"$work/a.log" &
  a=$!; pids+=($a)
  timeout -k 2 30 mpirun --oversubscribe -np 1 "$prog" connect "$service" 2>"$work/c.log"
  c=$?
  kill -TERM $a 2>/dev/null; wait $a; cat "$work/a.log" "$work/c.log" | grep '^\['
  [[ $c != 0 ]] && grep -q "lookup $service: [1-9]" "$work/c.log" \
    && { echo "as documented: no rendezvous between separate mpiruns (connector exit $c)"; exit 0; }
  echo "FAIL: the separate mpiruns behaved otherwise (connector exit $c)"; exit 1
  ;;
dvm)
  start_dvm
  t0=$(date +%s.%N)
  timeout -k 2 30 mpirun --dvm "file:$work/dvm.uri" -x OMPI_MCA_btl_tcp_if_include -n 2 --map-by :OVERSUBSCRIBE \
    --bind-to none "$prog" accept "$service" 2>"$work/a.log" &
  a=$!; pids+=($a)
  timeout -k 2 30 mpirun --dvm "file:$work/dvm.uri" -x OMPI_MCA_btl_tcp_if_include -n 1 --map-by :OVERSUBSCRIBE \
    --bind-to none "$prog" connect "$service" 2>"$work/c.log"
  c=$?
  wait $a; a_rc=$?
  echo "both jobs done in $(echo "$(date +%s.%N) - $t0" | bc) s"
  cat "$work/a.log" "$work/c.log" | grep '^\['
  [[ $c == 0 && $a_rc == 0 ]] && grep -q "merged world of 3, allreduce 6 (expected 6)" "$work/c.log" \
    && { echo "as documented: one DVM's jobs connect, merge and reduce"; exit 0; }
  echo "FAIL: accept exit $a_rc, connect exit $c"; exit 1
  ;;
sigterm)
  start_dvm
  # The job's process notes a SIGTERM in a file; mpirun --dvm gets the SIGTERM.
  mpirun --dvm "file:$work/dvm.uri" -n 1 --map-by :OVERSUBSCRIBE sh -c \
    "echo \$\$ >$work/rank.pid; trap 'echo >$work/rank.got-term; exit 0' TERM; while :; do sleep 0.1; done" \
    >/dev/null 2>&1 &
  m=$!; pids+=($m)
  for _ in $(seq 100); do [[ -s $work/rank.pid ]] && break; sleep 0.05; done
  rank=$(cat "$work/rank.pid"); pids+=($rank)
  kill -TERM $m; sleep 3
  kill -0 $m 2>/dev/null && mpirun_alive=yes || mpirun_alive=no
  kill -0 "$rank" 2>/dev/null && rank_alive=yes || rank_alive=no
  [[ -e $work/rank.got-term ]] && got=yes || got=no
  echo "3 s after SIGTERM to mpirun --dvm: mpirun alive: $mpirun_alive, the job's process alive: $rank_alive," \
    "it got the SIGTERM: $got"
  [[ $rank_alive == yes && $got == no ]] && { echo "as documented: the signal does not reach the job"; exit 0; }
  echo "FAIL: not as documented"; exit 1
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
