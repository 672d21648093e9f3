#!/usr/bin/env python3
"""`comm-bench select` against published large training runs, at the published clusters'
link rates (docs/benchmarks/selection-published.md).

Inputs (stated assumptions, not measurements of ours): results documents in the real schema
for a DGX A100 cluster (Selene: 8 x A100-SXM4-80GB per node, NVLink 3 through NVSwitch,
8 x HDR 200 Gb/s InfiniBand NICs, one per GPU), timed by an alpha-beta model at figures
NCCL reaches there: NCCL all_reduce / all_gather / reduce_scatter over 8 GPUs busbw
INTRA_GBS at large sizes (NVLink 3: 300 GB/s per direction), over 2 nodes x 8 GPUs busbw
NODE_GBS (the node's 8 NICs together), one NIC pair (ib_write_bw) PAIR_GBS of HDR's 25 GB/s.

Rows: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC'21 (arXiv 2104.04473), Table 1: model, tp, pp, GPUs, batch and the
achieved teraFLOP/s per GPU, counted with the paper's formula (full recomputation):
96 B s l h^2 (1 + s/6h + V/16lh). The paper's layout is predicted with the paper's setup
(full recomputation, no distributed optimizer or sequence parallelism, which did not exist
yet; micro-batch and interleaving chosen by select); the predicted teraFLOP/s per GPU is
the same formula over the predicted step. Also the ZeRO paper's memory example (7.5 B
parameters, 64 GPUs).

    python tools/check_select_published.py              # the table (markdown)
    python tools/check_select_published.py --json out.json
Exit 1 when a row misses its target (15%; ZeRO 5%), or select's answer is slower than the
paper's layout."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import synthetic_results as SR  # noqa: E402

INTRA_GBS, INTRA_ALPHA = 230.0, 1.5e-6      # NCCL 8 x A100 NVLink 3 ring, per step
NODE_GBS, NODE_ALPHA = 185.0, 3e-6          # NCCL 2 x 8 A100, 8 x HDR
PAIR_GBS, PAIR_ALPHA = 23.5, 2.5e-6         # ib_write_bw, one HDR NIC pair
A100 = dict(gpu_name="NVIDIA A100-SXM4-80GB", gpu_mem_bytes=80e9, nvlink_version=3, nvlink_links=12,
            nvlink_gbs=300.0)
TOLERANCE = 0.15

# (preset, tp, pp, GPUs, published teraFLOP/s per GPU): Narayanan et al. 2021, Table 1
TABLE1 = [("megatron-1.7b", 1, 1, 32, 137), ("megatron-3.6b", 2, 1, 64, 138), ("megatron-7.5b", 4, 1, 128, 142),
          ("megatron-18b", 8, 1, 256, 135), ("megatron-39b", 8, 2, 512, 138), ("megatron-76b", 8, 4, 1024, 140),
          ("megatron-146b", 8, 8, 1536, 148), ("megatron-310b", 8, 16, 1920, 155),
          ("megatron-530b", 8, 35, 2520, 163), ("megatron-1t", 8, 64, 3072, 163)]


def cluster_documents(folder, nic_gbs=25.0, nic_kind="ib", pair_gbs=PAIR_GBS, node_gbs=NODE_GBS, gpu=A100,
                      intra_gbs=INTRA_GBS, prefix="a100", extra=()):
    """[intra, inter-collective, inter-pair] result files of two DGX-like nodes (A100 by
    default); extra: more (file name, document) pairs written beside them."""
    topo = lambda h: SR.node_topology(h, nic_gbs=nic_gbs, nic_kind=nic_kind, **gpu)  # noqa: E731
    intra = SR.collective_doc(["n0"], 8, INTRA_ALPHA, intra_gbs * 1e9, topology=topo)
    # a 16-rank ring's busbw is what crosses the node boundary: the node's NICs together
    inter = SR.collective_doc(["n0", "n1"], 8, NODE_ALPHA, node_gbs * 1e9, topology=topo)
    pair = SR.pairwise_doc(["n0", "n1"], PAIR_ALPHA, pair_gbs * 1e9, transport="rdma" if nic_kind != "ethernet"
                           else "tcp", topology=topo)
    docs = ((f"{prefix}_intra.json", intra), (f"{prefix}_inter.json", inter), (f"{prefix}_pair.json", pair))
    return [SR.write(os.path.join(folder, f), d) for f, d in docs + tuple(extra)]


def paper_tflops(w, step_s, gpus):
    """The paper's teraFLOP/s per GPU: 96 B s l h^2 (1 + s/6h + V/16lh) / (step x GPUs)."""
    B, s, l, h, V = w["global_batch"], w["seq_len"], w["layers"], w["hidden"], w["vocab"]
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (step_s * gpus) / 1e12


def check_row(docs, preset, tp, pp, gpus, published):
    from comm_bench.select import plan_layout, select
    res = select(docs, model=preset, nodes=gpus // 8, gpu="A100")
    w = res["workload"]
    paper = plan_layout(res, "megatron", tp, pp,
                        recompute="full", distributed_optimizer=False, sequence_parallel=False)
    listed = next((c for c in res["candidates"] if c["tp"] == tp and c["pp"] == pp
                   and c["kind"] in ("megatron", "ddp")), None)
    rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
    pred = paper_tflops(w, paper["step_s"], gpus)
    return {"model": preset, "gpus": gpus, "paper_layout": f"tp{tp}-pp{pp}-dp{gpus // (tp * pp)}",
            "published_tflops": published, "predicted_tflops": round(pred, 1), "ratio": round(pred / published, 3),
            "paper_config": {k: paper[k] for k in ("micro_batch", "virtual_stages", "microbatches", "step_s",
                                                   "memory_gb", "feasible")},
            "paper_layout_candidate": bool(listed and listed["feasible"]),
            "recommended": res["recommendation"]["layout"], "framework": res["recommendation"]["framework"],
            "recommended_step_s": rec["step_s"], "recommended_tokens_per_s": rec["tokens_per_s"],
            "paper_tokens_per_s": paper["tokens_per_s"],
            "recommended_config": rec["config"], "recommended_recompute": rec["recompute"],
            "at_least_as_fast": rec["tokens_per_s"] >= paper["tokens_per_s"] * (1 - 1e-9),
            "ok": abs(pred / published - 1) <= TOLERANCE and bool(listed and listed["feasible"])
            and rec["tokens_per_s"] >= paper["tokens_per_s"] * (1 - 1e-9)}


def zero_example():
    """ZeRO paper Figure 1: 7.5 B parameters, 64 GPUs, mixed-precision Adam: 120, 31.4, 16.6, 1.9 GB."""
    from comm_bench.select import memory as M
    published = {"ddp": 120.0, "zero-1": 31.4, "zero-2": 16.6, "zero-3": 1.9}
    out = []
    for kind, gb in published.items():
        got = M.model_states_bytes(7.5e9, 2, 2, 12, kind, 64) / 1e9
        out.append({"layout": kind, "published_gb": gb, "predicted_gb": round(got, 2),
                    "ok": abs(got / gb - 1) <= 0.05})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write every row's figures here")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        docs = cluster_documents(d)
        rows = [check_row(docs, *r) for r in TABLE1]
    zero = zero_example()
    print("| model | GPUs | paper's layout (b, v chosen by select) | published TFLOP/s/GPU | predicted | ratio | "
          "select recommends (recomputation) | its tokens/s / the paper layout's |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['gpus']} | {r['paper_layout']} (b {r['paper_config']['micro_batch']}, "
              f"v {r['paper_config']['virtual_stages']}) | {r['published_tflops']} | {r['predicted_tflops']} | "
              f"{r['ratio']:.3f} | {r['recommended']} ({r['recommended_recompute']}) | "
              f"{r['recommended_tokens_per_s'] / r['paper_tokens_per_s']:.3f} |")
    print()
    for z in zero:
        print(f"ZeRO example {z['layout']}: published {z['published_gb']} GB, predicted {z['predicted_gb']} GB")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"table1": rows, "zero": zero}, f, indent=1)
    bad = [r["model"] for r in rows if not r["ok"]] + [z["layout"] for z in zero if not z["ok"]]
    print(f"{len(rows) + len(zero) - len(bad)} of {len(rows) + len(zero)} within target" +
          (f"; missed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
