#!/usr/bin/env bash
# rxe-setup.sh - bring up a Soft-RoCE device on a host whose kernel HAS
# rdma_rxe, the same way ci/rxe-vm.sh does inside its guest:
#
#   eval "$(ci/rxe-setup.sh)"      # as root
#
# Idempotent: loads rdma_rxe (and crc32_generic, rdma_ucm for librdmacm),
# creates the veth pair $RS_RXE_NETDEV/<peer> (default rsveth0/rsveth1) with
# 10.77.0.1/24 and 10.77.0.2-5 on it, and an rxe device on it (rxe0, or a
# free rs_rxeN if rxe0 is taken by another netdev). What is already there is
# reused. Prints `export RS_RDMA_DEV=...` lines (the env contract of
# docs/DEVELOPING.md) on stdout, diagnostics on stderr. Exits 1 with a clear
# message when the kernel cannot do it (no rdma_rxe module, not root, ...).
set -euo pipefail

prog=rxe-setup
die() { echo "$prog: $*" >&2; exit 1; }

netdev=${RS_RXE_NETDEV:-rsveth0}
peer=${netdev%0}1
[ "$peer" != "$netdev" ] || peer=${netdev}p
ip0=10.77.0.1
extra_ips="10.77.0.2 10.77.0.3 10.77.0.4 10.77.0.5"

[ "$(id -u)" -eq 0 ] || die "must run as root"
for t in ip rdma; do
	command -v "$t" >/dev/null ||
		die "'$t' not found (packages iproute2, rdma-core)"
done

# --- kernel support -------------------------------------------------------
if [ ! -d /sys/module/rdma_rxe ]; then
	modprobe rdma_rxe 2>/dev/null ||
		die "the kernel ($(uname -r)) has no rdma_rxe module (modprobe \
rdma_rxe failed); use ci/rxe-vm.sh"
fi
# rxe needs a crc32 shash; librdmacm needs /dev/infiniband/rdma_cm
modprobe crc32_generic 2>/dev/null || true
[ -d /sys/module/rdma_ucm ] || modprobe rdma_ucm 2>/dev/null ||
	echo "$prog: warning: rdma_ucm not loaded, librdmacm may fail" >&2

# --- veth pair and addresses ----------------------------------------------
if ! ip link show dev "$netdev" >/dev/null 2>&1; then
	ip link add "$netdev" type veth peer name "$peer" ||
		die "cannot create veth pair $netdev/$peer"
fi
has_addr() { ip -4 -o addr show dev "$netdev" | grep -q " $1/"; }
has_addr "$ip0" || ip addr add "$ip0/24" dev "$netdev" ||
	die "cannot add $ip0/24 to $netdev"
ip link set "$netdev" up || die "cannot bring $netdev up"
ip link set "$peer" up 2>/dev/null || true

# --- rxe device ------------------------------------------------------------
# `rdma link show` lines: "link rxe0/1 state ACTIVE ... netdev rsveth0"
dev=$(rdma link show 2>/dev/null |
	awk -v nd="$netdev" '$NF == nd { split($2, a, "/"); print a[1]; exit }')
if [ -z "$dev" ]; then
	dev=rxe0
	n=0
	while [ -e "/sys/class/infiniband/$dev" ]; do
		dev=rs_rxe$n
		n=$((n + 1))
	done
	rdma link add "$dev" type rxe netdev "$netdev" ||
		die "rdma link add $dev type rxe netdev $netdev failed (is \
crc32_generic available?)"
fi

port=/sys/class/infiniband/$dev/ports/1
want_gid=0000:0000:0000:0000:0000:ffff:0a4d:0001
gid_index=
for _ in $(seq 100); do
	if grep -q ACTIVE "$port/state" 2>/dev/null; then
		for g in "$port"/gids/*; do
			if [ "$(cat "$g" 2>/dev/null)" = "$want_gid" ]; then
				gid_index=${g##*/}
				break
			fi
		done
		[ -z "$gid_index" ] || break
	fi
	sleep 0.1
done
grep -q ACTIVE "$port/state" 2>/dev/null ||
	die "$dev port 1 is not ACTIVE: $(cat "$port/state" 2>/dev/null)"
[ -n "$gid_index" ] || die "no GID for $ip0 on $dev"

for a in $extra_ips; do
	has_addr "$a" || ip addr add "$a/24" dev "$netdev" ||
		die "cannot add $a/24 to $netdev"
done

echo "$prog: $dev on $netdev ($ip0, GID index $gid_index)" >&2
printf 'export RS_RDMA_DEV=%q\n' "$dev"
printf 'export RS_RDMA_IP=%q\n' "$ip0"
printf 'export RS_RDMA_IPS=%q\n' "$extra_ips"
printf 'export RS_RDMA_GID_INDEX=%q\n' "$gid_index"
