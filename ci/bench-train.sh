#!/usr/bin/env bash
# bench-train.sh [BUILD_DIR] - the trainer's data path against the fabric,
# in ONE guest boot (ratios within one boot are what mean something under
# TCG emulation; absolute times do not):
#   1. ib_read_bw at the row's READ size: the message rate the fabric gives
#      one-sided READs of rows (the physical limit);
#   2. ci/bench_train.py in the DLRM shape (26 tables, Zipf ids, one id per
#      feature and sample, every id written before: a model that exists),
#      each against a fresh node: --mode rpc (per-table GET_OR_INIT and
#      blocking updates, what the PyTorch collection did before) and
#      --mode onesided (recstore.EmbeddingBagCollection) with staleness 0
#      (the default) and 1, and --mode cache: the collection (staleness 0)
#      with a row cache of RS_BENCH_CACHE_MB per table on the trainer,
#      exact (16-byte version probes) and with cache staleness 1 (rows at
#      most 1 step old used without a READ);
#   3. per step: lookup and update time as the trainer waits for them, the
#      distinct keys, the time ib_read_bw needs to READ that many rows
#      (the bound), (lookup + update) / bound, node CPU seconds per million
#      looked-up keys, keys by path; for the collection's modes the keys/s
#      (looked-up keys over lookup + update time) and its ratio to
#      onesided_s0 (the collection without a cache), READ work requests and
#      row bytes READ per distinct key, the cache's hit rate.
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: result and ratio lines, also in bench-train.out in the current
# directory. Environment (RS_* reaches the guest): RS_BENCH_DIM (128),
# RS_BENCH_BATCH (1024), RS_BENCH_IDS (10000 per table), RS_BENCH_STEPS
# (20, after 5 warm-up steps), RS_BENCH_ZIPF (0.99), RS_BENCH_CACHE_MB (8
# per table). About 6 minutes.
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-train "$@"
dim=${RS_BENCH_DIM:-128}
row=$(( (32 + dim * 4 + 63) / 64 * 64 ))
gid=${RS_RDMA_GID_INDEX:-1}
ip=$RS_RDMA_IP
tmp=$(mktemp -d /tmp/bench-train.XXXXXX)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}


say "== ib_read_bw -s $row (rows of dim $dim)"
mpps=$(perf ib_read_bw -s "$row" -n 20000 | awk '{ print $5 }')
say "result train_ib_read_bw_mpps $mpps"

srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$tmp"' EXIT
printf '{"storage": {"size": "768MiB"}}\n' >"$tmp/node.json"
# a fresh node per mode: its CPU time is that mode's alone
node() {
	log=$tmp/server.$1.log
	"$build/recstore-server" -c "$tmp/node.json" --listen "$ip:0" \
		>"$log" 2>&1 &
	srv=$!
	for _ in $(seq 600); do
		grep -q 'listening on' "$log" && break
		kill -0 $srv 2>/dev/null || { cat "$log"; exit 1; }
		sleep 0.1
	done
	addr=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$log" | head -n 1)
}
args=(--dim "$dim" --batch "${RS_BENCH_BATCH:-1024}"
	--ids "${RS_BENCH_IDS:-10000}" --steps "${RS_BENCH_STEPS:-20}"
	--zipf "${RS_BENCH_ZIPF:-0.99}")
# MODE:STALENESS[:CACHE_STALENESS] (cache: exact or K)
for run in rpc:0 onesided:0 onesided:1 cache:0:exact cache:0:1; do
	IFS=: read -r m s k <<<"$run"
	extra=()
	case $m in
	rpc) mode=rpc ;;
	onesided) mode=${m}_s$s ;;
	cache)
		extra=(--cache-mb "${RS_BENCH_CACHE_MB:-8}")
		if [ "$k" = exact ]; then
			mode=cache_exact_s$s
		else
			mode=cache_k${k}_s$s
			extra+=(--cache-staleness "$k")
		fi ;;
	esac
	node "$mode"
	say "== bench_train.py --mode $m --staleness $s ${extra[*]} ${args[*]}"
	"$py" "$top/ci/bench_train.py" --mode "$m" --staleness "$s" \
		"${extra[@]}" --nodes "$addr" --device "$ip" --node-pid "$srv" \
		"${args[@]}" >"$tmp/$mode" 2>&1 || { cat "$tmp/$mode"; exit 1; }
	kill $srv
	wait $srv 2>/dev/null || true
	srv=
	grep '^result' "$tmp/$mode" | while read -r line; do say "$line"; done
	l=$(res "train_${mode}_lookup_ms" "$tmp/$mode")
	u=$(res "train_${mode}_update_ms" "$tmp/$mode")
	d=$(res "train_${mode}_distinct_keys_per_step" "$tmp/$mode")
	bound=$(awk -v d="$d" -v m="$mpps" 'BEGIN { if (m > 0) printf "%.3f", d / (m * 1e6) * 1e3; else print 0 }')
	say "result train_${mode}_bound_ms $bound"
	say "ratio train_${mode}_lookup_plus_update_vs_ib_read_bw $(ratio "$(awk -v a="$l" -v b="$u" 'BEGIN { print a + b }')" "$bound")"
	kps=$(res "train_${mode}_keys_per_s" "$tmp/$mode")
	if [ "$mode" = onesided_s0 ]; then ref_kps=$kps; fi
	if [ -n "${ref_kps:-}" ]; then
		say "ratio train_${mode}_keys_per_s_vs_onesided_s0 $(ratio "$kps" "$ref_kps")"
	fi
done
