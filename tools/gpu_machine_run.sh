#!/usr/bin/env bash
# On the GPU machine (no network): build comm-bench in place and the NCCL reference
# (tools/nccl_reference.cu) against the nvidia-nccl wheel's libnccl, the one the nccl
# transport loads first. Then runs "$@". NVLink multicast stays off in every process.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
COMM_BENCH_NO_IBVERBS=1 COMM_BENCH_CUDA_ARCH="-gencode=arch=compute_90,code=sm_90" \
  python3 -m pip install -q --no-build-isolation --no-deps -e . >/tmp/pip.log 2>&1 || { tail -20 /tmp/pip.log; exit 1; }
nccl=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
nvcc -O2 -std=c++17 tools/nccl_reference.cu -o nccl_reference -I"$nccl/include" -L"$nccl/lib" \
  -l:libnccl.so.2 -Xlinker -rpath="$nccl/lib" -lpthread
"$@"
