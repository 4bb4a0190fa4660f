#!/usr/bin/env bash
# test_repl_fire.sh BUILD_DIR - replication under fire (docs/replication.md,
# "A waiting write never keeps a node from receiving" and "CONFIG without
# the configuration lock").
#
# One etcd on tmpfs; two memory nodes of ONE worker each (r 2, an initial
# cluster of 2), so every key has a primary and a backup and every batch
# of the writers spans both primaries.
#  1. Cross waits: two writers UPDATE all 256 keys for 4 s. Each node's
#     worker waits for the other node's REPL apply while the other's waits
#     for its own; the node must still receive and apply the REPLs. No call
#     may fail or take 1.5 s (a backup's timeout is 2 s), every row equals
#     its acknowledged steps, and on both nodes REPLs were applied while
#     every worker of the node waited (repl.repls_all_waiting > 0).
#  2. CONFIG during an adoption: n1 holds its next adoption with the write
#     side of the configuration lock taken (RS_TEST_ADOPT_HOLD, as a long
#     purge of stale rows does); a third node joins, n1 adopts and holds;
#     3 concurrent CONFIG asks straight to n1 (connection included) must
#     each be answered within their 5 s wait while the hold lasts (under
#     TSan on a loaded host an answer took 1.7 s; a CONFIG that waits for
#     the adoption is never answered). Then the hold ends and n1 adopts.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin replfire 3
etcd_initial=2
etcd_workers=1
RS_TEST_ADOPT_HOLD=$d/hold etcd_node_start 1 "${ips[0]}"
etcd_node_start 2 "${ips[1]}"
node_await n1 n2
"$bin/recstore-ctl" --etcd "$url" --cluster t cluster --until-active 2 \
  --timeout 60 >"$d/two.out" 2>&1 || fail "the two nodes never became active"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/two.out")
for n in n1 n2; do
  await "$d/$n.log" "repl: epoch $epoch adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $epoch"
done
both="${addr[n1]},${addr[n2]}"
"$drv" init "$both" >"$d/init.txt" 2>&1 || fail "init (driver)"

echo "step 1: cross waits, two writers against one worker per node"
t0=$(date +%s.%N)
"$drv" fire "$both" 4 >"$d/fire.txt" 2>&1 || { cat "$d/fire.txt"; fail "fire (driver)"; }
cat "$d/fire.txt"
echo "step 1: $(elapsed "$t0") s"

echo "step 2: CONFIG while n1's adoption holds the configuration lock"
t0=$(date +%s.%N)
touch "$d/hold"
etcd_node_start 3 "${ips[2]}"
node_await n3
await "$d/n1.log" "adoption held" 60 "${pid[n1]}" ||
  fail "n1 did not hold an adoption"
"$drv" cfgprobe "${addr[n2]}" "${addr[n1]}" >"$d/probe.txt" 2>&1 ||
  { cat "$d/probe.txt"; rm -f "$d/hold"; fail "cfgprobe (driver)"; }
cat "$d/probe.txt"
rm -f "$d/hold"
await "$d/n1.log" "adoption released" 30 "${pid[n1]}" ||
  fail "n1 did not end its hold"
grep "adoption held\|adoption released" "$d/n1.log"
echo "step 2: $(elapsed "$t0") s"

node_stop n1 n2 n3
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
