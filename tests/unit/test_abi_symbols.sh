#!/usr/bin/env bash
# test_abi_symbols.sh BUILD_DIR - the shared libraries export exactly the
# symbols src/librecstore.map lists, each in its version node:
#   librecstore.so         every listed symbol
#   librecstore-client.so  every listed symbol but rs_server_* and
#                          rs_admin_* (node code)
# and the functions the sources mark RS_EXPORT are exactly the listed ones.
# A function marked for export but not listed (the version script would
# hide it), listed but missing, or in the wrong node fails here, so a
# forgotten map entry fails CI.
# Exit 0 pass, 1 fail.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
map=$top/src/librecstore.map
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "symbol@NODE" for every symbol of the map, from the node it sits in
# (comments stripped first)
sed -e 's|/\*.*\*/||' -e '/\/\*/,/\*\//d' "$map" | awk '
	/^[A-Z0-9_.]+ *\{/ { node = $1; next }
	/^[ \t]*(global|local):/ { next }
	/^[ \t]*[a-z_0-9]+;/ { gsub(/[ \t;]/, ""); print $0 "@" node }
' | sort >"$tmp/all"
[ -s "$tmp/all" ] || { echo "FAIL: no symbols read from $map"; exit 1; }

fail=0
check() { # check LIB EXPECTED_FILE
	local lib=$1 want=$2
	[ -f "$lib" ] || { echo "FAIL: $lib missing"; fail=1; return; }
	# defined dynamic symbols with their version, "name@NODE" (nm -D
	# prints name@@NODE for a default version); drop the version
	# definitions themselves (absolute symbols named like the nodes)
	nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' |
		sed 's/@@/@/' | sort >"$tmp/got"
	if ! diff -u "$want" "$tmp/got" >"$tmp/diff"; then
		echo "FAIL: $(basename "$lib") exports differ from the map" \
			"(- listed only, + exported only):"
		grep '^[-+][a-z]' "$tmp/diff" || cat "$tmp/diff"
		fail=1
	else
		echo "ok: $(basename "$lib") exports the $(wc -l <"$want")" \
			"listed symbols"
	fi
}
check "$build/librecstore.so" "$tmp/all"
# (the range setters of src/client/config.c are written by its
# RANGE_SETTER generator: one line each, its first argument the suffix)
{ grep -rhE '^RS_EXPORT ' "$top/src" | sed -E 's/.*[ *]([a-z_0-9]+)\(.*/\1/'
  grep -rhE '^RANGE_SETTER\(' "$top/src" |
	sed -E 's/^RANGE_SETTER\(([a-z_0-9]+),.*/rs_client_config_set_\1/'
} | sort >"$tmp/marked"
sed 's/@.*//' "$tmp/all" | sort >"$tmp/names"
if ! diff -u "$tmp/names" "$tmp/marked" >"$tmp/diff"; then
	echo "FAIL: RS_EXPORT functions differ from the map (- listed only," \
		"+ marked only):"
	grep '^[-+][a-z]' "$tmp/diff" || cat "$tmp/diff"
	fail=1
else
	echo "ok: the $(wc -l <"$tmp/marked") RS_EXPORT functions are listed"
fi
grep -vE '^rs_(server|admin)_' "$tmp/all" >"$tmp/client"
check "$build/librecstore-client.so" "$tmp/client"
exit $fail
