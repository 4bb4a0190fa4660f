#!/usr/bin/env bash
# test_layers.sh [BUILD_DIR] - every `#include "dir/file.h"` under src/
# follows the include rule of docs/DEVELOPING.md ("Layers"): a file of
# src/F may include its own folder, the public headers (recstore/, in
# include/), and what the rule table's row for F allows: a folder, or one
# header of it. A row whose first cell is a file (src-relative path) adds
# to that file alone what its folder's row does not allow: the known
# exceptions. The table is read from the doc, so the rule is written once;
# an include to a folder above F, or to one the table does not give F,
# fails here, naming the file and line. tools/recstore-ctl.c may include
# only the public headers.
# Exit 0 pass, 1 fail.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
doc=$top/docs/DEVELOPING.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The rule table: the table right after the marker line, one "key allowed"
# line per allowed entry, backquotes dropped. A key with no entries still
# gets a line (an empty allowed entry), so it counts as known.
awk '
	/<!-- include rule: read by tests\/unit\/test_layers.sh -->/ {
		on = 1; next }
	on && /^\|/ {
		n = split($0, cell, "|")
		key = cell[2]; allow = cell[3]
		gsub(/[` \t]/, "", key)
		gsub(/`/, "", allow)
		if (key == "folder" || key ~ /^-+$/ || key == "")
			next
		m = split(allow, a, /[ \t,]+/)
		print key, "-"
		for (i = 1; i <= m; i++)
			if (a[i] != "")
				print key, a[i]
		next
	}
	on && !/^\|/ { exit }
' "$doc" >"$tmp/rules"
[ -s "$tmp/rules" ] || { echo "FAIL: no rule table read from $doc"; exit 1; }

fail=0
# Every folder of src/ has a row: a new folder must be placed in the
# picture before it can include anything.
for d in "$top"/src/*/; do
	f=$(basename "$d")
	grep -q "^$f " "$tmp/rules" || {
		echo "FAIL: src/$f has no row in the rule table of $doc"
		fail=1
	}
done

# "path:line:target" for every quoted include of src/ (the comment and
# anything after the closing quote dropped)
(cd "$top/src" && grep -rn --include='*.c' --include='*.h' \
	-E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' .) |
	sed -E 's|^\./||; s|^([^:]*):([0-9]+):[^"]*"([^"]*)".*|\1:\2:\3|' \
	>"$tmp/includes"

awk -F: -v rules="$tmp/rules" '
	BEGIN {
		while ((getline line < rules) > 0) {
			split(line, kv, " ")
			ok[kv[1], kv[2]] = 1
		}
	}
	{
		file = $1; line = $2; inc = $3
		split(file, fp, "/"); folder = fp[1]
		if (index(inc, "/") == 0)
			next		# a file of the same folder
		split(inc, ip, "/"); to = ip[1]
		if (to == folder || to == "recstore")
			next
		if (ok[folder, to] || ok[folder, inc] || ok[file, inc] ||
		    ok[file, to])
			next
		printf "FAIL: src/%s:%s includes \"%s\": %s may not include %s " \
		       "(docs/DEVELOPING.md, \"Layers\")\n", file, line, inc,
		       folder, to
		bad = 1
	}
	END { exit bad }
' "$tmp/includes" || fail=1

# recstore-ctl is made of public calls only (the doc's paragraph after
# the table): any quoted include outside recstore/ fails, with its line
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
	"$top/tools/recstore-ctl.c" | grep -v '"recstore/'; then
	echo "FAIL: tools/recstore-ctl.c includes an internal header (above;" \
		"docs/DEVELOPING.md, \"Layers\")"
	fail=1
fi

n=$(wc -l <"$tmp/includes")
[ "$fail" -eq 0 ] || exit 1
echo "ok: $n includes of src/ follow the rule table"
