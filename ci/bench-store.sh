#!/usr/bin/env bash
# bench-store.sh [BUILD_DIR] - end-to-end figures of the store against the
# raw verbs tools, all in ONE guest boot (ratios within one boot are what
# mean something under TCG emulation; absolute times do not):
#   1. ib_read_lat at the row's READ size vs recstore-bench --single-key
#      (warm location cache: one READ; cold: bucket READs + row READ;
#      image: a key missing the location cache found in a prefetched
#      bucket image, one READ);
#      interleaved, RS_BENCH_REPS times, median ratios reported;
#   2. ib_read_bw at the row size (before and after) vs the batched
#      one-sided gets of recstore-bench (26 tables, Zipf 0.99);
#   3. server CPU during the get-only phase (one-sided) and the RPC phase.
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: the tools' result lines and "ratio ..." lines, also written to
# bench-store.out in the current directory.
#
# Environment (RS_* so that it reaches the guest): RS_BENCH_DIM (128),
# RS_BENCH_BATCH (4096), RS_BENCH_ITERS (10), RS_BENCH_KEYS (2000),
# RS_BENCH_TABLES (26), RS_BENCH_REPS (5), RS_BENCH_SPIN_US (the client's
# completion polling window, default: the library's 50 us; under TCG a
# longer window measured slower, as the spinning vCPU is the one the
# emulated NIC's kernel work needs).
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-store "$@"
dim=${RS_BENCH_DIM:-128}
reps=${RS_BENCH_REPS:-5}
spin=${RS_BENCH_SPIN_US:-50}
# What a warm get READs: the row, 32-byte header + payload, padded to 64.
row=$(( (32 + dim * 4 + 63) / 64 * 64 ))
gid=${RS_RDMA_GID_INDEX:-1}
ip=$RS_RDMA_IP
tmp=$(mktemp -d /tmp/bench-store.XXXXXX)
tool() {
	if [ -x "$build/tools/$1" ]; then echo "$build/tools/$1"
	else echo "$build/$1"; fi
}


log=$tmp/server.log
port=7471	# the node's default port (docs/config.md); --listen needs one
"$(tool recstore-server)" --listen "$ip:$port" >"$log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do
	grep -q 'listening on' "$log" && break
	kill -0 $srv 2>/dev/null || { cat "$log"; exit 1; }
	sleep 0.1
done
bench=("$(tool recstore-bench)" --nodes "$ip:$port" --dim "$dim")

say "== single key: ib_read_lat -s $row vs recstore-bench --single-key (x$reps)"
for r in $(seq "$reps"); do
	l=$(perf ib_read_lat -s "$row" -n 1000 | awk '{ print $5 }')
	"${bench[@]}" --spin-us "$spin" --tables 1 --keys 1000 --single-key \
		--samples 300 --prefix lat_t >"$tmp/single" 2>&1 || cat "$tmp/single"
	w=$(res single_warm_p50_us "$tmp/single")
	c=$(res single_cold_p50_us "$tmp/single")
	i=$(res single_image_p50_us "$tmp/single")
	p=$(res single_rpc_p50_us "$tmp/single")
	say "rep $r: ib_read_lat t_typical $l us; warm p50 $w us, cold p50 $c us, image p50 $i us ($(res single_image_reads_per_get "$tmp/single") READs per get), rpc p50 $p us"
	echo "$(ratio "$w" "$l")" >>"$tmp/rw"
	echo "$(ratio "$c" "$l")" >>"$tmp/rc"
	echo "$(ratio "$i" "$l")" >>"$tmp/ri"
	echo "$i" >>"$tmp/image"
	echo "$(ratio "$p" "$l")" >>"$tmp/rp"
	echo "$l" >>"$tmp/lat"
	echo "$w" >>"$tmp/warm"
	echo "$c" >>"$tmp/cold"
done
say "== batched: ib_read_bw -s $row vs recstore-bench gets"
bw1=$(perf ib_read_bw -s "$row" -n 20000 | awk '{ print $5 }')
"${bench[@]}" --spin-us "$spin" --server-pid "$srv" \
	--tables "${RS_BENCH_TABLES:-26}" --keys "${RS_BENCH_KEYS:-2000}" \
	--batch "${RS_BENCH_BATCH:-4096}" --iters "${RS_BENCH_ITERS:-10}" \
	>"$tmp/batch" 2>&1 || true
grep '^bench' "$tmp/batch" | tee -a "$out"
bw2=$(perf ib_read_bw -s "$row" -n 20000 | awk '{ print $5 }')
kill -INT $srv
wait $srv || true
trap 'rm -rf "$tmp"' EXIT

bw=$(printf '%s\n%s\n' "$bw1" "$bw2" |
	awk 'NF { s += $1; n++ } END { print n ? s / n * 1e6 : 0 }')
say "== summary (READ size $row bytes, dim $dim)"
say "ib_read_lat t_typical median $(median <"$tmp/lat") us; ib_read_bw $bw1 / $bw2 Mpps"
say "ratio single_warm_p50/ib_read_lat $(median <"$tmp/rw") (median of $reps; aim <= 1.2)"
say "ratio single_cold_p50/ib_read_lat $(median <"$tmp/rc") (median of $reps; aim <= 2.2)"
say "ratio single_image_p50/ib_read_lat $(median <"$tmp/ri") (median of $reps; a cold key in one READ; aim <= 1.2)"
say "ratio single_rpc_p50/ib_read_lat $(median <"$tmp/rp")"
# TCG timing is bimodal (runs land in a fast or a slow mode); the best p50
# of each tool over the reps compares like with like.
say "ratio best_warm_p50/best_ib_read_lat $(ratio "$(least <"$tmp/warm")" "$(least <"$tmp/lat")")"
say "ratio best_cold_p50/best_ib_read_lat $(ratio "$(least <"$tmp/cold")" "$(least <"$tmp/lat")")"
say "ratio best_image_p50/best_ib_read_lat $(ratio "$(least <"$tmp/image")" "$(least <"$tmp/lat")")"
say "ratio batched_get/ib_read_bw $(ratio "$(res get_keys_per_s "$tmp/batch")" "$bw") (aim >= 0.8)"
say "ratio batched_get_rpc/ib_read_bw $(ratio "$(res get_rpc_keys_per_s "$tmp/batch")" "$bw")"
say "server CPU, one-sided gets: $(res get_server_cpu_pct "$tmp/batch")% of a core, $(res get_server_cpu_s_per_mkeys "$tmp/batch") s per M keys"
say "server CPU, RPC gets:       $(res get_rpc_server_cpu_pct "$tmp/batch")% of a core, $(res get_rpc_server_cpu_s_per_mkeys "$tmp/batch") s per M keys"
