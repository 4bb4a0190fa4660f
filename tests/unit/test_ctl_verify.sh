#!/usr/bin/env bash
# test_ctl_verify.sh BUILD_DIR - `recstore-ctl verify DIR` on a checkpoint
# written by test_ckpt --make: intact (exit 0, the totals), then with one
# byte of a part changed, a part missing, the manifest changed: exit 1 and
# a message that names the damaged file.
set -euo pipefail
build=$1
ctl=$build/recstore-ctl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$tmp/c"
"$build/tests/test_ckpt" --make "$tmp/c" >/dev/null || fail "test_ckpt --make"
out=$("$ctl" verify "$tmp/c") || fail "intact checkpoint refused"
echo "$out"
grep -q "2 parts, 40 rows, 0 deletions.*intact" <<<"$out" || fail "totals"

expect_bad() { # expect_bad WHAT FILE
	local err rc=0
	err=$("$ctl" verify "$tmp/c" 2>&1) || rc=$?
	[ "$rc" -eq 1 ] || fail "$1: exit $rc, want 1 ($err)"
	grep -q "$2" <<<"$err" || fail "$1: message does not name $2: $err"
	echo "$1: $err"
}

cp "$tmp/c/p1.rsck" "$tmp/p1"
size=$(stat -c %s "$tmp/p1")
# one byte in the middle of the compressed records, changed
off=$((size / 2))
byte=$(od -An -tu1 -j "$off" -N1 "$tmp/p1" | tr -d ' ')
printf "$(printf '\\%03o' $(( (byte + 1) % 256 )))" |
	dd of="$tmp/c/p1.rsck" bs=1 seek="$off" conv=notrunc status=none
expect_bad "one byte changed" p1.rsck
rm "$tmp/c/p1.rsck"
expect_bad "part missing" p1.rsck
cp "$tmp/p1" "$tmp/c/p1.rsck"
"$ctl" verify "$tmp/c" >/dev/null || fail "restored part refused"
sed -i 's/"lr": /"lr": 1/' "$tmp/c/MANIFEST"
expect_bad "manifest edited" MANIFEST
echo ok
