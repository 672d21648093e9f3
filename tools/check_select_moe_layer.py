#!/usr/bin/env python3
"""One gpt-oss-120b MoE layer measured piece by piece on a GPU, against select's compute model
for the same layer (issue 32: where do the MoE rows' 1.65x go?; docs/benchmarks/selection-runs.md).

The measurement (tools/moe_layer_device.py, plain PyTorch, bf16, CUDA events, median of 25
after 5 warm-ups, forward + backward): one layer of gpt-oss-120b (h 2,880, 64 query heads of
64, 8 KV heads, RoPE, causal SDPA; 128 SwiGLU experts of f 2,880, top-4) as one rank of ep 8
runs it: its own b x 4,096 tokens through attention and the router, and the k b 4,096 rows
the all-to-all delivers to its 16 local experts on average under uniform routing (each of the
8 ranks sends k T 16 / 128 of its T tokens' copies: k T in all, k T / 16 = 1,024 per local
expert at b 1, the M of selection-kernels-moe-h200.json). Pieces: attention block (norm,
QKV, RoPE, SDPA, output projection, residual), router (norm, linear, top-k, softmax),
permutation (the dispatcher's sort by expert + gather, the host sync of tokens per expert,
the received rows' sort by local expert), experts (gate+up, SwiGLU, down: a loop of matmuls
and torch._grouped_mm, the faster), unpermutation (sort back, weight by the routing
probabilities, index_add into the tokens), and the whole layer chained (the all-to-all left
out: it is communication, priced elsewhere).

    python tools/check_select_moe_layer.py --device-command     # the commands to send to a GPU
    python tools/check_select_moe_layer.py --json docs/benchmarks/selection-moe-layer-h200.json

The device machine runs another checkout, so --device-command prints the measurement script
compressed into shell commands of at most 2,000 characters (the limit of one): all but the
last leave their part in /tmp, the last adds its part and runs it (JSON to $OUT/moe_layer.json);
send them one after another to the same (warm) machine.
Without --device-command, the JSON given is read and compared with select (no GPU needed).
"""
from __future__ import annotations

import argparse
import ast
import base64
import json
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = os.path.join(HERE, "moe_layer_device.py")
LIMIT = 2000


def device_commands():
    """The measurement script without docstrings, zlib-compressed, base85, in commands of at most LIMIT."""
    tree = ast.parse(open(DEVICE).read())
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.Module)) and n.body and isinstance(n.body[0], ast.Expr) \
                and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str):
            n.body = n.body[1:] or [ast.Pass()]
    blob = base64.b85encode(zlib.compress(ast.unparse(tree).encode(), 9)).decode()
    run = (" && PYTHONUNBUFFERED=1 python3 -c \"import zlib,base64;"
           "exec(zlib.decompress(base64.b85decode(open('/tmp/moe/z').read())))\"")
    n = -(-len(blob) // (LIMIT - len(run) - 40))
    size = -(-len(blob) // n)
    parts = [blob[i:i + size] for i in range(0, len(blob), size)]
    cmds = [("mkdir -p /tmp/moe && " if i == 0 else "") + f"printf %s '{p}' {'>' if i == 0 else '>>'} /tmp/moe/z"
            + (run if i == len(parts) - 1 else f" && echo part {i + 1} of {len(parts)}")
            for i, p in enumerate(parts)]
    assert max(map(len, cmds)) <= LIMIT, [len(c) for c in cmds]
    return cmds


def predicted(b, gpu="H200", ep=8, window=False):
    """Select's compute model for one layer of gpt-oss-120b at micro-batch b, tp 1, no
    recomputation, on `gpu`, split the way compute.Compute.seconds adds it up: ms per piece.
    window False: a full causal layer (what is measured); True: select's average layer (half
    of gpt-oss's layers have a 128-token window). The element-wise term (8 passes over the
    kept activations) is shared out by whose tensors they are: the attention block's (its
    norm and QKV inputs, q, k, v, o), the router's (the MoE norm's and router's inputs), the
    experts' (k x (h + 3 f): their inputs and SwiGLU intermediates)."""
    from comm_bench.select import shapes as SH
    from comm_bench.select import workload as W
    from comm_bench.select.compute import ELEMENTWISE_PASSES, Compute, gpu_figures
    w = W.build(model="gpt-oss-120b", seq_len=4096, micro_batch=b, recompute="none")
    if not window:
        w = dict(w, window=None, window_layers=0)
    comp = Compute(w, gpu_figures({"gpu_name": gpu}))
    share, h, k, f = 1.0 / w["layers"], w["hidden"], w["experts_per_token"], w["expert_ffn"]
    T = b * w["seq_len"]
    peak, eff = comp.peak, comp.gemm_efficiency(h)
    pe = ELEMENTWISE_PASSES * w["bytes"]["act"] * T / comp.hbm     # seconds per kept element per token
    d = SH.head_dim(w)
    attn_kept = 2 * h + 2 * w["heads"] * d + 2 * w["kv_heads"] * d
    assert abs(2 * (attn_kept + 2 * h + k * (h + 3 * f)) - SH.activation_bytes_per_token(w, 1, True, "none", True, 2)) < 1e-6
    attn_flops = W.attention_flops_per_sample(w, "none", executed=True) * b * share
    sdpa = attn_flops / (peak * (comp.attention_efficiency() or eff))
    gemms = comp.expert_flops(b, 1, share, "none") / comp.expert_rate(b, ep) \
        + comp.expert_weight_wait(b, 1, share, "none", ep)
    perm = comp.permute_seconds(b, 1, share, "none", ep)
    out = {"attention_block": sdpa + 3 * 2.0 * T * SH.attention_params(w) / (peak * eff) + pe * attn_kept,
           "sdpa_core": sdpa,
           "router": 3 * 2.0 * T * h * w["experts"] / (peak * eff) + pe * 2 * h,
           "permute": perm / 2,
           "experts": gemms + pe * k * (h + 3 * f),
           "swiglu_only": pe * k * 3 * f,
           "unpermute": perm / 2,
           "whole_layer": comp.seconds(b, 1, share, "none", False, ep, logits=False)}
    return {key: v * 1e3 for key, v in out.items()}


ROWS = [("attention_block", "attention block (norm, QKV, RoPE, SDPA, out, residual)"),
        ("sdpa_core", "  of which SDPA (causal, GQA)"),
        ("router", "router (norm, linear, top-4, softmax)"),
        ("permute", "permutation (2 sorts, host sync, 2 gathers)"),
        ("experts", "experts (16, grouped GEMMs + SwiGLU)"),
        ("swiglu_only", "  of which SwiGLU element-wise"),
        ("unpermute", "unpermutation (gather back, x probs, index_add)"),
        ("whole_layer", "whole layer, chained")]


def raw(case, key):
    """The measured case's key for a piece (the faster of the experts' and SDPA's variants)."""
    if key == "experts":
        return "experts_" + case["experts_used"]
    if key == "sdpa_core":
        return "sdpa_core_" + case["sdpa_used"].split("_")[-1]
    return key


def rng_ms(case, key):
    """Time the output gradients' generation (torch.randn_like inside the timed call) took."""
    return sum(t for n, t in case.get("top_kernels", {}).get(key, []) if "distribution_elementwise" in n)


def table(meas):
    """Markdown: measured (wall, net of the gradients' generation; GPU busy) vs select, b 1 and 4."""
    cases = {c["micro_batch"]: c for c in meas["cases"]}
    preds = {b: predicted(b) for b in cases}
    head = "| piece |" + "".join(f" b {b}: measured | GPU busy | select | ratio |" for b in cases)
    lines = [head, "|---|" + "---|---|---|---|" * len(cases)]
    for key, label in ROWS:
        row = f"| {label} |"
        for b, c in cases.items():
            r = raw(c, key)
            wall, busy, p = c[r] - rng_ms(c, r), c.get("gpu_busy", {}).get(r), preds[b][key]
            row += f" {wall:.2f} | {busy - rng_ms(c, r):.2f} |" if busy is not None else f" {wall:.2f} | - |"
            row += f" {p:.2f} | {wall / p:.2f} |"
        lines.append(row)
    return "\n".join(lines), preds


def what_if(meas, b=1):
    """OSS-H100 read with the recipe (micro-batch 1, no recomputation: select 9,446 tokens/s/GPU
    against the published 5,630): select's step with each layer's compute raised by the measured
    excess (measured whole layer - select's same layer on the H200), and with the GPU-busy excess
    of the memory-bound pieces (permutation, unpermutation, SwiGLU) scaled to the H100's HBM (4.8 / 3.35 TB/s). Diagnostic only: nothing in
    select changes."""
    import tempfile
    import check_select_runs as R
    from comm_bench.select import select
    from comm_bench.select.predict import predict
    c = next(x for x in meas["cases"] if x["micro_batch"] == b)
    pr = predicted(b)
    excess = (c["whole_layer"] - rng_ms(c, "whole_layer") - pr["whole_layer"]) / 1e3
    mem = sum(max(0.0, c.get("gpu_busy", c)[k] - rng_ms(c, k) - pr[k]) for k in ("permute", "unpermute", "swiglu_only")) / 1e3
    with tempfile.TemporaryDirectory() as d:
        res = select(R.documents(d, "H100"), model="gpt-oss-120b", nodes=8, seq_len=4096, global_batch=512,
                     micro_batch=b, recompute="none")
        w, cl, lm, comp, ov, hr = res["context"]
        shape = {"layout": "published", "kind": "megatron", "tp": 1, "cp": 1, "pp": 4, "dp": 16, "ep": 8}
        pub = predict(shape, dict(w, recompute="none"), cl, lm, comp, ov, hr, virtual=1)
    slots = pub["microbatches"] + 3                           # m + the 1F1B bubble (pp - 1, v 1)
    layers = w["layers"] // 4
    out = {"select_tokens_per_s_gpu": pub["tokens_per_s"] / 64, "published": 5630.0, "step_s": pub["step_s"],
           "excess_ms_per_layer": excess * 1e3, "memory_bound_excess_ms": mem * 1e3}
    for tag, x in (("excess as measured", excess), ("memory-bound excess x 4.8/3.35", excess + mem * (4.8 / 3.35 - 1))):
        step = pub["step_s"] + slots * layers * x
        out[tag] = {"step_s": step, "tokens_per_s_gpu": 512 * 4096 / step / 64,
                    "ratio": 512 * 4096 / step / 64 / 5630.0}
    out["excess_needed_ms_per_layer"] = (pub["step_s"] * (pub["tokens_per_s"] / 64 / 5630.0) - pub["step_s"]) \
        / (slots * layers) * 1e3
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device-command", action="store_true", help="print the commands for the GPU machine")
    p.add_argument("--json", default=os.path.join(os.path.dirname(HERE), "docs", "benchmarks",
                                                  "selection-moe-layer-h200.json"),
                   help="the measurement (moe_layer.json from the device, or the saved document)")
    a = p.parse_args(argv)
    if a.device_command:
        for c in device_commands():
            print(c, "\n")
        return 0
    meas = json.load(open(a.json))
    text, _ = table(meas)
    print(f"{meas['device']}, torch {meas['torch']}: ms per call, forward + backward\n{text}\n")
    wi = what_if(meas)
    print(f"OSS-H100 at micro-batch 1 (the recipe's): select {wi['select_tokens_per_s_gpu']:,.0f} tokens/s/GPU, "
          f"published {wi['published']:,.0f} ({wi['select_tokens_per_s_gpu'] / wi['published']:.2f}); "
          f"measured excess {wi['excess_ms_per_layer']:.2f} ms per layer (memory-bound pieces "
          f"{wi['memory_bound_excess_ms']:.2f}); {wi['excess_needed_ms_per_layer']:.2f} ms per layer would close the gap")
    for tag in ("excess as measured", "memory-bound excess x 4.8/3.35"):
        print(f"  with the {tag}: {wi[tag]['tokens_per_s_gpu']:,.0f} tokens/s/GPU ({wi[tag]['ratio']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
