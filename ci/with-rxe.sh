#!/usr/bin/env bash
# with-rxe.sh CMD [ARGS...] - run CMD where a Soft-RoCE device exists, with
# the RS_RDMA_* variables of docs/DEVELOPING.md set:
# - if RS_RDMA_DEV is already set and that device exists: CMD runs as is;
# - else if the kernel has rdma_rxe (ci/rxe-setup.sh succeeds): natively;
# - else inside a QEMU guest (ci/rxe-vm.sh), in the same cwd.
# Options for the guest come from the environment: RS_VM_TIMEOUT (seconds),
# RS_VM_MEM (MiB), RS_VM_SMP, RS_VM_PMEM (FILE:SIZE); see ci/rxe-vm.sh.
# RS_WITH_RXE=vm forces the guest, RS_WITH_RXE=native forbids it.
# The exit status is CMD's (or rxe-vm.sh's: 124 timeout, 125 set-up).
set -euo pipefail

ci=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 1 ] || {
	echo "usage: ci/with-rxe.sh CMD [ARGS...]" >&2
	exit 2
}
mode=${RS_WITH_RXE:-auto}

if [ "$mode" != vm ] && [ -n "${RS_RDMA_DEV:-}" ] &&
	[ -e "/sys/class/infiniband/$RS_RDMA_DEV" ]; then
	exec "$@"
fi

if [ "$mode" != vm ]; then
	if envs=$(bash "$ci/rxe-setup.sh" 2>"${TMPDIR:-/tmp}/rxe-setup.$$"); then
		rm -f "${TMPDIR:-/tmp}/rxe-setup.$$"
		eval "$envs"
		echo "with-rxe: native Soft-RoCE device $RS_RDMA_DEV" >&2
		exec "$@"
	fi
	why=$(cat "${TMPDIR:-/tmp}/rxe-setup.$$" 2>/dev/null || true)
	rm -f "${TMPDIR:-/tmp}/rxe-setup.$$"
	if [ "$mode" = native ]; then
		echo "with-rxe: no native Soft-RoCE (RS_WITH_RXE=native): $why" >&2
		exit 1
	fi
	echo "with-rxe: no native rdma_rxe (${why#rxe-setup: }); using a QEMU" \
		"guest" >&2
fi

vm_args=()
[ -z "${RS_VM_PMEM:-}" ] || vm_args+=(--pmem "$RS_VM_PMEM")
exec bash "$ci/rxe-vm.sh" "${vm_args[@]+"${vm_args[@]}"}" -- "$@"
