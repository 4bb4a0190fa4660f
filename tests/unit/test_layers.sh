#!/usr/bin/env bash
# test_layers.sh [BUILD_DIR] - every `#include "dir/file.h"` under src/
# follows the include rule of docs/DEVELOPING.md ("Layers"): a file of
# src/F may include its own folder, the public headers (recstore/, in
# include/), and what the rule table's row for F allows: a folder, or one
# header of it. A row whose first cell is a file (src-relative path) adds
# to that file alone what its folder's row does not allow: the known
# exceptions. The table is read from the doc, so the rule is written once;
# an include to a folder above F, or to one the table does not give F,
# fails here, naming the file and line. The same for the programs, tools/
# (what a user runs) and bench/ (the internal benches): a second table has
# one row per file of either folder (a new tool or bench must be
# declared), which lists the internal headers (or folders) it may
# include; a program with an empty row is thin (public headers only), and
# tools/recstore-ctl.c must stay so.
# Exit 0 pass, 1 fail.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
doc=$top/docs/DEVELOPING.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The rule tables: each table right after a marker line (src/'s, then
# the programs' of tools/ and bench/), one "key allowed" line per allowed
# entry, backquotes dropped.
# A key with no entries still gets a line (an empty allowed entry, "-"),
# so it counts as known.
awk '
	/<!-- include rule( \(tools\))?: read by tests\/unit\/test_layers.sh -->/ {
		on = 1; next }
	on && /^\|/ {
		n = split($0, cell, "|")
		key = cell[2]; allow = cell[3]
		gsub(/[` \t]/, "", key)
		gsub(/`/, "", allow)
		if (key == "folder" || key == "tool" || key ~ /^-+$/ ||
		    key == "")
			next
		m = split(allow, a, /[ \t,]+/)
		print key, "-"
		for (i = 1; i <= m; i++)
			if (a[i] != "")
				print key, a[i]
		next
	}
	on && !/^\|/ { on = 0 }
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

# The folders of programs, checked alike: a row per file, its includes
# by that row alone.
progs="tools bench"

# Every file of tools/ and bench/ has a row, and every such row a file.
for p in $progs; do
	for t in "$top/$p"/*.[ch]; do
		[ -e "$t" ] || continue		# an empty folder: no glob match
		f=$p/$(basename "$t")
		grep -q "^$f " "$tmp/rules" || {
			echo "FAIL: $f has no row in the tools table of $doc"
			fail=1
		}
	done
	for f in $(awk -v p="$p/" 'index($1, p) == 1 { print $1 }' \
			"$tmp/rules" | sort -u); do
		[ -e "$top/$f" ] || {
			echo "FAIL: the tools table of $doc has a row for $f," \
				"which does not exist"
			fail=1
		}
	done
done
# recstore-ctl is made of public calls only (the doc's paragraph after
# the tables): its row allows nothing
if grep '^tools/recstore-ctl\.c ' "$tmp/rules" | grep -qv ' -$'; then
	echo "FAIL: the row of tools/recstore-ctl.c in $doc allows an" \
		"internal header; it includes only recstore/"
	fail=1
fi

# "path:line:target" for every quoted include of DIR/SUB (paths relative
# to DIR; the comment and anything after the closing quote dropped)
includes() {
	(cd "$1" && grep -rn --include='*.c' --include='*.h' \
		-E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$2") |
		sed -E 's|^\./||; s|^([^:]*):([0-9]+):[^"]*"([^"]*)".*|\1:\2:\3|'
}
includes "$top/src" . >"$tmp/includes"
for p in $progs; do
	if [ -d "$top/$p" ]; then includes "$top" "$p"; fi
done >"$tmp/tool-includes"

# src/'s includes (the rule of the file's folder, or of the file) and
# those of tools/ and bench/ (the row of the file alone: who is the file)
check() {
	awk -F: -v rules="$tmp/rules" -v pre="$1" -v byfile="$2" '
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
			printf "FAIL: %s%s:%s includes \"%s\": %s may not include %s " \
			       "(docs/DEVELOPING.md, \"Layers\")\n", pre, file, line,
			       inc, byfile ? file : folder, byfile ? inc : to
			bad = 1
		}
		END { exit bad }
	'
}
check src/ 0 <"$tmp/includes" || fail=1
check "" 1 <"$tmp/tool-includes" || fail=1

n=$(wc -l <"$tmp/includes")
m=$(wc -l <"$tmp/tool-includes")
[ "$fail" -eq 0 ] || exit 1
echo "ok: $n includes of src/ and $m of tools/ and bench/ follow the" \
	"rule tables"
