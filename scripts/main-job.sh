#!/usr/bin/env bash
# main-job.sh BUILD_DIR [ARGS...] - where an RDMA device exists
# (RS_RDMA_DEV/RS_RDMA_IP set), start tools/recstore-server on its defaults,
# wait until it listens, run the workload against it, stop the node.
#
# The workload (RS_MAIN_JOB): `train` (default) trains the DLRM example
# (examples/dlrm.py, a small run: 2 epochs of 15 batches) with its
# embeddings in the store, printing loss and AUC per epoch and writing
# per-stage windows every second (the node's and the trainer's) to
# $RS_STAGE_FILE (/tmp/recstore-stages.txt); `bench` runs tools/recstore-bench
# (26 tables, Zipf keys, batch 4096, dim 128). ARGS go to the workload.
set -euo pipefail
build=$1
shift
: "${RS_RDMA_IP:?RS_RDMA_IP is not set: no Soft-RoCE device (use ci/with-rxe.sh)}"
ulimit -l unlimited 2>/dev/null || true
port=${RS_PORT:-7471}
log=$(mktemp /tmp/recstore-server.XXXXXX.log)

# the node and the trainer both append per-stage windows to one file
export RS_STAGE_FILE=${RS_STAGE_FILE:-/tmp/recstore-stages.txt}
: >"$RS_STAGE_FILE"
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
case "${RS_MAIN_JOB:-train}" in
train)
  top=$(cd "$(dirname "$0")/.." && pwd)
  stats=$RS_STAGE_FILE
  PYTHONPATH="$build/python" /usr/bin/python3 "$top/examples/dlrm.py" \
    --nodes "$RS_RDMA_IP:$port" --device "$RS_RDMA_IP" --epochs 2 \
    --steps 15 --eval 2048 --stats-file "$stats" --no-progress "$@"
  echo "per-stage windows (node and trainer), last lines of $stats:"
  tail -n 8 "$stats"
  ;;
bench)
  "$build/recstore-bench" --nodes "$RS_RDMA_IP:$port" --server-pid $srv "$@"
  ;;
*)
  echo "main-job: RS_MAIN_JOB must be train or bench" >&2
  exit 2
  ;;
esac
kill -INT $srv
wait $srv
trap - EXIT
cat "$log"
rm -f "$log"
