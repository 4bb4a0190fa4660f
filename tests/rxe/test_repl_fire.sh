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
#  3. A stale REPL: n3 (2 workers) holds the REPL of one write of a key
#     it is the backup of (RS_TEST_REPL_HOLD) past its primary's timeout;
#     the write fails, the next write of the key goes on a new connection
#     and n3's other worker applies it; then the held REPL goes on and
#     must be refused as overtaken: n3's row must equal the primary's
#     (docs/replication.md, "Stale REPLs"). Between the two writes n4
#     joins: the primary adopts a new configuration while it keeps the
#     failed REPL, and must read its records again from the rows. Then,
#     once n4 is active, the primary is
#     SIGKILLed; the failed write resent to the key's primary now
#     must be answered from its record, not applied again: the failed
#     REPL was sent again, completion included, before the next write's
#     ("A REPL that failed is sent again").
#  4. Drop and create again: a write of table rt fails on a REPL that n3
#     holds (the primary keeps it to send again); rt is dropped and
#     created again, and a write of another key ships what the primary
#     kept for n3 first: the key of the failed write must be missing
#     from the new rt at n3 as at its primary (issue 27, fault 3, for
#     the records a primary still holds).
#  5. The same with the REPL on the wire: the key is put first (the held
#     REPL carries its row) and no other write follows, so the held REPL
#     of the dropped rt is the last its sender sent and reaches n3 after
#     rt was created again there; it must be refused (the two
#     tables' identities differ, repl.other_table_repls) and the key be
#     missing from the new rt at n3 as at its primary (fault 3, the rest).
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin replfire 4
etcd_initial=2
etcd_workers=1
RS_TEST_ADOPT_HOLD=$d/hold etcd_node_start 1 "${ips[0]}"
etcd_node_start 2 "${ips[1]}"
node_await n1 n2
etcd_await_active 2 n1 n2
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
RS_TEST_REPL_HOLD=$d/rhold etcd_workers=2 etcd_node_start 3 "${ips[2]}"
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

echo "step 3: a REPL overtaken by the next one must not be applied"
t0=$(date +%s.%N)
etcd_await_active 3 n1 n2 n3
"$drv" replstale "$both,${addr[n3]}" "${addr[n3]}" "$d/rhold" "$d/go" \
  >"$d/stale.txt" 2>&1 &
stale_pid=$!
await "$d/go.ready" . 60 "$stale_pid" || { cat "$d/stale.txt"; fail "replstale (driver) never failed its write"; }
paddr=$(cat "$d/go.ready")
for n in n1 n2; do [ "${addr[$n]}" = "$paddr" ] && victim=$n; done
[ -n "${victim:-}" ] || fail "the key's primary $paddr is neither n1 nor n2"
# a new configuration while the primary keeps the failed REPL: n4 joins,
# and the primary must read the kept records again from its rows
RS_TEST_REPL_HOLD= etcd_workers=2 etcd_node_start 4 "${ips[3]}"
node_await n4
await "$d/$victim.log" "queued records of earlier epochs read again" 60 \
  "${pid[$victim]}" || fail "$victim did not read its kept REPL again"
grep "read again" "$d/$victim.log"
touch "$d/go"
wait "$stale_pid" || { cat "$d/stale.txt"; fail "replstale (driver)"; }
cat "$d/stale.txt"
grep "test hold" "$d/n3.log"
key=$(sed -n 's/^replstale: key \([0-9]*\), .*/\1/p' "$d/stale.txt")
"$bin/recstore-ctl" --etcd "$url" --cluster t cluster --until-active 4 \
  --timeout 60 >"$d/four.out" 2>&1 || fail "n4 never became active"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/four.out")
kill -KILL "${pid[$victim]}"
wait "${pid[$victim]}" 2>/dev/null || true
"$bin/recstore-ctl" --etcd "$url" --cluster t cluster --until-epoch \
  $((epoch + 1)) --timeout 60 >"$d/after.out" 2>&1 ||
  fail "no configuration after $victim was killed"
rest=n1; [ "$victim" = n1 ] && rest=n2
for n in "$rest" n3 n4; do
  await "$d/$n.log" "repl: epoch $((epoch + 1)) adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $((epoch + 1))"
done
"$drv" onceagain "${addr[$rest]},${addr[n3]},${addr[n4]}" "$key" \
  >"$d/again.txt" 2>&1 || { cat "$d/again.txt"; fail "onceagain (driver)"; }
cat "$d/again.txt"
echo "step 3: $(elapsed "$t0") s"

echo "step 4: a kept REPL of a table dropped and created again"
t0=$(date +%s.%N)
"$drv" droprecreate "${addr[$rest]},${addr[n3]},${addr[n4]}" "${addr[n3]}" "$d/rhold" \
  >"$d/drop.txt" 2>&1 || { cat "$d/drop.txt"; fail "droprecreate (driver)"; }
cat "$d/drop.txt"
echo "step 4: $(elapsed "$t0") s"

echo "step 5: a REPL on the wire of a table dropped and created again"
t0=$(date +%s.%N)
"$drv" droprecreate "${addr[$rest]},${addr[n3]},${addr[n4]}" "${addr[n3]}" "$d/rhold" wire \
  >"$d/dropwire.txt" 2>&1 || { cat "$d/dropwire.txt"; fail "droprecreate wire (driver)"; }
cat "$d/dropwire.txt"
# (the killed member is still listed: its section fails)
"$bin/recstore-ctl" -s "${addr[n3]}" stats >"$d/stats-n3.txt" 2>&1 || true
awk -v a="${addr[n3]}" '/^node /{on = index($0, a) > 0} on' "$d/stats-n3.txt" |
  grep -E "^node|repl\.(stale|other_table|foreign)_repls" || cat "$d/stats-n3.txt"
awk -v a="${addr[n3]}" '/^node /{on = index($0, a) > 0} on' "$d/stats-n3.txt" |
  grep -Eq "repl\.other_table_repls [1-9]" ||
  fail "n3 did not count the REPL of the other table it refused"
echo "step 5: $(elapsed "$t0") s"

node_stop "$rest" n3 n4
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
