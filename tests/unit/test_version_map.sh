#!/usr/bin/env bash
# test_version_map.sh BUILD_DIR - the version is written once (project()
# in the top CMakeLists.txt) and what follows from it agrees:
#   - the last symbol node of src/librecstore.map is RECSTORE_<MAJOR>.<MINOR>
#     of the generated recstore/version.h: a release that adds functions
#     bumps the minor and opens its node, one without the other fails here;
#   - the shared libraries' file names carry the same MAJOR.MINOR.PATCH;
#   - no other source file defines the version numbers.
# Exit 0 pass, 1 fail.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
hdr=$build/include/recstore/version.h
fail=0

[ -f "$hdr" ] || { echo "FAIL: $hdr missing (not generated)"; exit 1; }
part() { sed -n "s/^#define RS_VERSION_$1 \([0-9][0-9]*\)$/\1/p" "$hdr"; }
major=$(part MAJOR) minor=$(part MINOR) patch=$(part PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
	{ echo "FAIL: no RS_VERSION_MAJOR/MINOR/PATCH in $hdr"; exit 1; }
version=$major.$minor.$patch

# the last node opened in the map (comments stripped first)
last=$(sed -e 's|/\*.*\*/||' -e '/\/\*/,/\*\//d' "$top/src/librecstore.map" |
	sed -n 's/^\(RECSTORE_[0-9.]*\) *{.*/\1/p' | tail -n 1)
if [ "$last" != "RECSTORE_$major.$minor" ]; then
	echo "FAIL: the last node of src/librecstore.map is '$last', the" \
		"version is $version: bump project(... VERSION) in" \
		"CMakeLists.txt with the node (docs/DEVELOPING.md)"
	fail=1
else
	echo "ok: version $version, last map node $last"
fi

for lib in librecstore librecstore-client; do
	if [ ! -f "$build/$lib.so.$version" ]; then
		echo "FAIL: $build/$lib.so.$version missing"
		fail=1
	fi
done

# the number is written in one place: no hand-written RS_VERSION_* values
if grep -rnE '^#define RS_VERSION_(MAJOR|MINOR|PATCH) [0-9]' \
	"$top/include" "$top/src" "$top/python" "$top/tools"; then
	echo "FAIL: a version number written by hand (above)"
	fail=1
fi
exit $fail
