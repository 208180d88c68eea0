#!/bin/bash
# Driver of the mpi-labelled elastic_mpi tests. Every process runs under `timeout`, so a hang
# fails the test (ctest's TIMEOUT is the outer limit). Usage:
#   run_mpi_test.sh rescale MPIEXEC BIN SCHEDULE LR_RULE
#   run_mpi_test.sh capi    MPIEXEC BIN
#   run_mpi_test.sh join    BIN            two separate launches join through one ompi-server
#   run_mpi_test.sh badtoken BIN           a joiner with a wrong token is refused
#   run_mpi_test.sh sigterm BIN            a joined group that gets SIGTERM leaves at a step boundary
#   run_mpi_test.sh nodes MPIEXEC BIN [GROUPS]  launches emulating GROUPS (2) nodes of one job form one world
#   run_mpi_test.sh deadgroup MPIEXEC BIN  a spawned group's rank SIGKILLs itself: the job stops, bounded
#   run_mpi_test.sh stall MPIEXEC BIN      a rank sleeps 3x the collective watchdog at a step: the job lives
#   run_mpi_test.sh growfault BIN PHASE   a joiner dies at a grow phase: the parent completes at its size
#   run_mpi_test.sh usr1 BIN               SIGUSR1 (time-limit warning): checkpoint, training goes on
#   run_mpi_test.sh churn BIN HIER         200 in-place grows and shrinks of one world, each checked
#                                          (HIER=1: hierarchical MPI collectives)
#   run_mpi_test.sh relaunch MPIEXEC BIN   relaunch commands end the world and elastic-launch starts it
#                                          again at 3 ranks, then at 2: training goes on from the same step
#   run_mpi_test.sh anyleave MPIEXEC BIN FIRST HOW [RANKS]
#                                          groups 1 and 2 (RANKS ranks each, default 1) join; group FIRST
#                                          leaves first (HOW: command = a shrink command, then the other
#                                          group's; sigterm = SIGTERM, the other group stays to the end)
set -uo pipefail
mode=$1; shift
work=$(mktemp -d /tmp/elastic-mpi-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# A failure names what failed, then shows what the runs wrote (the tail of every log under the
# work directory, the rescale records), so that a failure in CI can be read from its output alone.
fail() {
  echo "FAIL: $*"
  local f
  while IFS= read -r f; do
    echo "--- ${f#"$work"/} (last 40 lines)"; tail -n 40 "$f"
  done < <(find "$work" -name '*.log' -type f 2>/dev/null | sort)
  while IFS= read -r f; do
    echo "--- ${f#"$work"/} (rescale records)"; grep '"type":"rescale"' "$f" | tail -n 20
  done < <(find "$work" -name 'metrics*.jsonl' -type f 2>/dev/null | sort)
  exit 1
}

# After a job of relaunches (JOB: its ELASTIC_JOB_ID) trained EPOCHS with --ids-dir $work/el and
# --model-out $work/el/model: no state file left in /dev/shm, every sample taken exactly once,
# and the model equal to the reference run's ($work/ref/model). Needs $bin.
relaunched_run_checks() {
  local job=$1 epochs=$2 leftover
  leftover=$(ls /dev/shm | grep -c "^elastic-relaunch\.$job\.")
  [[ $leftover == 0 ]] || fail "$leftover relaunch state file(s) left in /dev/shm"
  "$bin/elastic-train-logreg" --verify-ids "$work/el" --samples $SAMPLES --epochs "$epochs" \
    || fail "samples not processed exactly once"
  "$bin/elastic-train-logreg" --compare "$work/ref/model" "$work/el/model" --tolerance $TOLERANCE \
    || fail "model differs from the reference"
}

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
    timeout -k 10 60 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-c-api-example" 2>"$work/stderr") \
    || { cat "$work/stderr"; fail "C API example failed"; }
  echo "$out"; cat "$work/stderr"
  [[ $out == "steps 20 world 2" ]] || fail "unexpected output"
  # No GPU here (or no NCCL in the build): the job says why it uses MPI, once (not per rank or rescale).
  why=$(grep -c "NCCL backend not used: .*: using MPI collectives" "$work/stderr")
  [[ $why == 1 ]] || fail "expected one line saying why NCCL is not used, got $why"
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
nodes)
  # Node groups of one job (GROUPS, default 2), as `srun --ntasks-per-node=1 elastic-launch`
  # starts them on as many nodes: node group 0 (2 ranks, the leader: the rendezvous) and the
  # others (1 rank each) share the run dir and the job's initial token; they must train as one
  # world and match a world launched at as many ranks within the tolerance, then part at the end
  # (the last node group first) and exit 0.
  mpiexec=$1 bin=$2 groups=${3:-2}
  ranks=$((groups + 1))
  mkdir -p "$work/ref" "$work/el"
  timeout -k 10 90 "$mpiexec" --oversubscribe -np $ranks "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS --model-out "$work/ref/model" || fail "reference run failed"
  export ELASTIC_JOB_ID=nodes$$ ELASTIC_JOIN_TOKEN=00112233445566778899aabbccddeeff ELASTIC_NODE_GROUPS=$groups
  ELASTIC_NODE_GROUP=0 ELASTIC_METRICS_FILE="$work/el/metrics.jsonl" \
    timeout -k 10 120 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --samples $SAMPLES --epochs $EPOCHS --model-out "$work/el/model" \
    --ids-dir "$work/el" >"$work/node0.log" 2>&1 &
  node_pids=($!); pids+=($!)
  for ((g = 1; g < groups; g++)); do
    ELASTIC_NODE_GROUP=$g timeout -k 10 120 "$bin/elastic-launch" -n 1 --oversubscribe --run-dir "$work/run" -- \
      "$bin/elastic-train-logreg" --samples $SAMPLES --epochs $EPOCHS --ids-dir "$work/el" >"$work/node$g.log" 2>&1 &
    node_pids+=($!); pids+=($!)
  done
  rcs=()
  for p in "${node_pids[@]}"; do wait "$p"; rcs+=($?); done
  pids=()
  for ((g = 0; g < groups; g++)); do echo "--- node group $g"; cat "$work/node$g.log"; done
  for rc in "${rcs[@]}"; do [[ $rc == 0 ]] || fail "node groups exited with ${rcs[*]}"; done
  grep -q "initial world of $ranks ranks from $groups node groups" "$work/node0.log" || fail "no merged initial world"
  grep -q "done: [0-9]* steps, world $ranks," "$work/node0.log" || fail "did not train as one world of $ranks"
  "$bin/elastic-train-logreg" --verify-ids "$work/el" --samples $SAMPLES --epochs $EPOCHS \
    || fail "samples not processed exactly once"
  "$bin/elastic-train-logreg" --compare "$work/ref/model" "$work/el/model" --tolerance $TOLERANCE \
    || fail "model differs from the world launched at $ranks ranks"
  ;;
deadgroup)
  # A spawned group's rank dies (SIGKILL) while the others enter the step's allreduce: the job
  # must end with an error within the collective watchdog (never hang).
  mpiexec=$1 bin=$2
  limit=${ELASTIC_COLLECTIVE_TIMEOUT_S:-30}
  start=$(date +%s.%N)
  ELASTIC_SCHEDULE="2->3" ELASTIC_SCHEDULE_EVERY=5 \
    timeout -k 10 150 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" --sleep-ms 20 \
    --samples $SAMPLES --epochs 50 --die-at-step 12 --die-group 1 >"$work/out.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  cat "$work/out.log"
  elapsed=$(echo "$end - $start" | bc)
  (( $(echo "$elapsed < 145" | bc) )) || fail "the job hung (killed by timeout after $elapsed s)"
  [[ $rc != 0 ]] || fail "the job ended with 0 although a rank died"
  grep -q "kills itself (SIGKILL)" "$work/out.log" || fail "no rank died"
  echo "job ended with $rc after $elapsed s (collective watchdog $limit s)"
  (( $(echo "$elapsed < $limit + 40" | bc) )) || fail "took $elapsed s"
  # The same for a group that joined by connect/accept (an extension job: no common mpirun to
  # notice the death): the parent's ranks must stop on their own within the collective guard.
  mkdir -p "$work/commands"
  export ELASTIC_JOB_ID=dead$$ ELASTIC_POLL_INTERVAL_S=0.2 ELASTIC_CONNECT_TIMEOUT_S=30
  ELASTIC_COMMAND_DIR="$work/commands" timeout -k 10 120 "$bin/elastic-launch" -n 2 --oversubscribe \
    --run-dir "$work/run" -- "$bin/elastic-train-logreg" --sleep-ms 20 --samples $SAMPLES --epochs 50 \
    >"$work/parent.log" 2>&1 &
  parent=$!; pids+=($parent)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  ELASTIC_GROUP_ID=1 ELASTIC_JOIN_TOKEN=0123456789abcdef0123456789abcdef \
    timeout -k 10 90 "$bin/elastic-launch" --join -n 1 --uri "$work/run/rendezvous.uri" -- \
    "$bin/elastic-train-logreg" --sleep-ms 20 --samples $SAMPLES --epochs 50 --die-at-step 1 \
    >"$work/joiner.log" 2>&1 &
  pids+=($!)
  echo '{"action":"grow","group":1,"join_token":"0123456789abcdef0123456789abcdef"}' >"$work/commands/001.json"
  for _ in $(seq 300); do grep -q "kills itself" "$work/joiner.log" 2>/dev/null && break; sleep 0.1; done
  died=$(date +%s.%N)
  wait $parent; rc=$?
  end=$(date +%s.%N)
  pids=()
  echo "--- parent"; cat "$work/parent.log"; echo "--- joiner"; cat "$work/joiner.log"
  grep -q "kills itself (SIGKILL)" "$work/joiner.log" || fail "the joined rank did not die"
  elapsed=$(echo "$end - $died" | bc)
  echo "parent ended with $rc $elapsed s after the joined rank died (collective watchdog $limit s)"
  [[ $rc != 0 ]] || fail "the parent ended with 0 although a rank of its world died"
  (( $(echo "$elapsed < $limit + 15" | bc) )) || fail "the parent took $elapsed s to stop"
  # Open MPI 5 (fault tolerance on, src/mpi_stack_prte_dvm.cpp) reports the dead process at once.
  grep -Eq "did not finish within|a rank of the world died|MPI_ERR_PROC_FAILED: Process Failure" "$work/parent.log" || fail "no clear error"
  ;;
growfault)
  # A joiner SIGKILLs itself at one phase of its grow (ELASTIC_TEST_KILL_AT: connect = after
  # `ready`, before connecting; merge = accepted, before the merge; state = during the state
  # hand-over; late-confirm = it confirms the state past the deadline): the parent abandons the grow within its deadlines, acks it as failed, and trains
  # to the end at its old size with every sample processed once.
  bin=$1 phase=$2
  mkdir -p "$work/commands"
  export ELASTIC_JOB_ID=fault$$ ELASTIC_POLL_INTERVAL_S=0.2 ELASTIC_CONNECT_TIMEOUT_S=8 ELASTIC_GROW_PHASE_TIMEOUT_S=8
  start=$(date +%s.%N)
  ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_METRICS_FILE="$work/metrics.jsonl" \
    timeout -k 10 120 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 30 --samples $SAMPLES --epochs 5 --ids-dir "$work" \
    >"$work/parent.log" 2>&1 &
  parent=$!; pids+=($parent)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  [[ -s $work/run/rendezvous.uri ]] || fail "no rendezvous URI"
  ELASTIC_GROUP_ID=1 ELASTIC_JOIN_TOKEN=0123456789abcdef0123456789abcdef ELASTIC_TEST_KILL_AT=$phase \
    timeout -k 10 90 "$bin/elastic-launch" --join -n 1 --uri "$work/run/rendezvous.uri" -- \
    "$bin/elastic-train-logreg" --sleep-ms 30 --samples $SAMPLES --epochs 5 --ids-dir "$work/joiner-ids" \
    >"$work/joiner.log" 2>&1 &
  joiner=$!; pids+=($joiner)
  echo '{"action":"grow","group":1,"join_token":"0123456789abcdef0123456789abcdef"}' >"$work/commands/001.json"
  wait $parent; parent_rc=$?
  wait $joiner; joiner_rc=$?
  pids=()
  echo "--- parent"; cat "$work/parent.log"; echo "--- joiner"; cat "$work/joiner.log"
  echo "--- rescales"; grep rescale "$work/metrics.jsonl"
  echo "parent ended with $parent_rc after $(echo "$(date +%s.%N) - $start" | bc) s; joiner with $joiner_rc"
  if [[ $phase == late-confirm ]]; then
    # The parents abandoned the grow before the joiner's "state received": the joiner, alone in
    # the merged world, ends under its watchdog (exit 75) instead of hanging.
    grep -q "the first collectives in the grown world as group 1, .* did not finish within" "$work/joiner.log" || fail "no watchdog on the joiner"
    [[ $joiner_rc == 75 ]] || fail "the joiner exited with $joiner_rc, not 75"
  else
    grep -q "ELASTIC_TEST_KILL_AT=$phase: rank 0 of group 1 kills itself" "$work/joiner.log" || fail "the joiner did not die at $phase"
  fi
  [[ $parent_rc == 0 ]] || fail "parent exited with $parent_rc"
  grep -q "join FAILED at step [0-9]*: 2 -> 2 ranks" "$work/parent.log" || fail "the failed grow was not reported"
  grep -q "done: [0-9]* steps, world 2," "$work/parent.log" || fail "the parent did not finish at its old size"
  "$bin/elastic-train-logreg" --verify-ids "$work" --samples $SAMPLES --epochs 5 \
    || fail "samples not processed exactly once"
  ;;
stall)
  # Slow is not dead: one rank sleeps at a step boundary three times as long as the collective
  # watchdog's timeout (4 s here, 20 s by default: the 60 s of a real stall scaled down); the
  # others find it alive through the liveness side channel, wait, and the job completes.
  mpiexec=$1 bin=$2
  ELASTIC_COLLECTIVE_TIMEOUT_S=4 timeout -k 10 100 "$mpiexec" --oversubscribe -np 3 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS --stall-at-step 10 --stall-s 12 --ids-dir "$work" >"$work/out.log" 2>&1
  rc=$?
  cat "$work/out.log"
  [[ $rc == 0 ]] || fail "the job ended with $rc although no rank died"
  grep -q "rank 2 stalls 12 s at step 10" "$work/out.log" || fail "no rank stalled"
  grep -q "is late (.*but every rank is alive: rank 2 outside collectives (computing) at step [0-9]*; waiting on" "$work/out.log" \
    || fail "the late collective was not told apart from a dead rank"
  grep -q "done: [0-9]* steps, world 3," "$work/out.log" || fail "training did not go on to the end"
  "$bin/elastic-train-logreg" --verify-ids "$work" --samples $SAMPLES --epochs $EPOCHS \
    || fail "samples not processed exactly once"
  ;;
usr1)
  # Slurm's time-limit warning (sbatch --signal=USR1@S) reaches elastic-launch: every rank
  # checkpoints at the next rescale point and training goes on to the end.
  bin=$1
  export ELASTIC_JOB_ID=usr1$$ ELASTIC_LOG_LEVEL=verbose
  timeout -k 10 120 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 20 --samples $SAMPLES --epochs $EPOCHS >"$work/out.log" 2>&1 &
  launcher=$!; pids+=($launcher)
  # Both ranks up (their sessions log "session: rank R of 2" once they handle SIGUSR1): on a
  # loaded machine the ranks started more than 12 s after the launcher, and a signal before that
  # tested nothing (it ended the launcher, exit 138, before it handled SIGUSR1 from the start).
  for _ in $(seq 600); do (( $(grep -c "session: rank [01] of 2" "$work/out.log") == 2 )) && break; sleep 0.1; done
  (( $(grep -c "session: rank [01] of 2" "$work/out.log") == 2 )) || fail "the ranks did not start within 60 s"
  # timeout(1) does not forward SIGUSR1: signal elastic-launch itself (its child), as srun would.
  kill -USR1 "$(pgrep -P $launcher)" || fail "no elastic-launch under timeout" 
  wait $launcher; rc=$?
  pids=()
  cat "$work/out.log"
  [[ $rc == 0 ]] || fail "launcher exited with $rc"
  grep -q "checkpoint at step [0-9]* written to $work/run/checkpoint/checkpoint.bin" "$work/out.log" \
    || fail "no checkpoint on SIGUSR1"
  [[ -s $work/run/checkpoint/checkpoint.bin ]] || fail "checkpoint file missing"
  grep -q "done: [0-9]* steps, world 2," "$work/out.log" || fail "training did not go on to the end"
  ;;
churn)
  # A base launch of 2 and a joining launch of 2 whose processes join and leave 100 times each
  # (elastic-mpi-churn plays elasticd through command files); the deadline inside the program
  # fails a slow churn before the timeouts kill a hung one.
  bin=$1 hier=$2 changes=200
  mkdir -p "$work/commands"
  export ELASTIC_JOB_ID=churn$$ ELASTIC_POLL_INTERVAL_S=0.01 ELASTIC_CONNECT_TIMEOUT_S=30 \
    ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_HIERARCHICAL_ALLREDUCE=$hier ELASTIC_BACKEND=mpi ELASTIC_LOG_LEVEL=debug
  start=$(date +%s.%N)
  timeout -k 10 180 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-mpi-churn" --changes $changes >"$work/base.log" 2>&1 &
  base=$!; pids+=($base)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  [[ -s $work/run/rendezvous.uri ]] || fail "no rendezvous URI"
  ELASTIC_GROUP_ID=1 ELASTIC_JOIN_TOKEN=0123456789abcdef0123456789abcdef \
    timeout -k 10 180 "$bin/elastic-launch" --join -n 2 --oversubscribe --uri "$work/run/rendezvous.uri" -- \
    "$bin/elastic-mpi-churn" --joiner --changes $changes >"$work/joiner.log" 2>&1 &
  joiner=$!; pids+=($joiner)
  wait $joiner; joiner_rc=$?
  wait $base; base_rc=$?
  pids=()
  echo "wall $(echo "$(date +%s.%N) - $start" | bc) s"
  echo "--- base (last lines)"; tail -n 15 "$work/base.log"; echo "--- joiner (last lines)"; tail -n 15 "$work/joiner.log"
  [[ $base_rc == 0 ]] || fail "base exited with $base_rc"
  [[ $joiner_rc == 0 ]] || fail "joiner exited with $joiner_rc"
  line=$(grep '^{"test": "churn"' "$work/base.log") || fail "no result line"
  echo "$line"
  [[ $line == *"\"changes\": $changes,"* ]] || fail "not $changes changes"
  mean=$(echo "$line" | sed -E 's/.*"interval_mean_s": ([0-9.]+).*/\1/')
  (( $(echo "$mean <= 1" | bc) )) || fail "one change every $mean s, not every second or faster"
  if [[ $hier == 1 ]]; then  # the base launch's communicator survived every change (in place)
    kept=$(grep -c "rank 0 kept its launch's communicator" "$work/base.log")
    (( kept >= changes )) || fail "the base kept its launch's communicator at $kept changes of $changes"
  fi
  ;;
spanned)
  # A world one launch started over several nodes (elastic-launch sets ELASTIC_SPANNED_NODES for
  # its ranks on Open MPI 5) refuses a relaunch: the other nodes' launchers hold them until it
  # ends. The world trains on at its size and completes.
  mpiexec=$1 bin=$2
  mkdir -p "$work/commands" "$work/run"
  echo '{"action": "relaunch", "world": [{"node": "'"$(hostname)"'", "ranks": 1}]}' >"$work/commands/r.json"
  ELASTIC_JOB_ID=spanned$$ ELASTIC_POLL_INTERVAL_S=0.1 ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_RUN_DIR="$work/run" \
    ELASTIC_SPANNED_NODES=2 timeout -k 10 90 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS >"$work/out.log" 2>&1 || { cat "$work/out.log"; fail "the world failed"; }
  grep -q "relaunch refused: the job's world spans 2 nodes whose launchers hold them until it ends" "$work/out.log" \
    || { cat "$work/out.log"; fail "the relaunch was not refused"; }
  grep -q "done: [0-9]* steps, world 2," "$work/out.log" || { cat "$work/out.log"; fail "no end at 2 ranks"; }
  [[ -e $work/run/relaunch.json ]] && fail "a relaunch record was written"
  echo "spanned: the relaunch was refused, the world of 2 completed"
  ;;
relaunch)
  # elastic-launch -n 2 trains; a relaunch command (as elasticd would send where the MPI cannot
  # grow in place) ends the world at a rescale point and the launcher starts it again at 3 ranks
  # from the state rank 0 left (memory-backed), then another brings it back to 2 (before both, one
  # whose record cannot be written is not done, and the world trains on). The global batch
  # never changes: the model must match a 2-rank run's, every sample taken exactly once, and each
  # world must go on from the step the one before it reached.
  mpiexec=$1 bin=$2
  node=$(hostname)
  mkdir -p "$work/ref" "$work/el" "$work/commands"
  timeout -k 10 90 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $EPOCHS --model-out "$work/ref/model" 2>"$work/ref.log" \
    || { cat "$work/ref.log"; fail "reference run failed"; }
  steps=$(grep -o "done: [0-9]* steps" "$work/ref.log" | grep -o "[0-9]*")
  export ELASTIC_JOB_ID=relaunch$$ ELASTIC_POLL_INTERVAL_S=0.1 ELASTIC_COMMAND_DIR="$work/commands"
  timeout -k 10 150 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 60 --samples $SAMPLES --epochs $EPOCHS --model-out "$work/el/model" \
    --ids-dir "$work/el" >"$work/out.log" 2>&1 &
  launcher=$!; pids+=($launcher)
  relaunch_to() {  # relaunch_to RANKS: the command, then the new world's first line
    local n=$1 before
    before=$(grep -c "relaunched world of $n ranks" "$work/out.log")
    echo "{\"action\": \"relaunch\", \"world\": [{\"node\": \"$node\", \"ranks\": $n}]}" >"$work/commands/r$n.tmp"
    mv "$work/commands/r$n.tmp" "$work/commands/r$n.json"
    for _ in $(seq 300); do
      (( $(grep -c "relaunched world of $n ranks" "$work/out.log") > before )) && return 0
      kill -0 $launcher 2>/dev/null || break
      sleep 0.1
    done
    cat "$work/out.log"; fail "no relaunched world of $n ranks within 30 s"
  }
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  sleep 1.5
  # A relaunch whose record cannot be written (a directory in the way of its temporary file) is
  # not done: a failed acknowledgement, nothing left behind, and the world trains on at 2 ranks.
  mkdir "$work/run/relaunch.json.tmp"
  echo '{"action": "relaunch", "world": [{"node": "'"$node"'", "ranks": 3}]}' >"$work/commands/r0.tmp"
  mv "$work/commands/r0.tmp" "$work/commands/r0.json"
  for _ in $(seq 300); do
    grep -q "relaunch FAILED at step [0-9]*: 2 -> 2 ranks" "$work/out.log" && break
    kill -0 $launcher 2>/dev/null || break
    sleep 0.1
  done
  grep -q "relaunch FAILED at step [0-9]*: 2 -> 2 ranks" "$work/out.log" \
    || { cat "$work/out.log"; fail "an unwritable relaunch record did not fail the relaunch"; }
  grep -q "relaunch not done, the world goes on: cannot write $work/run/relaunch.json.tmp" "$work/out.log" \
    || { cat "$work/out.log"; fail "the failed relaunch does not name the file it could not write"; }
  kill -0 $launcher 2>/dev/null || { cat "$work/out.log"; fail "the job ended after a relaunch that was not done"; }
  leftover=$(ls /dev/shm | grep -c "^elastic-relaunch\.relaunch$$\.")
  [[ $leftover == 0 && ! -e $work/run/relaunch.json ]] || fail "a relaunch that was not done left its state or record"
  rmdir "$work/run/relaunch.json.tmp"
  sleep 0.5
  relaunch_to 3
  sleep 1
  relaunch_to 2
  wait $launcher; rc=$?
  pids=()
  cat "$work/out.log"
  [[ $rc == 0 ]] || fail "launcher exited with $rc"
  mapfile -t at < <(grep -o "relaunch at step [0-9]*" "$work/out.log" | grep -o "[0-9]*$")
  mapfile -t from < <(grep -o "relaunched world of [0-9]* ranks at step [0-9]*" "$work/out.log" | grep -o "[0-9]*$")
  [[ ${#at[@]} == 2 && ${#from[@]} == 2 ]] || fail "expected 2 relaunches, got ${#at[@]} ends and ${#from[@]} starts"
  for i in 0 1; do
    (( at[i] > 0 )) && [[ ${at[$i]} == "${from[$i]}" ]] \
      || fail "relaunch $((i + 1)): the world ended at step ${at[$i]}, the new one started at ${from[$i]}"
  done
  grep -q "done: $steps steps, world 2," "$work/out.log" || fail "did not train to the end at 2 ranks in $steps steps"
  pauses=$(grep -o "relaunch done: [0-9]* ranks at step [0-9]*, pause [0-9.e+-]*" "$work/out.log" | awk '{print $NF}' | paste -sd,)
  [[ $pauses == *,* ]] || fail "no relaunch pause logged for both relaunches ($pauses)"
  echo "{\"bench\": \"relaunch_one_node\", \"sizes\": [2, 3, 2], \"pause_s\": [$pauses]}"
  relaunched_run_checks relaunch$$ $EPOCHS
  ;;
fallback)
  # Relaunches onto a node whose daemon cannot start: its agent fails at once (as a Slurm step
  # refused while slurmctld restarts), then one whose agent hangs (a step that never starts).
  # Open MPI 5's DVM ends the first new world before it took the state; the launcher stops the
  # second once it has not taken the state within --wait. Either way elastic-launch starts the
  # world before it again, as it was, from that state; it says the relaunch failed and trains on.
  # Open MPI 4 refuses a relaunch over other nodes before the world stops. (--wait 15: it bounds
  # every relaunched world, the ones started again too, also on a CI machine at nice 19.) The world trains to
  # the end at 2 ranks, every sample taken exactly once, and the model matches a 2-rank run's.
  mpiexec=$1 bin=$2 stack=$3
  node=$(hostname)
  mkdir -p "$work/ref" "$work/el" "$work/commands"
  epochs=$((EPOCHS * 3))
  timeout -k 10 90 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $epochs --model-out "$work/ref/model" 2>"$work/ref.log" \
    || { cat "$work/ref.log"; fail "reference run failed"; }
  steps=$(grep -o "done: [0-9]* steps" "$work/ref.log" | grep -o "[0-9]*")
  export ELASTIC_JOB_ID=fallback$$ ELASTIC_POLL_INTERVAL_S=0.1 ELASTIC_COMMAND_DIR="$work/commands"
  timeout -k 10 170 "$bin/elastic-launch" -n 2 --oversubscribe --wait 15 --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 80 --samples $SAMPLES --epochs $epochs --model-out "$work/el/model" \
    --ids-dir "$work/el" >"$work/out.log" 2>&1 &
  launcher=$!; pids+=($launcher)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  sleep 1.5
  if [[ $stack == prte-dvm ]]; then outcome="relaunch undone: the world goes on as before it, 2 ranks"
  else outcome="relaunch refused: this runtime (rendezvous ompi-server) relaunches a world on the launcher's node only"; fi
  relaunch_onto() {  # relaunch_onto N AGENT-JSON: the command, then the Nth outcome within 60 s
    local n=$1 agent=$2
    echo '{"action": "relaunch", "world": [{"node": "'"$node"'", "ranks": 2},
      {"node": "unreachable-node", "ranks": 2, "agent": '"$agent"'}]}' >"$work/commands/r$n.tmp"
    mv "$work/commands/r$n.tmp" "$work/commands/r$n.json"
    for _ in $(seq 600); do
      (( $(grep -c "$outcome" "$work/out.log") >= n )) && return 0
      kill -0 $launcher 2>/dev/null || break
      sleep 0.1
    done
    cat "$work/out.log"; fail "relaunch $n: no \"$outcome\" within 60 s"
  }
  relaunch_onto 1 '["/bin/false"]'
  # The hanging agent writes its pid, so that the test ends it (the DVM leaves it behind; under
  # Slurm it ends with the extension job elasticd cancels on the failed acknowledgement).
  relaunch_onto 2 '["sh", "-c", "echo $$ > '"$work"'/agent.pid; exec sleep 600", "hang"]'
  wait $launcher; rc=$?
  pids=()
  [[ -s $work/agent.pid ]] && kill "$(cat "$work/agent.pid")" 2>/dev/null
  cat "$work/out.log"
  [[ $rc == 0 ]] || fail "launcher exited with $rc"
  if [[ $stack == prte-dvm ]]; then
    mapfile -t at < <(grep -o "relaunch at step [0-9]*: 2 -> 4 ranks" "$work/out.log" | grep -o "step [0-9]*" | grep -o "[0-9]*")
    mapfile -t from < <(grep -o "relaunch undone: the world goes on as before it, 2 ranks at step [0-9]*" "$work/out.log" | grep -o "[0-9]*$")
    [[ ${#at[@]} == 2 && ${#from[@]} == 2 ]] || fail "expected 2 relaunches undone, got ${#at[@]} stops and ${#from[@]} undone"
    for i in 0 1; do
      [[ ${at[$i]} == "${from[$i]}" ]] || fail "relaunch $((i + 1)): the world stopped at step ${at[$i]}, went on at ${from[$i]}"
    done
    grep -q "FAILED (it ended with status [0-9]* before it took the state); its state was not taken: the world before it is started again as it was, 2 ranks" \
      "$work/out.log" || fail "the launcher did not undo the relaunch whose daemon failed"
    grep -q "the relaunched world has not taken its state after 15 s (--wait): it is stopped" "$work/out.log" \
      || fail "the launcher did not stop the relaunched world that hung"
    grep -q "FAILED (it had not taken the state after 15 s); its state was not taken" "$work/out.log" \
      || fail "the launcher did not undo the relaunch that hung"
    (( $(grep -c "relaunched world of" "$work/out.log") == 0 )) || fail "a relaunched world of another size started"
    pauses=$(grep -o "relaunch undone: .*, pause [0-9.e+-]*" "$work/out.log" | awk '{print $NF}' | paste -sd,)
    echo "{\"bench\": \"relaunch_fallback\", \"cases\": [\"agent fails\", \"agent hangs, --wait 15\"], \"pause_s\": [$pauses]}"
  else
    (( $(grep -c "$outcome" "$work/out.log") == 2 )) || fail "Open MPI 4's runtime did not refuse both relaunches"
    [[ -e $work/run/relaunch.json || -e $work/run/relaunched.json ]] && fail "a relaunch record was written"
  fi
  grep -q "done: $steps steps, world 2," "$work/out.log" || fail "did not train to the end at 2 ranks in $steps steps"
  [[ -e $work/run/checkpoint/checkpoint.bin ]] && fail "the relaunch's state was made the job's checkpoint"
  relaunched_run_checks fallback$$ $epochs
  echo "fallback ($stack): the world went on at 2 ranks after relaunches onto a node whose agent failed or hung"
  ;;
anyleave)
  # Two separately launched groups of RANKS ranks join (group 1, then group 2), as two extension jobs
  # would; then group FIRST leaves (1: the older one, from the middle of the world; 2: the latest)
  # by a shrink command or by SIGTERM (its extension job cancelled), and training goes on in the
  # world that is left. HOW=command: the other group leaves by command afterwards; HOW=sigterm:
  # it stays to the end of the job (the session's end takes the world apart). The global batch
  # never changes, so the model must match a 2-rank run's, and every sample is taken exactly once.
  # Prints the pause of each leave as a JSON line.
  mpiexec=$1 bin=$2 first=$3 how=$4 ranks=${5:-1}
  other=$((3 - first))
  good=0123456789abcdef0123456789abcdef
  mkdir -p "$work/commands" "$work/ref" "$work/el"
  epochs=4
  timeout -k 10 60 "$mpiexec" --oversubscribe -np 2 "$bin/elastic-train-logreg" \
    --samples $SAMPLES --epochs $epochs --model-out "$work/ref/model" || fail "reference run failed"
  export ELASTIC_JOB_ID=any$$ ELASTIC_POLL_INTERVAL_S=0.1 ELASTIC_CONNECT_TIMEOUT_S=20
  start=$(date +%s.%N)
  ELASTIC_COMMAND_DIR="$work/commands" ELASTIC_METRICS_FILE="$work/metrics.jsonl" \
    timeout -k 10 90 "$bin/elastic-launch" -n 2 --oversubscribe --run-dir "$work/run" -- \
    "$bin/elastic-train-logreg" --sleep-ms 25 --samples $SAMPLES --epochs $epochs --ids-dir "$work/el" \
    --model-out "$work/el/model" >"$work/parent.log" 2>&1 &
  parent=$!; pids+=($parent)
  for _ in $(seq 100); do [[ -s $work/run/rendezvous.uri ]] && break; sleep 0.1; done
  [[ -s $work/run/rendezvous.uri ]] || fail "no rendezvous URI"
  # Waits until the metrics show the n-th rescale of kind `what` (at most 20 s).
  await() {
    for _ in $(seq 200); do
      n=$(grep -c "\"what\":\"$1\"" "$work/metrics.jsonl" 2>/dev/null)
      (( ${n:-0} >= $2 )) && return 0
      sleep 0.1
    done
    fail "no $1 number $2 within 20 s"
  }
  declare -A joiner
  for g in 1 2; do
    ELASTIC_GROUP_ID=$g ELASTIC_JOIN_TOKEN=$good \
      timeout -k 10 80 "$bin/elastic-launch" --join -n $ranks --oversubscribe --uri "$work/run/rendezvous.uri" -- \
      "$bin/elastic-train-logreg" --sleep-ms 25 --samples $SAMPLES --epochs $epochs --ids-dir "$work/el" \
      >"$work/joiner$g.log" 2>&1 &
    joiner[$g]=$!; pids+=($!)
    echo "{\"action\":\"grow\",\"group\":$g,\"join_token\":\"$good\"}" >"$work/commands/00$g.json"
    await join $g
  done
  sleep 0.3
  if [[ $how == sigterm ]]; then  # scancel of the extension job: SIGTERM through timeout and elastic-launch
    kill -TERM "${joiner[$first]}"
  else
    echo "{\"action\":\"shrink\",\"group\":$first}" >"$work/commands/003.json"
  fi
  await shrink 1
  # The group that was asked to leave is gone, the other still trains in the world.
  wait "${joiner[$first]}"; first_rc=$?
  kill -0 "${joiner[$other]}" 2>/dev/null || fail "group $other ended with group $first"
  sleep 0.5
  if [[ $how == command ]]; then
    echo "{\"action\":\"shrink\",\"group\":$other}" >"$work/commands/004.json"
    await shrink 2
  fi
  wait "${joiner[$other]}"; other_rc=$?
  wait $parent; parent_rc=$?
  pids=()
  echo "--- parent"; cat "$work/parent.log"
  for g in 1 2; do echo "--- group $g"; cat "$work/joiner$g.log"; done
  echo "--- rescales"; grep rescale "$work/metrics.jsonl"
  echo "wall $(echo "$(date +%s.%N) - $start" | bc) s"
  [[ $parent_rc == 0 ]] || fail "parent exited with $parent_rc"
  [[ $first_rc == 0 ]] || fail "group $first exited with $first_rc"
  [[ $other_rc == 0 ]] || fail "group $other exited with $other_rc"
  [[ $how == sigterm ]] && { grep -q "group $first got SIGTERM: it leaves" "$work/parent.log" || fail "no SIGTERM leave"; }
  full=$((2 + 2 * ranks)) one=$((2 + ranks))
  grep -q "shrink at step [0-9]*: $full -> $one ranks" "$work/parent.log" || fail "no leave from $full ranks"
  # Training went on in the world of one group after the first leave (rank 0 reports the world
  # after a change).
  grep -q "step [0-9]*: world $one, batch" "$work/parent.log" || fail "no step in the world of $one"
  if [[ $how == command ]]; then
    grep -q '"gpus":2,"pause_s":[0-9.e-]*,"type":"rescale","what":"shrink"' "$work/metrics.jsonl" || fail "no second leave"
    grep -q "done: [0-9]* steps, world 2," "$work/parent.log" || fail "did not finish at 2 ranks"
  else
    grep -q "done: [0-9]* steps, world $one," "$work/parent.log" || fail "did not finish at $one ranks with group $other"
  fi
  "$bin/elastic-train-logreg" --verify-ids "$work/el" --samples $SAMPLES --epochs $epochs \
    || fail "samples not processed exactly once"
  "$bin/elastic-train-logreg" --compare "$work/ref/model" "$work/el/model" --tolerance $TOLERANCE \
    || fail "model differs from the 2-rank run"
  pauses=$(grep '"what":"shrink"' "$work/metrics.jsonl" | sed -E 's/.*"gpus":([0-9]+),"pause_s":([0-9.e-]+).*/{"to": \1, "pause_s": \2}/' | paste -sd, -)
  echo "{\"test\": \"anyleave\", \"first\": $first, \"how\": \"$how\", \"ranks\": $ranks, \"leaves\": [$pauses]}"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo PASS
