#!/usr/bin/env bash
# comm-bench's nccl transport against nccl-tests itself (NVIDIA/nccl-tests, built here from
# the source folder you give, never vendored): world size 1, every op both have, alternating
# the two tools round by round, with and without -G; then tools/nccl_tests_compare.py.
#
#   tools/nccl_tests_parity.sh NCCL_TESTS_SRC OUTDIR [ROUNDS] [MAXBYTES] [GRAPHS]
#
# Run it from a built comm-bench checkout (tools/gpu_machine_run.sh builds one). nccl-tests
# is built against the libnccl the nccl transport loads first (the nvidia-nccl wheel), with
# the nvcc on PATH (BUILD_ONLY=1: build and stop). Raw outputs and the comparison land in OUTDIR.
set -euo pipefail
src=$(cd "$1" && pwd); out=$2; rounds=${3:-3}; maxb=${4:-1G}; graphs=${5:-"0 10"}
iters=${ITERS:-20}; warm=${WARMUP:-5}; reg=${REGISTER:-0}  # REGISTER: -R for both tools
mkdir -p "$out"; out=$(cd "$out" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# NCCL_HOME for nccl-tests' Makefile: the wheel's include/ (nccl.h, nccl_device/) and its libnccl
wheel=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
home=${NCCL_TESTS_HOME:-/tmp/nccl_home}; build=${NCCL_TESTS_BUILD:-/tmp/nccl-tests-build}
mkdir -p "$home/lib"; cp -r "$wheel/include" "$home/"
ln -sf "$wheel/lib/libnccl.so.2" "$home/lib/libnccl.so.2"; ln -sf libnccl.so.2 "$home/lib/libnccl.so"
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
flock /tmp/nccl-tests-build.lock make -C "$src" -j"$(nproc)" MPI=0 CUDA_HOME="$cuda" NCCL_HOME="$home" BUILDDIR="$build" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" >"$out/nccl_tests_build.log" 2>&1 \
  || { tail -30 "$out/nccl_tests_build.log"; exit 1; }
[ -n "${BUILD_ONLY:-}" ] && exit 0
export LD_LIBRARY_PATH="$wheel/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

ops="all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv"
cb_ops=$(echo $ops | tr ' ' ,)
cmds="$out/commands.txt"; : >"$cmds"
run_cb() {  # $1 graph, $2 round
  local c=(python3 -m comm_bench sweep -t nccl --nprocs 1 --op "$cb_ops" -b 8 -e "$maxb" -f 2 -n "$iters" -w "$warm"
           -G "$1" -R "$reg" --no-progress -o "$out/cb_G$1_r$2.json")
  echo "${c[*]}" >>"$cmds"; "${c[@]}" >"$out/cb_G$1_r$2.txt" 2>&1
}
run_ref() {
  for op in $ops; do
    local c=("$build/${op}_perf" -b 8 -e "$maxb" -f 2 -g 1 -n "$iters" -w "$warm" -G "$1" -R "$reg" -c 0)
    echo "${c[*]}" >>"$cmds"; "${c[@]}" >"$out/ref_${op}_G$1_r$2.txt" 2>&1
  done
}
for r in $(seq 1 "$rounds"); do
  for g in $graphs; do  # alternate which tool goes first
    if (( r % 2 )); then run_cb "$g" "$r"; run_ref "$g" "$r"; else run_ref "$g" "$r"; run_cb "$g" "$r"; fi
    echo "round $r -G $g done"
  done
done
python3 "$(dirname "$0")/nccl_tests_compare.py" "$out" | tee "$out/summary.md"
