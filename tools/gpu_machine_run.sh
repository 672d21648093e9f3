#!/usr/bin/env bash
# On the GPU machine (no network): build comm-bench in place, then run "$@". NVLink
# multicast stays off in every process. (The NCCL reference is nccl-tests itself, built by
# tools/nccl_tests_parity.sh from a source folder you give.)
set -euo pipefail
# The machine installs with --no-deps (no network): pure-Python dependencies it lacks
# (fastjsonschema, junitparser) travel in devdeps/ (cp -r from .venv's site-packages; run's
# carry: ["devdeps"]). Without fastjsonschema a failed run's own error is hidden behind an
# internal error while its results file is finalized.
[ -d devdeps ] && export PYTHONPATH="$PWD/devdeps${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import fastjsonschema, junitparser" 2>/dev/null || echo "warning: fastjsonschema/junitparser missing here: see devdeps/ above" >&2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
COMM_BENCH_NO_IBVERBS=1 COMM_BENCH_CUDA_ARCH="-gencode=arch=compute_90,code=sm_90" \
  python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/pip.log 2>&1 || { tail -20 /tmp/pip.log; exit 1; }
"$@"
