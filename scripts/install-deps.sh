#!/usr/bin/env bash
# install-deps.sh - install every Debian package the project builds, tests and
# benchmarks with. Idempotent; quiet when everything is already there.
set -euo pipefail

pkgs=(
  build-essential clang libclang-rt-14-dev cmake pkg-config git
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils
  rdmacm-utils perftest
  libpmem-dev libhwloc-dev libcmocka-dev libjansson-dev libxxhash-dev
  libmicrohttpd-dev libsodium-dev libcurl4-openssl-dev libzstd-dev
  etcd-server etcd-client
  qemu-system-x86 busybox-static cpio iproute2 kmod ndctl
  valgrind curl openssl procps python3
  python3-dev python3-numpy python3-torch
  python3-pip python3-setuptools python3-wheel python3-venv
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
