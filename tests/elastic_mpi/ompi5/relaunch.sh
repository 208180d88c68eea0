#!/bin/bash
# relaunch.sh: what a relaunch at a rescale point costs on Open MPI 5.0 / PRRTE 3, the way past
# its one-node growth limit (docs/interfaces.md section 5): the world ends, a new DVM is started
# over the job's nodes and its extensions' nodes, and the world is launched again at its new size.
# A reproducer, not a test: it prints one JSON line per world and exits 0 when every world reduced
# right over the hosts asked for, 1 otherwise.
#
# Usage (as root, in a Debian 13 root whose local cluster is up: `scripts/cluster up`):
#   relaunch.sh [CLUSTER_DIR [JOB_USER]]      (defaults /tmp/elastic-cluster, elastic)
# Env: STATE_MB (100): the state rank 0 keeps in /dev/shm between worlds and hands to every rank.
#
# Three jobs of the job user hold nodes n1 (the "job", which runs this script's driver), n2 and n3
# (its "extensions"). The driver starts each world's DVM with PRRTE's ssh launcher and an agent
# that starts the daemon of a node through the job that holds it (`srun --jobid=<that job>
# --overlap -N1 -n1 -w <node>`), as elastic-launch would for an extension job; Slurm's
# environment is kept from prte (its Slurm support would limit the DVM to the job's own node).
# Worlds: n1+n2 (4 ranks), n1+n2+n3 (6: a grow onto a new node), n1+n2 (4: n3 given back),
# n1+n2+n3 (6: the node given back, taken again).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cluster_dir=${1:-/tmp/elastic-cluster}
user=${2:-elastic}
state_mb=${STATE_MB:-100}
[[ $state_mb =~ ^[0-9]+$ ]] && (( state_mb >= 1 && state_mb < 2048 )) \
  || { echo "relaunch.sh: STATE_MB must be 1-2047 (MiB)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "relaunch.sh: run it as root (it submits as $user)" >&2; exit 2; }
command -v prte >/dev/null || { echo "relaunch.sh: no prte here: this is for Open MPI 5 (Debian 13)" >&2; exit 77; }
eval "$("$repo/scripts/cluster" env --dir "$cluster_dir")" || exit 2
work=$(mktemp -d /tmp/elastic-relaunch.XXXXXX)
chmod 755 "$work"
mpicc -O1 -o "$work/world" "$here/relaunch_world.c" || exit 1
chown -R "$user" "$work"
jobs=()
# The jobs, and the state the driver keeps in /dev/shm should it not end by itself.
cleanup() {
  local j
  for j in "${jobs[@]}"; do scancel "$j" 2>/dev/null; rm -f "/dev/shm/elastic-relaunch-$j"; done
}
trap cleanup EXIT
as_user() { runuser -u "$user" -- "$@"; }
hold() {  # hold NODE: a job of the user that holds NODE (an extension job's stand-in)
  as_user sbatch --parsable -D "$work" -N1 -w "$1" --gres=gpu:1 -o /dev/null --wrap 'sleep 600'
}
running() {  # running JOB: waits (60 s at most) until JOB runs
  local i
  for i in $(seq 600); do [[ $(squeue -h -j "$1" -o %T) == RUNNING ]] && return 0; sleep 0.1; done
  echo "relaunch.sh: job $1 did not start" >&2; return 1
}
j2=$(hold n2) && jobs+=("$j2") && j3=$(hold n3) && jobs+=("$j3") || exit 1
running "$j2" && running "$j3" || exit 1

# The agent PRRTE's ssh launcher calls: agent NODE COMMAND-LINE (PRRTE 3 sends one shell line).
cat > "$work/agent.sh" <<SH
#!/bin/sh
node=\$1; shift
case \$node in n2) job=$j2 ;; n3) job=$j3 ;; *) echo "agent: no job holds \$node" >&2; exit 1 ;; esac
exec env -u SLURM_JOB_ID -u SLURM_JOBID -u SLURM_STEP_ID -u SLURM_STEPID srun --jobid=\$job --overlap -N1 -n1 -w \$node sh -c "\$*"
SH
# The driver: job 1 on n1. Each world: its own DVM, the world launched into it, the DVM stopped.
cat > "$work/driver.sh" <<'SH'
#!/bin/bash
work=$1 state_mb=$2
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }
# Slurm's environment away from prte (and so from its daemons' srun, which names its job).
noslurm=$(env | sed -n 's/^\(SLURM_[A-Z0-9_]*\)=.*/-u \1/p' | grep -v SLURM_CONF)
export OMPI_MCA_btl=self,sm,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi \
  OMPI_MCA_mpi_yield_when_idle=1
state=/dev/shm/elastic-relaunch-$SLURM_JOB_ID
status=0 w=0
for hosts in n1:2,n2:2 n1:2,n2:2,n3:2 n1:2,n2:2 n1:2,n2:2,n3:2; do
  w=$((w + 1))
  ranks=$(tr ',' '\n' <<<"$hosts" | awk -F: '{n += $2} END {print n}')
  want=$(tr ',' '\n' <<<"$hosts" | wc -l)
  mkdir -p "$work/s$w"
  t0=$(now)
  env $noslurm prte --prtemca plm ssh --prtemca plm_ssh_agent "$work/agent.sh" --host "$hosts" \
    --report-uri "$work/uri$w" --tmpdir "$work/s$w" > "$work/prte$w.log" 2>&1 &
  prte=$!
  for _ in $(seq 300); do [[ -s $work/uri$w ]] && break; sleep 0.05; done
  uri_s=$(since "$t0")
  t1=$(now)
  STATE_IN=$( ((w > 1)) && echo "$state") STATE_OUT=$state STATE_MB=$state_mb \
    timeout -k 2 60 mpirun --dvm "file:$work/uri$w" -x OMPI_MCA_btl -x OMPI_MCA_btl_tcp_if_include -x OMPI_MCA_pml \
      -x OMPI_MCA_mtl -x OMPI_MCA_mpi_yield_when_idle -x STATE_IN -x STATE_OUT -x STATE_MB \
      -n "$ranks" --host "$hosts" --map-by :OVERSUBSCRIBE --bind-to none "$work/world" > "$work/world$w.out" 2>&1
  rc=$?
  world_s=$(since "$t1")
  t2=$(now)
  kill -TERM "$prte" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$prte" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$prte" 2>/dev/null && { kill -KILL "$prte"; stop="killed"; } || stop=ok
  wait "$prte" 2>/dev/null
  stop_s=$(since "$t2")
  line=$(grep '^world ' "$work/world$w.out")
  read -r _ size _ sum _ expected _ got _ mib _ state_s _ init_s _ bad <<<"${line:-x 0 x 0 x -1 x 0 x 0 x 0 x 0 x 1}"
  ok=false
  # Right: the sum, the size, the hosts, and (after the first world) the whole state on every rank.
  [[ $rc == 0 && $sum == "$expected" && $size == "$ranks" && $got == "$want" && $bad == 0 ]] \
    && { ((w == 1)) || [[ $mib == "$state_mb.0" ]]; } && ok=true || status=1
  printf '{"world":%d,"hosts":"%s","ranks":%d,"ok":%s,"mpirun_rc":%d,"dvm_uri_s":%.3f,"launch_to_end_s":%.3f,"total_s":%.3f,"stop_s":%.3f,"stop":"%s","mpi_init_s":%s,"state_mib":%s,"state_s":%s}\n' \
    "$w" "$hosts" "$ranks" "$ok" "$rc" "$uri_s" "$world_s" "$(awk -v a="$uri_s" -v b="$world_s" 'BEGIN {print a + b}')" "$stop_s" "$stop" \
    "${init_s:-0}" "${mib:-0}" "${state_s:-0}"
  [[ $ok == true ]] || { echo "world $w:"; cat "$work/world$w.out"; tail -5 "$work/prte$w.log"; }
done
rm -f "$state"
exit $status
SH
chmod 755 "$work/agent.sh" "$work/driver.sh"
chown "$user" "$work/agent.sh" "$work/driver.sh"
j1=$(as_user sbatch --parsable -D "$work" -N1 -w n1 --gres=gpu:1 -o "$work/driver.out" \
  "$work/driver.sh" "$work" "$state_mb") && jobs+=("$j1") || exit 1
for _ in $(seq 1800); do [[ -z $(squeue -h -j "$j1" -o %T 2>/dev/null) ]] && break; sleep 0.1; done
cat "$work/driver.out"
state=$(sacct -n -X -P -j "$j1" -o State 2>/dev/null | head -1)
echo "relaunch.sh: driver job $j1 ended $state (work dir $work)"
[[ $state == COMPLETED ]]
