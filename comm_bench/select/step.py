"""One configured candidate: its memory per GPU and its step time (docs/selection.md,
sections 4 and 5).

evaluate(c, w, cluster, lm, compute, cfg) with cfg = Config(b, v, recompute, distributed
optimizer, sequence parallel, reshard) returns the candidate's figures, feasible or why not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import memory as M
from . import pipeline as P
from . import shapes as SH
from .layouts import LAYOUTS, optimizer_unsupported, state_bytes
from .layouts import etp as etp_of
from .linkmodel import worst
from .strategies import expert_dp, groups
from .traffic import DEEPSPEED_BUCKET_ELEMS, Timeline, chunks, ddp_buckets
from .workload import attention_share, recompute_share, tensors, units as fsdp_units


@dataclass(frozen=True)
class Config:
    b: int                      # micro-batch (sequences per data-parallel rank)
    v: int                      # virtual pipeline stages (interleaving)
    recompute: str
    dist: bool = False          # Megatron's distributed optimizer (overlapped RS / AG)
    sp: bool = False            # sequence parallelism
    reshard: bool = True        # FSDP: reshard parameters after forward
    grads_sharded: bool = False  # FSDP without resharding under a pipeline: gradients reduce-scattered
    #                              every micro-batch, kept sharded (Llama 3's FSDP) instead of accumulated whole


def batch_split(gb, b, dp, pp, v):
    """(micro-batches m, the global batch used): gb rounded to the nearest multiple of b x dp
    (x pp with interleaving, Megatron's m % pp == 0); (0, unit) when gb is smaller than one
    such unit (more data-parallel ranks than sequences: not a rounding, another recipe)."""
    unit = b * dp * (pp if v > 1 else 1)
    if gb < unit:
        return 0, unit
    n = round(gb / unit)
    return n * unit // (b * dp), n * unit


def split_params(w, c, split=None, r=0):
    """(dense parameters, expert parameters) one GPU holds. Without a split: the average stage,
    dense / (tp pp) plus the embedding or output layer (V h / tp) on the first and last stage,
    experts / (etp pp ep). With a split (pipeline.py): rank r's layers, its dense layers (the
    first L - moe_layers) and MoE layers each by their own weights (shapes.py), + V h / tp on
    the first (embedding) and the last rank (output layer)."""
    tp, pp, ep = c["tp"], c["pp"], c.get("ep", 1)
    shaped = "ffn_hidden" in w
    experts = SH.expert_params(w, mtp=True) if shaped and SH.moe_layers(w) else 0
    dense = w["params"] - experts
    mtp_dense, mtp_experts = SH.mtp_params(w) if shaped else (0, 0)     # on the last rank, with the loss
    emb_all = (SH.embedding_params(w) if "ffn_hidden" in w else w["vocab"] * w["hidden"]) if w["vocab"] else 0
    ends = w["vocab"] * w["hidden"] / tp if pp > 1 and w["vocab"] else 0.0
    if split is None or pp <= 1 or w["kind"] != "transformer":
        if pp > 1 and w["vocab"]:
            local = (dense - emb_all) / (tp * pp) + ends
        else:
            local = dense / (tp * pp)
        return local, experts / (etp_of(c) * pp * ep)
    L, n_moe = w["layers"], (SH.moe_layers(w) if "ffn_hidden" in w else 0)
    start = sum(split.stages[:r])
    n = split.stages[r]
    k = max(0, min(start + n, L) - max(start, L - n_moe))          # MoE layers on rank r
    if n_moe:
        per_expert_layer = (experts - mtp_experts) / n_moe
        moe_dense = SH.layer_params(w, True) - per_expert_layer
        dense_layer = SH.layer_params(w, False) if L > n_moe else 0.0
        body = (L - n_moe) * dense_layer + n_moe * moe_dense
        scale = (dense - emb_all - mtp_dense) / body if body else 0.0   # the final norm spread over the layers
        local = ((n - k) * dense_layer + k * moe_dense) * scale / tp
        exp = k * per_expert_layer / (etp_of(c) * ep)
    else:
        local = (dense - emb_all - mtp_dense) * n / L / tp
        exp = 0.0
    last = r == len(split.stages) - 1
    at_end = (1 if r == 0 else 0) + (1 if last else 0)
    if last:
        local += mtp_dense / tp
        exp += mtp_experts / (etp_of(c) * ep)
    return local + at_end * ends, exp


def _sharded(lay, cfg, pp):
    """Which states the layout splits over its sharding group for this configuration."""
    if lay.kind == "fsdp-tp" and not cfg.reshard:
        # gradients kept unsharded across micro-batches (torchtitan's FSDP2 + PP), unless sharded
        return "k" if pp > 1 and not cfg.grads_sharded else "gk"
    return lay.sharded + ("k" if cfg.dist else "")


def _split(w, c, cfg, compute, bc, m, states_of):
    """The pipeline split of candidate c (pipeline.py): --pp-layout's where given, else the
    searched one, priced by this configuration's layer time, output layer, states and activations."""
    L, pp, v, tp, etp = w["layers"], c["pp"], cfg.v, c["tp"], etp_of(c)
    if w.get("pp_layout"):
        return P.given(w["pp_layout"], L, pp, v)
    args = (bc, tp)
    kw = dict(recompute=cfg.recompute, sp=cfg.sp, ep=c.get("ep", 1), etp=etp)
    t_layer = compute.seconds(*args, layer_share=1.0 / L, logits=False, **kw)
    o = compute.seconds(*args, layer_share=0.0, logits=True, **kw) / t_layer if t_layer > 0 else 0.0
    d, e = split_params(w, c)
    ends = w["vocab"] * w["hidden"] / tp if w["vocab"] else 0.0
    s = states_of((d - ends) * pp / L, e * pp / L)
    a = M.layer_activation_bytes(w, bc, tp, cfg.recompute, cfg.sp, etp)
    e_first = states_of(ends, 0.0)
    return P.best(L, pp, v, max(1, m), round(o, 6), s, a, e_first, e_first + 4.0 * w["seq_len"] * bc * w["vocab"] / tp)


def combined_1f1b(total, m, pp, t_mb):
    """Exposed seconds per micro-batch of the dispatcher's communication (total per step)
    under Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): in the steady
    state a micro-batch's alltoalls run beside the paired micro-batch's compute (a forward
    beside a backward) and hide behind up to all of it (assumed: no slowdown of either); the
    min(m, pp) micro-batches of the warm-up and cool-down have no partner and run theirs
    exposed."""
    per = total / m
    edge = min(m, pp)
    return (edge * per + (m - edge) * max(0.0, per - t_mb)) / m


def infeasible(out, reason):
    out.update(feasible=False, reason=reason, step_s=None, efficiency=None, comm_s=None, exposed_comm_s=None,
               compute_s=None, bubble=None, samples_per_s=None, tokens_per_s=None, comm_source=None,
               collectives=[], overlap=None, overlap_source=None)
    return out


def evaluate(c, w, cluster, lm, compute, cfg, overlap_for, overlap, headroom):
    kind, tp, pp, dp = c["kind"], c["tp"], c["pp"], c["dp"]
    cp, ep, etp = c.get("cp", 1), c.get("ep", 1), etp_of(c)
    lay = LAYOUTS[kind]
    N, G = cluster["world_size"], cluster["gpus_per_node"]
    b, v, rc = cfg.b, cfg.v, cfg.recompute
    m, gb = batch_split(w["global_batch"] or w["micro_batch"] * N, b, dp, pp, v)
    out = dict(c, **({"etp": etp} if w.get("experts") else {}), hpz_size=min(G, dp), micro_batch=b,
               virtual_stages=v, recompute=rc, distributed_optimizer=cfg.dist, sequence_parallel=cfg.sp,
               reshard=cfg.reshard, microbatches=m, global_batch=gb,
               **({"grads_sharded": True} if cfg.grads_sharded else {}))
    unsized = dict(out, model_states_gb=None, activations_gb=None, buffers_gb=None, memory_gb=None)
    if m == 0:
        return infeasible(unsized, f"global batch {w['global_batch'] or w['micro_batch'] * N} < micro-batch {b} x "
                                   f"dp {dp}" + (f" x pp {pp} (interleaved)" if v > 1 else "") + " (--global-batch)")
    if SH.recompute_modules(rc) and kind != "megatron":
        return infeasible(unsized, f"--recompute {rc} is Megatron-Core's --recompute-modules: {kind} has no such "
                                   "option")
    why = optimizer_unsupported(kind, w)
    if why:
        return infeasible(unsized, why)
    g = groups(c, G)
    bc = b / cp                               # a GPU's share of the micro-batch's tokens
    # memory
    sb, g_comm = state_bytes(kind, w)
    shard = (g["node"][0] * g["node"][1]) if lay.shard_group == "node" else dp * cp
    sharded = _sharded(lay, cfg, pp)
    expert_shard = shard if lay.shard_group == "node" else expert_dp(c)

    def states_of(d, e):
        return (M.model_states_bytes(d, sb["p"], sb["g"], sb["k"], kind, shard, sharded=sharded)
                + M.model_states_bytes(e, sb["p"], sb["g"], sb["k"], kind, expert_shard, sharded=sharded))
    transformer = w["kind"] == "transformer"
    L = w["layers"] if transformer else 1
    split = None
    if transformer and pp > 1:
        split = _split(w, c, cfg, compute, bc, m, states_of)
        if split is None:
            why = (f"--pp-layout {','.join(map(str, w['pp_layout']))} is no split of {L} layers over {pp} stages"
                   if w.get("pp_layout") else f"no split of {L} layers over {pp} stages")
            return infeasible(unsized, why + (f" of {v} whole chunks" if v > 1 else ""))
        out.update(pp_split=list(split.stages), pp_split_how=split.how)
    fsdp = fsdp_units(w)

    def rank_memory(r):
        """(bytes, states, activations, buffers, dense, experts) of pipeline rank r."""
        d, e = split_params(w, c, split, r)
        st = states_of(d, e)
        if split is None:
            ac = M.activation_bytes(w, bc, tp, pp, m, rc, cfg.sp, v, etp=etp)
        else:
            per = M.layer_activation_bytes(w, bc, tp, rc, cfg.sp, etp)
            ac = per * M.in_flight_layers(pp, v, max(1, m), split.chunks(r, v), rank=r)
            if r == pp - 1:                   # the logits (one set per MTP module too) and the MTP layers
                n_mtp = w.get("mtp", 0)
                ac += (1 + n_mtp) * 4.0 * w["seq_len"] * bc * w["vocab"] / tp
                if n_mtp:
                    ac += per * M.in_flight_layers(pp, v, max(1, m), [0.0] * (v - 1) + [float(n_mtp)], rank=r)
        un = [u * (d + e) / max(1.0, w["params"] / pp) for u in fsdp]     # a GPU's part
        bu = 0.0
        if "p" in sharded:                    # two units gathered at a time, one's gradients
            bu = 2 * max(un) * sb["p"] + max(un) * sb["g"]
        if lay.hpz:                           # the node's secondary parameter partition
            bu += sb["p"] * w["params"] / (g["node"][0] * g["node"][1])
        return st + ac + bu, st, ac, bu, d, e, un
    ids = P._ranks(split) if split else [0]
    ranks = [rank_memory(r) for r in ids]
    mem, states, acts, buffers, _, _, _ = max(ranks, key=lambda x: x[0])
    if split:
        out["peak_rank"] = ids[max(range(len(ids)), key=lambda i: ranks[i][0])]
    _, _, _, _, dense, experts, units = max(ranks, key=lambda x: x[4] + x[5])   # the most weights: its DP sync
    usable = cluster["gpu_mem_gb"] * (1 - headroom)
    out.update(model_states_gb=round(states / 1e9, 3), activations_gb=round(acts / 1e9, 3),
               buffers_gb=round(buffers / 1e9, 3), memory_gb=round(mem / 1e9, 3))
    if mem / 1e9 > usable:
        return infeasible(out, f"needs {mem / 1e9:.1f} > {usable:.1f} GB/GPU")
    # time: the stage of one micro-batch; the slowest stage sets the pipeline's pace: the last
    # holds the output layer too (Megatron-Core's and torchtitan's stage split)
    stages = sorted({(n, r == pp - 1) for r, n in enumerate(split.stages)}) if split else [(L, True)]
    layers_stage = max(n for n, _ in stages)
    t_mb = max(compute.seconds(bc, tp, n / L, rc, cfg.sp, ep, logits=lg, etp=etp) for n, lg in stages)
    tl = Timeline(lm)
    act = bc * w["seq_len"] * w.get("hidden", 0) * w["bytes"]["act"]
    per_mb = 0.0                              # exposed model-parallel communication per micro-batch
    redo = recompute_share(rc)                # a recomputed forward repeats its layers' traffic
    n_moe = math.ceil(SH.moe_layers(w) * layers_stage / w["layers"]) if "ffn_hidden" in w else 0
    # a MoE layer's experts need no tp collective of their own when they are whole (etp 1)
    # or when their tokens arrive by all-to-all (the etp gather below); else (ep 1, etp tp),
    # or with shared experts (split over tp), tokens are gathered over tp as for a dense MLP
    own_tp = n_moe if (ep > 1 or etp == 1) and not w.get("shared_experts") else 0
    if tp > 1:
        e, _ = tl.add("tensor-parallel activation all_reduce", "all_reduce",
                      [act] * round((4 + 2 * redo) * layers_stage - (2 + redo) * own_tp), g["tp"], repeat=m)
        per_mb += e.seconds / m
    if cp > 1:
        kv = act / w["hidden"] * 2 * w.get("kv_heads", w["heads"]) * SH.head_dim(w) / tp if "ffn_hidden" in w \
            else 2 * act / tp
        if lay.cp_comm == "all_gather":       # the whole K, V gathered after the local chunk's attention
            e, _ = tl.add("context-parallel K/V all_gather (forward, backward)", "all_gather",
                          [kv * cp] * round((2 + redo) * layers_stage), g["cp"], repeat=m)
            r, _ = tl.add("context-parallel dK/dV reduce_scatter", "reduce_scatter", [kv * cp] * layers_stage,
                          g["cp"], repeat=m)
            hidden_by = attention_share(w) * t_mb / cp
            per_mb += max(0.0, (e.seconds + r.seconds) / m - hidden_by)
        else:                                 # ring attention: K, V chunks around the cp ring
            sends = round((cp - 1) * (3 + redo) * layers_stage)   # forward K V, backward K V + dK dV
            e, _ = tl.add("context-parallel K/V ring send/recv", "p2p", [kv] * sends, (2, 1), repeat=m,
                          scope="intra-node" if tp * cp <= G else "inter-node")
            hidden_by = attention_share(w) * t_mb  # each ring step overlaps the previous chunk's attention
            per_mb += max(0.0, e.seconds / m - hidden_by)
    # a GPU's routed token copies (sequence parallel: its b s / (cp tp) tokens, k copies each)
    routed = act / tp * w.get("experts_per_token", 0)
    dispatch = 0.0                            # the dispatcher's communication, seconds per step
    if n_moe and ep > 1:                      # dispatch + combine, forward and backward
        e, _ = tl.add("expert-parallel all-to-all (dispatch, combine)", "alltoall",
                      [routed] * round((4 + 2 * redo) * n_moe), g["ep"], repeat=m)
        dispatch += e.seconds
    if n_moe and ep > 1 and etp > 1:          # received copies gathered over etp, outputs scattered back
        for op in ("all_gather", "reduce_scatter"):   # forward's, and backward's of the other
            e, _ = tl.add(f"expert-tensor-parallel token {op}", op, [etp * routed] * round((2 + redo) * n_moe),
                          g["etp"], repeat=m)
            dispatch += e.seconds
    out["a2a_overlap"] = bool(dispatch and w.get("a2a_overlap") and kind == "megatron")
    per_mb += combined_1f1b(dispatch, m, pp, t_mb) if out["a2a_overlap"] else dispatch / m
    if pp > 1:
        e, _ = tl.add("pipeline activation send/recv", "p2p", [act / tp] * (2 * v), (2, 1), repeat=m,
                      scope=g["pp_scope"])
        per_mb += e.seconds / m
    bubble = (pp - 1) / v
    t_pipe = (m + bubble) * (t_mb + per_mb)
    # data-parallel traffic, dense and expert weights over their own groups
    mechanism = "backward" if (kind == "megatron" and cfg.dist) else lay.overlap
    F, out["overlap_source"] = overlap_for(overlap, g["grad"] if lay.model_parallel else g["dp"], mechanism)
    out["overlap"] = F
    bwd = t_mb * (2 + redo) / (3 + redo)      # backward's share of the stage's compute
    exposed = 0.0
    parts = [(dense, g["grad"] if lay.model_parallel else (g["node"] if lay.shard_group == "node" else g["dp"]),
              ""), (experts, g["expert_grad"], " (experts)")]
    for P_local, place, tag in parts:
        if P_local <= 0:
            continue
        exposed += _dp_traffic(tl, w, lay, cfg, sb, g_comm, P_local, place, tag, units, m, pp, F, t_mb, bwd, g,
                               shard, sharded)
    step = t_pipe + exposed
    ref = compute.seconds(w["micro_batch"], 1, 1.0, "none", False) / w["micro_batch"]
    comm = sum(i["seconds"] for i in tl.items)
    out.update(comm_s=comm, exposed_comm_s=exposed + m * per_mb, compute_s=m * t_mb,
               bubble=bubble / (m + bubble), step_s=step, efficiency=gb * ref / (N * step),
               samples_per_s=gb / step, tokens_per_s=gb * w["seq_len"] / step,
               comm_source=worst(*(i["source"] for i in tl.items)) if tl.items else "measured",
               collectives=tl.items, feasible=True, reason=f"fits: {mem / 1e9:.1f} of {usable:.1f} GB usable")
    return out


def _dp_traffic(tl, w, lay, cfg, sb, g_comm, P_local, place, tag, units, m, pp, F, t_mb, bwd, g, shard, sharded):
    """Add one weight group's data-parallel collectives to tl; return their exposed seconds."""
    grad_op, grad_when = lay.grads
    # FSDP / ZeRO-3: per layer, per micro-batch (torchtitan without resharding and without a
    # pipeline still gathers each micro-batch's parameters in forward: held until its backward)
    per_unit = "p" in sharded or lay.kind == "fsdp-tp"
    frac = P_local / max(1.0, sum(units))     # this group's share of each unit
    if lay.kind == "fsdp-tp" and not cfg.reshard and pp > 1:
        # parameters gathered before the first micro-batch and kept; gradients accumulated
        # unsharded and reduce-scattered after the last (FSDP2 under a pipeline schedule), or
        # reduce-scattered after every micro-batch's backward and kept sharded (grads_sharded)
        sizes = [u * frac * g_comm for u in units]
        n_rs = m if cfg.grads_sharded else 1
        rs, last = tl.add(f"gradient reduce_scatter per unit{' per micro-batch' if n_rs > 1 else ''}{tag}",
                          "reduce_scatter", sizes, place, repeat=n_rs)
        ag, first = tl.add(f"parameter all_gather per unit, once per step{tag}", "all_gather",
                           [u * frac * sb["p"] for u in units], place)
        return (max(first.seconds, ag.seconds - F * (t_mb - bwd))
                + n_rs * max(last.seconds, rs.seconds / n_rs - F * bwd))
    per_mb = 1 if grad_when == "step" and not per_unit else m
    if lay.kind == "ddp":
        sizes = ddp_buckets(tensors(w), g_comm, w["bucket_mb"])
    elif lay.kind == "megatron" and not cfg.dist:
        sizes = ddp_buckets([P_local], g_comm, w["bucket_mb"])
    else:
        grad_op = "reduce_scatter" if cfg.dist else grad_op
        sizes = ([u * frac * g_comm for u in units] if per_unit
                 else chunks(P_local * g_comm, DEEPSPEED_BUCKET_ELEMS * g_comm))
    grad, last = tl.add(f"gradient {grad_op}" + (" per micro-batch" if per_mb > 1 else "") + tag, grad_op, sizes,
                        place, repeat=per_mb)
    if per_unit:
        unit_p = [u * frac * sb["p"] for u in units]
        agf, first = tl.add(f"parameter all_gather per unit (forward){tag}", "all_gather", unit_p, place, repeat=m)
        total = grad.seconds + agf.seconds
        if cfg.reshard:
            agb, _ = tl.add("parameter all_gather per unit (backward" + (", from the node's copy)" if lay.hpz else ")")
                            + tag, "all_gather", unit_p, g["node"] if lay.hpz else place, repeat=m)
            total += agb.seconds
        if lay.replicas and g["replicas"][1] > 1:
            rep, _ = tl.add("shard all_reduce across nodes per micro-batch", "all_reduce",
                            [u * g_comm / shard for u in units], g["replicas"], repeat=m)
            total += rep.seconds
        # forward hides the forward all_gathers; backward the rest
        rest = (total - agf.seconds) / m
        return m * (max(first.seconds, agf.seconds / m - F * (t_mb - bwd)) + max(0.0, rest - F * bwd))
    exposed = per_mb * max(last.seconds, grad.seconds / per_mb - F * bwd) if grad.seconds else 0.0
    if lay.params == "step" or cfg.dist:
        ag, first = tl.add(f"parameter all_gather (after the step){tag}", "all_gather",
                           chunks(P_local * sb["p"], DEEPSPEED_BUCKET_ELEMS * sb["p"]), place)
        # Megatron's --overlap-param-gather hides it behind the next forward; DeepSpeed's is exposed
        exposed += max(first.seconds, ag.seconds - F * (t_mb - bwd)) if cfg.dist else ag.seconds
    return exposed
