# shellcheck shell=bash
# sh-lib.sh - sourced by the scripts that run nodes (the main job, the rxe
# tests, the replication bench): failing with the logs, cleaning up at exit,
# timing and waiting. Source it, set what differs from the defaults, then
# `trap cleanup EXIT`. The caller's variables:
#
#   sh_dir          the temporary directory: the logs are in it and cleanup
#                   removes it (unless sh_keep is non-empty)
#   sh_logs         patterns under sh_dir of the files fail shows (*.log)
#   sh_tail         lines fail shows of each (40)
#   sh_fail_prefix  put before fail's message (FAIL: )
#   sh_fail_fd      where the message goes (1), sh_log_fd the logs (1)
#   sh_pids         names of the variables holding the pids that cleanup
#                   stops, in order: a variable at a time, with signal
#                   sh_sig (KILL), and waits for (a node leaves while etcd
#                   still runs)
#   fail_hook       a function fail calls with its message after the logs,
#                   when the caller defines one
#   watchdog_hook   a function sh_watchdog calls before it stops the
#                   processes, when the caller defines one (print what
#                   tells where it hangs: the cluster's state, counters)
#
# rxe_test_args "$@" (the rxe tests' command line, BUILD_DIR): exit 77 (skip)
# where there is no RDMA device, 2 on a wrong call; sets bin, the build
# directory.
rxe_test_args() {
  if [ -z "${RS_RDMA_DEV:-}" ] || [ -z "${RS_RDMA_IP:-}" ]; then
    echo "skip: no RDMA device (RS_RDMA_DEV, RS_RDMA_IP)"
    exit 77
  fi
  [ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
  bin=$(cd "$1" && pwd)
}

# fail MESSAGE: print it, the last lines of each non-empty log, exit 1.
fail() {
  local f pat pats
  echo "${sh_fail_prefix-FAIL: }$*" >&"${sh_fail_fd:-1}"
  read -ra pats <<<"${sh_logs:-*.log}" # not expanded here, but under sh_dir
  for pat in "${pats[@]}"; do
    for f in "$sh_dir"/$pat; do
      [ -s "$f" ] && { echo "--- $f"; tail -n "${sh_tail:-40}" "$f"; } >&"${sh_log_fd:-1}"
    done
  done
  if declare -F fail_hook >/dev/null; then
    fail_hook "$@"
  fi
  exit 1
}

# sh_watchdog SECONDS: a test that hangs is stopped before its ctest
# timeout with what it was waiting for, instead of being killed silently
# (ctest then shows no log). After SECONDS a background watcher prints
# that the test hangs, runs watchdog_hook, then SIGKILLs every process
# the test's shell started, children's children included (nodes,
# drivers, etcd): the command the test waits on fails, and the test's
# own fail prints the logs. If the shell still runs 30 s later, it is
# stopped too. cleanup stops the watcher (sh_watchdog_pid).
# etcd_test_begin arms it from RS_TEST_TIMEOUT (tests/CMakeLists.txt
# gives every shell test its ctest timeout there).
sh_watchdog() {
  local secs=$1 main=$$
  (
    trap - EXIT
    # a deadline, not a count of sleeps: each sleep is a fork and exec,
    # seconds late on a loaded host
    local end=$((EPOCHSECONDS + secs))
    while [ "$EPOCHSECONDS" -lt "$end" ]; do sleep 1; done
    echo "${sh_fail_prefix-FAIL: }watchdog: the test still runs after $secs s: stopping every process it started"
    if declare -F watchdog_hook >/dev/null; then
      watchdog_hook || true
    fi
    local me=$BASHPID p
    for p in $(sh_descendants "$main" "$me"); do
      kill -KILL "$p" 2>/dev/null || true
    done
    end=$((EPOCHSECONDS + 30))
    while [ "$EPOCHSECONDS" -lt "$end" ]; do sleep 1; done
    kill -TERM "$main" 2>/dev/null
  ) &
  sh_watchdog_pid=$!
}

# sh_descendants PID [SKIP]: the pids of PID's descendants (not SKIP's
# subtree), parents before children, from /proc.
sh_descendants() {
  local f line pp p
  local -A kids=()
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue
    line=${line##*) } # state ppid ...
    read -r _ pp _ <<<"$line"
    p=${f#/proc/}
    kids[$pp]+=" ${p%/stat}"
  done
  local -a todo=($1)
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]}
    todo=("${todo[@]:1}")
    for f in ${kids[$p]:-}; do
      [ "$f" = "${2:-}" ] && continue
      echo "$f"
      todo+=("$f")
    done
  done
}

# sh_stop SIGNAL VAR...: send SIGNAL to the pids listed in the variables
# named, wait for them, and empty the variables. (Its own variables are
# named so as not to hide the caller's.)
sh_stop() {
  local sh_sig_=$1 sh_v_ sh_p_
  shift
  for sh_v_; do
    for sh_p_ in ${!sh_v_}; do
      kill -"$sh_sig_" "$sh_p_" 2>/dev/null || true
    done
    for sh_p_ in ${!sh_v_}; do
      wait "$sh_p_" 2>/dev/null || true
    done
    printf -v "$sh_v_" %s ''
  done
}

# cleanup: the EXIT trap.
cleanup() {
  local sh_v_
  if [ -n "${sh_watchdog_pid:-}" ]; then
    kill -KILL "$sh_watchdog_pid" 2>/dev/null || true
    wait "$sh_watchdog_pid" 2>/dev/null || true
  fi
  for sh_v_ in ${sh_pids:-}; do
    sh_stop "${sh_sig:-KILL}" "$sh_v_"
  done
  wait 2>/dev/null || true
  [ -n "${sh_keep:-}" ] || rm -rf "$sh_dir"
}

# elapsed T0: seconds since T0 (date +%s.%N), to a tenth.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# await FILE PATTERN SECONDS PID: wait (up to SECONDS) for a line matching
# PATTERN in FILE while PID lives.
await() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# node_await NAME...: wait (up to 120 s each) until sh_dir/NAME.log says
# the node listens while ${pid[NAME]} lives, then set addr[NAME] to its
# address; fail otherwise. (The caller declares the associative arrays
# pid and addr.)
node_await() {
  local n
  for n; do
    await "$sh_dir/$n.log" "listening on" 120 "${pid[$n]}" || fail "$n did not start"
    addr[$n]=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$sh_dir/$n.log" | head -n 1)
  done
}

# node_stop NAME...: SIGTERM each node ${pid[NAME]}; it must exit 0 and
# log that it stopped (peers, queues and records freed); fail otherwise.
node_stop() {
  local n rc
  for n; do
    rc=0
    kill -TERM "${pid[$n]}"
    wait "${pid[$n]}" || rc=$?
    [ "$rc" = 0 ] || fail "$n exit status $rc after SIGTERM"
    grep -q "stopped" "$sh_dir/$n.log" || fail "$n did not stop cleanly"
  done
}
