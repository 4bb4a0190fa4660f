#!/usr/bin/env bash
# soak.sh [BUILD_DIR] [MINUTES] - the replication nemesis for a long time
# (docs/replication.md, "Nemesis"): tests/rxe/test_nemesis.sh again and
# again, each run with a fresh seed and RS_NEMESIS_FAULTS faults (default
# 12), until MINUTES (default 60) have passed or a run fails. The runs
# take the cluster shapes in turn: 3 nodes r 2, 4 nodes r 3, 3 nodes r 2
# of one worker each, 4 nodes r 2 of one worker (RS_SOAK_SHAPES="N:R:W ..."
# sets others). Not part of
# the test command (which runs one fixed seed with 5 faults).
#
# Every run's seed and verdict go to soak.out in the current directory; a
# failing run's logs are kept (the test prints them) and its seed replays
# the schedule: RS_NEMESIS_SEED=<seed> RS_NEMESIS_FAULTS=<n>
# bash tests/rxe/test_nemesis.sh BUILD_DIR.
#
# Where no RDMA device exists it re-runs itself through ci/with-rxe.sh
# (one guest boot for the whole soak). Exit 0: every run passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
b=${1:-build}
minutes=${2:-60}
if [ -z "${RS_RDMA_DEV:-}" ]; then
  RS_VM_TIMEOUT=$((minutes * 60 + 900)) \
    exec bash "$here/ci/with-rxe.sh" bash "$here/ci/soak.sh" "$b" "$minutes"
fi
export RS_NEMESIS_FAULTS=${RS_NEMESIS_FAULTS:-12}
end=$(($(date +%s) + minutes * 60))
runs=0
: >soak.out
read -ra shapes <<<"${RS_SOAK_SHAPES:-3:2:2 4:3:2 3:2:1 4:2:1}"
while [ "$(date +%s)" -lt "$end" ]; do
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  IFS=: read -r nodes r workers <<<"${shapes[$((runs % ${#shapes[@]}))]}"
  runs=$((runs + 1))
  echo "run $runs: seed $seed, $RS_NEMESIS_FAULTS faults, $nodes nodes of $workers workers, r $r" |
    tee -a soak.out
  if ! RS_NEMESIS_SEED=$seed RS_NEMESIS_NODES=$nodes RS_NEMESIS_R=$r \
    RS_NEMESIS_WORKERS=$workers bash "$here/tests/rxe/test_nemesis.sh" "$b" \
    >"soak-run.log" 2>&1; then
    cat soak-run.log
    echo "run $runs FAILED: RS_NEMESIS_SEED=$seed RS_NEMESIS_FAULTS=$RS_NEMESIS_FAULTS RS_NEMESIS_NODES=$nodes RS_NEMESIS_R=$r RS_NEMESIS_WORKERS=$workers" |
      tee -a soak.out
    exit 1
  fi
  grep "^nemesis: seed" soak-run.log | tail -n 1 | tee -a soak.out
done
echo "soak: $runs runs passed in $minutes minutes" | tee -a soak.out
