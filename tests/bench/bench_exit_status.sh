#!/bin/bash
# bench_exit_status.sh STATUS TEXT TIGHTEN PROGRAM [ARGS...]: runs a benchmark with
# ELASTIC_BENCH_TIGHTEN=TIGHTEN and fails unless it exits with STATUS and its output (standard
# output and error together) contains TEXT. TIGHTEN 1e9 makes every target unreachable, 1 leaves
# the stated targets (docs/results.md, "Benchmark targets").
set -u
if [[ $# -lt 4 ]]; then
  echo "usage: bench_exit_status.sh STATUS TEXT TIGHTEN PROGRAM [ARGS...]" >&2
  exit 2
fi
want=$1 text=$2 tighten=$3
shift 3
out=$(ELASTIC_BENCH_TIGHTEN=$tighten "$@" 2>&1)
rc=$?
if [[ $rc -ne $want ]]; then
  printf 'exit status %s, expected %s (ELASTIC_BENCH_TIGHTEN=%s %s); output:\n%s\n' "$rc" "$want" "$tighten" "$*" "$out"
  exit 1
fi
if [[ $out != *"$text"* ]]; then
  printf 'the output lacks "%s"; output:\n%s\n' "$text" "$out"
  exit 1
fi
printf '%s\n' "$out" | tail -n 3
echo "exit status $rc, as expected"
