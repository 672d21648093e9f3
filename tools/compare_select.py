#!/usr/bin/env python3
"""Prediction error of `comm-bench select` against measured training steps.

Reads the JSON of tools/bench_train_step.py and, per measured case (model size x
strategy), what `select` predicts for the same workload from comm-bench results files
(e.g. a `comm-bench sweep -t nccl` run on the same machine), or from `select --json`
output files given with --select. Prints per case:

  comm time/step   predicted comm_s        vs what communication adds to a measured step,
                   from steps with and without it (comm_cost_s: DDP step - no_sync step,
                   FSDP step - the same FSDP step on one-rank meshes); the target's figure
  comm kernels     predicted comm_s        vs the NCCL kernel time (profiler; per collective
                   the shortest rank), which contention with compute kernels stretches;
                   in a --serialize run (no kernel beside another) the transfer time itself,
                   and then the target's figure
  exposed comm     predicted exposed_comm_s vs measured step - local compute
  step time        predicted step_s         vs measured step

and the relative error (predicted / measured - 1); target: |error| <= 20% for the
communication time per step.

    python tools/compare_select.py train_step.json --results nccl.json [--save-dir DIR]
    python tools/compare_select.py train_step.json --select sel_350M_ddp.json ...

Exit 0; 1 when a communication-time error exceeds --target (default 0.2) and --strict.
Needs only numpy, torch-free comm_bench and the two JSON inputs; no network.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

STRATEGY_LAYOUT = {"ddp": "ddp", "fsdp": "fsdp"}


def select_args(bench, case, overlap=None):
    """The `comm-bench select` options that describe a measured case's workload."""
    return {"overlap": overlap, "params": case["params"], "layers": case["layers"], "hidden": case["hidden"],
            "heads": max(1, case["hidden"] // 128), "seq_len": bench["seq_len"],
            "micro_batch": bench["micro_batch"], "precision": "bf16" if bench["dtype"] == "bf16" else "fp32",
            "bucket_mb": bench["bucket_mb"], "nodes": 1, "gpus_per_node": bench["world_size"],
            "step_time": case["compute_s"]}


def cli_line(results, a):
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in a.items())
    return f"comm-bench select {' '.join(results)} {flags} --json"


def predict_with_library(results, a):
    from comm_bench.select import select
    from comm_bench.select.output import to_json
    return json.loads(to_json(select(results, **a)))


def rel(pred, meas):
    if pred is None or not meas:
        return None
    return pred / meas - 1.0


def kernel_scale(bench):
    """Bench files written before bench_train_step recorded its "kernel_filter" counted each
    NCCL kernel twice (the kernel and the GPU annotation the profiler lays over it; shown on
    a kernel dump in docs/benchmarks/selection.md): their kernel figures are halved here."""
    return 0.5 if bench.get("backend") == "nccl" and not bench.get("kernel_filter") else 1.0


def rows(bench, selections):
    out, half = [], kernel_scale(bench)
    blocking = bench.get("serialize") == "CUDA_LAUNCH_BLOCKING=1"
    for case, sel in selections:
        cands = {c["layout"]: c for c in sel["candidates"]}
        for strat, m in case["strategies"].items():
            c = cands.get(STRATEGY_LAYOUT.get(strat, strat))
            if c is None:
                continue
            meas_exposed = m["step_s"] - case["compute_s"]
            kernels = m.get("comm_kernel_min_s", m.get("comm_kernel_s"))
            kernels = None if kernels is None else kernels * half
            # a launch-blocking run's steps are not training steps, its kernels are the transfer
            cost = None if blocking else m.get("comm_cost_s")
            meas = cost if cost is not None else kernels
            out.append({"params": case["params"], "strategy": strat, "world_size": bench["world_size"],
                        "serialize": bool(bench.get("serialize")),
                        "pred_comm_s": c["comm_s"], "meas_comm_s": meas,
                        "meas_comm_from": "steps" if cost is not None else "kernels",
                        "err_comm": rel(c["comm_s"], meas),
                        "meas_kernel_s": kernels, "err_kernel": rel(c["comm_s"], kernels),
                        "meas_kernel_mean_s": m["comm_kernel_s"] * half if "comm_kernel_s" in m else None,
                        "kernel_scale": half,
                        "pred_exposed_s": c.get("exposed_comm_s"), "meas_exposed_s": meas_exposed,
                        "err_exposed": rel(c.get("exposed_comm_s"), meas_exposed if meas_exposed > 0 else None),
                        "pred_step_s": c["step_s"], "meas_step_s": m["step_s"],
                        "err_step": rel(c["step_s"], m["step_s"]), "figures": c.get("comm_source")})
    return out


def fmt(v, scale=1e3, spec=".2f"):
    return "-" if v is None else format(v * scale, spec)


def pct(v):
    return "-" if v is None else f"{v:+.1%}"


def print_table(rs, target):
    head = (f"{'params':>10} {'strategy':>8} {'comm pred ms':>12} {'comm meas ms':>12} {'error':>8} "
            f"{'kernels ms':>10} {'error':>8} "
            f"{'exp pred ms':>11} {'exp meas ms':>11} {'error':>8} {'step pred ms':>12} {'step meas ms':>12} "
            f"{'error':>8}  figures")
    print(head)
    for r in rs:
        print(f"{r['params'] / 1e9:>9.3f}B {r['strategy']:>8} {fmt(r['pred_comm_s']):>12} {fmt(r['meas_comm_s']):>12} "
              f"{pct(r['err_comm']):>8} {fmt(r['meas_kernel_s']):>10} {pct(r['err_kernel']):>8} "
              f"{fmt(r['pred_exposed_s']):>11} {fmt(r['meas_exposed_s']):>11} "
              f"{pct(r['err_exposed']):>8} {fmt(r['pred_step_s']):>12} {fmt(r['meas_step_s']):>12} "
              f"{pct(r['err_step']):>8}  {r['figures']}")
    errs = [abs(r["err_comm"]) for r in rs if r["err_comm"] is not None]
    if errs:
        within = sum(e <= target for e in errs)
        print(f"communication time per step ({', '.join(sorted({r['meas_comm_from'] for r in rs}))}): "
              f"{within} of {len(errs)} cases within {target:.0%} "
              f"(largest |error| {max(errs):.1%})")
    return errs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench", help="JSON written by tools/bench_train_step.py")
    p.add_argument("--results", nargs="+", default=None, help="comm-bench results files for select")
    p.add_argument("--select", nargs="+", default=None,
                   help="select --json outputs instead, one per case in the bench file's order")
    p.add_argument("--save-dir", default=None, help="write each case's select JSON here")
    p.add_argument("--overlap", type=float, default=None, help="select's --overlap (default: select's default)")
    p.add_argument("--target", type=float, default=0.2)
    p.add_argument("--strict", action="store_true", help="exit 1 when an error exceeds --target")
    p.add_argument("--json", dest="json_out", default=None, help="write the comparison rows as JSON")
    a = p.parse_args(argv)
    try:
        with open(a.bench, encoding="utf-8") as f:
            bench = json.load(f)
        cases = bench["cases"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"compare_select: cannot read {a.bench}: {exc}", file=sys.stderr)
        return 2
    if bool(a.results) == bool(a.select):
        print("compare_select: give --results FILE... or --select FILE...", file=sys.stderr)
        return 2
    selections = []
    for i, case in enumerate(cases):
        args = select_args(bench, case, a.overlap)
        if a.results:
            print(f"# {cli_line(a.results, args)}")
            sel = predict_with_library(a.results, args)
            if a.save_dir:
                os.makedirs(a.save_dir, exist_ok=True)
                with open(os.path.join(a.save_dir, f"select_{case['params']}.json"), "w", encoding="utf-8") as f:
                    json.dump(sel, f, indent=1)
        else:
            if i >= len(a.select):
                break
            with open(a.select[i], encoding="utf-8") as f:
                sel = json.load(f)
        selections.append((case, sel))
    rs = rows(bench, selections)
    if kernel_scale(bench) != 1.0:
        print("# kernel figures halved: this bench file counted each NCCL kernel twice (no kernel_filter)")
    errs = print_table(rs, a.target)
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump({"bench": a.bench, "target": a.target, "rows": rs}, f, indent=1)
    return 1 if a.strict and any(e > a.target for e in errs) else 0


if __name__ == "__main__":
    sys.exit(main())
