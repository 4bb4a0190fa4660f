#!/usr/bin/env bash
# test_repl_grow.sh BUILD_DIR - tables that grow on the members of a
# replicated cluster, over real verbs (docs/replication.md, "Tables that
# grow"; the workload: repl_grow_driver.c).
#
#  1. One etcd on tmpfs; three memory nodes (r 2) form a cluster.
#  2. Table "gt" (Adagrad, 1024 rows per node, max_capacity 4096) with 256
#     keys; two writers insert 2560 more (PUT, then an UPDATE of each
#     batch) while a reader gets the first 256 again and again, each of
#     which must come back exact. A member holds about 1900 keys: each
#     grows its own copy (twice), by an insert as a primary or by a REPL
#     as a backup; during a member's growth its REPLs are answered
#     RS_E_BUSY and resent by their primaries, which do not count that as
#     a failed backup.
#  3. Every writer call succeeded; every member grew (STATS grow.count,
#     the race the test is about); REPLs were answered busy somewhere;
#     no chunk failed.
#  4. recstore-ctl grow --capacity 8192: every member grows once more.
#  5. Every acknowledged key and base key is found through the cluster;
#     each node dumps the table with its optimizer state: every key is on
#     exactly two nodes, bit-identical.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_grow_driver
d=$(mktemp -d "${TMPDIR:-/tmp}/rs-rgrow-XXXXXX") # tmpfs in the guest
etcd_pid= pids=
t_start=$(date +%s.%N)
sh_dir=$d sh_logs="*.log *.txt" sh_pids="pids etcd_pid"
trap cleanup EXIT
ulimit -l unlimited 2>/dev/null || true

# ---- 1. etcd and three nodes ---------------------------------------------------
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_start "$d"
ips=($RS_RDMA_IP ${RS_RDMA_IPS:-})
[ ${#ips[@]} -ge 3 ] || ips=($RS_RDMA_IP $RS_RDMA_IP $RS_RDMA_IP)
declare -A pid addr
mkdir -p "$d/ck"
for i in 1 2 3; do
  cat >"$d/n$i.json" <<EOT
{"name": "mem-$i", "listen": {"addr": "${ips[$((i - 1))]}", "port": 0},
 "workers": 2, "storage": {"size": "32M"}, "checkpoint_dir": "$d/ck",
 "coord": {"endpoints": ["$url"], "cluster": "g", "lease_ms": 3000,
           "replicas": 2, "initial_members": 3}}
EOT
  "$bin/recstore-server" -c "$d/n$i.json" >"$d/n$i.log" 2>&1 &
  pid[n$i]=$!
  pids="$pids $!"
done
for n in n1 n2 n3; do
  await "$d/$n.log" "listening on" 120 "${pid[$n]}" || fail "$n did not start"
  addr[$n]=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$d/$n.log" | head -n 1)
done
"$bin/recstore-ctl" --etcd "$url" --cluster g cluster --until-active 3 \
  --timeout 60 >"$d/three.txt" 2>&1 ||
  fail "the configuration never had the three nodes active"
for n in n1 n2 n3; do
  await "$d/$n.log" "repl: epoch [0-9]* adopted" 30 "${pid[$n]}" ||
    fail "$n adopted no configuration"
done
seeds="${addr[n1]},${addr[n2]},${addr[n3]}"

# stats FILE: every node's counters; stat FILE N KEY: node nN's (named by
# its address or its member id; 0 when absent); sum FILE KEY: over nodes
stats() { "$bin/recstore-ctl" -s "$seeds" stats >"$d/$1.txt" 2>&1 || fail "stats"; }
stat() {
  awk -v a="node ${addr[n$2]}" -v m="node mem-$2" -v k="$3" '
    $0 == a || $0 == m { on = 1; next } /^node / { on = 0 }
    on && $1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$d/$1.txt"
}
sum() {
  awk -v k="$2" '$1 == k { s += $2 } END { print s + 0 }' "$d/$1.txt"
}

# ---- 2. the stream ----------------------------------------------------------------
"$drv" init "$seeds" >"$d/init.txt" 2>&1 || fail "init"
cat "$d/init.txt"
"$drv" read "$seeds" "$d/stop" "$d/reader.out" >"$d/reader.txt" 2>&1 &
rd_pid=$!
pids="$pids $!"
for ((i = 0; i < 1200; i++)); do
  [ -e "$d/reader.out.ready" ] && break
  sleep 0.1
done
[ -e "$d/reader.out.ready" ] || fail "the reader did not start"
t0=$(date +%s.%N)
for w in 0 1; do
  "$drv" stream "$seeds" $w "$d/w$w.out" >"$d/w$w.txt" 2>&1 &
  pids="$pids $!"
  eval "w${w}_pid=$!"
done
rc=0
wait "$w0_pid" || rc=$?
[ "$rc" = 0 ] || fail "writer 0 exit status $rc"
wait "$w1_pid" || rc=$?
[ "$rc" = 0 ] || fail "writer 1 exit status $rc"
echo "stream: 2560 inserts in $(elapsed "$t0") s"
touch "$d/stop"
wait "$rd_pid" || rc=$?
[ "$rc" = 0 ] || fail "the reader saw a wrong row (exit status $rc)"
cat "$d/w0.txt" "$d/w1.txt" "$d/reader.txt"

# ---- 3. every member grew its copy ----------------------------------------------
stats s1
for i in 1 2 3; do
  n=n$i c=$(stat s1 $i grow.count)
  echo "$n: grow.count $c, grow.rows $(stat s1 $i grow.rows), REPLs its backups answered busy $(stat s1 $i repl.busy_repls)"
  [ "$c" -ge 1 ] || fail "$n did not grow its copy of the table"
  grep -q "table 'gt' grew from 1024 to" "$d/$n.log" || fail "$n logged no growth"
done
[ "$(sum s1 grow.failures)" = 0 ] || fail "a growth failed"
[ "$(sum s1 repl.chunks_failed)" = 0 ] || fail "a chunk failed: a backup was counted as failed"
[ "$(sum s1 repl.busy_repls)" -ge 1 ] ||
  fail "no REPL was answered busy: no backup grew under its primary's writes"

# ---- 4. grow by command on every member --------------------------------------------
"$bin/recstore-ctl" -s "$seeds" grow gt --capacity 8192 >"$d/grow.txt" 2>&1 ||
  fail "recstore-ctl grow"
cat "$d/grow.txt"
stats s2
for i in 1 2 3; do
  n=n$i a=$(stat s1 $i grow.count) b=$(stat s2 $i grow.count)
  [ "$b" -eq $((a + 1)) ] || fail "$n: grow.count $a -> $b after the command"
  grep -q "table 'gt' grew from [0-9]* to 8192 rows" "$d/$n.log" ||
    fail "$n did not grow to 8192 rows"
done

# ---- 5. nothing lost, replicas identical ----------------------------------------------
"$drv" check "$seeds" "$d/ck" "${addr[n1]}" "${addr[n2]}" "${addr[n3]}" -- \
  "$d/w0.out" "$d/w1.out" >"$d/check.txt" 2>&1 || fail "check"
cat "$d/check.txt"
echo "PASS in $(elapsed "$t_start") s"
