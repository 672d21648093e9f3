#!/usr/bin/env bash
# On the GPU machine (2 GPUs, one rank each): the GPU-buffer tests and the side-by-side
# benchmark of docs/benchmarks/gpu-buffers.md, everything written under $OUT. One device call:
#   bash tools/gpu_machine_run.sh bash tools/gpu_buffers_device.sh
set -uo pipefail
out=${OUT:-.}
comm-bench doctor > "$out/doctor.txt" 2>&1
grep -A5 '^\[buffers' "$out/doctor.txt"
python3 -m pytest -m gpu -v -rA -p no:cacheprovider tests/test_gpu_buffers.py > "$out/gpu_buffers_tests.log" 2>&1
echo "tests rc=$?"; grep -E "FAILED|ERROR|passed|failed" "$out/gpu_buffers_tests.log" | tail -20
python3 tools/bench_gpu_buffers.py --lib cupy --rounds 2 -n 10 -b 64K -e 64M -f 32 \
  -o "$out/gpu-buffers.md" --json "$out/gpu-buffers.json" > "$out/bench.log" 2>&1
echo "bench rc=$?"; tail -3 "$out/bench.log"
