#!/usr/bin/env bash
# run.sh - the main job on its built-in defaults: install what is missing,
# build, then start a memory node and run the recommendation workload
# (tools/recstore-bench) against it over Soft-RoCE: natively when the kernel
# has rdma_rxe, otherwise inside a QEMU guest (ci/with-rxe.sh).
# Extra arguments go to recstore-bench.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
exec bash ci/with-rxe.sh bash scripts/main-job.sh build "$@"
