#!/usr/bin/env bash
# idle-cpu.sh [-t] PID SECONDS - print the percent of one core that process
# PID used during the next SECONDS (user + system time, all threads), e.g.
# "0.12". With -t, also one line per thread: tid, name, percent.
#
# Reads utime and stime (fields 14 and 15 of /proc/PID/stat, in clock
# ticks, usually 100 per second): the resolution is one tick, so measure for
# 10 s or more to resolve 0.1 %. An idle RecStore-C node or client must stay
# well under 1 %.
set -euo pipefail

usage() { echo "usage: $0 [-t] PID SECONDS" >&2; exit 2; }

threads=0
if [ "${1:-}" = -t ]; then
  threads=1
  shift
fi
[ $# -eq 2 ] || usage
pid=$1
secs=$2
[[ $pid =~ ^[0-9]+$ ]] || usage
[[ $secs =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
[ -r "/proc/$pid/stat" ] || { echo "idle-cpu: no process $pid" >&2; exit 1; }
hz=$(getconf CLK_TCK)

# utime + stime of a stat file. The command name (field 2) may hold spaces
# and parentheses, so split after the last ')': field 3 is then word 1,
# utime (14) word 12 and stime (15) word 13.
ticks() {
  local s rest
  s=$(cat "$1" 2>/dev/null) || { echo 0; return; }
  rest=${s##*) }
  # shellcheck disable=SC2086
  set -- $rest
  echo $(( ${12} + ${13} ))
}

declare -A before
if [ $threads = 1 ]; then
  for t in /proc/"$pid"/task/*; do
    before[${t##*/}]=$(ticks "$t/stat")
  done
fi
t0=$(ticks "/proc/$pid/stat")
start=$(date +%s.%N)
sleep "$secs"
t1=$(ticks "/proc/$pid/stat")
end=$(date +%s.%N)
[ -r "/proc/$pid/stat" ] || { echo "idle-cpu: process $pid exited" >&2; exit 1; }

awk -v d=$((t1 - t0)) -v hz="$hz" -v a="$start" -v b="$end" \
  'BEGIN { printf "%.2f\n", d / hz / (b - a) * 100 }'
if [ $threads = 1 ]; then
  for t in /proc/"$pid"/task/*; do
    tid=${t##*/}
    now=$(ticks "$t/stat")
    name=$(cat "$t/comm" 2>/dev/null || echo '?')
    awk -v d=$((now - ${before[$tid]:-0})) -v hz="$hz" -v a="$start" \
      -v b="$end" -v tid="$tid" -v name="$name" \
      'BEGIN { printf "  %-8s %-16s %.2f\n", tid, name, d / hz / (b - a) * 100 }'
  done
fi
