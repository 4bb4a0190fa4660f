#!/usr/bin/env bash
# bench-ckpt.sh [BUILD_DIR] - checkpoint, verify and restore rates against
# the file system's own write and read rates, in ONE guest boot (ratios
# within one boot mean something under TCG emulation; absolute rates do
# not):
#   1. a node, tables filled by recstore-bench (uniform random rows, and
#      one batch of updates);
#   2. recstore-ctl checkpoint into DIR, recstore-ctl verify, and
#      recstore-ctl restore onto a second, empty node;
#   3. dd writing (conv=fsync) and reading (page cache dropped) a file of
#      the checkpoint's uncompressed size in the same DIR.
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh.
# Output: the tools' lines and "ratio ..." lines, also in bench-ckpt.out
# in the current directory.
#
# Environment (RS_* so that it reaches the guest): RS_BENCH_KEYS (rows per
# table, 100000), RS_BENCH_DIM (64), RS_BENCH_TABLES (2), RS_BENCH_OPTIM
# (adagrad), RS_BENCH_CKPT_DIR (where the files go: default a directory
# under the current one, which in the guest is the host's disk over 9p;
# /tmp in the guest is tmpfs, i.e. memory).
set -euo pipefail
# shellcheck source=ci/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
bench_init bench-ckpt "$@"
keys=${RS_BENCH_KEYS:-100000}
dim=${RS_BENCH_DIM:-64}
tables=${RS_BENCH_TABLES:-2}
optim=${RS_BENCH_OPTIM:-adagrad}
root=${RS_BENCH_CKPT_DIR:-$PWD}
ip=$RS_RDMA_IP
dir=$(mktemp -d "$root/bench-ckpt.XXXXXX")
tmp=$(mktemp -d /tmp/bench-ckpt.XXXXXX)
tool() {
	if [ -x "$build/tools/$1" ]; then echo "$build/tools/$1"
	else echo "$build/$1"; fi
}
pids=()
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp" "$dir"' EXIT

# node NAME: start a node whose checkpoint_dir is $dir; its address in
# $addr
node() {
	local log=$tmp/$1.log
	printf '{ "checkpoint_dir": "%s", "storage": { "size": "512MiB" } }\n' \
		"$dir" >"$tmp/$1.json"
	"$(tool recstore-server)" -c "$tmp/$1.json" --listen "$ip:0" \
		>"$log" 2>&1 &
	pids+=($!)
	for _ in $(seq 300); do
		if grep -q 'listening on' "$log"; then
			addr=$(sed -n 's/.*listening on //p' "$log" | head -1)
			return
		fi
		sleep 0.1
	done
	cat "$log" >&2
	exit 1
}
ctl=$(tool recstore-ctl)
node a
a=$addr
say "== fill: $tables tables x $keys rows, dim $dim, $optim"
"$(tool recstore-bench)" --nodes "$a" --tables "$tables" --keys "$keys" \
	--dim "$dim" --optim "$optim" --iters 1 --no-rpc --batch 4096 \
	>"$tmp/fill" 2>&1 || { cat "$tmp/fill"; exit 1; }

say "== checkpoint, verify, restore (recstore-ctl)"
# (progress lines go to stderr: kept aside, shown on failure)
run_ctl() { "$ctl" "$@" 2>"$tmp/ctl.err" | tee -a "$out" ||
	{ cat "$tmp/ctl.err"; exit 1; }; }
run_ctl -s "$a" checkpoint "$dir/c1"
line=$(tail -1 "$out")
rows=$(echo "$line" | sed -n 's/.* \([0-9]*\) rows.*/\1/p')
bytes=$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes (.*/\1/p')
raw=$(echo "$line" | sed -n 's/.*(\([0-9]*\) uncompressed).*/\1/p')
ck_s=$(echo "$line" | sed -n 's/.* in \([0-9.]*\) s;.*/\1/p')
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
t0=$(now)
run_ctl verify "$dir/c1"
ver_s=$(since "$t0")
node b
b=$addr
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
run_ctl -s "$b" restore "$dir/c1"
rs_s=$(tail -1 "$out" | sed -n 's/.* in \([0-9.]*\) s$/\1/p')

say "== dd: $raw bytes (the records, uncompressed) in $dir"
mb=$(( (raw + 1048575) / 1048576 ))
t0=$(now)
dd if=/dev/zero of="$dir/dd" bs=1M count="$mb" conv=fsync 2>"$tmp/dd-w"
dw_s=$(since "$t0")
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
t0=$(now)
dd if="$dir/dd" of=/dev/null bs=1M 2>"$tmp/dd-r"
dr_s=$(since "$t0")
say "dd write $mb MiB: $dw_s s; dd read: $dr_s s"

mbs() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", b / 1048576 / s; else print "n/a" }'; }
say "rows $rows, part bytes $bytes, record bytes $raw (compression $(ratio "$raw" "$bytes"))"
say "rate checkpoint $(mbs "$raw" "$ck_s") MiB/s of records, verify $(mbs "$raw" "$ver_s"), restore $(mbs "$raw" "$rs_s"); dd write $(mbs "$((mb * 1048576))" "$dw_s"), dd read $(mbs "$((mb * 1048576))" "$dr_s")"
# rate ratios: (record bytes / time) / (dd bytes / dd time)
rr() { awk -v b="$raw" -v s="$1" -v d="$((mb * 1048576))" -v t="$2" 'BEGIN { if (s > 0 && t > 0) printf "%.2f", (b / s) / (d / t); else print "n/a" }'; }
say "ratio checkpoint/dd-write $(rr "$ck_s" "$dw_s")"
say "ratio verify/dd-read $(rr "$ver_s" "$dr_s")"
say "ratio restore/dd-read $(rr "$rs_s" "$dr_s")"
