#!/bin/bash
# The GPU-machine run behind docs/benchmarks/health.md, from the repository root:
#   bash docs/benchmarks/health-h100/run.sh OUTDIR [WHEELS]
# WHEELS: the pure-Python packages comm-bench lacks there (no network), see health.md.
set -u
out=${1:?usage: run.sh OUTDIR [WHEELS]}; wheels=${2:-.whl}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export COMM_BENCH_CUDA_ARCH=${COMM_BENCH_CUDA_ARCH:--gencode=arch=compute_90,code=sm_90} NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
py=$(command -v python3)
# the native build needs nvcc; on the GPU machine it is not on PATH
command -v nvcc >/dev/null || for d in /usr/local/cuda /usr/local/cuda-13.0; do
  [ -x "$d/bin/nvcc" ] && export CUDA_HOME=$d PATH=$d/bin:$PATH && break; done
settings() {   # what a reading must never change: limits, clocks settings, modes
  nvidia-smi --query-gpu=name,power.limit,enforced.power.limit,clocks.applications.graphics,clocks.applications.memory,persistence_mode,compute_mode,ecc.mode.current --format=csv,noheader
}
date -u; nvidia-smi -L; "$py" -c 'import pynvml; print("nvidia-ml-py", pynvml.__file__)'
before=$(settings); echo "settings before: $before"
time bash tools/install.sh --into-env "$py" --wheels "$wheels" || exit 1
cb() { "$py" -m comm_bench "$@"; }
cb doctor > "$out/doctor.txt"; cb doctor --json > "$out/doctor.json"
sed -n '/^\[health\]/,/^\[buffers\]/p' "$out/doctor.txt"
# one document kept whole: its ranks[0].health holds the before/after NVML readings
cb sweep -t nccl --nprocs 1 -b 8 -e 256M -f 4 -n 20 --no-progress -o "$out/nccl_health.json"
cb validate "$out/nccl_health.json" > "$out/validate.txt"; echo "validate exit $?" >> "$out/validate.txt"
cat "$out/validate.txt"
# paired runs, alternating with (1) and without (0) the health readings
w=$(mktemp -d)
for i in 1 2 3; do
  for h in 1 0; do
    COMM_BENCH_HEALTH=$h cb sweep -t cuda --nprocs 1 --pattern collective --op d2d,h2d -b 64M -e 256M -f 4 \
      -n 20 --no-progress -o "$w/cuda_h${h}_$i.json" > /dev/null || echo "cuda h=$h run $i failed"
    COMM_BENCH_HEALTH=$h cb sweep -t nccl --nprocs 1 --op all_reduce -b 64M -e 256M -f 4 -n 20 \
      --no-progress -o "$w/nccl_h${h}_$i.json" > /dev/null || echo "nccl h=$h run $i failed"
  done
done
"$py" - "$w" > "$out/paired.txt" <<'PY'
import glob, json, os, statistics, sys
w = sys.argv[1]
rows = {}
for p in sorted(glob.glob(os.path.join(w, "*.json"))):
    t, h, i = os.path.basename(p)[:-5].split("_")
    d = json.load(open(p))
    has = all("health" in r for r in d["ranks"])
    for r in d["results"]:
        # one rank: all_reduce's busbw is 0 by its bus factor, so algbw is compared (copies: busbw = algbw)
        rows.setdefault((t, r["op"], r["size"], h), []).append((r["algbw"], has))
print("transport op size health runs median_algbw_GBs min max health_block_in_doc")
keys = sorted({k[:3] for k in rows})
for k in keys:
    for h in ("h1", "h0"):
        v = rows.get(k + (h,), [])
        g = [x for x, _ in v]
        if g:
            print(*k, h, len(g), f"{statistics.median(g):.2f}", f"{min(g):.2f}", f"{max(g):.2f}", all(b for _, b in v) if h == "h1" else not any(b for _, b in v))
    a, b = [[x for x, _ in rows.get(k + (h,), [])] for h in ("h1", "h0")]
    if a and b:
        print("   ratio with/without health:", f"{statistics.median(a) / statistics.median(b):.4f}")
PY
cat "$out/paired.txt"
tar czf "$out/paired_docs.tar.gz" -C "$w" .
after=$(settings); echo "settings after:  $after"
[ "$before" = "$after" ] && echo "settings unchanged" || echo "SETTINGS CHANGED"
"$py" - "$out/nccl_health.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = d["ranks"][0].get("health")
print(json.dumps(h, indent=1)[:6000] if h else "NO HEALTH BLOCK")
PY
date -u
