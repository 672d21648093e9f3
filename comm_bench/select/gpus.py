"""GPU data-sheet figures the selection model uses: dense 16-bit tensor-core peak and
memory bandwidth and size. One table, matched by name as substrings, longest first (a
'-' or '_' in a name reads as a space: --gpu H100-NVL is "H100 NVL").

peak_tflops: dense bf16 (fp16 on V100) tensor-core peak, TFLOP/s; fp32 work runs at half
(TF32 dense). fp8_tflops: dense FP8 peak where the GPU has FP8 tensor cores. hbm_tbs: memory
bandwidth, TB/s; mem_gb: memory, GB (1e9 B); tdp_w: the board power the compute figures
hold at (--power-cap scales below it, compute.power_factor); nvlink_gbs: NVLink per direction,
GB/s (the link model takes the measured figure; this one is shown). NVIDIA's sheets print
the Hopper / Blackwell tensor peaks with 2:4 sparsity: the dense figure is half. Sources
(docs/selection.md, section 2, "GPU cards"): NVIDIA data sheets (A100 80GB SXM 2.039 TB/s,
A100 40GB 1.555; H100 SXM 3.35; H100 NVL 3.9, 94 GB, 835 / 1,671 dense; H100 PCIe 2.0,
756 / 1,513; H800 SXM 3.35, NVLink 400 GB/s bidirectional; H200 4.8; GB200 NVL72 per GPU
2,500 / 5,000 dense, 186 GB, 8 TB/s; B200 8; L40S 0.864; A10 0.6; V100 SXM2 0.9); H20:
NVIDIA's partner specification (148 / 296 dense, 96 GB HBM3, 4.0 TB/s, 400 W); H100 96GB:
the figures issue 41 gives (HBM2e, 2.4 TB/s), no NVIDIA data sheet found: stated, unverified."""
from __future__ import annotations

GPUS = {
    "GB200": {"peak_tflops": 2500.0, "fp8_tflops": 5000.0, "hbm_tbs": 8.0, "mem_gb": 186.0, "tdp_w": 1200,
              "nvlink_gbs": 900.0},
    "B200": {"peak_tflops": 2250.0, "fp8_tflops": 4500.0, "hbm_tbs": 8.0, "mem_gb": 180.0, "tdp_w": 1000,
             "nvlink_gbs": 900.0},
    "H200": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 4.8, "mem_gb": 141.0, "tdp_w": 700,
             "nvlink_gbs": 450.0},
    "GH200": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 4.0, "mem_gb": 96.0, "tdp_w": 700,
              "nvlink_gbs": 450.0},
    "H100 NVL": {"peak_tflops": 835.0, "fp8_tflops": 1671.0, "hbm_tbs": 3.9, "mem_gb": 94.0, "tdp_w": 400,
                 "nvlink_gbs": 300.0},
    "H100 PCIE": {"peak_tflops": 756.0, "fp8_tflops": 1513.0, "hbm_tbs": 2.0, "mem_gb": 80.0, "tdp_w": 350,
                  "nvlink_gbs": 300.0},
    "H100 96GB": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 2.4, "mem_gb": 96.0, "tdp_w": 700,
                  "nvlink_gbs": 450.0},
    "H100": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 3.35, "mem_gb": 80.0, "tdp_w": 700,
             "nvlink_gbs": 450.0},
    "H800": {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 3.35, "mem_gb": 80.0, "tdp_w": 700,
             "nvlink_gbs": 200.0},
    "H20": {"peak_tflops": 148.0, "fp8_tflops": 296.0, "hbm_tbs": 4.0, "mem_gb": 96.0, "tdp_w": 400,
            "nvlink_gbs": 450.0},
    "A100-SXM4-40GB": {"peak_tflops": 312.0, "hbm_tbs": 1.555, "mem_gb": 40.0, "tdp_w": 400},
    "A100": {"peak_tflops": 312.0, "hbm_tbs": 2.039, "mem_gb": 80.0, "tdp_w": 400},
    "L40S": {"peak_tflops": 362.0, "fp8_tflops": 733.0, "hbm_tbs": 0.864, "mem_gb": 48.0, "tdp_w": 350},
    "A10": {"peak_tflops": 125.0, "hbm_tbs": 0.6, "mem_gb": 24.0, "tdp_w": 150},
    "V100": {"peak_tflops": 125.0, "hbm_tbs": 0.9, "mem_gb": 32.0, "tdp_w": 300},
}
# no GPU named in the results and no --gpu: H100-class, every figure labelled assumed
ASSUMED = {"peak_tflops": 989.0, "fp8_tflops": 1979.0, "hbm_tbs": 3.35, "mem_gb": 80.0, "tdp_w": 700}


def _norm(name):
    return " ".join(str(name or "").upper().replace("-", " ").replace("_", " ").split())


def lookup(name):
    """(data-sheet entry, matched key) of a GPU name, or (None, None)."""
    n = _norm(name)
    for key in sorted(GPUS, key=len, reverse=True):
        if _norm(key) in n:
            return GPUS[key], key
    return None, None
