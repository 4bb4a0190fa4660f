#!/usr/bin/env bash
# test_repl_ttl.sh BUILD_DIR - the TTL sweep in a replicated cluster over
# real verbs (docs/eviction.md, "Replication (cluster mode)").
#
# One etcd on tmpfs; two memory nodes (r 2, an initial cluster of 2) form
# an epoch with both active, so every key has a primary and a backup. The
# driver creates a table with a TTL of 1 s, puts 256 keys and puts the odd
# half again every 100 ms: on both nodes (unfenced GETs) no key is gone
# before 1 s after its last write, the even half goes from both replicas
# (each expiry a deletion the primary forwards to the backup), the odd
# half stays with its rows, and the nodes' evictions.ttl add up to the
# expired keys (each one expired once, by its primary). Then both nodes
# stop cleanly.
#
# Exit 0 pass, 77 no RDMA device, anything else fails (with the logs).
set -euo pipefail
. "$(dirname "$0")/../../scripts/sh-lib.sh"

rxe_test_args "$@"
drv=$bin/tests/repl_driver
d=$(mktemp -d "${TMPDIR:-/tmp}/rs-replttl-XXXXXX") # tmpfs in the guest
etcd_pid= pids=
t_start=$(date +%s.%N)
sh_dir=$d sh_logs="*.log *.out *.txt" sh_pids="pids etcd_pid"
trap cleanup EXIT
ulimit -l unlimited 2>/dev/null || true

. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_start "$d"
ips=($RS_RDMA_IP ${RS_RDMA_IPS:-})
[ ${#ips[@]} -ge 2 ] || ips=($RS_RDMA_IP $RS_RDMA_IP)
declare -A pid addr
for i in 1 2; do
  cat >"$d/n$i.json" <<EOT
{"name": "mem-$i", "listen": {"addr": "${ips[$((i - 1))]}", "port": 0},
 "workers": 2, "storage": {"size": "16M"},
 "coord": {"endpoints": ["$url"], "cluster": "t", "lease_ms": 3000,
           "replicas": 2, "initial_members": 2}}
EOT
  "$bin/recstore-server" -c "$d/n$i.json" >"$d/n$i.log" 2>&1 &
  pid[n$i]=$!
  pids="$pids $!"
done
for n in n1 n2; do
  await "$d/$n.log" "listening on" 120 "${pid[$n]}" || fail "$n did not start"
  addr[$n]=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$d/$n.log" | head -n 1)
done
"$bin/recstore-ctl" --etcd "$url" --cluster t cluster --until-active 2 \
  --timeout 60 >"$d/two.out" 2>&1 || fail "the two nodes never became active"
epoch=$(sed -n 's/^cluster t: epoch \([0-9]*\),.*/\1/p' "$d/two.out")
for n in n1 n2; do
  await "$d/$n.log" "repl: epoch $epoch adopted" 30 "${pid[$n]}" ||
    fail "$n did not adopt epoch $epoch"
done
both="${addr[n1]},${addr[n2]}"

t0=$(date +%s.%N)
"$drv" ttl "$both" "$both" >"$d/ttl.txt" 2>&1 || fail "ttl (driver)"
cat "$d/ttl.txt"
echo "ttl run: $(elapsed "$t0") s"

for n in n1 n2; do
  rc=0
  kill -TERM "${pid[$n]}"
  wait "${pid[$n]}" || rc=$?
  [ "$rc" = 0 ] || fail "$n exit status $rc after SIGTERM"
  grep -q "stopped" "$d/$n.log" || fail "$n did not stop cleanly"
done
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
