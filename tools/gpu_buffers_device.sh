#!/usr/bin/env bash
# On the GPU machine (2 GPUs, one rank each): the GPU-buffer tests and the side-by-side
# benchmark of docs/benchmarks/gpu-buffers.md, everything written under $OUT. One device call
# (~7 min with the build; devdeps/ as tools/gpu_machine_run.sh says, carry: ["devdeps"]):
#   bash tools/gpu_machine_run.sh bash tools/gpu_buffers_device.sh
set -uo pipefail
out=${OUT:-.}
comm-bench doctor > "$out/doctor.txt" 2>&1
grep -A6 '^\[buffers' "$out/doctor.txt"
python3 -m pytest -m gpu -v -rA -p no:cacheprovider tests/test_gpu_buffers.py > "$out/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests.log" | tail -20
python3 tools/bench_gpu_buffers.py --lib cupy --rounds 2 -n 20 -b 64K -e 64M -f 32 \
  -o "$out/gpu-buffers-cupy.md" --json "$out/gpu-buffers-cupy.json" > "$out/bench-cupy.log" 2>&1
echo "cupy bench rc=$?"
python3 tools/bench_gpu_buffers.py --lib numba --transports mpi --rounds 1 -n 20 -b 64K -e 64M -f 32 \
  -o "$out/gpu-buffers-numba.md" --json "$out/gpu-buffers-numba.json" > "$out/bench-numba.log" 2>&1
echo "numba bench rc=$?"
