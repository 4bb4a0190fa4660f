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
#   bench_etcd         one etcd in $tmp (scripts/etcd-lib.sh), its line
#                      said; sets url and etcd_pid
#   bench_cluster R N NAME [PREFIX...]  N fresh memory nodes of a cluster
#                      NAME (replicas R), waited for until they adopted
#                      its epoch; sets seeds, spids and nodes (below)
# bench_etcd and bench_cluster need scripts/sh-lib.sh (fail, await,
# elapsed) and scripts/etcd-lib.sh sourced by the caller, and $tmp.
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

bench_etcd() {
	etcd_start "$tmp" >"$tmp/etcd.out"
	say "$(cat "$tmp/etcd.out")"
}

# bench_cluster R N NAME [PREFIX...]: N fresh memory nodes mem-1..mem-N in
# $tmp/NAME (their JSON nI.json, logs nI.log), each run by PREFIX (e.g.
# valgrind and its options; %p in a valgrind file name is the node's pid):
# 2 workers, 64M of storage, the JSON fields of bench_node_json (none;
# each followed by a comma, e.g. '"spin_us": 0,')
# and a coord section: the etcd of bench_etcd, replicas R, an initial
# cluster of N, lease bench_lease_ms (3000), the cluster NAME. Waits until
# recstore-ctl cluster --until-active N passes and every node logged that
# it adopted that epoch (fails otherwise). Sets seeds (the addresses,
# comma-separated), spids (the pids, comma-separated) and adds the pids
# to nodes. The nodes listen at RS_RDMA_IP, or at the first N of
# "RS_RDMA_IP RS_RDMA_IPS" when there are that many.
bench_cluster() {
	local r=$1 n=$2 name=$3 d=$tmp/$3 i epoch ips pids=() addrs=()
	shift 3
	mkdir -p "$d"
	read -ra ips <<<"$RS_RDMA_IP ${RS_RDMA_IPS:-}"
	if [ ${#ips[@]} -lt "$n" ]; then
		ips=()
		for ((i = 0; i < n; i++)); do ips+=("$RS_RDMA_IP"); done
	fi
	for ((i = 1; i <= n; i++)); do
		cat >"$d/n$i.json" <<EOT
{"name": "mem-$i", "listen": {"addr": "${ips[$((i - 1))]}", "port": 0},
 "workers": 2, "storage": {"size": "64M"}, ${bench_node_json:-}
 "coord": {"endpoints": ["$url"], "cluster": "$name",
           "lease_ms": ${bench_lease_ms:-3000}, "replicas": $r,
           "initial_members": $n}}
EOT
		"$@" "$build/recstore-server" -c "$d/n$i.json" >"$d/n$i.log" 2>&1 &
		pids+=($!)
		nodes="$nodes $!"
	done
	for ((i = 1; i <= n; i++)); do
		await "$d/n$i.log" "listening on" 120 "${pids[$((i - 1))]}" ||
			fail "$name: mem-$i did not start"
		addrs+=("$(sed -n 's/.*listening on \(.*\)$/\1/p' "$d/n$i.log" | head -n 1)")
	done
	"$build/recstore-ctl" --etcd "$url" --cluster "$name" cluster \
		--until-active "$n" --timeout 120 >"$d/ctl.out" 2>&1 ||
		fail "$name: the configuration never had the $n nodes active: $(cat "$d/ctl.out")"
	epoch=$(sed -n "s/^cluster $name: epoch \([0-9]*\),.*/\1/p" "$d/ctl.out")
	for ((i = 1; i <= n; i++)); do
		await "$d/n$i.log" "repl: epoch $epoch adopted" 120 "${pids[$((i - 1))]}" ||
			fail "$name: mem-$i did not adopt epoch $epoch"
	done
	seeds=$(IFS=,; echo "${addrs[*]}")
	spids=$(IFS=,; echo "${pids[*]}")
	say "$name: replicas $r, epoch $epoch, $n nodes active: $seeds"
}
