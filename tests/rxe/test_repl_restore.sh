#!/usr/bin/env bash
# test_repl_restore.sh BUILD_DIR - etcd restored from an older snapshot
# (docs/replication.md, "A store restored from a snapshot"; issue 27,
# fault 9). Before, the agents ignored the restored (lower) epochs and the
# decider built new ones on the restored configuration: no failover until
# those passed the nodes' epoch, and then a configuration derived from the
# snapshot's members, not from what the nodes hold.
#
#  1. etcd, three nodes (r 2, lease 3 s), a table whose 256 keys are put.
#     `etcdctl snapshot save`: the configuration of epoch e0.
#  2. n3 is killed, starts again with empty memory, joins, copies and is
#     active again: the nodes follow epoch e3 > e0.
#  3. etcd is restored from the snapshot (`etcdctl snapshot restore`, the
#     same port). Every node must say its store went back from e3 to e0
#     (log, repl.store_regressed), keep serving e3 (every key readable),
#     and follow and decide nothing: n1 is SIGKILLed and the store's
#     configuration stays e0 past several leases.
#  4. `recstore-ctl recover` writes e3's configuration back at e3 + 1;
#     every node follows it, the decider takes n1 down, the survivors copy
#     what they gained, and every key is still there with its value.
#
# Release tree only: the agent's rules run under ASan and TSan in the unit
# test test_membership (store_restored); here the real etcd restore.
#
# Exit 0 pass, 77 no RDMA device or skipped, anything else fails (with
# the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
if grep -q "^RS_SANITIZE:[A-Z]*=" "$bin/CMakeCache.txt" 2>/dev/null &&
  ! grep -q "^RS_SANITIZE:[A-Z]*=OFF$" "$bin/CMakeCache.txt"; then
  echo "repl_restore: skipped in the sanitizer trees (test_membership has the rules)"
  exit 77
fi
command -v etcdctl >/dev/null || fail "no etcdctl (scripts/install-deps.sh installs etcd-client)"
drv=$bin/tests/repl_driver
# ---- 1. etcd, three nodes, one table, a snapshot --------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin restore 3
etcd_initial=3
ctl() { "$bin/recstore-ctl" --etcd "$url" --cluster t "$@"; }
store_epoch() { ctl cluster | sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p'; }
# copied E N: wait until node N's copy of epoch E (if it planned one) is in
copied() {
  await "$d/$2.log" "repl: epoch $1 adopted" 60 "${pid[$2]}" ||
    fail "$2 did not adopt epoch $1"
  ! grep -q "repl: epoch $1 adopted: .* 0 ranges\{0,1\} to copy in" "$d/$2.log" || return 0
  await "$d/$2.log" "repl: epoch $1: ranges copied in" 60 "${pid[$2]}" ||
    fail "$2's copy of epoch $1 never finished"
}
regressed() { # regressed N: node N's repl.store_regressed (stats lists them all)
  "$bin/recstore-ctl" -s "${addr[$1]}" stats >"$d/stats-$1.txt" 2>&1 || true
  awk -v a="${addr[$1]}" '$1 == "node" { me = index($0, a) > 0 }
    me && $1 == "repl.store_regressed" { print $2 }' "$d/stats-$1.txt"
}
for i in 1 2 3; do etcd_node_start $i "${ips[$((i - 1))]}"; done
node_await n1 n2 n3
etcd_await_active 3 n1 n2 n3
e0=$epoch
seeds="${addr[n1]},${addr[n2]},${addr[n3]}"
"$drv" tables "$seeds" create rt >"$d/tables.txt" 2>&1 || fail "create rt"
"$drv" tput "$seeds" rt 7 >>"$d/tables.txt" 2>&1 || fail "put rt"
etcd_snapshot "$d/snap.db"
echo "snapshot of epoch $e0 saved"

# ---- 2. n3 killed and back: the nodes follow a newer epoch -----------------------
kill -KILL "${pid[n3]}"
wait "${pid[n3]}" 2>/dev/null || true
ctl cluster --until-epoch $((e0 + 1)) --timeout 60 >"$d/down.out" 2>&1 ||
  fail "no configuration after n3 was killed"
mv "$d/n3.log" "$d/n3.before.log"
etcd_node_start 3 "${ips[2]}"
node_await n3
etcd_await_active 3 n1 n2 n3
e3=$epoch
seeds="${addr[n1]},${addr[n2]},${addr[n3]}"
for n in n1 n2 n3; do copied $e3 $n; done
echo "n3 killed and back: the nodes follow epoch $e3 (the snapshot has $e0)"

# ---- 3. the restore: found, nothing followed or decided from it ------------------
t0=$(date +%s.%N)
etcd_restore "$d/snap.db"
echo "etcd restored from the snapshot (epoch $(store_epoch)) in $(elapsed "$t0") s"
declare -A followed=()
for n in n1 n2 n3; do
  await "$d/$n.log" "went back from epoch [0-9]* to $e0:" 30 "${pid[$n]}" ||
    fail "$n did not notice that the store went back to epoch $e0"
  # the epoch it follows (e3, or later if a lease lapsed under load)
  followed[$n]=$(sed -n "s/.*went back from epoch \([0-9]*\) to $e0:.*/\1/p" "$d/$n.log" | tail -n 1)
  [ "${followed[$n]}" -ge "$e3" ] || fail "$n follows epoch ${followed[$n]} < $e3"
  [ "$(regressed $n)" = "$e0" ] || fail "$n: repl.store_regressed is not $e0"
done
echo "every node noticed the regression after $(elapsed "$t0") s" \
  "(they follow epochs ${followed[n1]}, ${followed[n2]}, ${followed[n3]})"
ctl cluster >"$d/regressed.out" 2>&1
grep -q "^WARNING: .* follows epoch" "$d/regressed.out" ||
  { cat "$d/regressed.out"; fail "recstore-ctl cluster does not warn"; }
"$drv" tcheck "$seeds" rt 7 >"$d/tcheck-regressed.txt" 2>&1 ||
  { cat "$d/tcheck-regressed.txt"; fail "keys not served while the store was behind"; }
kill -KILL "${pid[n1]}"
wait "${pid[n1]}" 2>/dev/null || true
sleep 10	# three leases: a decider would have taken n1 down by now
[ "$(store_epoch)" = "$e0" ] ||
  fail "a configuration was derived from the restored store (epoch $(store_epoch))"
for n in n2 n3; do
  ! grep -q "repl: epoch $((followed[$n] + 1)) adopted" "$d/$n.log" ||
    fail "$n followed a configuration derived from the restored store"
done
echo "n1 killed: the store stayed at epoch $e0, the nodes where they were"

# ---- 4. recover: failover resumes, nothing lost ----------------------------------
t0=$(date +%s.%N)
ctl recover --timeout 60 >"$d/recover.out" 2>&1 ||
  { cat "$d/recover.out"; fail "recstore-ctl recover failed"; }
cat "$d/recover.out"
top=${followed[n2]}
[ "${followed[n3]}" -le "$top" ] || top=${followed[n3]}
grep -q "configuration epoch [0-9]* written: the newest a live node followed (epoch $top," "$d/recover.out" ||
  fail "recover did not write back epoch $top"
etcd_await_active 2 n2 n3
for n in n2 n3; do
  copied $epoch $n
  [ "$(regressed $n)" = 0 ] || fail "$n: repl.store_regressed still set"
done
echo "recovered, n1 taken down (epoch $epoch) $(elapsed "$t0") s after recover"
"$drv" tcheck "${addr[n2]},${addr[n3]}" rt 7 >"$d/tcheck.txt" 2>&1 ||
  { cat "$d/tcheck.txt"; fail "keys of rt lost across the restore and the recovery"; }
cat "$d/tcheck.txt"
echo "every key of rt kept"
