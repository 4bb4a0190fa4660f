# bench-lib.sh - sourced by the ci/bench-*.sh scripts:
#   bench_init NAME BUILD_DIR ARGS...
# resolves top and build (default $top/build), re-runs the calling script
# through ci/with-rxe.sh where no RDMA device exists, raises the memlock
# limit, and opens NAME.out in the current directory for say(). Helpers:
#   say TEXT           print and append to the output file
#   median / least     of numbers on stdin
#   ratio A B [DIGITS] A / B (n/a when B is not positive)
#   res KEY FILE       the value of a "result KEY VALUE" line
#   perf TOOL ARGS...  a perftest pair on $RS_RDMA_DEV (server in the
#                      background, client to $ip, GID $gid, files in
#                      $tmp): the result line for the message size $row
bench_init() {
	local name=$1
	shift
	top=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
	build=${1:-$top/build}
	build=$(cd "$build" && pwd)
	if [ -z "${RS_RDMA_DEV:-}" ]; then
		exec bash "$top/ci/with-rxe.sh" bash "$top/ci/$name.sh" "$build"
	fi
	ulimit -l unlimited 2>/dev/null || true
	out=$PWD/$name.out
	: >"$out"
}
say() { echo "$*" | tee -a "$out"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print 0 }'; }
least() { sort -g | head -1; }
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%.*f", d, a / b; else print "n/a" }'; }
res() { awk -v k="$1" '$1 == "result" && $2 == k { print $3 }' "$2"; }
perf() {
	local t=$1; shift
	"$t" -d "$RS_RDMA_DEV" -x "$gid" "$@" >"$tmp/perf-srv" 2>&1 &
	local s=$!
	sleep 1.5
	"$t" -d "$RS_RDMA_DEV" -x "$gid" "$@" "$ip" >"$tmp/perf" 2>&1 || true
	wait $s || true
	awk -v s="$row" '$1 == s' "$tmp/perf" | tail -1
}
