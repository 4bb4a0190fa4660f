#!/usr/bin/env bash
# bench-trace.sh [BUILD_DIR] - what tracing costs the bench, in ONE guest boot.
#
#   1. Throughput: RS_BENCH_REPS rounds; each round runs a fresh node and
#      recstore-bench once with tracing off and once at 1% sampling (client
#      RS_TRACE_SAMPLE=0.01, node RS_TRACE with sampling 0, so it records
#      exactly the requests the client sampled), and once more with tracing
#      off, in rotating order. The median keys/s of each phase (one-sided
#      get, update, RPC get), the per-round ratios 1%/off and, as the noise
#      floor, off/off are reported.
#   2. Instructions (callgrind; stable where wall time under TCG is not):
#      the same fixed workload (--iters, no spinning) under valgrind with
#      tracing off, on with nothing sampled (0%), at 1% and at 100%. For the
#      client: instructions of the whole process, of the bench threads
#      (worker_main, inclusive) and, inside them, of the tracing calls
#      (trace_emit_, trace_in_sample_, trace_new_id, trace_now_us), and of
#      the trace writer thread (writer_main); the node runs under callgrind
#      too (its workers, their tracing calls, its writer). Differences between whole runs
#      carry about 0.1% (process) to 1% (threads) of noise from completion
#      polling; the per-function figures do not.
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: the measurement lines, also written to bench-trace.out in the
# current directory.
#
# Environment: RS_BENCH_PARTS ("tp cg": throughput, callgrind),
# RS_BENCH_REPS (5), RS_BENCH_SECONDS (3 per phase),
# RS_BENCH_CG_ITERS (20 batches per phase under callgrind), RS_BENCH_TABLES
# (8), RS_BENCH_DIM (64), RS_BENCH_BATCH (512), RS_BENCH_KEYS (5000).
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-trace "$@"
reps=${RS_BENCH_REPS:-5}
secs=${RS_BENCH_SECONDS:-3}
cg_iters=${RS_BENCH_CG_ITERS:-20}
shape=(--tables "${RS_BENCH_TABLES:-8}" --dim "${RS_BENCH_DIM:-64}"
	--batch "${RS_BENCH_BATCH:-512}" --keys "${RS_BENCH_KEYS:-5000}")
tmp=$(mktemp -d /tmp/bench-trace.XXXXXX)
srv=
node_wrap=() # a command the node runs under (callgrind)
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT

# node_start TRACE(0|1): a fresh node on an ephemeral port, under
# ${node_wrap[@]} if set; sets srv, addr.
node_start() {
	local log=$tmp/node.log
	rm -f "$tmp/node.jsonl"
	if [ "$1" = 1 ]; then
		RS_TRACE=$tmp/node.jsonl RS_TRACE_SAMPLE=0 "${node_wrap[@]}" \
			"$build/recstore-server" --listen "$RS_RDMA_IP:0" >"$log" 2>&1 &
	else
		"${node_wrap[@]}" \
			"$build/recstore-server" --listen "$RS_RDMA_IP:0" >"$log" 2>&1 &
	fi
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

# one MODE(off|pct) OUTFILE [bench args...]: bench against a fresh node.
one() {
	local mode=$1 o=$2
	shift 2
	rm -f "$tmp/client.jsonl"
	if [ "$mode" = off ]; then
		node_start 0
		"$@" --nodes "$addr" >"$o" 2>&1 || { cat "$o"; exit 1; }
	else
		node_start 1
		RS_TRACE=$tmp/client.jsonl RS_TRACE_SAMPLE=$mode \
			"$@" --nodes "$addr" >"$o" 2>&1 || { cat "$o"; exit 1; }
	fi
	node_stop
	if [ "$mode" != off ]; then
		echo "$(wc -l <"$tmp/client.jsonl") client and $(wc -l <"$tmp/node.jsonl") node trace lines" >>"$o"
	fi
}

phases="get update get_rpc"
parts=${RS_BENCH_PARTS:-tp cg}
if [[ " $parts " == *" tp "* ]]; then
say "== throughput: tracing off vs 1% sampling, and off vs off again (the noise), ${secs}s per phase, $reps rounds (${shape[*]})"
for r in $(seq "$reps"); do
	case $((r % 3)) in
	1) order="off 0.01 off2" ;;
	2) order="0.01 off2 off" ;;
	0) order="off2 off 0.01" ;;
	esac
	for m in $order; do
		one "${m%2}" "$tmp/tp.$m.$r" "$build/recstore-bench" "${shape[@]}" \
			--seconds "$secs"
	done
	line="round $r:"
	for p in $phases; do
		a=$(res "${p}_keys_per_s" "$tmp/tp.off.$r")
		b=$(res "${p}_keys_per_s" "$tmp/tp.0.01.$r")
		c=$(res "${p}_keys_per_s" "$tmp/tp.off2.$r")
		echo "$a" >>"$tmp/off.$p"
		echo "$b" >>"$tmp/pct.$p"
		echo "$(ratio "$b" "$a" 4)" >>"$tmp/ratio.$p"
		echo "$(ratio "$c" "$a" 4)" >>"$tmp/aa.$p"
		line="$line $p off $a 1% $b off $c;"
	done
	say "$line $(tail -n 1 "$tmp/tp.0.01.$r")"
done
for p in $phases; do
	say "result trace_tp_${p}_off_keys_per_s $(median <"$tmp/off.$p")"
	say "result trace_tp_${p}_1pct_keys_per_s $(median <"$tmp/pct.$p")"
	say "result trace_tp_${p}_1pct_over_off $(median <"$tmp/ratio.$p") (rounds $(sort -g "$tmp/ratio.$p" | paste -sd' ' -))"
	say "result trace_tp_${p}_off_over_off $(median <"$tmp/aa.$p") (rounds $(sort -g "$tmp/aa.$p" | paste -sd' ' -))"
done
fi
[[ " $parts " == *" cg "* ]] || exit 0

say "== instructions (callgrind): $cg_iters batches per phase, no spinning"
# inclusive instructions of function $1 in callgrind_annotate output $2
incl() {
	awk -v f="$1" '!v && index($0, ":" f " [") { v = $1; gsub(",", "", v) }
		END { print v + 0 }' "$2"
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? 100 * a / b : 0 }'; }
for m in off 0 0.01 1; do
	node_wrap=(valgrind --tool=callgrind --callgrind-out-file="$tmp/cgn.$m.out")
	one "$m" "$tmp/cg.$m" valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/cg.$m.out" \
		"$build/recstore-bench" "${shape[@]}" --iters "$cg_iters" \
		--spin-us 0
	callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.$m.out" \
		>"$tmp/cg.$m.txt" 2>/dev/null || true
	all=$(awk '/^summary:/ { print $2 }' "$tmp/cg.$m.out")
	hot=$(incl worker_main "$tmp/cg.$m.txt")
	tr=0
	for f in trace_emit_ trace_in_sample_ trace_new_id trace_now_us; do
		tr=$((tr + $(incl "$f" "$tmp/cg.$m.txt")))
	done
	wr=$(incl writer_main "$tmp/cg.$m.txt")
	echo "$all" >"$tmp/all.$m"
	say "sampling $m, client: process $all instructions; bench threads $hot, of which tracing calls $tr ($(pct "$tr" "$hot")%); trace writer thread $wr ($(pct "$wr" "$all")% of the process)$(grep -h 'trace lines' "$tmp/cg.$m" | sed 's/^/; /')"
	# the node: its workers (server.c worker_main) and its writer
	callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cgn.$m.out" \
		>"$tmp/cgn.$m.txt" 2>/dev/null || true
	nall=$(awk '/^summary:/ { print $2 }' "$tmp/cgn.$m.out")
	nhot=$(incl worker_main "$tmp/cgn.$m.txt")
	ntr=0
	for f in trace_emit_ trace_in_sample_ trace_now_us; do
		ntr=$((ntr + $(incl "$f" "$tmp/cgn.$m.txt")))
	done
	nwr=$(incl writer_main "$tmp/cgn.$m.txt")
	say "sampling $m, node: process $nall instructions; worker threads $nhot, of which tracing calls $ntr ($(pct "$ntr" "$nhot")%); trace writer thread $nwr ($(pct "$nwr" "$nall")% of the process)"
done
node_wrap=()
for m in 0 0.01 1; do
	case $m in 0) n=0pct ;; 0.01) n=1pct ;; 1) n=100pct ;; esac
	say "result trace_cg_${n}_over_off_process $(ratio "$(cat "$tmp/all.$m")" "$(cat "$tmp/all.off")" 4)"
done
