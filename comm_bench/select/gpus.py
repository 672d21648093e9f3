"""GPU data-sheet figures the selection model uses: dense 16-bit tensor-core peak and
memory bandwidth and size. One table, matched by name as substrings, longest first.

peak_tflops: dense bf16 (fp16 on V100) tensor-core peak, TFLOP/s; fp32 work runs at half
(TF32 dense). fp8_tflops: dense FP8 peak where the GPU has FP8 tensor cores (H100 / H200
SXM 1,979; B200 4,500; L40S 733). hbm_tbs: memory bandwidth, TB/s; mem_gb: memory, GB (1e9 B). Sources: NVIDIA data sheets (A100 80GB
SXM 2.039 TB/s, A100 40GB 1.555; H100 SXM 3.35; H200 4.8; B200 8; L40S 0.864; A10
0.6; V100 SXM2 0.9)."""
from __future__ import annotations

GPUS = {
    "B200": {"peak_tflops": 2250.0, "fp8_tflops": 4500.0, "hbm_tbs": 8.0, "mem_gb": 180.0},
    "H200": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 4.8, "mem_gb": 141.0},
    "GH200": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 4.0, "mem_gb": 96.0},
    "H100": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 3.35, "mem_gb": 80.0},
    "A100-SXM4-40GB": {"peak_tflops": 312.0, "hbm_tbs": 1.555, "mem_gb": 40.0},
    "A100": {"peak_tflops": 312.0, "hbm_tbs": 2.039, "mem_gb": 80.0},
    "L40S": {"peak_tflops": 362.0, "fp8_tflops": 733.0, "hbm_tbs": 0.864, "mem_gb": 48.0},
    "A10": {"peak_tflops": 125.0, "hbm_tbs": 0.6, "mem_gb": 24.0},
    "V100": {"peak_tflops": 125.0, "hbm_tbs": 0.9, "mem_gb": 32.0},
}
# no GPU named in the results and no --gpu: H100-class, every figure labelled assumed
ASSUMED = {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 3.35, "mem_gb": 80.0}


def lookup(name):
    """(data-sheet entry, matched key) of a GPU name, or (None, None)."""
    for key in sorted(GPUS, key=len, reverse=True):
        if key in (name or ""):
            return GPUS[key], key
    return None, None
