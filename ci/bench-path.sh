#!/usr/bin/env bash
# bench-path.sh [BUILD_DIR] - instructions per key on the hot paths (get,
# update, RPC get), for the client and for the node, in ONE guest boot.
#
# Instruction counts (callgrind) are the figures to compare between two
# builds: wall time under TCG is noise, instructions are repeatable. Each
# phase is measured by difference, so that connecting, creating tables and
# the warm-up cancel out: three runs of recstore-bench, each against a fresh
# node, with the client and the node both under callgrind and no spinning
# (--spin-us 0, node spin_us 0):
#   A: get phase only          (--no-rpc --no-update)
#   B: get + update            (--no-rpc)
#   C: get + RPC get           (--no-update)
# client get    = worker threads of A            / keys of the get phase
# client update = (worker threads of B - A)      / keys of the update phase
# client rpc    = (worker threads of C - A)      / keys of the rpc phase
# node update   = (node worker threads of B - A) / keys of the update phase
# node rpc      = (node worker threads of C - A) / keys of the rpc phase
# ("worker threads": worker_main inclusive, in the bench and in the node).
# The one-sided get costs the node nothing by design (run A's node work is
# the warm-up's GET_OR_INIT, which cancels out of B - A and C - A).
#
# Part repl (only when RS_BENCH_PATH_PARTS names it): what one backup costs
# the nodes per updated key. One etcd (bench_etcd, ci/bench-lib.sh); then
# for r = 1 and r = 2, runs A and B as above, each against two fresh
# memory nodes of a cluster of its own (path-rR-A, path-rR-B; bench_cluster:
# 2 workers, spin_us 0, replicas r, an initial cluster of 2, lease
# RS_BENCH_LEASE_MS, 10 s: a node under callgrind is ~50x slower), both
# nodes and the bench (cluster mode: both addresses) under callgrind, the
# nodes stopped by SIGTERM after each run:
# node update, r           = (both nodes' worker threads of B - A)
#                            / keys of the update phase
# client update cluster, r = (worker threads of B - A) / keys of the
#                            update phase
# and the ratios r2 / r1. At r = 1 the two nodes split the keys and
# forward nothing; at r = 2 each is the primary of about half the keys and
# the backup of the rest. Everything a REPL costs runs in worker_main, on
# both sides (checked with callgrind_annotate --tree=caller): the primary
# queues its records (srv_repl_record) and posts the REPL and waits for
# its reply (srv_repl_wait) in the worker that applied the write; the
# backup receives the REPL like any request and applies it in a worker
# (do_repl, inlined into srv_handle: the row stores slab_load_row, the
# exactly-once records srv_once_record); the fence (srv_repl_enter, the
# keys' replica sets) runs on both sides. No other thread takes part (the
# membership agent's and the adopting thread's work is outside
# worker_main, and not counted). The line beside each result gives those
# functions' inclusive B - A per key, both nodes, and do_keyed_body (the
# primary's UPDATE itself). About 8.5 minutes in the guest with its boot;
# docs/benchmarks.md, "What one backup costs the nodes per updated key".
#
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: the measurement lines, also written to bench-path.out in the
# current directory. Environment: RS_BENCH_CG_ITERS (20 batches per phase),
# RS_BENCH_TABLES (8), RS_BENCH_DIM (64), RS_BENCH_BATCH (512),
# RS_BENCH_KEYS (5000), RS_BENCH_OPTIM (sgd), RS_BENCH_UPDATE_LR (unset:
# updates at the table's lr; a number: every update passes that lr with
# rs_update_ex, as a learning-rate schedule does), RS_BENCH_EVICT (unset: no
# eviction; lru or lfu: the tables evict by that policy at their capacity,
# which the bench never reaches: the cost of keeping access information),
# RS_BENCH_PATH_PARTS ("key call": the per-key phases, the per-call gets;
# either alone; "repl": the replication part, run only when named),
# RS_BENCH_CALLS (200: the calls of the shorter per-call run); for part
# repl, RS_BENCH_REPL_TABLES (2) and RS_BENCH_REPL_ITERS (20 batches per
# phase) in place of RS_BENCH_TABLES and RS_BENCH_CG_ITERS (the other
# shape knobs apply), RS_BENCH_LEASE_MS (10000).
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-path "$@"
iters=${RS_BENCH_CG_ITERS:-20}
common=(--dim "${RS_BENCH_DIM:-64}" --batch "${RS_BENCH_BATCH:-512}"
	--keys "${RS_BENCH_KEYS:-5000}" --optim "${RS_BENCH_OPTIM:-sgd}"
	--spin-us 0 ${RS_BENCH_UPDATE_LR:+--update-lr "$RS_BENCH_UPDATE_LR"}
	${RS_BENCH_EVICT:+--evict "$RS_BENCH_EVICT"})
shape=(--tables "${RS_BENCH_TABLES:-8}" --iters "$iters" "${common[@]}")
tmp=$(mktemp -d /tmp/bench-path.XXXXXX)
srv='' nodes='' etcd_pid=''
# shellcheck source=scripts/sh-lib.sh
. "$top/scripts/sh-lib.sh"
sh_dir=$tmp sh_logs="*.log */*.log" sh_tail=30 sh_fail_prefix="bench-path: "
sh_fail_fd=2 sh_log_fd=2 sh_pids="srv nodes etcd_pid" sh_sig=TERM
sh_keep=${RS_BENCH_KEEP:-}
trap cleanup EXIT

# inclusive instructions of function $1 in callgrind_annotate output $2
incl() {
	awk -v f="$1" '!v && index($0, ":" f " [") { v = $1; gsub(",", "", v) }
		END { print v + 0 }' "$2"
}
# cg_incl OUT FUNCTION: the inclusive instructions of FUNCTION in the
# callgrind output OUT (annotated once into OUT.txt; threads summed)
cg_incl() {
	[ -s "$1.txt" ] || callgrind_annotate --inclusive=yes --threshold=100 \
		"$1" >"$1.txt" 2>/dev/null || true
	incl "$2" "$1.txt"
}

# node LOG [PREFIX...]: a fresh node (spin 0), run by PREFIX (e.g. under
# callgrind); sets srv and node_addr
node() {
	local log=$1
	shift
	printf '{"spin_us": 0}\n' >"$tmp/node.json"
	"$@" "$build/recstore-server" -c "$tmp/node.json" \
		--listen "$RS_RDMA_IP:0" >"$log" 2>&1 &
	srv=$!
	for _ in $(seq 1200); do
		grep -q 'listening on' "$log" && break
		kill -0 $srv 2>/dev/null || { cat "$log"; exit 1; }
		sleep 0.1
	done
	node_addr=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$log" | head -n 1)
}
srv_stop() {
	kill -TERM $srv
	wait $srv || true
	srv=
}

# run NAME [bench args...]: a fresh node and the bench, both under callgrind
run() {
	local n=$1
	shift
	node "$tmp/node.$n.log" valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/cgn.$n.out"
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n.out" \
		"$build/recstore-bench" "${shape[@]}" "$@" --nodes "$node_addr" \
		>"$tmp/bench.$n" 2>&1 || { cat "$tmp/bench.$n"; exit 1; }
	srv_stop
	cg_incl "$tmp/cg.$n.out" worker_main >"$tmp/c.$n"
	cg_incl "$tmp/cgn.$n.out" worker_main >"$tmp/s.$n"
}
# keys of phase $1 in run $2: batches x batch size
keys() {
	local b
	b=$(sed -n "s/^bench: $1 .*(\([0-9]*\) batches.*/\1/p" "$tmp/bench.$2")
	echo $((b * ${RS_BENCH_BATCH:-512}))
}
per() { awk -v a="$1" -v k="$2" 'BEGIN { printf "%.0f", (k > 0 ? a / k : 0) }'; }

parts=${RS_BENCH_PATH_PARTS:-key call}
if [[ " $parts " == *" key "* ]]; then
say "== instructions per key (callgrind, spin window 0): ${shape[*]}"
run A --no-rpc --no-update
run B --no-rpc
run C --no-update
cA=$(cat "$tmp/c.A") cB=$(cat "$tmp/c.B") cC=$(cat "$tmp/c.C")
sA=$(cat "$tmp/s.A") sB=$(cat "$tmp/s.B") sC=$(cat "$tmp/s.C")
kg=$(keys get A) ku=$(keys update B) kr=$(keys get_rpc C)
say "result path_client_get_instr_per_key $(per "$cA" "$kg") ($kg keys)"
say "result path_client_update_instr_per_key $(per $((cB - cA)) "$ku") ($ku keys)"
say "result path_client_rpc_get_instr_per_key $(per $((cC - cA)) "$kr") ($kr keys)"
say "result path_node_update_instr_per_key $(per $((sB - sA)) "$ku")"
say "result path_node_rpc_get_instr_per_key $(per $((sC - sA)) "$kr")"
fi

# Replication (part repl): two memory nodes of a cluster under callgrind,
# at r = 1 and r = 2 (see the header)
# repl_run R RUN [bench args...]: two fresh nodes of a cluster path-rR-RUN
# (replicas R) and the bench against both, all three under callgrind;
# stops the nodes; writes the client's worker_main to c.rRRUN and, for
# each function F of rfns, the nodes' inclusive count (summed) to F.rRRUN
rfns=(worker_main do_keyed_body srv_repl_enter srv_repl_targets srv_repl_wait
	slab_load_row srv_once_record)
repl_run() {
	local r=$1 n=r$1$2 name=path-r$1-$2 f fn k=0
	local -A sum=()
	shift 2
	bench_cluster "$r" 2 "$name" valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/$name/cgn.%p.out"
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n.out" \
		"$build/recstore-bench" "${rshape[@]}" "$@" --nodes "$seeds" \
		>"$tmp/bench.$n" 2>&1 || fail "$name: recstore-bench: $(cat "$tmp/bench.$n")"
	sh_stop TERM nodes
	for f in "$tmp/$name"/cgn.*.out; do
		[ -s "$f" ] || continue
		k=$((k + 1))
		for fn in "${rfns[@]}"; do
			sum[$fn]=$((${sum[$fn]:-0} + $(cg_incl "$f" "$fn")))
		done
	done
	[ "$k" = 2 ] || fail "$name: $k node profiles, not 2"
	cg_incl "$tmp/cg.$n.out" worker_main >"$tmp/c.$n"
	for fn in "${rfns[@]}"; do
		echo "${sum[$fn]}" >"$tmp/$fn.$n"
	done
}
if [[ " $parts " == *" repl "* ]]; then
	# shellcheck source=scripts/etcd-lib.sh
	. "$top/scripts/etcd-lib.sh"
	rshape=(--tables "${RS_BENCH_REPL_TABLES:-2}"
		--iters "${RS_BENCH_REPL_ITERS:-20}" "${common[@]}")
	say "== node instructions per updated key, one backup (two nodes, callgrind, spin window 0): ${rshape[*]}"
	bench_etcd
	bench_lease_ms=${RS_BENCH_LEASE_MS:-10000} bench_node_json='"spin_us": 0,'
	for r in 1 2; do
		repl_run $r A --no-rpc --no-update
		repl_run $r B --no-rpc
		ku=$(keys update r${r}B)
		split=
		for fn in "${rfns[@]}"; do
			v=$(per $(($(cat "$tmp/$fn.r${r}B") - $(cat "$tmp/$fn.r${r}A"))) "$ku")
			[ "$fn" = worker_main ] && nu[r]=$v || split="$split $fn $v"
		done
		cu[r]=$(per $(($(cat "$tmp/c.r${r}B") - $(cat "$tmp/c.r${r}A"))) "$ku")
		say "result path_node_update_r${r}_instr_per_key ${nu[r]} ($ku keys)"
		say "result path_client_update_cluster_r${r}_instr_per_key ${cu[r]}"
		say "r $r, per key, both nodes, inclusive:$split"
	done
	say "result path_node_update_r2_over_r1 $(ratio "${nu[2]}" "${nu[1]}")"
	say "result path_client_update_cluster_r2_over_r1 $(ratio "${cu[2]}" "${cu[1]}")"
fi

# Per call, as a caller sees it: the client's instructions inside rs_get
# (callgrind --toggle-collect, spin 0) for one-key gets of MODE: warm (the
# location cache holds the key), cold (RS_F_NOCACHE: bucket READs, then
# the row), image (a client without a location cache whose bucket images
# were prefetched: one READ) and rpc (RS_F_RPC). Two runs of recstore-bench --single-mode
# with S and 3S calls against a fresh node: their difference / 2S is one
# call, connecting and the untimed first get cancelling out.
calls=${RS_BENCH_CALLS:-200}
# instructions collected in rs_get by a run of $2 calls of mode $1
call_ir() {
	local f=$tmp/cgc.$1.$2
	node "$tmp/node.call.log"
	valgrind --tool=callgrind --toggle-collect=rs_get \
		--callgrind-out-file="$f.out" "$build/recstore-bench" \
		--tables 1 --keys 1000 --dim "${RS_BENCH_DIM:-64}" --spin-us 0 \
		--single-mode "$1" --samples "$2" --nodes "$node_addr" \
		>"$f.log" 2>&1 || { cat "$f.log"; exit 1; }
	srv_stop
	callgrind_annotate "$f.out" 2>/dev/null |
		awk '!v && /PROGRAM TOTALS/ { v = $1; gsub(",", "", v) }
			END { print v + 0 }'
}
[[ " $parts " == *" call "* ]] || exit 0
say "== client instructions per one-key rs_get call (callgrind, spin 0, dim ${RS_BENCH_DIM:-64})"
for m in warm cold image rpc; do
	a=$(call_ir $m "$calls") b=$(call_ir $m $((3 * calls)))
	say "result path_client_call_${m}_instr $(per $((b - a)) $((2 * calls))) ($((2 * calls)) calls)"
done
