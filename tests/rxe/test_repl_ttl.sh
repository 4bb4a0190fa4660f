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
. "$(dirname "$0")/../../scripts/etcd-lib.sh"
etcd_test_begin replttl 2
etcd_initial=2
for i in 1 2; do etcd_node_start $i "${ips[$((i - 1))]}"; done
node_await n1 n2
etcd_await_active 2 n1 n2
both="${addr[n1]},${addr[n2]}"

t0=$(date +%s.%N)
"$drv" ttl "$both" "$both" >"$d/ttl.txt" 2>&1 || fail "ttl (driver)"
cat "$d/ttl.txt"
echo "ttl run: $(elapsed "$t0") s"

node_stop n1 n2
pids=
if grep -l "Sanitizer" "$d"/*.log "$d"/*.txt 2>/dev/null; then
  fail "a sanitizer report (above)"
fi
echo "ok: whole test $(elapsed "$t_start") s"
