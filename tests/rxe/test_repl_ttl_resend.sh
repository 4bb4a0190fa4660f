#!/usr/bin/env bash
# test_repl_ttl_resend.sh BUILD_DIR - deletions a primary made on its own
# (TTL expiries) whose REPL failed are sent again until the backups have
# them (docs/eviction.md, "Deletions that did not reach a backup").
#
# One etcd on tmpfs; two memory nodes (r 2, an initial cluster of 2), so
# every key has a primary and a backup, each node the primary of about
# half. Both run with the test hook RS_TEST_REPL_REFUSE_DELETES=FILE
# (while FILE exists a REPL carrying a deletion is refused whole, as by a
# backup that did not answer in time; the configuration does not change).
#  1. FILE appears. Table "tt" with a TTL of 1 s; every key put (rows
#     replicate: only deletions are refused).
#  2. The keys expire at their primaries, whose deletions the backups
#     refuse (both nodes log it). Each node still holds, as a backup, the
#     rows the other expired: the fault took.
#  3. FILE goes. Within 30 s neither node holds a key of "tt" (unfenced
#     GETs straight to each: what a backup serves once it becomes the
#     key's primary), the nodes resent deletions, none pend, none were
#     dropped (STATS repl.evict_deletions_*), and nothing is readable
#     through the cluster.
# Before the resend existed, step 3 failed: the backups kept the rows for
# as long as the configuration held.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin replttlresend 2
etcd_initial=2
for i in 1 2; do
  RS_TEST_REPL_REFUSE_DELETES=$d/refuse etcd_node_start $i "${ips[$((i - 1))]}"
done
node_await n1 n2
etcd_await_active 2 n1 n2
both="${addr[n1]},${addr[n2]}"

echo "step 1: put (rows replicate; deletions are refused from now on)"
touch "$d/refuse"
"$drv" ttlput "$both" >"$d/put.txt" 2>&1 || { cat "$d/put.txt"; fail "ttlput (driver)"; }
cat "$d/put.txt"

echo "step 2: the keys expire while the backups refuse their deletions"
t0=$(date +%s.%N)
for n in n1 n2; do
  await "$d/$n.log" "expired rows: the backups did not acknowledge" 20 \
    "${pid[$n]}" || fail "$n: no expiry failed to replicate"
done
sleep 0.5 # the rest of a tick's expiries
for n in n1 n2; do
  if "$drv" tempty "${addr[$n]}" tt >"$d/held_$n.txt" 2>&1; then
    cat "$d/held_$n.txt"
    fail "$n holds no row as a backup: the fault did not take"
  fi
  cat "$d/held_$n.txt"
done
echo "step 2: $(elapsed "$t0") s"

echo "step 3: the backups take deletions again"
t0=$(date +%s.%N)
rm -f "$d/refuse"
ok=
until_s=$(($(date +%s) + 30))
while [ "$(date +%s)" -lt "$until_s" ]; do
  h=0
  "$drv" tempty "${addr[n1]}" tt >"$d/e1.txt" 2>&1 || h=1
  "$drv" tempty "${addr[n2]}" tt >"$d/e2.txt" 2>&1 || h=1
  if [ "$h" = 0 ]; then
    ok=1
    break
  fi
  sleep 0.2
done
cat "$d/e1.txt" "$d/e2.txt"
[ -n "$ok" ] || fail "the backups still hold expired rows 30 s after they take deletions again"
echo "step 3: the backups empty after $(elapsed "$t0") s"
"$drv" evr "$both" >"$d/evr.txt" 2>&1 || { cat "$d/evr.txt"; fail "evr (driver)"; }
cat "$d/evr.txt"
"$drv" ttlgone "$both" >"$d/gone.txt" 2>&1 || { cat "$d/gone.txt"; fail "ttlgone (driver)"; }
cat "$d/gone.txt"

node_stop n1 n2
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
