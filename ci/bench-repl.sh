#!/usr/bin/env bash
# bench-repl.sh [BUILD_DIR] - what replication costs the client, in ONE guest
# boot (ratios within one boot are what mean something under TCG emulation;
# absolute times do not). One etcd; then for r = 1, 2, 3 in turn:
#   1. three fresh memory nodes (mem-1..mem-3, 2 workers, 64M of storage)
#      with a coord section: replicas r, an initial cluster of 3, lease 3 s,
#      a cluster name of their own (repl-rR);
#   2. recstore-ctl cluster --until-active 3, and every node has adopted
#      that epoch;
#   3. recstore-bench against the three nodes' addresses (the client learns
#      the configuration from them: cluster mode): get, update, RPC get;
#      --server-pid covers the three nodes (their CPU per million keys);
#      then the get phase again with --primary-reads (no replica reads):
#      get_primary_keys_per_s, against get_keys_per_s where the client
#      READs at any ready replica (get_backup_share: the keys READ at a
#      backup);
#   4. the nodes are stopped (SIGTERM).
# Then one table: each figure and its ratio to r = 1 of the same boot.
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: the bench lines and the table, also written to bench-repl.out in
# the current directory.
#
# Environment (RS_* so that it reaches the guest): RS_BENCH_TABLES (1),
# RS_BENCH_DIM (64), RS_BENCH_BATCH (256), RS_BENCH_KEYS (20000),
# RS_BENCH_ITERS (200 batches per phase), RS_BENCH_THREADS (1),
# RS_BENCH_OPTIM (sgd), RS_BENCH_REPLICAS ("1 2 3").
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-repl "$@"
shape=(--tables "${RS_BENCH_TABLES:-1}" --dim "${RS_BENCH_DIM:-64}"
	--batch "${RS_BENCH_BATCH:-256}" --keys "${RS_BENCH_KEYS:-20000}"
	--iters "${RS_BENCH_ITERS:-200}" --threads "${RS_BENCH_THREADS:-1}"
	--optim "${RS_BENCH_OPTIM:-sgd}")
tmp=$(mktemp -d /tmp/bench-repl.XXXXXX) # tmpfs in the guest
etcd_pid='' nodes=''

# shellcheck source=scripts/sh-lib.sh
. "$top/scripts/sh-lib.sh"
sh_dir=$tmp sh_logs="*.log */*.log" sh_tail=30 sh_fail_prefix="bench-repl: "
sh_fail_fd=2 sh_log_fd=2 sh_pids="nodes etcd_pid" sh_sig=TERM
sh_keep=${RS_BENCH_KEEP:-}
trap cleanup EXIT

# shellcheck source=scripts/etcd-lib.sh
. "$top/scripts/etcd-lib.sh"
bench_etcd

say "== replication cost: three nodes, recstore-bench ${shape[*]}"
figs=(get_keys_per_s get_primary_keys_per_s get_backup_share update_keys_per_s
	update_p50_us update_p99_us get_rpc_keys_per_s
	update_server_cpu_s_per_mkeys)
for r in ${RS_BENCH_REPLICAS:-1 2 3}; do
	t0=$(date +%s.%N)
	bench_cluster "$r" 3 "repl-r$r"
	"$build/recstore-bench" "${shape[@]}" --nodes "$seeds" \
		--server-pid "$spids" \
		>"$tmp/bench.$r" 2>&1 || fail "r $r: recstore-bench: $(cat "$tmp/bench.$r")"
	"$build/recstore-bench" "${shape[@]}" --nodes "$seeds" \
		--primary-reads --no-update --no-rpc \
		>"$tmp/bench.$r.p" 2>&1 || fail "r $r: recstore-bench --primary-reads: $(cat "$tmp/bench.$r.p")"
	grep '^bench:' "$tmp/bench.$r" | sed "s/^/r $r: /" | tee -a "$out"
	grep '^bench: get ' "$tmp/bench.$r.p" | sed "s/^/r $r, primary reads: /" | tee -a "$out"
	for f in "${figs[@]}"; do
		res "$f" "$tmp/bench.$r" >"$tmp/$f.$r"
	done
	res get_keys_per_s "$tmp/bench.$r.p" >"$tmp/get_primary_keys_per_s.$r"
	sh_stop TERM nodes
	say "r $r: $(elapsed "$t0") s"
done

say "== summary (ratio to r = 1 of this boot)"
say "$(printf '%-32s' figure)$(for r in ${RS_BENCH_REPLICAS:-1 2 3}; do printf '%22s' "r = $r"; done)"
base=$(echo "${RS_BENCH_REPLICAS:-1 2 3}" | awk '{ print $1 }')
for f in "${figs[@]}"; do
	line=$(printf '%-32s' "$f")
	b=$(cat "$tmp/$f.$base")
	for r in ${RS_BENCH_REPLICAS:-1 2 3}; do
		v=$(cat "$tmp/$f.$r")
		line="$line$(printf '%22s' "$v ($(ratio "$v" "$b")x)")"
	done
	say "$line"
done
for f in "${figs[@]}"; do
	for r in ${RS_BENCH_REPLICAS:-1 2 3}; do
		say "result repl_r${r}_$f $(cat "$tmp/$f.$r")"
	done
done
