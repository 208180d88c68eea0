#!/bin/bash
# repro.sh [grow|timing|spawn|spawn-mpirun|release-busy|release-api|fixed|all]
# Elastic grow/shrink checks against a PRRTE DVM, simulated nodes on one machine.
#
# Simulated nodes: nodeA..nodeE are network namespaces on a private bridge
# (netsetup.sh), each process tree of a node also gets its own host name (UTS
# namespace). agent.sh stands in for ssh. Needs root.
# Every step is bounded by a timeout; a hang shows up as "TIMEOUT".
# A reproducer, not a test: it prints what each step did (results, times, error messages) and
# exits 0 whatever they were; read its output (docs/interfaces.md section 5 has what it showed).
set -u
cd "$(dirname "$0")"
HERE=$PWD
NODES="nodeA nodeB nodeC nodeD nodeE"
if [ -z "${ELASTIC_NET:-}" ]; then   # private network and mount namespace
    exec unshare --net --mount --propagation private env ELASTIC_NET=1 "$0" "$@"
fi
./netsetup.sh $NODES || exit 1
export PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=${T:-60}                                   # bound for each step, seconds
BASE=$(mktemp -d /tmp/elastic.XXXXXX)        # logs; one folder per test
# MPI over the node links; only the components needed here (probing the
# fabric components ofi/uct costs about 1 s per process start)
NET="-x OMPI_MCA_btl_tcp_if_include=10.9.0.0/24"
# and yield when idle: more busy-polling ranks than cores here
MPIX=${MPIX:-"$NET -x OMPI_MCA_btl=self,sm,tcp -x OMPI_MCA_pml=ob1 -x OMPI_MCA_mtl=^ofi -x OMPI_MCA_mpi_yield_when_idle=1"}
BIN=$BASE/bin                                # the programs, built from this folder's sources
mkdir -p "$BIN"
mpicc -O1 -o "$BIN/elastic" elastic.c || exit 1
cc -O1 -o "$BIN/release" release.c $(pkg-config --cflags --libs pmix) || exit 1

declare -A GPID                              # prun pid of each group
now() { date +%s.%N; }
say() { echo "[$(date +%T.%3N)] $*"; }
# show the PRRTE daemons and the simulated node each one runs on
daemons() {
    for p in $(pgrep -x prte) $(pgrep -x prted); do
        echo "    daemon pid $p on $(nsenter -t $p -u hostname)"
    done
}
# waitfor FILE PATTERN COUNT: wait until PATTERN occurs COUNT times in FILE
waitfor() {
    local i=0
    while [ "$(cat "$1" 2>/dev/null | grep -c -- "$2")" -lt "$3" ]; do
        sleep 0.05; i=$((i + 1))
        [ $i -gt $((T * 20)) ] && { say "TIMEOUT waiting for '$2' x$3 in $1"; tail -5 "$1"; return 1; }
    done
    return 0
}
# elapsed T0 FILE: seconds from T0 to the latest "OK join" time stamp in FILE
elapsed() { grep '^OK join' "$2" | sed 's/^OK [a-z]* t=\([0-9.]*\).*/\1/' | sort -n | tail -1 | awk -v t0="$1" '{printf "%.2f", $1 - t0}'; }

start_dvm() {  # start_dvm EXTRA_ARGS: elastic DVM whose controller runs on nodeA
    say "start DVM on nodeA: prte --prtemca prte_elastic_mode 1 $*"
    ip netns exec nodeA unshare --uts sh -c "hostname nodeA; exec prte --prtemca prte_elastic_mode 1 \
        --prtemca plm ssh --prtemca plm_ssh_agent $HERE/agent.sh \
        --host nodeA:4 --report-uri $D/uri --daemonize $*" || return 1
    waitfor $D/uri prte 1
}
stop_dvm() { timeout $T ip netns exec nodeA pterm.prrte $DVM >/dev/null 2>&1 || say "pterm failed"; }

# group NAME WHAT NP PRUN-ARGS...: launch a joining group, report its grow time
group() {
    local name=$1 what=$2 np=$3; shift 3
    local t0; t0=$(now)
    say "$name: prun $* -n $np $BIN/elastic group $what"
    timeout $T ip netns exec nodeA prun $DVM $MPIX --bind-to none "$@" -n $np $BIN/elastic group $what > $D/$name.log 2>&1 &
    GPID[$name]=$!
    if waitfor $D/$name.log '^OK join' $np; then
        say "$name: joined, merged allreduce correct after $(elapsed $t0 $D/$name.log) s"
        grep '^OK join' $D/$name.log | sed 's/^/    /'
    else
        say "$name: FAILED"; return 1
    fi
}

grow_test() {
    start_dvm || return 1
    say "world: 2 ranks on nodeA, accepting 8 joins"
    timeout $((T * 6)) ip netns exec nodeA prun $DVM $MPIX --bind-to none --host nodeA:2 -n 2 $BIN/elastic world 8 > $D/world.log 2>&1 &
    waitfor $D/world.log READY 1 || return 1

    # (a) grow onto a new host
    group g1-nodeB-new stay 2 --add-host nodeB:2 --host nodeB:2 || return 1
    # (b) another group onto the same host (one more slot), and onto a 2nd new host
    group g2-nodeB-again leave 1 --add-host nodeB:+1 --host nodeB:1 || return 1
    waitfor $D/g2-nodeB-again.log LEFT 1
    group g3-nodeC-new stay 2 --add-host nodeC:2 --host nodeC:2 || return 1
    group g4-nodeD-new leave 2 --add-host nodeD:2 --host nodeD:2 || return 1
    waitfor $D/g4-nodeD-new.log LEFT 2; wait_gone g4-nodeD-new
    daemons

    # (c) give nodeD back: release it from the DVM while the world keeps running
    local t0; t0=$(now)
    say "release nodeD: palloc --uri file:$D/uri --shrink -w nodeD --no-shell"
    timeout $T ip netns exec nodeA palloc --uri file:$D/uri --shrink -w nodeD --no-shell
    say "palloc rc=$? after $(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.2f", b-a}') s"
    for i in $(seq 1 40); do daemons | grep -q nodeD || break; sleep 0.1; done
    say "nodeD daemon gone after $(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.2f", b-a}') s:"; daemons
    timeout $T ip netns exec nodeA prun $DVM --display alloc -n 1 hostname 2>&1 | grep -i 'slots=' | sed 's/^/   /'
    # the world is still there and can grow again, also onto the released host
    group g5-nodeD-again stay 1 --add-host nodeD:1 --host nodeD:1 || return 1
    daemons

    # (c') a daemon that dies: kill nodeE's daemon after its group has left
    group g6-nodeE-new leave 1 --add-host nodeE:1 --host nodeE:1 || return 1
    waitfor $D/g6-nodeE-new.log LEFT 1; wait_gone g6-nodeE-new
    for p in $(pgrep -x prted); do
        [ "$(nsenter -t $p -u hostname)" = nodeE ] && { say "kill -9 daemon $p on nodeE"; kill -9 $p; }
    done
    sleep 2; daemons
    group g7-nodeC-after-kill stay 1 --add-host nodeC:+1 --host nodeC:1 || say "world did not survive"
    # bring the host whose daemon died back: first release it, then add it again
    # (adding it again without the release fails: PMIX_ERR_JOB_FAILED_TO_LAUNCH)
    if [ -n "${READD_DIRECT:-}" ]; then
        say "add nodeE again, without releasing it first"
    else
        say "release dead nodeE: palloc --shrink -w nodeE"
        timeout $T ip netns exec nodeA palloc --uri file:$D/uri --shrink -w nodeE --no-shell
        say "palloc rc=$?"
    fi
    group g8-nodeE-again stay 1 --add-host nodeE:1 --host nodeE:1 || say "nodeE could not be added again"
    daemons

    waitfor $D/world.log DONE 1 && say "world finished all joins"
    wait_all
    say "world log:"; sed 's/^/    /' $D/world.log | grep -v '^    OK accept' | tail -20
    stop_dvm
}
wait_gone() { wait ${GPID[$1]} 2>/dev/null; }   # wait_gone NAME: that group's prun has exited
wait_all() { wait; }

spawn_test() {  # (d) MPI_Comm_spawn with an add-host info key, from a job in the DVM
    start_dvm || return 1
    for key in PMIX_ADD_HOST add-host; do
        say "spawn ($key): nodeB:1, nodeB:+1 (same host again), nodeC:1"
        ADD_HOST_KEY=$key timeout $T ip netns exec nodeA prun $DVM $MPIX --bind-to none -x ADD_HOST_KEY --host nodeA:1 -n 1 \
            $BIN/elastic spawner nodeB:1 nodeB:+1 nodeC:1 2>&1 | grep -v '^OK' | sed 's/^/    /'
        say "rc=${PIPESTATUS[0]}"; daemons
    done
    stop_dvm
}
spawn_mpirun_test() {  # (d') the same under a one-shot mpirun
    say "spawn under mpirun: nodeB:1, nodeB:+1, nodeC:1"
    ip netns exec nodeA unshare --uts sh -c "hostname nodeA; exec timeout $T mpirun --prtemca prte_elastic_mode 1 \
        --prtemca plm ssh --prtemca plm_ssh_agent $HERE/agent.sh --host nodeA:1 -n 1 $MPIX --bind-to none \
        $BIN/elastic spawner nodeB:1 nodeB:+1 nodeC:1" 2>&1 | grep -v '^OK' | sed 's/^/    /'
    say "rc=${PIPESTATUS[0]}"
}

timed() {  # timed LABEL CMD...: run a bounded command, print its wall time
    local label=$1 t0 rc; shift; t0=$(now)
    timeout $T ip netns exec nodeA "$@" > $D/timed.log 2>&1; rc=$?
    say "$label: rc=$rc $(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.2f", b-a}') s"
}
timing_test() {  # where the time of a grow goes
    start_dvm || return 1
    timed "prun hostname on nodeA (no new daemon)      " prun $DVM --host nodeA:1 -n 1 hostname
    timed "prun hostname, --add-host nodeB (new daemon)" prun $DVM --add-host nodeB:2 --host nodeB:1 -n 1 hostname
    timed "prun hostname on nodeB (daemon exists)      " prun $DVM --host nodeB:1 -n 1 hostname
    timed "MPI check on nodeB, default components      " prun $DVM $NET --bind-to none --host nodeB:1 -n 1 $BIN/elastic check
    timed "MPI check on nodeB (daemon exists)          " prun $DVM $MPIX --bind-to none --host nodeB:1 -n 1 $BIN/elastic check
    timed "MPI check, --add-host nodeC (new daemon)    " prun $DVM $MPIX --bind-to none --add-host nodeC:1 --host nodeC:1 -n 1 $BIN/elastic check
    timed "slot change --add-host nodeB:+1             " prun $DVM --add-host nodeB:+1 --host nodeB:1 -n 1 hostname
    timeout $T ip netns exec nodeA prun $DVM --display alloc -n 1 hostname 2>&1 | grep 'slots=' | sed 's/^/   /'
    stop_dvm
}
release_busy_test() {  # give back a host on which members of the world still run
    start_dvm || return 1
    say "world: 2 ranks on nodeA, accepting 1 join"
    timeout $T ip netns exec nodeA prun $DVM $MPIX -x LINGER=6 --bind-to none --host nodeA:2 -n 2 $BIN/elastic world 1 > $D/world.log 2>&1 &
    waitfor $D/world.log READY 1 || return 1
    group g1-nodeB-new stay 2 -x LINGER=6 --add-host nodeB:2 --host nodeB:2 || return 1
    sleep 1   # the merged world of 4 now runs allreduces for 6 s
    say "release nodeB while two members of the world run there"
    timeout $T ip netns exec nodeA palloc --uri file:$D/uri --shrink -w nodeB --no-shell
    say "palloc rc=$?"
    wait_all
    say "world log:"; sed 's/^/    /' $D/world.log | tail -15
    say "g1 log:"; sed 's/^/    /' $D/g1-nodeB-new.log | tail -8
    stop_dvm
}

release_api_test() {  # give a host back from inside a job via PMIx_Allocation_request
    start_dvm || return 1
    timed "prun hostname, --add-host nodeB,nodeC        " prun $DVM --add-host nodeB:1,nodeC:1 --host nodeB:1,nodeC:1 -n 2 hostname
    daemons
    say "from a process on nodeA: $BIN/release nodeB"
    timeout $T ip netns exec nodeA prun $DVM --host nodeA:1 -n 1 $BIN/release nodeB 2>&1 | sed 's/^/    /'
    for i in $(seq 1 40); do daemons | grep -q nodeB || break; sleep 0.1; done
    daemons
    timed "prun hostname, --add-host nodeB again       " prun $DVM --add-host nodeB:1 --host nodeB:1 -n 1 hostname
    daemons
    say "release nodeC and add it again at once (daemon still leaving)"
    timeout $T ip netns exec nodeA prun $DVM --host nodeA:1 -n 1 $BIN/release nodeC 2>&1 | sed 's/^/    /'
    timed "prun hostname, --add-host nodeC at once     " prun $DVM --add-host nodeC:1 --host nodeC:1 -n 1 hostname
    sed 's/^/    /' $D/timed.log | head -5
    sleep 3; daemons
    timed "prun hostname on nodeC, 3 s later          " prun $DVM --add-host nodeC:1 --host nodeC:1 -n 1 hostname
    sed 's/^/    /' $D/timed.log | head -5
    daemons
    stop_dvm
}
fixed_test() {  # the same grow on a DVM not started in elastic mode
    say "start DVM on nodeA without elastic mode"
    ip netns exec nodeA unshare --uts sh -c "hostname nodeA; exec prte \
        --prtemca plm ssh --prtemca plm_ssh_agent $HERE/agent.sh \
        --host nodeA:4 --report-uri $D/uri --daemonize" || return 1
    waitfor $D/uri prte 1
    timeout $T ip netns exec nodeA prun $DVM --add-host nodeB:1 --host nodeB:1 -n 1 hostname 2>&1 | grep -v '^ *$' | sed 's/^/    /'
    say "rc=${PIPESTATUS[0]}"
    stop_dvm
}

run() {  # run TEST: each test gets its own log directory and DVM
    D=$BASE/$1; DVM="--dvm-uri file:$D/uri"; mkdir -p $D
    echo; say "===== $1"
    ${1//-/_}_test
    stop_children
}
stop_children() {  # leave no background job of this test behind
    local p; for p in $(jobs -p); do kill $p 2>/dev/null; done; wait 2>/dev/null
}

case "${1:-all}" in
    all) for t in grow timing spawn spawn-mpirun release-busy release-api fixed; do run $t; done ;;
    grow|timing|spawn|spawn-mpirun|release-busy|release-api|fixed) run $1 ;;
    *) echo "usage: repro.sh [grow|timing|spawn|spawn-mpirun|release-busy|release-api|fixed|all]" >&2; exit 2 ;;
esac
say "logs in $BASE"
