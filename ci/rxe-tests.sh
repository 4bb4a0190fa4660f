#!/usr/bin/env bash
# rxe-tests.sh BUILD_DIR... - run the rxe-labelled tests of each build tree.
# Runs where an RDMA device exists (called through ci/with-rxe.sh), so that
# all trees share one guest boot. Fails if a test fails or if no device is
# there (a silent skip of every rxe test would hide a broken set-up).
set -euo pipefail
if [ -z "${RS_RDMA_DEV:-}" ]; then
  echo "rxe-tests: RS_RDMA_DEV is not set: no Soft-RoCE device" >&2
  exit 1
fi
ulimit -l unlimited 2>/dev/null || true
rc=0
# one test at a time (no -j): tests share the device dax RS_PMEM_DEV
for b in "$@"; do
  printf '\n--- rxe tests in %s ---\n' "$b"
  ctest --test-dir "$b" -L rxe --output-on-failure || rc=1
done
exit $rc
