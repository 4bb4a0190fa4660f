#!/usr/bin/env bash
# bench-verbs.sh [BUILD_DIR] - the verbs layer against perftest, in ONE boot.
#
# Where a Soft-RoCE device exists (RS_RDMA_DEV set) it runs, on that device
# and address (perftest: server in the background, client against it):
#   ib_read_lat -x GID -s 512       READ latency (t_typical ~ p50, 99%)
#   ib_read_bw  -x GID -s 512       READ message rate (MsgRate)
#   recstore-verbs-bench self       rv_read_batch latency (p50, p99) and
#                                   batched READ rate at 512 B
# ROUNDS times, interleaved (perftest lat, ours lat, perftest bw, ours rate)
# so that a noisy host hits both sides alike, and prints each figure, the
# medians and the ratios ours / perftest. Elsewhere it re-runs itself
# through ci/with-rxe.sh (native rxe, or one QEMU guest boot).
# BUILD_DIR (default: build) must hold recstore-verbs-bench.
# Environment: RS_BENCH_ROUNDS (3), RS_BENCH_SECONDS (rate duration, 3),
# RS_BENCH_ITERS (latency samples, 1000), RS_BENCH_SPIN_US (our adaptive
# spin window, 200: under QEMU TCG a round trip takes 30-70 us and the
# window must cover it, as perftest never sleeps; on hardware the default
# 50 us is plenty).
set -euo pipefail

ci=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-$ci/../build}" && pwd)
bench=$build/recstore-verbs-bench
[ -x "$bench" ] || {
	echo "bench-verbs: $bench is not built" >&2
	exit 1
}
if [ -z "${RS_RDMA_DEV:-}" ]; then
	exec bash "$ci/with-rxe.sh" bash "$ci/bench-verbs.sh" "$build"
fi

dev=$RS_RDMA_DEV ip=$RS_RDMA_IP gid=${RS_RDMA_GID_INDEX:-1}
rounds=${RS_BENCH_ROUNDS:-3} secs=${RS_BENCH_SECONDS:-3}
iters=${RS_BENCH_ITERS:-1000} spin=${RS_BENCH_SPIN_US:-200}
ulimit -l unlimited 2>/dev/null || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# perftest TOOL OUT ARGS...: server in the background, then the client.
perf() {
	local tool=$1 out=$2 spid
	shift 2
	"$tool" -d "$dev" -x "$gid" "$@" >"$tmp/srv.txt" 2>&1 &
	spid=$!
	sleep 2
	if ! "$tool" -d "$dev" -x "$gid" "$@" "$ip" >"$out" 2>&1; then
		sleep 2
		"$tool" -d "$dev" -x "$gid" "$@" "$ip" >"$out" 2>&1 || {
			cat "$out" "$tmp/srv.txt" >&2
			kill "$spid" 2>/dev/null
			return 1
		}
	fi
	wait "$spid" || true
}

ours() {
	"$bench" self --ip "$ip" --dev "$dev" --size 512 --iters "$iters" \
		--seconds "$secs" --spin-us "$spin" --only "$1" >"$2"
}

# perftest result rows start with the message size; ours are key=value.
col() { awk -v c="$2" '$1 == 512 { print $c }' "$1"; }
key() { awk -F= -v k="$2" '$1 == k { print $2 }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "bench-verbs: device $dev, $ip, GID $gid, $rounds rounds," \
	"our spin window $spin us"
printf '%-6s %12s %12s %12s %12s %14s %14s\n' round pt_p50_us \
	ours_p50_us pt_p99_us ours_p99_us pt_rate_rps ours_rate_rps
for r in $(seq 1 "$rounds"); do
	perf ib_read_lat "$tmp/pl.$r" -s 512
	ours lat "$tmp/ol.$r"
	perf ib_read_bw "$tmp/pb.$r" -s 512
	ours rate "$tmp/or.$r"
	col "$tmp/pl.$r" 5 >>"$tmp/pl50"
	col "$tmp/pl.$r" 8 >>"$tmp/pl99"
	awk '$1 == 512 { printf "%.0f\n", $5 * 1e6 }' "$tmp/pb.$r" \
		>>"$tmp/prate"
	key "$tmp/ol.$r" lat_p50_us >>"$tmp/ol50"
	key "$tmp/ol.$r" lat_p99_us >>"$tmp/ol99"
	key "$tmp/or.$r" rate_rps >>"$tmp/orate"
	printf '%-6s %12s %12s %12s %12s %14s %14s\n' "$r" \
		"$(tail -1 "$tmp/pl50")" "$(tail -1 "$tmp/ol50")" \
		"$(tail -1 "$tmp/pl99")" "$(tail -1 "$tmp/ol99")" \
		"$(tail -1 "$tmp/prate")" "$(tail -1 "$tmp/orate")"
done
echo "-- last round, ours:"
cat "$tmp/ol.$rounds" "$tmp/or.$rounds"
echo "-- last round, perftest rows:"
grep -h -B1 '^ 512 ' "$tmp/pl.$rounds" "$tmp/pb.$rounds" || true

pl50=$(median <"$tmp/pl50") ol50=$(median <"$tmp/ol50")
pl99=$(median <"$tmp/pl99") ol99=$(median <"$tmp/ol99")
prate=$(median <"$tmp/prate") orate=$(median <"$tmp/orate")
echo "== summary: medians of $rounds rounds, 512 B READs"
awk -v pl="$pl50" -v p9="$pl99" -v pr="$prate" \
	-v ol="$ol50" -v o9="$ol99" -v or="$orate" 'BEGIN {
	printf "latency p50: ours %.2f us, ib_read_lat t_typical %.2f us, " \
	       "ratio %.3f (aim <= 1.1)\n", ol, pl, ol / pl
	printf "latency p99: ours %.2f us, ib_read_lat 99%% %.2f us, " \
	       "ratio %.3f\n", o9, p9, o9 / p9
	printf "READ rate:   ours %.0f /s, ib_read_bw %.0f /s, " \
	       "ratio %.3f (aim >= 0.9)\n", or, pr, or / pr
}'
