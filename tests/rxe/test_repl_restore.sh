#!/usr/bin/env bash
# test_repl_restore.sh BUILD_DIR - etcd going back in time under a running
# cluster (docs/replication.md, "Restoring etcd from a snapshot").
#
# One etcd on tmpfs; three memory nodes (r 2, an initial cluster of 3).
#  1. The driver creates its table and acknowledges a step on 2 keys.
#     etcd stops, its data directory is copied (the backup: Debian's
#     etcd-server ships no etcdctl/etcdutl, and a copy of the stopped data
#     directory goes back exactly as a restored snapshot does: an older
#     configuration and an older store revision), etcd starts again.
#  2. n3 is killed; the decider takes it down (a higher epoch) and the
#     driver acknowledges a step on 2 more keys (in the new epoch).
#  3. etcd stops and starts on the copy. n1 and n2 must find the store
#     behind the epoch they follow (log line), show it in the gauge
#     rs_repl_epoch_regressed (their metrics endpoint) and refuse a write
#     with RS_E_EPOCH and the reason (it names recstore-ctl repair-epoch).
#  4. recstore-ctl repair-epoch: both nodes serve again in the repaired
#     epoch, a write is acknowledged, and every acknowledged step is in
#     every row, on every member of its replica set.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin replrestore 3
etcd_initial=3
mport=$((10000 + RANDOM % 9000))
for i in 1 2 3; do
  etcd_node_start $i "${ips[$((i - 1))]}" "\"metrics_port\": $((mport + i)),"
done
node_await n1 n2 n3
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t "$@"; }
ctl cluster --until-active 3 --timeout 60 >"$d/three.out" 2>&1 ||
  fail "the three nodes never became active"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/three.out")
for n in n1 n2 n3; do
  await "$d/$n.log" "repl: epoch $epoch adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $epoch"
done
seeds="${addr[n1]},${addr[n2]}"
"$drv" init "$seeds,${addr[n3]}" >"$d/init.txt" 2>&1 || fail "init (driver)"
# bump KEY...: one acknowledged step of each key (its stream file b.KEY.txt)
bump() {
  local k
  for k; do
    "$drv" bump "$seeds" "$k" "$d/b.$k.txt" >>"$d/bump.txt" 2>&1 ||
      { cat "$d/bump.txt"; fail "bump $k (driver)"; }
  done
}
bump 0 1

echo "step 1: the backup of etcd at epoch $epoch"
t0=$(date +%s.%N)
etcd_stop
cp -a "$d/etcd" "$d/etcd-backup"
etcd_restart "$d/etcd"
echo "step 1: $(elapsed "$t0") s"

echo "step 2: n3 killed, the epoch moves on"
t0=$(date +%s.%N)
kill -KILL "${pid[n3]}"
wait "${pid[n3]}" 2>/dev/null || true
ctl cluster --until-epoch $((epoch + 1)) --timeout 30 >"$d/down.out" 2>&1 ||
  fail "no epoch after $epoch with n3 killed"
later=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/down.out")
for n in n1 n2; do
  await "$d/$n.log" "repl: epoch $later adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $later"
done
bump 100 101
echo "step 2: epoch $later, $(elapsed "$t0") s"

echo "step 3: etcd back at the backup (epoch $epoch)"
t0=$(date +%s.%N)
etcd_restart "$d/etcd-backup"
for n in n1 n2; do
  await "$d/$n.log" "the store went back" 30 "${pid[$n]}" ||
    fail "$n did not find the store behind it"
  grep "the store went back" "$d/$n.log"
  curl -sf --max-time 10 "http://127.0.0.1:$((mport + ${n#n}))/metrics" \
    >"$d/$n.metrics.txt" || fail "the metrics of $n"
  grep "^rs_repl_epoch_regressed " "$d/$n.metrics.txt"
  grep -q "^rs_repl_epoch_regressed $later$" "$d/$n.metrics.txt" ||
    fail "$n: rs_repl_epoch_regressed is not $later"
done
# the client resends a refused write until its timeout: 3 s here
if RS_DRIVER_TIMEOUT_MS=3000 timeout 60 "$drv" bump "$seeds" 4 "$d/refused.4" >"$d/refused.txt" 2>&1; then
  fail "a write acknowledged while the store was behind"
fi
cat "$d/refused.txt"
grep -q "repair-epoch" "$d/refused.txt" ||
  fail "the refusal does not name recstore-ctl repair-epoch"
echo "step 3: $(elapsed "$t0") s"

echo "step 4: recstore-ctl repair-epoch"
t0=$(date +%s.%N)
for ((i = 0; ; i++)); do
  ctl repair-epoch >"$d/repair.out" 2>&1 && break
  [ $i -lt 20 ] || { cat "$d/repair.out"; fail "repair-epoch"; }
  sleep 0.5
done
cat "$d/repair.out"
for n in n1 n2; do
  await "$d/$n.log" "configuration repaired at epoch" 30 "${pid[$n]}" ||
    fail "$n did not adopt the repaired configuration"
done
bump 5
"$drv" check "$seeds" sets "$d"/b.*.txt >"$d/check.txt" 2>&1 ||
  { cat "$d/check.txt"; fail "check (driver)"; }
cat "$d/check.txt"
echo "step 4: $(elapsed "$t0") s"

node_stop n1 n2
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
