# fail.sh: sourced by every script of scripts/ right after its first line. Strict mode, and loud
# failure: when a command fails, the script says which step it was in, the command, its exit
# status and the file and line, then exits with that status. Never a bare non-zero status.
#
# A script names its current step with `fail_step "what it is doing"`; the name stays until the
# next call. Inside `if`, `while`, `&&` and `||` a failing command is a condition, not a failure,
# exactly as with `set -e`. A command failing inside a subshell or a command substitution is
# reported there and again where its status ends the script: two lines, the innermost first.
set -Eeuo pipefail

FAIL_SCRIPT=${FAIL_SCRIPT:-$(basename "${BASH_SOURCE[1]:-$0}")}
FAIL_STEP=${FAIL_STEP:-start}

fail_step() { FAIL_STEP=$*; }

_fail_on_err() {
  local status=$1 line=$2 file=$3 cmd=$4
  # Once a process: a failure inside a function is not reported again at the function's call.
  [[ ${_FAIL_REPORTED:-} != "$BASHPID" ]] || return 0
  _FAIL_REPORTED=$BASHPID
  printf '%s: FAILED in step "%s": `%s` exited with status %d (%s, line %d)\n' \
    "$FAIL_SCRIPT" "$FAIL_STEP" "$cmd" "$status" "$file" "$line" >&2
}
trap '_fail_on_err "$?" "$LINENO" "${BASH_SOURCE[0]:-$0}" "$BASH_COMMAND"' ERR
