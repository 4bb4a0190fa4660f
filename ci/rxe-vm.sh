#!/usr/bin/env bash
# rxe-vm.sh - run a command where a Soft-RoCE (rxe) device exists, on a host
# whose kernel has no RDMA at all, by booting Debian's own kernel in a QEMU
# TCG guest that runs the HOST's file system and binaries.
#
#   ci/rxe-vm.sh [--timeout SECS] [--mem MB] [--smp N] [--pmem FILE:SIZE]
#                -- CMD [ARGS...]
#
# How (facts: docs/softroce-in-qemu.md, pitfalls: docs/DEVELOPING.md):
# - The kernel package that linux-image-amd64 depends on is fetched with
#   `apt-get download` and unpacked under $RS_VM_CACHE (default
#   /var/cache/recstore-rxe-vm). A busybox initramfs holding the needed
#   modules is built there too, keyed on this script's content and the kernel
#   version. Both are reused by later runs (set-up is serialised by flock).
# - The guest mounts the host's / read-only over 9p and chroots into it; the
#   current directory is a second, WRITABLE 9p share mounted at the same path,
#   so files written there in the guest appear on the host. /tmp, /run,
#   /var/tmp and /dev/shm are tmpfs; hugepages are reserved when possible.
# - In the guest: veth0/veth1, 10.77.0.1/24 plus 10.77.0.2-5 on veth0, rxe0
#   on veth0. CMD runs as root in the same cwd with RS_RDMA_DEV, RS_RDMA_IP,
#   RS_RDMA_IPS, RS_RDMA_GID_INDEX (and RS_PMEM_DEV with --pmem), the
#   caller's PATH and every RS_* / CTEST_* / *SAN_OPTIONS variable.
# - CMD's stdout and stderr come back live over two virtio-serial ports
#   (fifos on the host side); its exit status comes back through a per-run
#   control share. Exit status: CMD's own; 124 when the guest timed out; 125
#   when the guest died without reporting a status or the set-up failed.
# - --pmem FILE:SIZE (SIZE with M or G) adds an emulated NVDIMM backed by
#   FILE (created if missing, kept across boots), exposed as /dev/dax0.0.
#
# Environment: RS_VM_CACHE (cache dir), RS_VM_TIMEOUT / RS_VM_MEM / RS_VM_SMP
# (defaults for the options), RS_VM_HUGEPAGES (2 MiB pages to reserve,
# default 256), RS_VM_KERNEL_PKG (kernel package override), RS_VM_APPEND
# (more kernel parameters), RS_VM_VERBOSE=1 (print the guest console's tail),
# RS_VM_CONSOLE=FILE (save the guest console there), RS_VM_QUIET=1 (no
# summary lines).
set -euo pipefail

prog=rxe-vm
die() { echo "$prog: error: $*" >&2; exit 125; }
note() { [ "${RS_VM_QUIET:-0}" = 1 ] || echo "$prog: $*" >&2; }
usage() {
	sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
	exit 125
}

timeout_s=${RS_VM_TIMEOUT:-1800}
mem_mb=${RS_VM_MEM:-4096}
smp=${RS_VM_SMP:-2}
pmem=
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
	--timeout=*) timeout_s=${1#*=}; shift ;;
	--mem) [ $# -ge 2 ] || usage; mem_mb=$2; shift 2 ;;
	--mem=*) mem_mb=${1#*=}; shift ;;
	--smp) [ $# -ge 2 ] || usage; smp=$2; shift 2 ;;
	--smp=*) smp=${1#*=}; shift ;;
	--pmem) [ $# -ge 2 ] || usage; pmem=$2; shift 2 ;;
	--pmem=*) pmem=${1#*=}; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	-*) echo "$prog: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "$prog: no command given" >&2; usage; }
[[ $timeout_s =~ ^[0-9]+$ ]] || die "--timeout wants seconds, got '$timeout_s'"
[[ $mem_mb =~ ^[0-9]+$ ]] || die "--mem wants MiB, got '$mem_mb'"
[[ $smp =~ ^[1-9][0-9]*$ ]] || die "--smp wants a count, got '$smp'"
[ "$mem_mb" -ge 512 ] || die "--mem $mem_mb is too small (at least 512)"
[ "$(id -u)" -eq 0 ] || die "must run as root (9p passthrough, apt-get)"
for t in qemu-system-x86_64 busybox cpio gzip modinfo apt-get dpkg-deb \
	flock timeout sha256sum awk; do
	command -v "$t" >/dev/null ||
		die "'$t' not found; run scripts/install-deps.sh"
done
[ -x /bin/busybox ] || die "/bin/busybox missing (package busybox-static)"

pmem_file='' pmem_size='' pmem_mb=0
if [ -n "$pmem" ]; then
	[[ $pmem == *:* ]] || die "--pmem wants FILE:SIZE (e.g. /tmp/pm.img:1G)"
	pmem_file=${pmem%:*} pmem_size=${pmem##*:}
	[[ $pmem_size =~ ^[0-9]+[mMgG]$ ]] ||
		die "--pmem SIZE wants a number with M or G, got '$pmem_size'"
	case $pmem_size in
	*[gG]) pmem_mb=$((${pmem_size%[gG]} * 1024)) ;;
	*[mM]) pmem_mb=${pmem_size%[mM]} ;;
	*) die "--pmem SIZE wants a M or G suffix, got '$pmem_size'" ;;
	esac
	[ "$pmem_mb" -ge 128 ] ||
		die "--pmem SIZE must be at least 128M, got '$pmem_size'"
	[ $((pmem_mb % 2)) -eq 0 ] || die "--pmem SIZE must be a multiple of 2M"
	mkdir -p "$(dirname "$pmem_file")"
	if [ ! -e "$pmem_file" ]; then
		truncate -s "${pmem_mb}M" "$pmem_file"
	fi
	have=$(stat -c %s "$pmem_file")
	[ "$have" -ge $((pmem_mb * 1048576)) ] ||
		truncate -s "${pmem_mb}M" "$pmem_file"
	pmem_file=$(realpath "$pmem_file")
fi

cwd_phys=$(pwd -P)
cwd_log=$PWD
[ "$cwd_phys" != / ] || die "run from a directory other than / (it is \
shared writable with the guest)"

# ---------------------------------------------------------------- cache ----
cache=${RS_VM_CACHE:-/var/cache/recstore-rxe-vm}
mkdir -p "$cache" || die "cannot create cache dir $cache"
exec 9>"$cache/.lock"
flock 9

if [ -n "${RS_VM_KERNEL_PKG:-}" ]; then
	kpkg=$RS_VM_KERNEL_PKG
else
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	if [ -z "$kpkg" ]; then
		# apt lists unavailable: fall back to the newest cached kernel
		kpkg=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete \
			-path '*/linux-image-*' -printf '%h\n' | sort -V |
			tail -1 | xargs -r basename)
		[ -n "$kpkg" ] || die "cannot find which kernel package \
linux-image-amd64 depends on (apt-cache depends failed; try apt-get update)"
	fi
fi
kver=${kpkg#linux-image-}
kdir=$cache/$kpkg
if [ ! -e "$kdir/.complete" ]; then
	note "fetching and unpacking $kpkg (once; cached in $cache)"
	rm -rf "$kdir" "$kdir.tmp"
	mkdir -p "$kdir.tmp/root"
	(cd "$kdir.tmp" && apt-get download "$kpkg" >/dev/null 2>dl.log) ||
		die "apt-get download $kpkg failed: $(tail -3 "$kdir.tmp/dl.log")"
	dpkg-deb -x "$kdir.tmp"/"$kpkg"_*.deb "$kdir.tmp/root" ||
		die "dpkg-deb -x failed for $kpkg"
	mv "$kdir.tmp" "$kdir"
	touch "$kdir/.complete"
fi
touch "$kdir/.complete"		# last use, for pruning
# prune what no run has used for 30 days (older kernels, old initramfs)
find "$cache" -maxdepth 1 -name 'initrd-*' -mtime +30 -delete 2>/dev/null || :
for d in "$cache"/linux-image-*/; do
	[ -e "$d/.complete" ] && [ -z "$(find "$d/.complete" -mtime +30)" ] ||
		[ "$d" = "$kdir/" ] || rm -rf "$d"
done
vmlinuz=$kdir/root/boot/vmlinuz-$kver
moddir=$kdir/root/lib/modules/$kver
[ -f "$vmlinuz" ] || die "no kernel image at $vmlinuz"
[ -d "$moddir/kernel" ] || die "no modules at $moddir"

# Boot the uncompressed ELF kernel through its PVH entry when it has one:
# decompressing vmlinuz under TCG costs several seconds per boot.
extract_vmlinux() {
	local magic off prog
	# (no NUL bytes in bash strings: the magics are cut short)
	for magic in $'\xfd7zXZ:xz -dc' $'\x28\xb5\x2f\xfd:zstd -dcq' \
		$'\x1f\x8b\x08:gzip -dc'; do
		prog=${magic#*:}
		for off in $(LC_ALL=C grep -abo "${magic%%:*}" "$vmlinuz" |
			cut -d: -f1 | head -3); do
			tail -c +$((off + 1)) "$vmlinuz" | $prog >"$1" 2>/dev/null
			[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = 177ELF ] ||
				continue
			readelf -n "$1" 2>/dev/null | grep -q 'Unknown note type: (0x00000012)' &&
				return 0
		done
	done
	return 1
}
kimage=$vmlinuz
if [ ! -e "$kdir/.vmlinux-done" ]; then
	if command -v readelf >/dev/null && extract_vmlinux "$kdir/vmlinux.tmp"
	then
		mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"
	else
		rm -f "$kdir/vmlinux.tmp"
		note "no PVH-bootable vmlinux in $kpkg; booting vmlinuz"
	fi
	touch "$kdir/.vmlinux-done"
fi
[ ! -s "$kdir/vmlinux" ] || kimage=$kdir/vmlinux

# Modules to load, in dependency order (read from each module's depends=).
# crc32_generic: rxe allocates a crc32 shash ("rdma link add" fails without).
# rdma_ucm & co: /dev/infiniband/rdma_cm for librdmacm.
base_mods="virtio_pci virtio_console 9pnet_virtio 9p crc32_generic rdma_rxe
ib_uverbs veth configfs rdma_ucm"
pmem_mods="libnvdimm nd_btt nd_pmem nfit device_dax dax_pmem crc32c_generic
ext4"

declare -A mod_path=() mod_seen=()
mod_order=()
resolve_mod() {
	local m=${1//-/_} d deps
	[ -z "${mod_seen[$m]:-}" ] || return 0
	mod_seen[$m]=1
	if [ -z "${mod_path[$m]:-}" ]; then
		grep -q "/$m.ko\$" "$moddir/modules.builtin" 2>/dev/null &&
			return 0
		die "kernel module $m not found in $kpkg"
	fi
	deps=$(modinfo -F depends "${mod_path[$m]}")
	for d in ${deps//,/ }; do
		resolve_mod "$d"
	done
	mod_order+=("$m")
}
resolve_all() {
	local f n m
	while IFS= read -r f; do
		n=${f##*/}
		n=${n%.ko}
		mod_path[${n//-/_}]=$f
	done < <(find "$moddir/kernel" -name '*.ko')
	for m in $base_mods; do resolve_mod "$m"; done
	base_order=("${mod_order[@]}")
	mod_order=()
	for m in $pmem_mods; do resolve_mod "$m"; done
	pmem_order=("${mod_order[@]+"${mod_order[@]}"}")
}

# The guest's /init (busybox sh). It loads modules, mounts the host root,
# the control share and the work share, then chroots into the host root and
# runs the per-run stage-2 script (bash, written below) from the control
# share. The control share sits at /run/rxe-vm in the chroot.
# 9p caching: the read-only host root uses cache=loose (each program start
# re-read every library over 9p otherwise: 3-5x slower execs); the writable
# work share uses cache=mmap, without which MAP_SHARED writable mappings of
# its files fail with EINVAL; the control share is uncached.
read -r -d '' init_script <<'EOF' || true
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
log() { read -r up _ </proc/uptime; echo "rxe-vm(init) [$up]: $*"; }
halt_now() {
	sync
	poweroff -f
	echo o > /proc/sysrq-trigger
	sleep 5
}
fail() { log "FATAL: $*"; halt_now; }
for m in $(cat /modules.base); do
	insmod /lib/modules/$m.ko || log "insmod $m failed"
done
log "modules loaded"
mkdir -p /host
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /host ||
	fail "cannot mount the host root (9p)"
mount -t tmpfs -o mode=1777 tmpfs /host/tmp || fail "tmpfs /tmp"
mount -t tmpfs -o mode=755 tmpfs /host/run || fail "tmpfs /run"
mount -t tmpfs -o mode=1777 tmpfs /host/var/tmp 2>/dev/null
mount -o bind /proc /host/proc
mount -o bind /sys /host/sys
mount -o bind /dev /host/dev
mkdir -p /host/dev/shm /host/dev/pts /host/dev/hugepages
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t devpts devpts /host/dev/pts
mount -t hugetlbfs hugetlbfs /host/dev/hugepages 2>/dev/null
mkdir -p /host/run/rxe-vm
mount -t 9p -o trans=virtio,version=9p2000.L ctl /host/run/rxe-vm ||
	fail "cannot mount the control share (9p)"
ctl=/host/run/rxe-vm
if [ -e $ctl/pmem ]; then
	for m in $(cat /modules.pmem); do
		insmod /lib/modules/$m.ko || log "insmod $m failed"
	done
fi
read -r cwd < $ctl/cwd
mkdir -p "/host$cwd" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,cache=mmap work "/host$cwd" ||
	fail "cannot mount the work share at $cwd (9p)"
mkfifo /host/run/rxe-vm-nap
log "mounts done, stage 2"
chroot /host /bin/bash /run/rxe-vm/stage2.sh
log "stage 2 returned $?"
halt_now
EOF

# the initramfs is keyed on this script (init, module lists) and the kernel
key=$( {
	cat "${BASH_SOURCE[0]}"
	echo "$kver"
} | sha256sum | cut -c1-16)
initrd=$cache/initrd-$kver-$key.cpio.gz
if [ ! -s "$initrd" ]; then
	note "building initramfs $(basename "$initrd")"
	resolve_all
	stage=$(mktemp -d "$cache/initrd.XXXXXX")
	mkdir -p "$stage"/{bin,dev,proc,sys,lib/modules}
	cp /bin/busybox "$stage/bin/busybox"
	printf '%s\n' "$init_script" >"$stage/init"
	chmod 755 "$stage/init"
	for m in "${base_order[@]}" "${pmem_order[@]}"; do
		cp "${mod_path[$m]}" "$stage/lib/modules/$m.ko"
	done
	printf '%s\n' "${base_order[@]}" >"$stage/modules.base"
	printf '%s\n' "${pmem_order[@]}" >"$stage/modules.pmem"
	(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet |
		gzip -1) >"$initrd.tmp" || die "cpio of initramfs failed"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
fi
touch "$initrd"			# last use, for pruning
flock -u 9

# ------------------------------------------------------------ per run ------
ctl=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
qemu_pid='' out_pid='' err_pid='' ready_pid='' dog_pid=''
cleanup() {
	local p
	# qemu_pid is timeout(1)'s, which passes the signal on to QEMU
	for p in $dog_pid $ready_pid $qemu_pid $out_pid $err_pid; do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$ctl"
}
trap cleanup EXIT
trap 'echo "$prog: interrupted, stopping the guest" >&2; exit 130' INT
trap 'echo "$prog: terminated, stopping the guest" >&2; exit 143' TERM

printf '%s\n' "$cwd_phys" >"$ctl/cwd"
[ -z "$pmem" ] || touch "$ctl/pmem"
hugepages=${RS_VM_HUGEPAGES:-256}
[[ $hugepages =~ ^[0-9]+$ ]] || die "RS_VM_HUGEPAGES wants a count"
[ $((hugepages * 2 * 8)) -le "$mem_mb" ] || hugepages=$((mem_mb / 16))

{
	echo '#!/bin/bash'
	echo '# stage 2 of the rxe-vm guest, runs chrooted in the host root'
	printf 'cwd_log=%q\n' "$cwd_log"
	printf 'hugepages=%q\n' "$hugepages"
	printf 'pmem=%q\n' "$pmem"
	printf 'cmd=('
	printf '%q ' "$@"
	printf ')\n'
	echo 'cmd_env=('
	printf '%q\n' "PATH=$PATH"
	while IFS= read -r -d '' kv; do
		case $kv in
		RS_RDMA_* | RS_PMEM_DEV=* | RS_VM_*) ;;
		RS_* | CTEST_* | [A-Z]SAN_OPTIONS=* | UBSAN_OPTIONS=*)
			printf '%q\n' "$kv" ;;
		esac
	done < <(env -0)
	echo ')'
	cat <<'EOF'
# Every host binary run here is loaded over 9p, which is slow under
# emulation (about 0.2 s each, seconds on a loaded host): polling and
# bookkeeping use bash builtins only; ip runs in batch mode.
set -u
ctl=/run/rxe-vm
PATH=/usr/sbin:/usr/bin:/sbin:/bin
exec 5<>/run/rxe-vm-nap		# a fifo nobody writes: read -t sleeps
nap() { read -r -t "$1" -u 5 _ || true; }
slog() {
	local up _
	read -r up _ </proc/uptime
	echo "rxe-vm(stage2) [$up]: $*"
}
fail() {
	echo "rxe-vm(guest): set-up failed: $*" >&4
	slog "set-up failed: $*"
	echo setup-failed >"$ctl/rc"
	exit 1
}
# CMD's stdout/stderr: the virtio-serial ports named rs.stdout / rs.stderr
exec 4>/dev/console
out= err=
for ((i = 0; i < 100; i++)); do
	for p in /sys/class/virtio-ports/*; do
		[ -r "$p/name" ] || continue
		read -r name <"$p/name"
		case $name in
		rs.stdout) out=/dev/${p##*/} ;;
		rs.stderr) err=/dev/${p##*/} ;;
		esac
	done
	[ -n "$out" ] && [ -n "$err" ] && [ -c "$out" ] && [ -c "$err" ] && break
	nap 0.1
done
[ -n "$err" ] && [ -c "$err" ] && exec 4>"$err"
[ -n "$out" ] && [ -c "$out" ] && exec 3>"$out" ||
	fail "no virtio-serial port rs.stdout"

echo "$hugepages" >/proc/sys/vm/nr_hugepages 2>/dev/null &
huge_pid=$!
slog "network"
ip -batch - <<-'NET' || fail "veth pair / 10.77.0.1 on veth0 (ip -batch)"
	link set lo up
	link add veth0 type veth peer name veth1
	addr add 10.77.0.1/24 dev veth0
	link set veth0 up
	link set veth1 up
NET
rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0"
port=/sys/class/infiniband/rxe0/ports/1
want_gid=0000:0000:0000:0000:0000:ffff:0a4d:0001
state= gid=
for ((i = 0; i < 300; i++)); do
	read -r state <$port/state 2>/dev/null
	read -r gid <$port/gids/1 2>/dev/null
	[[ $state == *ACTIVE ]] && [ "$gid" = "$want_gid" ] && break
	nap 0.1
done
[[ $state == *ACTIVE ]] || fail "rxe0 port 1 is not ACTIVE: $state"
[ "$gid" = "$want_gid" ] || fail "GID index 1 is $gid, not 10.77.0.1"
ips="10.77.0.2 10.77.0.3 10.77.0.4 10.77.0.5"
for a in $ips; do echo "addr add $a/24 dev veth0"; done |
	ip -batch - || fail "extra addresses on veth0"
extra_env=()
if [ -n "$pmem" ]; then
	# A file that was made devdax before keeps its info block: the kernel
	# brings /dev/dax0.0 back by itself, and it must not be reconfigured
	# (that could move or wipe what a crash test left there).
	for ((i = 0; i < 30; i++)); do
		[ -c /dev/dax0.0 ] && break
		nap 0.1
	done
	if [ -c /dev/dax0.0 ]; then
		slog "pmem: /dev/dax0.0 already devdax"
	else
		slog "pmem: ndctl create-namespace -m devdax"
		[ -d /sys/bus/nd/devices/namespace0.0 ] ||
			fail "no nvdimm namespace0.0 in the guest"
		ndctl create-namespace -f -e namespace0.0 -m devdax >/dev/null ||
			fail "ndctl create-namespace -f -e namespace0.0 -m devdax"
		for ((i = 0; i < 50; i++)); do
			[ -c /dev/dax0.0 ] && break
			nap 0.1
		done
		[ -c /dev/dax0.0 ] || fail "no /dev/dax0.0 after ndctl"
	fi
	extra_env+=(RS_PMEM_DEV=/dev/dax0.0)
fi
wait $huge_pid
read -r nhuge </proc/sys/vm/nr_hugepages
read -r gid0 <$port/gids/0
slog "rxe0 up (gid0 $gid0, gid1 $gid), hugepages $nhuge"
read -r up _ </proc/uptime
echo "$up" >"$ctl/ready"
read -r cwd_phys <"$ctl/cwd"
cd "$cwd_log" 2>/dev/null || cd "$cwd_phys" || fail "cd $cwd_phys"
ulimit -l unlimited
ulimit -c 0
(
	for v in $(compgen -e); do unset "$v" 2>/dev/null; done
	export "${cmd_env[@]}" HOME=/root TERM=dumb RS_RDMA_DEV=rxe0 \
		RS_RDMA_IP=10.77.0.1 RS_RDMA_IPS="$ips" RS_RDMA_GID_INDEX=1 \
		"${extra_env[@]}"
	exec 3>&- 4>&- 5<&-
	exec "${cmd[@]}"
) </dev/null >&3 2>&4
rc=$?
exec 3>&- 4>&-
slog "command exited with status $rc"
echo "$rc" >"$ctl/rc"
EOF
} >"$ctl/stage2.sh"

# Copy a fifo to stdout. If stdout goes away (`... | head`), keep draining
# to /dev/null: a fifo without a reader throttles the guest's port for good
# and CMD would block until the timeout.
drain() {
	cat "$1" && return 0
	exec cat "$1" >/dev/null 2>&1
}
mkfifo "$ctl/out" "$ctl/err"

machine=pc
memopt=${mem_mb}M
pmem_args=()
if [ -n "$pmem" ]; then
	machine=pc,nvdimm=on
	memopt="${mem_mb}M,slots=2,maxmem=$((mem_mb + pmem_mb + 1024))M"
	# shellcheck disable=SC2054 # commas belong to QEMU's option syntax
	pmem_args=(-object
		"memory-backend-file,id=mem1,share=on,mem-path=$pmem_file,size=${pmem_mb}M"
		-device nvdimm,id=nvdimm1,memdev=mem1)
fi

# mitigations=off: syscalls and page-table switches are costly under TCG;
# tsc=reliable: clock_gettime stays in the vDSO instead of trapping to an
# emulated HPET (QEMU's TCG TSC follows the host clock).
kcmdline="console=ttyS0 quiet loglevel=5 panic=1 rdinit=/init mitigations=off"
kcmdline+=" tsc=reliable no_timer_check i8042.nokbd i8042.noaux"
kcmdline+=" ${RS_VM_APPEND:-}"
# shellcheck disable=SC2054 # commas belong to QEMU's option syntax
qemu_args=(
	-name rxe-vm -machine "$machine" -accel tcg -cpu max
	-m "$memopt" -smp "$smp" -nodefaults -no-user-config -no-reboot
	-display none
	-kernel "$kimage" -initrd "$initrd"
	-append "$kcmdline"
	-chardev "file,id=con,path=$ctl/console.log" -serial chardev:con
	-device virtio-serial-pci,id=vser
	-chardev "file,id=out,path=$ctl/out"
	-device virtserialport,bus=vser.0,chardev=out,name=rs.stdout
	-chardev "file,id=err,path=$ctl/err"
	-device virtserialport,bus=vser.0,chardev=err,name=rs.stderr
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$ctl,mount_tag=ctl,security_model=none,multidevs=remap"
	-virtfs "local,path=$cwd_phys,mount_tag=work,security_model=none,multidevs=remap"
	"${pmem_args[@]}"
)

# One boot: sets qrc (timeout(1)'s status) and the time spent.
boot_once() {
	local limit=$1 i
	rm -f "$ctl/ready" "$ctl/rc"
	drain "$ctl/out" &
	out_pid=$!
	drain "$ctl/err" 2>/dev/null >&2 &
	err_pid=$!
	(
		while [ ! -s "$ctl/ready" ]; do sleep 0.2; done
		t=$(date +%s.%N)
		note "$(printf 'guest up, rxe0 ready after %.1f s (guest uptime %s s)' \
			"$(awk "BEGIN { print $t - $t0 }")" "$(cat "$ctl/ready")")"
	) &
	ready_pid=$!
	# timeout(1) puts QEMU in a process group of its own: a signal to ours
	# does not reach it. So QEMU runs in the background (the traps can run
	# while we wait) and a watchdog stops it if this script is killed.
	timeout -k 10 "$limit" qemu-system-x86_64 "${qemu_args[@]}" \
		</dev/null >"$ctl/qemu.log" 2>&1 &
	qemu_pid=$!
	(
		trap - EXIT INT TERM
		while kill -0 $$ 2>/dev/null; do sleep 2; done
		kill "$qemu_pid" 2>/dev/null
	) </dev/null >/dev/null 2>&1 &
	dog_pid=$!
	set +e
	wait "$qemu_pid"
	qrc=$?
	set -e
	qemu_pid=''
	kill "$dog_pid" 2>/dev/null || true
	dog_pid=''
	kill "$ready_pid" 2>/dev/null || true
	wait "$ready_pid" 2>/dev/null || true
	ready_pid=''
	# the readers end at QEMU's exit (EOF); give them time to write it out
	for ((i = 0; i < 100; i++)); do
		kill -0 "$out_pid" 2>/dev/null ||
			kill -0 "$err_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$out_pid" "$err_pid" 2>/dev/null || true
	wait "$out_pid" "$err_pid" 2>/dev/null || true
	out_pid='' err_pid=''
}

# A guest that dies before CMD starts (early-boot hiccups of emulated timers
# on a loaded host, set-up steps that time out) is booted again, up to 3
# times in all, within the one --timeout budget: CMD never ran, so this is
# safe.
t0=$(date +%s.%N)
note "booting guest (kernel $kver, ${mem_mb} MiB, $smp vCPU, timeout ${timeout_s}s)"
attempt=1
while :; do
	elapsed=$(awk "BEGIN { printf \"%d\", $(date +%s.%N) - $t0 }")
	limit=$((timeout_s - elapsed))
	[ "$timeout_s" -ne 0 ] || limit=0
	boot_once "$limit"
	[ "$qrc" -ne 124 ] && [ "$qrc" -ne 137 ] || break
	[ ! -e "$ctl/ready" ] || break
	[ "$attempt" -lt 3 ] || break
	elapsed=$(awk "BEGIN { printf \"%d\", $(date +%s.%N) - $t0 }")
	[ "$timeout_s" -eq 0 ] || [ $((timeout_s - elapsed)) -ge 60 ] || break
	cp "$ctl/console.log" "$ctl/console.$attempt.log" 2>/dev/null || :
	why=$(grep -m1 -E 'panic|set-up failed|FATAL' "$ctl/console.log" \
		2>/dev/null | cut -c1-160 || :)
	note "guest failed before the command started (attempt $attempt/3${why:+: $why}); booting again"
	attempt=$((attempt + 1))
done
t1=$(date +%s.%N)

show_console() {
	echo "$prog: --- last guest console lines ($1) ---" >&2
	tail -n 30 "$ctl/console.log" >&2 2>/dev/null || true
	[ -s "$ctl/qemu.log" ] && {
		echo "$prog: --- qemu output ---" >&2
		tail -n 20 "$ctl/qemu.log" >&2
	}
	echo "$prog: ---" >&2
}
[ "${RS_VM_VERBOSE:-0}" != 1 ] || show_console "RS_VM_VERBOSE"
[ -z "${RS_VM_CONSOLE:-}" ] || cp "$ctl/console.log" "$RS_VM_CONSOLE" ||
	echo "$prog: warning: cannot save the console to $RS_VM_CONSOLE" >&2

total=$(awk "BEGIN { print $t1 - $t0 }")
if [ "$qrc" -eq 124 ] ||
	{ [ "$qrc" -eq 137 ] && [ "${total%.*}" -ge "$timeout_s" ]; }; then
	show_console "timeout"
	echo "$prog: error: guest timed out after ${timeout_s}s (--timeout," \
		"boot included); killed QEMU" >&2
	exit 124
fi
if [ ! -s "$ctl/rc" ]; then
	show_console "no exit status"
	echo "$prog: error: QEMU exited (status $qrc) without an exit status" \
		"from the guest after $(printf %.1f "$total") s (guest crashed" \
		"or set-up failed; RS_VM_CONSOLE=FILE keeps the whole console)" >&2
	exit 125
fi
rc=$(cat "$ctl/rc")
if [ "$rc" = setup-failed ]; then
	show_console "set-up failed"
	echo "$prog: error: guest set-up failed (see above)" >&2
	exit 125
fi
note "$(printf 'done in %.1f s, command exit status %s' "$total" "$rc")"
exit "$rc"
