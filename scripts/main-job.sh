#!/usr/bin/env bash
# main-job.sh BUILD_DIR [BENCH_ARGS...] - where an RDMA device exists
# (RS_RDMA_DEV/RS_RDMA_IP set), start tools/recstore-server on its defaults,
# wait until it listens, run tools/recstore-bench against it, stop the node.
set -euo pipefail
build=$1
shift
: "${RS_RDMA_IP:?RS_RDMA_IP is not set: no Soft-RoCE device (use ci/with-rxe.sh)}"
ulimit -l unlimited 2>/dev/null || true
port=${RS_PORT:-7471}
log=$(mktemp /tmp/recstore-server.XXXXXX.log)

"$build/recstore-server" --listen "$RS_RDMA_IP:$port" >"$log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true; wait $srv 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 300); do
  grep -q 'listening on' "$log" && break
  kill -0 $srv 2>/dev/null || { cat "$log"; echo "main-job: node exited" >&2; exit 1; }
  sleep 0.1
done
grep -q 'listening on' "$log" || { cat "$log"; echo "main-job: node did not start" >&2; exit 1; }
cat "$log"
"$build/recstore-bench" --nodes "$RS_RDMA_IP:$port" --server-pid $srv "$@"
kill -INT $srv
wait $srv
trap - EXIT
cat "$log"
rm -f "$log"
