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
# either alone), RS_BENCH_CALLS (200: the calls of the shorter per-call
# run).
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-path "$@"
iters=${RS_BENCH_CG_ITERS:-20}
shape=(--tables "${RS_BENCH_TABLES:-8}" --dim "${RS_BENCH_DIM:-64}"
	--batch "${RS_BENCH_BATCH:-512}" --keys "${RS_BENCH_KEYS:-5000}"
	--optim "${RS_BENCH_OPTIM:-sgd}" --iters "$iters" --spin-us 0
	${RS_BENCH_UPDATE_LR:+--update-lr "$RS_BENCH_UPDATE_LR"}
	${RS_BENCH_EVICT:+--evict "$RS_BENCH_EVICT"})
tmp=$(mktemp -d /tmp/bench-path.XXXXXX)
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; [ -n "${RS_BENCH_KEEP:-}" ] || rm -rf "$tmp"' EXIT

# inclusive instructions of function $1 in callgrind_annotate output $2
incl() {
	awk -v f="$1" '!v && index($0, ":" f " [") { v = $1; gsub(",", "", v) }
		END { print v + 0 }' "$2"
}

# node LOG [PREFIX...]: a fresh node (spin 0), run by PREFIX (e.g. under
# callgrind); sets srv and addr
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
	addr=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$log" | head -n 1)
}
node_stop() {
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
		"$build/recstore-bench" "${shape[@]}" "$@" --nodes "$addr" \
		>"$tmp/bench.$n" 2>&1 || { cat "$tmp/bench.$n"; exit 1; }
	node_stop
	callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.$n.out" \
		>"$tmp/cg.$n.txt" 2>/dev/null || true
	callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cgn.$n.out" \
		>"$tmp/cgn.$n.txt" 2>/dev/null || true
	echo "$(incl worker_main "$tmp/cg.$n.txt")" >"$tmp/c.$n"
	echo "$(incl worker_main "$tmp/cgn.$n.txt")" >"$tmp/s.$n"
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
		--single-mode "$1" --samples "$2" --nodes "$addr" \
		>"$f.log" 2>&1 || { cat "$f.log"; exit 1; }
	node_stop
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
