#!/usr/bin/env bash
# test_repl_cut.sh BUILD_DIR - a node whose copy of gained ranges is cut
# short by the next configurations keeps the ranges it held all along
# (docs/replication.md, "Copying ranges"; issue 27's nemesis found rows
# lost this way after a kill, a pause and a kill):
#
#  1. etcd, three nodes (r 2, lease 3 s), a table whose 256 keys are put.
#     n2 runs with the test hook RS_TEST_COPY_HOLD_FIRST: while the file exists,
#     its copies of gained ranges wait before their first round.
#  2. n3 is killed. n2 gains the ranges n3 shared with n1 and its copy is
#     held. n3 starts again with empty memory, joins, copies (not held)
#     and becomes active: two more configurations arrive while n2's copy
#     of the first is still held. n2 was in the replica set of the ranges
#     it shares with n3 in every one of them (their primary in the first
#     two, their backup again in the last): it holds them completely and
#     must neither remove nor copy them again.
#  3. n3 is killed again before n2's copy ever finished: n2 leads the
#     ranges it shared with n3. The hold ends; every key must still be
#     there, through the cluster and on every member of its replica set.
#
# Skipped in the TSan tree (the test command's budget; the planning is
# the adopting thread's alone, and ASan checks its memory).
#
# Exit 0 pass, 77 no RDMA device or skipped, anything else fails (with
# the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
if grep -q "^RS_SANITIZE:[A-Z]*=thread$" "$bin/CMakeCache.txt" 2>/dev/null; then
  echo "repl_cut: skipped in the TSan tree"
  exit 77
fi
drv=$bin/tests/repl_driver
# ---- 1. etcd, three nodes, one table --------------------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin cut 3
etcd_initial=3
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t cluster "$@"; }
etcd_node_start 1 "${ips[0]}"
RS_TEST_COPY_HOLD_FIRST=$d/hold etcd_node_start 2 "${ips[1]}"
etcd_node_start 3 "${ips[2]}"
node_await n1 n2 n3
etcd_await_active 3 n1 n2 n3
seeds="${addr[n1]},${addr[n2]},${addr[n3]}"
"$drv" tables "$seeds" create rt >"$d/tables.txt" 2>&1 || fail "create rt"
"$drv" tput "$seeds" rt 7 >>"$d/tables.txt" 2>&1 || fail "put rt"

# adopted E N: wait until node N logged that it adopted epoch E
adopted() {
  await "$d/$2.log" "repl: epoch $1 adopted" 60 "${pid[$2]}" ||
    fail "$2 did not adopt epoch $1"
}
# planned E N: how many ranges node N planned to copy in when it adopted E
planned() {
  sed -n "s/^.*repl: epoch $1 adopted: .*, \([0-9]*\) ranges\{0,1\} to copy in.*/\1/p" \
    "$d/$2.log" | tail -n 1
}
# kill3 E: SIGKILL n3 (epoch E) and wait for the configuration after it
kill3() {
  kill -KILL "${pid[n3]}"
  wait "${pid[n3]}" 2>/dev/null || true
  ctl --until-epoch $(($1 + 1)) --timeout 60 >"$d/down-$1.out" 2>&1 ||
    fail "no configuration after n3 was killed in epoch $1"
}
# copied E N: wait until node N's copy of epoch E (if any) is in
copied() {
  [ "$(planned "$1" "$2")" != 0 ] || return 0
  await "$d/$2.log" "repl: epoch $1: ranges copied in" 120 "${pid[$2]}" ||
    fail "$2's copy of epoch $1 never finished"
}

# ---- 2. n3 killed: n2's copy held through three configurations ------------------
touch "$d/hold"
e0=$epoch
kill3 $e0
e1=$((e0 + 1))
adopted $e1 n2
[ "$(planned $e1 n2)" -gt 0 ] || fail "n2 gained no range when n3 died (epoch $e1)"
await "$d/n2.log" "copy held while" 60 "${pid[n2]}" ||
  fail "n2's copy was never held (RS_TEST_COPY_HOLD_FIRST)"
mv "$d/n3.log" "$d/n3.before.log"
etcd_node_start 3 "${ips[2]}"
node_await n3
etcd_await_active 3 n1 n2 n3
e3=$epoch
echo "n3 killed in epoch $e0, back and active in epoch $e3; n2 planned:"
for ((e = e1; e <= e3; e++)); do
  adopted $e n2
  echo "  epoch $e: $(planned $e n2) ranges to copy in"
done
grep -h "rows of ranges this node held earlier removed" "$d/n2.log" || true

# ---- 3. n3 killed again before n2's copy finished --------------------------------
! grep -q "ranges copied in" "$d/n2.log" ||
  fail "n2's copy finished while held: the test did not cut it short"
kill3 $e3
e4=$((e3 + 1))
adopted $e4 n1
adopted $e4 n2
rm -f "$d/hold"
copied $e4 n1
copied $e4 n2
"$drv" tcheck "${addr[n1]},${addr[n2]}" rt 7 >"$d/tcheck.txt" 2>&1 ||
  { cat "$d/tcheck.txt"; fail "keys of rt lost after n2's copies were cut short"; }
cat "$d/tcheck.txt"
echo "every key of rt kept (n2 led the ranges it shared with n3 in epoch $e4)"
