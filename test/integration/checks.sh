# Shared by the shell integration tests (sourced): a work directory removed at exit, processes
# killed at exit, and the check helpers that count failures.
#   work        a fresh temporary directory
#   server_pid  a process to SIGTERM and reap at exit (set it after starting one)
#   agent_pid   a process to SIGKILL and reap at exit (set it after starting one; clear it once reaped)
#   failures    the number of failed checks
work=$(mktemp -d)
server_pid=
agent_pid=
cleanup() {
  [ -n "$agent_pid" ] && kill -KILL "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
# expect_contains DESCRIPTION NEEDLE TEXT
expect_contains() {
  if [[ "$3" != *"$2"* ]]; then fail "$1: expected to contain [$2], got: $3"; else ok "$1"; fi
}
# expect_eq DESCRIPTION EXPECTED ACTUAL
expect_eq() {
  if [[ "$3" != "$2" ]]; then fail "$1: expected [$2], got [$3]"; else ok "$1"; fi
}
# eventually TENTHS COMMAND...: runs COMMAND every 0.1 s until it succeeds, at most TENTHS times;
# its status is the last run's (polls a condition the test waits for, never a fixed wait).
eventually() {
  local tries=$1
  shift
  for ((n = 1; n < tries; n++)); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}
