#!/usr/bin/env bash
# test_alloc_wrapped.sh [BUILD_DIR] - every heap allocation of the storage
# side goes through src/common/alloc.h (rs_malloc, rs_calloc, rs_realloc,
# rs_strdup, rs_strndup, rs_aligned_alloc, rs_posix_memalign), where
# failure injection can fail it (docs/DEVELOPING.md, RS_FAULT_INJECT): a
# plain malloc(), calloc(), ... in a .c or .h file of src/common,
# src/index, src/value, src/ckpt, src/place or src/server fails here,
# naming the file and line. Comments are skipped (lines whose first
# non-blank is * or /*). alloc.h itself, which calls libc, is the exception.
# Exit 0 pass, 1 fail.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
hits=$(grep -nE '(^|[^A-Za-z0-9_.>])(malloc|calloc|realloc|strdup|strndup|aligned_alloc|posix_memalign|reallocarray|memalign|valloc)[[:space:]]*\(' \
	src/common/*.[ch] src/index/*.[ch] src/value/*.[ch] \
	src/ckpt/*.[ch] src/place/*.[ch] src/server/*.[ch] |
	grep -v '^src/common/alloc\.h:' |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*)' || true)
if [ -n "$hits" ]; then
	echo "FAIL: allocations not through src/common/alloc.h:"
	echo "$hits"
	exit 1
fi
echo "ok: every allocation of the storage side goes through alloc.h"
