"""One gpt-oss-120b transformer layer on one GPU at ep 8, forward + backward by piece (the
device half of tools/check_select_moe_layer.py, which sends this file inline, compressed,
since the device machine runs another checkout). Plain PyTorch, bf16. Also the bytes per
token autograd keeps from the forward for the backward (kept_bytes_per_token). Prints and
writes JSON to $OUT/moe_layer.json (or argv[1])."""
import json
import os
import sys

import torch
import torch.nn.functional as F

D, B = "cuda", torch.bfloat16
H, NQ, NKV, HD, FF, E, K, EP = 2880, 64, 8, 64, 2880, 128, 4, 8
EL, S = E // EP, 4096


def timed(fn, reps=25, warm=5):
    """Median ms of fn (CUDA events around each call, after warm-up)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[reps // 2]


def P(*shape, scale=0.02):
    return (torch.randn(*shape, device=D, dtype=B) * scale).requires_grad_()


def fb(f, ins):
    """fwd+bwd of f over its inputs (random output gradients; autograd.grad: no accumulation):
    [median ms per call, ms per call the GPU is busy (kernels, copies: torch.profiler over 5
    calls), the 12 costliest kernels' (name, ms per call)]."""
    from torch.profiler import ProfilerActivity, profile

    def run():
        out = f(*ins)
        out = out if isinstance(out, tuple) else (out,)
        out = [o for o in out if o.requires_grad]
        torch.autograd.grad(out, [i for i in ins if torch.is_tensor(i) and i.requires_grad],
                            [torch.randn_like(o) for o in out])
    t = timed(run)
    with profile(activities=[ProfilerActivity.CUDA]) as pr:
        for _ in range(5):
            run()
        torch.cuda.synchronize()
    ks = sorted(((e.self_device_time_total / 5e3, e.key[:70]) for e in pr.key_averages()
                 if e.self_device_time_total > 0), reverse=True)
    return [t, sum(k for k, _ in ks), [(n, round(k, 4)) for k, n in ks[:12]]]


def case(b):
    T = b * S
    r = {"micro_batch": b, "tokens": T, "routed_rows": K * T, "rows_per_local_expert": K * T // E * EP,
         "gpu_busy": {}, "top_kernels": {}}

    def m(name, f, ins):
        r[name], r["gpu_busy"][name], r["top_kernels"][name] = fb(f, ins)
    ln1, ln2, wqkv, wo, wr = P(H), P(H), P(H, (NQ + 2 * NKV) * HD), P(NQ * HD, H), P(H, E)
    w1, w2 = P(EL, 2 * FF, H), P(EL, H, FF)
    ang = torch.arange(S, device=D)[:, None] * 1e4 ** (-torch.arange(HD // 2, device=D) / (HD // 2))
    cos, sin = ang.cos().to(B), ang.sin().to(B)

    def rope(t):
        t1, t2 = t.chunk(2, -1)
        return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], -1)

    def sdpa_gqa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def sdpa_cudnn(q, k, v):              # K, V repeated to the query heads, cuDNN's kernel
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k.repeat_interleave(NQ // NKV, 1),
                                                  v.repeat_interleave(NQ // NKV, 1), is_causal=True)

    def attn(x, ln1, wqkv, wo):
        y = F.rms_norm(x, (H,), ln1) @ wqkv
        q, k, v = y.view(b, S, NQ + 2 * NKV, HD).transpose(1, 2).split([NQ, NKV, NKV], 1)
        o = sdpa(rope(q), rope(k), v)
        return x + o.transpose(1, 2).reshape(b, S, NQ * HD) @ wo

    x = P(b, S, H, scale=1)
    q, k, v = P(b, NQ, S, HD, scale=1), P(b, NKV, S, HD, scale=1), P(b, NKV, S, HD, scale=1)
    m("sdpa_core_gqa", sdpa_gqa, (q, k, v))
    try:
        m("sdpa_core_cudnn", sdpa_cudnn, (q, k, v))
    except Exception as ex:  # noqa: BLE001
        r["sdpa_cudnn_error"] = str(ex)[:200]
    sdpa = sdpa_cudnn if r.get("sdpa_core_cudnn", 1e9) < r["sdpa_core_gqa"] else sdpa_gqa
    r["sdpa_used"] = sdpa.__name__
    r["sdpa_core"] = min(r["sdpa_core_gqa"], r.get("sdpa_core_cudnn", 1e9))
    m("attention_block", attn, (x, ln1, wqkv, wo))

    def router(x, ln2, wr):
        y = F.rms_norm(x, (H,), ln2)
        p, i = (y @ wr).topk(K, -1)
        return y, p.float().softmax(-1).to(B), i

    xt = P(T, H, scale=1)
    m("router", router, (xt, ln2, wr))
    with torch.no_grad():
        _, pr, idx = router(xt, ln2, wr)

    def route(idx):
        """Megatron-Core's order: the k copies sorted by global expert (the dispatcher's permute,
        before the all-to-all), then the received rows sorted by local expert (sort_chunks)."""
        e = idx.flatten()
        o1 = e.argsort(stable=True)
        loc = e[o1] % EL
        o2 = loc.argsort(stable=True)
        cnt = torch.bincount(loc, minlength=EL)
        return o1, o2, cnt

    def permute(y, idx):
        o1, o2, cnt = route(idx)
        _split = cnt.tolist()                  # tokens per expert to the host (the dispatcher's sync)
        return y.index_select(0, o1 // K).index_select(0, o2)

    y = P(T, H, scale=1)
    m("permute", permute, (y, idx))
    o1, o2, cnt = route(idx)
    offs = cnt.cumsum(0).to(torch.int32)
    inv2 = o2.argsort()

    def swiglu(g):
        a, u = g.chunk(2, -1)
        return F.silu(a) * u

    def experts_loop(xs, w1, w2):
        outs = []
        for e, xe in enumerate(xs.split(cnt.tolist())):
            outs.append(swiglu(xe @ w1[e].T) @ w2[e].T)
        return torch.cat(outs)

    def experts_grouped(xs, w1, w2):
        g = torch._grouped_mm(xs, w1.transpose(-2, -1), offs=offs)
        return torch._grouped_mm(swiglu(g), w2.transpose(-2, -1), offs=offs)

    xs = P(K * T, H, scale=1)
    m("experts_loop", experts_loop, (xs, w1, w2))
    try:
        m("experts_grouped_mm", experts_grouped, (xs, w1, w2))
    except Exception as ex:  # noqa: BLE001
        r["experts_grouped_mm_error"] = str(ex)[:200]
    m("swiglu_only", swiglu, (P(K * T, 2 * FF, scale=1),))
    best = experts_grouped if r.get("experts_grouped_mm", 1e9) < r["experts_loop"] else experts_loop
    r["experts_used"] = "grouped_mm" if best is experts_grouped else "loop"

    def unpermute(ys, pr):
        z = ys.index_select(0, inv2) * pr.flatten()[o1][:, None]
        return torch.zeros(T, H, device=D, dtype=B).index_add(0, o1 // K, z)

    m("unpermute", unpermute, (P(K * T, H, scale=1), pr.clone().requires_grad_()))

    def layer(x, *ws):
        x = attn(x, ln1, wqkv, wo).view(T, H)
        yy, p, i = router(x, ln2, wr)
        a, b_, c = route(i)
        _cnt = c.tolist()
        xs = yy.index_select(0, a // K).index_select(0, b_)
        z = best(xs, w1, w2).index_select(0, b_.argsort()) * p.flatten()[a][:, None]
        return x + torch.zeros_like(x).index_add(0, a // K, z)

    m("whole_layer", layer, (x, ln1, wqkv, wo, ln2, wr, w1, w2))

    def kept(f, ins):
        """Bytes per token that autograd keeps from f's forward for its backward: allocated
        after the forward, less before it and less the output itself."""
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        out = f(*ins)
        torch.cuda.synchronize()
        n = torch.cuda.memory_allocated() - before - out.numel() * out.element_size()
        del out
        return n / T
    r["kept_bytes_per_token"] = {"whole_layer": kept(layer, (x, ln1, wqkv, wo, ln2, wr, w1, w2)),
                                 "attention_block": kept(attn, (x, ln1, wqkv, wo)),
                                 "experts": kept(best, (xs, w1, w2))}
    r["experts"] = min(r["experts_loop"], r.get("experts_grouped_mm", 1e9))
    r["sum_of_pieces"] = r["attention_block"] + r["router"] + r["permute"] + r["experts"] + r["unpermute"]
    return r


def main():
    torch.manual_seed(0)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "sdpa_backends": {n: getattr(torch.backends.cuda, n + "_sdp_enabled")() for n in ("flash", "cudnn", "mem_efficient")},
           "cases": [case(b) for b in (1, 4)]}
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."), "moe_layer.json")
    json.dump(res, open(out, "w"), indent=1)
    print(json.dumps(res, indent=1))


main()
