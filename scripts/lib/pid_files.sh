# pid_files.sh: the local cluster's processes and pid files, sourced by scripts/cluster (which
# defines log). alive, start_ticks, record_pid, pid_of, stop_pid.

# alive PID: the process exists and is not a zombie (PID 1 may reap late here).
alive() {
  local pid=$1 state
  [[ -n $pid && -r /proc/$pid/stat ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && -n $state ]]
}

# Pid files: "PID START" where START is when the process started, in clock ticks since boot
# (field 22 of /proc/PID/stat). A pid file left by a run that was killed (its daemons gone) may
# name a PID that an unrelated process holds since (PIDs wrap; a new PID namespace starts again
# from 1): such a process started at another tick, so it is not taken for the daemon. Unlike a
# wall-clock time, the tick does not move when the clock is set.
start_ticks() {  # start_ticks PID
  local ticks
  # The command name (field 2) may hold spaces: count from its closing parenthesis.
  ticks=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}')
  [[ -n $ticks ]] && echo "$ticks"
}

record_pid() {  # record_pid FILE PID
  echo "$2 $(start_ticks "$2")" > "$1"
}

pid_of() {  # pid_of FILE: the PID in a pid file when that process is alive and is the file's
  local f=$1 pid start
  [[ -s $f ]] || return 1
  read -r pid start < "$f" || [[ -n $pid ]] || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  if [[ -n $start ]]; then
    [[ $(start_ticks "$pid") == "$start" ]] || return 1
  else
    # A file written without the tick (by an earlier version of this script, or when the process
    # had already ended): not the daemon if the process started after the file was written.
    local boot ticks
    boot=$(awk '$1 == "btime" {print $2}' /proc/stat)
    ticks=$(start_ticks "$pid") || return 1
    (( boot + ticks / $(getconf CLK_TCK) <= $(stat -c %Y "$f") + 1 )) || return 1
  fi
  echo "$pid"
}

stop_pid() {  # stop_pid PID NAME: TERM, wait up to 10 s, then KILL
  local pid=$1 name=$2 i
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  log "$name (pid $pid) ignored SIGTERM for 10 s: killing it"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do alive "$pid" || return 0; sleep 0.1; done
  echo "cluster: warning: $name (pid $pid) is still alive" >&2
}
