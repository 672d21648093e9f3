#!/usr/bin/env python3
"""Megatron-Core's MoE layer on one GPU at EP 1 (issue 41): the alltoall token dispatcher,
the local (no Transformer Engine) router and sequential expert MLP, gpt-oss-120b's shapes
(h 2880, 128 experts, top-4, expert FFN 2880, bf16), one micro-batch of --tokens tokens.
Each piece of MoELayer.forward is timed alone, forward and forward + backward: routing
(router GEMM, top-k, softmax, aux loss), preprocess (token counts, the device-to-host copy
of them and its synchronisation, permutation 1), dispatch (+ its postprocess), the experts,
combine (unpermutation). Beside them the same steps written in plain PyTorch (index_select /
index_add_ like moe_utils.permute/unpermute unfused) and the whole layer. Every figure is
also given per routed element (tokens x top-k x h), the unit of select's MoE gap.

    PYTHONPATH=<megatron-core> python tools/bench_moe_megatron.py --json out.json [--tokens 4096]
Timing like nccl-tests' BenchTime: a host clock over `iters` back-to-back calls and the
synchronize that follows, / iters, median of `repeats` batches; host-side costs count."""
from __future__ import annotations

import argparse
import json
import os
import sys


def timed(fn, iters, repeats):
    """bench_launch_overhead's timing loop (one for both benchmarks) after a warm-up call."""
    import torch

    from bench_launch_overhead import timed as median_s      # tools/ is the script's own folder
    fn()
    torch.cuda.synchronize()
    return median_s(fn, iters, repeats)


def setup():
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state, tensor_parallel
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
    tensor_parallel.model_parallel_cuda_manual_seed(0)


def megatron_layer(h, e, k, f):
    import torch
    import torch.nn.functional as F
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig
    cfg = TransformerConfig(
        num_layers=1, hidden_size=h, num_attention_heads=64, ffn_hidden_size=f, moe_ffn_hidden_size=f,
        num_moe_experts=e, moe_router_topk=k, moe_token_dispatcher_type="alltoall", moe_grouped_gemm=False,
        moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3, moe_permute_fusion=False,
        gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False, bf16=True,
        params_dtype=torch.bfloat16, expert_model_parallel_size=1, tensor_model_parallel_size=1)
    spec = get_moe_module_spec(use_te=False, num_experts=e, moe_grouped_gemm=False)
    return build_module(spec, config=cfg, layer_number=1).cuda()


def leaf(t):
    return t.detach().requires_grad_(t.is_floating_point())


def fwd_bwd(fn, ins):
    """fn(*ins) -> tensor or tuple; backward of its floating outputs with ones-like gradients."""
    import torch

    def run():
        for t in ins:
            t.grad = None
        out = fn(*ins)
        outs = [o for o in (out if isinstance(out, tuple) else (out,))
                if torch.is_tensor(o) and o.requires_grad]
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    return run


def megatron_pieces(layer, x, iters, repeats):
    import torch
    td = layer.token_dispatcher
    probs, rmap = layer.route(x)
    hp, pp = layer.preprocess(x, probs, rmap)
    dh, dp = layer.dispatch(hp, pp)
    di, tpe, dprobs = td.dispatch_postprocess(dh, dp)
    eo, _ = layer.experts(di, tpe, dprobs)
    pieces = {}

    def piece(name, fn, ins):
        ins = [leaf(t) for t in ins]
        try:
            with torch.no_grad():
                f = timed(lambda: fn(*ins), iters, repeats)
            fb = timed(fwd_bwd(fn, ins), iters, repeats)
        except Exception as exc:  # noqa: BLE001 -- one piece's failure is recorded, the others still run
            pieces[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"  megatron {name:26s} {pieces[name]['error']}", flush=True)
            return
        pieces[name] = {"fwd_s": f, "fwd_bwd_s": fb}
        print(f"  megatron {name:26s} fwd {f * 1e3:8.3f} ms  fwd+bwd {fb * 1e3:8.3f} ms", flush=True)

    piece("route", lambda a: layer.route(a)[0], [x])
    piece("preprocess_permute_sync", lambda a, p: layer.preprocess(a, p, rmap), [x, probs])
    piece("dispatch_postprocess", lambda a, p: (lambda r: (r[0], r[2]))(
        td.dispatch_postprocess(*layer.dispatch(a, p))), [hp, pp])
    piece("experts", lambda a, p: layer.experts(a, tpe, p)[0], [di, dprobs])
    piece("combine_unpermute", lambda a: td.combine_postprocess(td.token_combine(td.combine_preprocess(a))),
          [eo])
    # the token-count device-to-host copy and synchronisation alone (what preprocess waits on)
    pieces["token_count_dtoh_sync"] = {"fwd_s": timed(lambda: rmap.sum(0).long().cpu(), iters, repeats)}
    piece("whole_layer", lambda a: layer(a)[0], [x])
    return pieces


def plain_pieces(h, e, k, f, x, iters, repeats):
    """The same steps in plain PyTorch (Megatron-Core's unfused moe_utils.permute/unpermute:
    index_select by a sorted token index, index_add_ weighted by the probabilities)."""
    import torch
    import torch.nn.functional as F
    dev, dt = x.device, x.dtype
    wr = (torch.randn(e, h, device=dev, dtype=dt) * 0.02).requires_grad_()
    w1 = [(torch.randn(2 * f, h, device=dev, dtype=dt) * 0.02).requires_grad_() for _ in range(e)]
    w2 = [(torch.randn(h, f, device=dev, dtype=dt) * 0.02).requires_grad_() for _ in range(e)]
    s = x.shape[0]

    def route(a):
        logits = (a @ wr.t()).float()
        v, i = logits.topk(k, -1)
        p = torch.softmax(v, -1)
        return torch.zeros(s, e, device=dev).scatter(1, i, p), i

    probs, idx = route(x)
    order = idx.flatten().argsort(stable=True)
    tok = order // k
    counts = torch.bincount(idx.flatten(), minlength=e).tolist()
    pieces = {}

    def piece(name, fn, ins):
        ins = [leaf(t) for t in ins]
        with torch.no_grad():
            fw = timed(lambda: fn(*ins), iters, repeats)
        fb = timed(fwd_bwd(fn, ins), iters, repeats)
        pieces[name] = {"fwd_s": fw, "fwd_bwd_s": fb}
        print(f"  plain    {name:26s} fwd {fw * 1e3:8.3f} ms  fwd+bwd {fb * 1e3:8.3f} ms", flush=True)

    def permute(a, p):
        i = idx.flatten().argsort(stable=True)
        n = torch.bincount(idx.flatten(), minlength=e).cpu()          # the count sync, as Megatron-Core
        return a.index_select(0, i // k), p.gather(1, idx).flatten()[i], n

    def experts(a):
        outs = [F.linear((lambda g: F.silu(g[0]) * g[1])(F.linear(c, w1[j]).chunk(2, -1)), w2[j])
                for j, c in enumerate(a.split(counts))]
        return torch.cat(outs)

    def unpermute(y, p):
        return torch.zeros(s, h, device=dev, dtype=dt).index_add(0, tok, y * p.unsqueeze(-1).to(dt))

    piece("route", lambda a: route(a)[0], [x])
    piece("permute_sync", lambda a, p: permute(a, p)[:2], [x, probs])
    xs = x.index_select(0, tok)
    ps = probs.gather(1, idx).flatten()[order]
    piece("experts", experts, [xs])
    piece("unpermute", unpermute, [xs, ps])
    return pieces


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2880)
    p.add_argument("--experts", type=int, default=128)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--ffn", type=int, default=2880)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("bench_moe_megatron: no CUDA device", file=sys.stderr)
        return 2
    import megatron.core
    from megatron.core.transformer.moe import moe_utils
    if not hasattr(moe_utils, "te_general_gemm"):
        # megatron-core 0.16.1 without Transformer Engine: moe_utils imports te_general_gemm inside
        # its TE try-block and tests it by name in the router GEMM; None is the value
        # extensions/transformer_engine.py gives it where TE is absent (torch matmul path)
        moe_utils.te_general_gemm = None
    setup()
    torch.manual_seed(0)
    h, e, k, f, s = a.hidden, a.experts, a.topk, a.ffn, a.tokens
    x = torch.randn(s, 1, h, device="cuda", dtype=torch.bfloat16)
    doc = {"what": "Megatron-Core MoELayer (alltoall dispatcher, local router, SequentialMLP, no TE) at EP 1 "
                   "by piece, and the same steps in plain PyTorch (tools/bench_moe_megatron.py)",
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "megatron_core": megatron.core.__version__,
           "shape": {"tokens": s, "hidden": h, "experts": e, "topk": k, "ffn": f},
           "routed_elements": s * k * h}

    def save():
        if a.json:
            with open(a.json, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1)
    layer = megatron_layer(h, e, k, f)
    doc["megatron"] = megatron_pieces(layer, x, a.iters, a.repeats)
    save()
    del layer
    torch.cuda.empty_cache()
    doc["plain"] = plain_pieces(h, e, k, f, x.view(s, h), a.iters, a.repeats)
    save()
    n = s * k * h
    for side in ("megatron", "plain"):
        for name, r in doc[side].items():
            if "fwd_s" in r:
                r["fwd_bwd_s_per_routed_element"] = r.get("fwd_bwd_s", r["fwd_s"]) / n
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
