#!/usr/bin/env python3
"""`comm-bench select` against published training runs of 2024-2025: dense models with GQA and
SwiGLU at 8K and 131K tokens, and mixture-of-experts models with expert parallelism
(docs/benchmarks/selection-runs.md).

Each row: the published layout is predicted under the publication's settings (its model,
GPUs, global batch, micro-batch, recomputation and parallel sizes; select chooses only what
the publication does not state), its throughput compared with the published figure, and
select's own recommendation compared with that layout. Nothing here is tuned to these rows:
the compute constants are the ones set against SC'21 Table 1 (docs/selection.md, section 3),
so every row below is held out.

Inputs (stated assumptions, not measurements of ours): results documents in the real schema
(tools/synthetic_results.py, "synthetic": true) for DGX-class nodes of 8 GPUs behind
NVSwitch with 8 x 400 Gb/s NICs, timed by alpha-beta at rates NCCL reaches there: 8-GPU
all_reduce / all_gather / reduce_scatter busbw 0.8 x the NVLink rate per direction (A100's
230 of 300 GB/s in check_select_published.py: H100 360 of 450, B200 720 of 900), 2 x 8-GPU
collectives 370 GB/s (8 NICs of 50 GB/s at the 92.5% A100's HDR reaches), a NIC pair
47 GB/s, and a 2 x 8 alltoall at 86.7 GB/s busbw (half of each buffer crosses the node
over the rank's own NIC at 92.5% of 50 GB/s).

    python tools/check_select_runs.py                   # the table (markdown)
    python tools/check_select_runs.py --json out.json
Exit 1 when a row misses 15%, the published layout is not feasible, or select's answer is
predicted slower than it."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import check_select_published as CK  # noqa: E402
import synthetic_results as SR  # noqa: E402

TOLERANCE = 0.15
NODE_GBS, PAIR_GBS, NIC_GBS = 370.0, 47.0, 50.0
# 2 x 8 alltoall: half of each rank's buffer crosses the node over its own NIC at the 92.5%
# of 50 GB/s the collectives reach; busbw = S/t x 15/16 = 2 x 46.25 x 15/16 = 86.7 GB/s
A2A_GBS = 2 * 0.925 * 50.0 * 15 / 16
# NVIDIA data sheets: H100 SXM 80 GB (81,559 MiB as NVML reports it), NVLink 4 18 x 25 GB/s;
# B200 180 GB, NVLink 5 18 x 50 GB/s
SYSTEMS = {
    "H100": dict(gpu=dict(gpu_name="NVIDIA H100 80GB HBM3", gpu_mem_bytes=81559 * 2 ** 20, nvlink_version=4,
                          nvlink_links=18, nvlink_gbs=450.0), intra_gbs=360.0),
    "B200": dict(gpu=dict(gpu_name="NVIDIA B200", gpu_mem_bytes=180e9, nvlink_version=5, nvlink_links=18,
                          nvlink_gbs=900.0), intra_gbs=720.0),
}

LLAMA3 = "Grattafiori et al., The Llama 3 Herd of Models, 2024 (arXiv 2407.21783), Table 4"
BRIDGE = ("NVIDIA Megatron-Bridge performance summary, 25.11 NeMo container, DGX-{sys} table "
          "(docs.nvidia.com/nemo/megatron-bridge/latest/performance-summary.html; "
          "docs/performance-summary.md of NVIDIA-NeMo/Megatron-Bridge)")
# model, system, GPUs, published layout (kind, tp, cp, pp, ep, etp or None (= tp), micro-batch or None, v or None),
# seq, global batch, recompute, gradient reduction, precision, the alltoall overlap (Megatron-Bridge's
# moe_a2a_overlap: on in both Qwen3 H100 recipes at 5776a6d, qwen3_workload_base_configs.py; off
# in gpt-oss's; no experts in Llama's), metric, published figure, source.
# gpt-oss: the 25.11 recipe (Megatron-Bridge scripts/performance/configs/gpt_oss/
# gpt_oss_workload_base_configs.py) recomputes the norms and the experts' activation
# (recompute_modules = ["layernorm", "moe_act"]) and reduces gradients in bf16
# (grad_reduce_in_fp32 = False); H100 micro-batch 1 from the recipe's H100 config, since the
# table's H100 row (MBS 4, GA 2 at DP 16) contradicts itself (512 / (4 x 16) = 8).
# Llama 3 70B / 3.1 405B FP8-CS on H100: the 25.11 table's layouts (the recipe's
# LLAMA3_70B_ / LLAMA31_405B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG agree), micro-batch 1,
# no recomputation, bf16 gradients (set_llama3_common_configs); model TFLOP/s as the table.
OSS_RC = "modules:layernorm,moe_act"
RUNS = [
    ("llama3-405b", "H100", 8192, ("fsdp-tp", 8, 1, 16, 1, None, 1, None), 8192, 2048, "none", "fp32", "bf16",
     True, "tflops", 430, LLAMA3),
    ("llama3-405b", "H100", 16384, ("fsdp-tp", 8, 1, 16, 1, None, 1, None), 8192, 2048, "none", "fp32", "bf16",
     True, "tflops", 400, LLAMA3),
    ("llama3-405b", "H100", 16384, ("fsdp-tp", 8, 16, 16, 1, None, 1, None), 131072, 128, "none", "fp32", "bf16",
     True, "tflops", 380, LLAMA3),
    ("gpt-oss-120b", "H100", 64, ("megatron", 1, 1, 4, 8, None, 1, 1), 4096, 512, OSS_RC, "bf16", "bf16",
     False, "tokens", 5630, BRIDGE.format(sys="H100")),
    ("gpt-oss-120b", "B200", 64, ("megatron", 1, 1, 1, 8, None, 4, 1), 4096, 512, OSS_RC, "bf16", "bf16",
     False, "tokens", 8213, BRIDGE.format(sys="B200")),
    ("llama3-70b", "H100", 64, ("megatron", 4, 1, 8, 1, None, 1, 5), 8192, 128, "none", "bf16", "fp8",
     True, "tokens", 1602, BRIDGE.format(sys="H100")),
    ("llama3-405b", "H100", 1024, ("megatron", 8, 2, 8, 1, None, 1, 8), 8192, 512, "none", "bf16", "fp8",
     True, "tokens", 292, BRIDGE.format(sys="H100")),
    ("qwen3-30b-a3b", "H100", 16, ("megatron", 1, 1, 2, 8, None, 2, 24), 4096, 512, "none", "bf16", "fp8",
     True, "tokens", 5275, BRIDGE.format(sys="H100")),
    ("qwen3-235b-a22b", "H100", 256, ("megatron", 2, 1, 8, 32, 1, 1, 4), 4096, 2048, "none", "bf16", "fp8",
     True, "tokens", 1575, BRIDGE.format(sys="H100")),
]


def documents(folder, system):
    """The intra, inter and NIC-pair documents of check_select_published plus a 2 x 8 alltoall."""
    s = SYSTEMS[system]
    topo = lambda h: SR.node_topology(h, nic_gbs=NIC_GBS, nic_kind="ib", **s["gpu"])  # noqa: E731
    a2a = SR.collective_doc(["n0", "n1"], 8, CK.NODE_ALPHA, A2A_GBS * 1e9, ops=("alltoall",),
                            topology=topo)
    return CK.cluster_documents(folder, nic_gbs=NIC_GBS, pair_gbs=PAIR_GBS, node_gbs=NODE_GBS, gpu=s["gpu"],
                                intra_gbs=s["intra_gbs"], prefix=system.lower(), extra=((f"{system}_a2a.json", a2a),))


def model_tflops(w, c, gpus, causal=False):
    """Model TFLOP/s per GPU of a predicted candidate: 3 x forward FLOPs (shapes.py) x tokens /
    step, attention over the whole s x s matrix; causal: attention counted for a causal mask
    (the other convention a publication may use; Llama 3's paper does not say which)."""
    from comm_bench.select import workload as W
    return c["global_batch"] * W.flops_per_sample(w, executed=causal) / c["step_s"] / gpus / 1e12


def published_split(L, pp, v):
    """The stage split a publication ran (none states another): Megatron-Core's default, even,
    where pp v divides the layers; else its --account-for-embedding/loss-in-pipeline-split
    ((L + 2) / pp a stage, one fewer on the first and last: Llama 3's 7 + 8 x 14 + 7, the
    Megatron-Bridge recipes for Llama 3.1 405B and Qwen3 235B). select's own answer searches
    the split (comm_bench/select/pipeline.py)."""
    if pp <= 1:
        return None
    v = v or 1
    if L % (pp * v) == 0:
        return (L // pp,) * pp
    y = (L + 2) // pp
    return (y - 1,) + (y,) * (pp - 2) + (y - 1,)


def check_row(folder, model, system, gpus, layout, seq, gb, recompute, grad_reduce, precision, a2a_overlap, metric,
              published, source):
    from comm_bench.select import select
    from comm_bench.select.facts import TIE
    from comm_bench.select.predict import predict
    kind, tp, cp, pp, ep, etp, mb, v = layout
    res = select(documents(folder, system), model=model, nodes=gpus // 8, seq_len=seq, global_batch=gb,
                 micro_batch=mb, recompute=recompute, grad_reduce=grad_reduce, precision=precision,
                 a2a_overlap=a2a_overlap)
    w, cl, lm, comp, overlap, headroom = res["context"]
    shape = {"layout": "published", "kind": kind, "tp": tp, "cp": cp, "pp": pp, "dp": gpus // (tp * cp * pp), "ep": ep,
             **({"etp": etp} if etp else {})}
    # Llama 3's FSDP as the paper states it (arXiv 2407.21783, 3.3.2): no resharding after
    # forward, optimizer states and gradients sharded (select's Config.grads_sharded)
    force = (recompute, False, tp > 1, False, True) if kind == "fsdp-tp" else None
    split = published_split(w["layers"], pp, v)
    pub = predict(shape, dict(w, recompute=recompute if recompute != "auto" else w["recompute"],
                              **({"pp_layout": split} if split else {})), cl, lm, comp,
                  overlap, headroom, force=force, virtual=v)
    rec = next((c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"]), None)
    value = (lambda c: model_tflops(w, c, gpus)) if metric == "tflops" else (lambda c: c["tokens_per_s"] / gpus)
    pred = value(pub) if pub["feasible"] else None
    ratio = pred / published if pred else None
    faster = bool(rec and pub["feasible"] and rec["tokens_per_s"] >= pub["tokens_per_s"] * (1 - TIE))
    return {"model": model, "system": system, "gpus": gpus, "seq": seq, "global_batch": gb,
            "published_layout": f"{kind} tp{tp} cp{cp} pp{pp} dp{shape['dp']} ep{ep}" + (f" etp{etp}" if etp else ""),
            "metric": metric,
            "published": published, "predicted": round(pred, 1) if pred else None,
            "ratio": round(ratio, 3) if ratio else None, "source": source,
            "predicted_causal_count": round(model_tflops(w, pub, gpus, True), 1)
            if metric == "tflops" and pub["feasible"] else None,
            "published_split": pub.get("pp_split"),
            "published_config": {k: pub[k] for k in ("micro_batch", "virtual_stages", "recompute", "reshard",
                                                     "distributed_optimizer", "memory_gb", "feasible", "reason",
                                                     "step_s", "bubble")},
            "recommended": rec and rec["layout"], "recommended_config": rec and rec["config"],
            "recommended_split": rec and rec.get("pp_split"),
            "recommended_memory_gb": rec and rec["memory_gb"],
            "recommended_vs_published": round(rec["tokens_per_s"] / pub["tokens_per_s"], 3)
            if rec and pub["feasible"] else None,
            "ok": bool(pub["feasible"] and ratio and abs(ratio - 1) <= TOLERANCE and faster)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write every row's figures here")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rows = [check_row(d, *r) for r in RUNS]
    print("| model | GPUs | seq | published layout (b, v) | metric | published | predicted | ratio | "
          "predicted, causal count | "
          "select recommends | its tokens/s / published layout's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        pc = r["published_config"]
        print(f"| {r['model']} | {r['gpus']} {r['system']} | {r['seq']} | {r['published_layout']} (b {pc['micro_batch']}, "
              f"v {pc['virtual_stages']}, {pc['recompute']}) | {r['metric']}/GPU | {r['published']} | "
              f"{r['predicted'] if r['predicted'] else 'infeasible: ' + pc['reason']} | {r['ratio']} | "
              f"{r['predicted_causal_count'] or '-'} | "
              f"{r['recommended']} | {r['recommended_vs_published']} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"runs": rows}, f, indent=1)
    bad = [f"{r['model']}@{r['gpus']}x{r['system']}/{r['seq']}" for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} within {TOLERANCE:.0%}, feasible and not beaten"
          + (f"; missed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
