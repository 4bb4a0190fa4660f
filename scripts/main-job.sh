#!/usr/bin/env bash
# main-job.sh BUILD_DIR [ARGS...] - where an RDMA device exists
# (RS_RDMA_DEV/RS_RDMA_IP set), start the store as users deploy it, run the
# workload against it, stop the store.
#
# The store (RS_MAIN_NODES): 3 (default) is one etcd and three memory nodes
# (tools/recstore-server) in one cluster with r = 2 (docs/replication.md);
# the workload finds them through their addresses. With the `train`
# workload one node is SIGKILLed once the first epoch is done: training
# carries on, and the job reports how long the cluster took to drop the
# node and the trainer's longest step (the pause it saw). 1 is one node on
# its defaults, no etcd.
#
# The workload (RS_MAIN_JOB): `train` (default) trains the DLRM example
# (examples/dlrm.py, a small run: 2 epochs of 15 batches) with its
# embeddings in the store, printing loss and AUC per epoch and writing
# per-stage windows every second (the nodes' and the trainer's) to
# $RS_STAGE_FILE (/tmp/recstore-stages.txt); `bench` runs tools/recstore-bench
# (26 tables, Zipf keys, batch 4096, dim 128). ARGS go to the workload.
set -euo pipefail
build=$(cd "$1" && pwd)
shift
: "${RS_RDMA_IP:?RS_RDMA_IP is not set: no Soft-RoCE device (use ci/with-rxe.sh)}"
ulimit -l unlimited 2>/dev/null || true
top=$(cd "$(dirname "$0")/.." && pwd)
port=${RS_PORT:-7471}
nodes=${RS_MAIN_NODES:-3}
job=${RS_MAIN_JOB:-train}
d=$(mktemp -d /tmp/recstore-main.XXXXXX)
etcd_pid= pids=

# the nodes and the trainer all append per-stage windows to one file
export RS_STAGE_FILE=${RS_STAGE_FILE:-/tmp/recstore-stages.txt}
: >"$RS_STAGE_FILE"

# shellcheck source=scripts/sh-lib.sh
. "$top/scripts/sh-lib.sh"
sh_dir=$d sh_tail=20 sh_fail_prefix="main-job: " sh_fail_fd=2
sh_pids="pids etcd_pid"
trap cleanup EXIT

case $nodes in
1)
  "$build/recstore-server" --listen "$RS_RDMA_IP:$port" >"$d/mem-1.log" 2>&1 &
  pids=$!
  await "$d/mem-1.log" "listening on" 60 "$pids" || fail "the node did not start"
  cat "$d/mem-1.log"
  seeds=$RS_RDMA_IP:$port
  ;;
3)
  # shellcheck source=scripts/etcd-lib.sh
  . "$top/scripts/etcd-lib.sh"
  etcd_start "$d"
  ips=($RS_RDMA_IP ${RS_RDMA_IPS:-})
  [ ${#ips[@]} -ge 3 ] || ips=($RS_RDMA_IP $RS_RDMA_IP $RS_RDMA_IP)
  declare -A pid
  seeds=
  for i in 1 2 3; do
    cat >"$d/mem-$i.json" <<EOF
{"name": "mem-$i", "listen": {"addr": "${ips[$((i - 1))]}", "port": $((port + i - 1))},
 "coord": {"endpoints": ["$url"], "cluster": "main", "lease_ms": 3000,
           "replicas": 2, "initial_members": 3}}
EOF
    "$build/recstore-server" -c "$d/mem-$i.json" >"$d/mem-$i.log" 2>&1 &
    pid[mem-$i]=$!
    pids="$pids $!"
    seeds=$seeds${seeds:+,}${ips[$((i - 1))]}:$((port + i - 1))
  done
  for i in 1 2 3; do
    await "$d/mem-$i.log" "listening on" 60 "${pid[mem-$i]}" || fail "mem-$i did not start"
  done
  ctl() { "$build/recstore-ctl" --etcd "$url" --cluster main cluster "$@"; }
  ctl --until-active 3 --timeout 120 || fail "the three nodes did not form a cluster"
  ;;
*)
  fail "RS_MAIN_NODES must be 1 or 3"
  ;;
esac

# SIGKILL mem-2 once the trainer's output ($1) shows its first epoch; then
# how long the cluster took to write the configuration without it.
kill_midrun() {
  local i t0
  for ((i = 0; i < 6000; i++)); do
    grep -q '^epoch 1:' "$1" 2>/dev/null && break
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
  t0=$(date +%s.%N)
  kill -KILL "${pid[mem-2]}"
  echo "main-job: mem-2 SIGKILLed during epoch 2"
  ctl --until-epoch 2 --timeout 60 >"$d/after.log" 2>&1 ||
    fail "no configuration without mem-2"
  echo "main-job: the cluster dropped mem-2 after $(elapsed "$t0") s (lease 3 s)"
}

case $job in
train)
  PYTHONPATH="$build/python" /usr/bin/python3 "$top/examples/dlrm.py" \
    --nodes "$seeds" --device "$RS_RDMA_IP" --epochs 2 \
    --steps 15 --eval 2048 --stats-file "$RS_STAGE_FILE" --no-progress \
    "$@" >"$d/train.out" 2>&1 &
  trainer=$!
  tail -n +1 -f --pid="$trainer" "$d/train.out" &
  [ "$nodes" = 3 ] && kill_midrun "$d/train.out" "$trainer"
  rc=0
  wait "$trainer" || rc=$?
  [ "$rc" = 0 ] || fail "the trainer failed (exit status $rc)"
  if [ "$nodes" = 3 ]; then
    echo "main-job: failover: $(grep '^longest step' "$d/train.out" || true)"
    sed -n 's/^/  /p' "$d/after.log"
  fi
  echo "per-stage windows (nodes and trainer), last lines of $RS_STAGE_FILE:"
  tail -n 8 "$RS_STAGE_FILE"
  ;;
bench)
  "$build/recstore-bench" --nodes "$seeds" \
    --server-pid "$(echo $pids | tr ' ' ',')" "$@"
  ;;
*)
  fail "RS_MAIN_JOB must be train or bench"
  ;;
esac
sh_stop INT pids
for f in "$d"/mem-*.log; do
  echo "--- $(basename "$f" .log)"
  grep -v '^recstore-server: table' "$f" | tail -n 12
done
