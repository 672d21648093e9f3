"""Predicted memory, communication and step time of one candidate layout, configured.

A shape (strategies.py: kind, tp, pp, dp) is tried with each micro-batch size b (the
given one, else 1, 2, 4, 8), each interleaving v of Megatron's schedule, and the memory
switches in order of cost (configs below); the first switch set that fits is that
(b, v)'s configuration, and the fastest (b, v) is the candidate. Per step, with global
batch B = b x dp x m (m micro-batches per GPU; B the recipe's or --global-batch, rounded
to a multiple of b x dp):
  stage time   per micro-batch: compute of the stage's layers / tp (compute.py) + the
               tensor-parallel all_reduces (4 per layer, 6 with full recomputation, of
               b s h activations; sequence parallel moves the same bytes) + the pipeline
               sends (2 v per micro-batch of b s h / tp: Megatron's scatter/gather)
  pipeline     (m + (pp - 1)/v) x stage time  (1F1B; interleaved: Narayanan et al. 2021)
  data-parallel collectives per layouts.LAYOUTS: gradient all_reduce / reduce_scatter once
               per step or once per micro-batch, parameter all_gather after the step or
               per unit in forward and backward; hybrid sharding adds the all_reduce of
               the shard across nodes
  exposed      by the layout's overlap mechanism and F (--overlap; default per DP scope:
               DEFAULT_OVERLAP): "backward": max(last bucket, comm - F x backward of the
               last micro-batch); "compute": per micro-batch the forward all_gathers
               behind F x forward (at least the first unit exposed) and the rest behind
               F x backward; "none": all of it (Megatron-LM reduces after the flush,
               unless --overlap is given)
step = pipeline + exposed data-parallel communication; efficiency = B x (one GPU's time per
sample, no parallelism) / (N x step): throughput on N GPUs / N x one GPU's.
"""
from __future__ import annotations

import math

from . import memory as M
from .layouts import LAYOUTS, config_lines, state_bytes
from .linkmodel import worst
from .strategies import groups
from .traffic import DEEPSPEED_BUCKET_ELEMS, Timeline, chunks, ddp_buckets
from .workload import tensors, units as fsdp_units

# --overlap's default, by where the data-parallel group runs (docs/selection.md, Overlap):
#  intra-node 0: measured on 2 x H200 over NVLink (docs/benchmarks/selection.md): DDP's
#    all_reduce was not hidden behind backward (step - no_sync step = 82-99% of its transfer
#    time, 5 sizes over two sessions; NCCL's copy kernels compete with backward for the SMs),
#    and step times with 0 came within 1% (DDP) and 4% (FSDP, 1-2 B); with 1, 7-47% short.
#  inter-node 1: assumed, not measured here: over the network NCCL's kernels wait on the NIC
#    and need few SMs, and gradient sync hides behind backward (Li et al., PyTorch
#    Distributed, VLDB 2020).
DEFAULT_OVERLAP = {"intra-node": 0.0, "inter-node": 1.0}
MICRO_BATCHES = (1, 2, 4, 8)
VIRTUAL_STAGES = (1, 2, 3, 4, 6, 8)


def overlap_for(overlap, dp_placement, mechanism="backward"):
    """(--overlap a candidate uses, where it comes from): the user's, else none for a
    layout that does not overlap, else the default of its DP group's scope."""
    if overlap is not None:
        return overlap, "given"
    if mechanism == "none":
        return 0.0, "none: Megatron-LM reduces gradients after the pipeline flush (--overlap-grad-reduce off)"
    scope = "inter-node" if dp_placement[1] > 1 else "intra-node"
    return DEFAULT_OVERLAP[scope], f"{scope} default, {'measured' if scope == 'intra-node' else 'assumed'}"


def configs(kind, tp, w):
    """Memory switches in order of cost: (recompute, distributed optimizer, sequence parallel)."""
    rcs = [w["recompute"]] if w["recompute"] != "auto" else (
        ["none", "full"] if w["attention"] == "flash" else ["none", "selective", "full"])
    if w["kind"] != "transformer":
        rcs = ["none"]
    if kind != "megatron":
        return [(rc, False, False) for rc in rcs]
    out = [("none" if "none" in rcs else rcs[0], False, False)] if "none" in rcs or len(rcs) == 1 else []
    for rc in rcs:
        out.append((rc, True, tp > 1))
    return list(dict.fromkeys(out))


def predict(c, w, cluster, lm, compute, overlap=None, headroom=0.1, force=None):
    """The fastest configuration of shape c that fits (or the leanest one, infeasible);
    force: one (recompute, distributed optimizer, sequence parallel) set instead of the ladder."""
    kind, tp, pp, dp = c["kind"], c["tp"], c["pp"], c["dp"]
    gb = w["global_batch"] or w["micro_batch"] * cluster["world_size"]
    if w["micro_batch_fixed"]:
        bs = [w["micro_batch"]]
    else:                                     # the sizes the batch divides into, at least one
        bs = sorted({b for b in MICRO_BATCHES + (w["micro_batch"],) if gb % (b * dp) == 0} or {1})
    vs = [1] + [v for v in VIRTUAL_STAGES[1:] if pp > 1 and w["layers"] % (pp * v) == 0]
    best, lean = None, None
    for b in bs:
        for v in vs:
            for rc, dist, sp in ([force] if force else configs(kind, tp, w)):
                out = evaluate(c, w, cluster, lm, compute, b, v, rc, dist, sp, overlap, headroom)
                if out is None:
                    continue
                if not out["feasible"]:
                    leaner = lambda o: (o["memory_gb"] is None, o["memory_gb"] or 0)  # noqa: E731
                    if lean is None or leaner(out) < leaner(lean):
                        lean = out
                    if out["memory_gb"] is None:
                        break                 # the batch does not divide: no switch helps
                    continue
                if best is None or out["step_s"] / out["global_batch"] < best["step_s"] / best["global_batch"]:
                    best = out
                break                         # the cheapest switch set that fits
    res = best or lean
    res["config"] = config_lines(res, w)
    return res


def evaluate(c, w, cluster, lm, compute, b, v, rc, dist, sp, overlap, headroom):
    kind, tp, pp, dp = c["kind"], c["tp"], c["pp"], c["dp"]
    lay = LAYOUTS[kind]
    N, G = cluster["world_size"], cluster["gpus_per_node"]
    if v > 1 and pp == 1:
        return None
    gb = w["global_batch"] or w["micro_batch"] * N
    m = gb // (b * dp)
    out = dict(c, hpz_size=min(G, dp), micro_batch=b, virtual_stages=v, recompute=rc, distributed_optimizer=dist,
               sequence_parallel=sp, microbatches=m, global_batch=gb)
    if gb % (b * dp):
        return _no_batch(out, gb, b, dp)
    if v > 1 and m % pp:
        return None                           # Megatron's interleaved schedule needs m % pp == 0
    # memory
    sb, g_comm = state_bytes(kind, w)
    g = groups(c, G)
    shard = (g["node"][0] * g["node"][1]) if lay.shard_group == "node" else dp
    psi = w["params"]
    if kind == "megatron" and pp > 1 and w["vocab"]:    # the embedding stage holds V h / tp more
        emb = w["vocab"] * w["hidden"]
        psi = (psi - emb) + emb * pp
    states = M.model_states_bytes(psi, sb["p"], sb["g"], sb["k"], kind, dp, tp, pp, shard, dist)
    acts = M.activation_bytes(w, b, tp, pp, m, rc, sp, v)
    units = fsdp_units(w)
    buffers = (2 * max(units) * sb["p"] + max(units) * sb["g"]) if "p" in lay.sharded else 0.0
    node = g["node"][0] * g["node"][1]
    if lay.hpz:                               # the node's secondary parameter partition
        buffers += sb["p"] * psi / node
    mem = states + acts + buffers
    usable = cluster["gpu_mem_gb"] * (1 - headroom)
    out.update(model_states_gb=round(states / 1e9, 3), activations_gb=round(acts / 1e9, 3),
               buffers_gb=round(buffers / 1e9, 3), memory_gb=round(mem / 1e9, 3))
    if mem / 1e9 > usable:
        out.update(feasible=False, reason=f"needs {mem / 1e9:.1f} > {usable:.1f} GB/GPU", step_s=None,
                   efficiency=None, comm_s=None, exposed_comm_s=None, compute_s=None, bubble=None,
                   samples_per_s=None, tokens_per_s=None, comm_source=None, collectives=[], overlap=None,
                   overlap_source=None)
        return out
    # time: the stage of one micro-batch
    layers_stage = math.ceil(w["layers"] / pp) if w["kind"] == "transformer" else 1
    share = layers_stage / w["layers"] if w["kind"] == "transformer" else 1.0
    t_mb = compute.seconds(b, tp, share, rc, sp)
    tl = Timeline(lm)
    act = b * w["seq_len"] * w.get("hidden", 0) * w["bytes"]["act"]
    tp_mb = pp_mb = 0.0
    if tp > 1:
        n = (6 if rc == "full" else 4) * layers_stage
        e, _ = tl.add("tensor-parallel activation all_reduce", "all_reduce", [act] * n, g["tp"], repeat=m)
        tp_mb = e.seconds / m
    if pp > 1:
        e, _ = tl.add("pipeline activation send/recv", "p2p", [act / tp] * (2 * v), (2, 1), repeat=m,
                      scope=g["pp_scope"])
        pp_mb = e.seconds / m
    bubble = (pp - 1) / v
    t_pipe = (m + bubble) * (t_mb + tp_mb + pp_mb)
    # data-parallel traffic
    F, out["overlap_source"] = overlap_for(overlap, g["dp"], lay.overlap)
    out["overlap"] = F
    P_local = w["params"] / (tp * pp)
    bwd = t_mb * (0.75 if rc == "full" else 2 / 3)
    dp_place = g["node"] if lay.shard_group == "node" else g["dp"]
    grad_op, grad_when = lay.grads
    per_mb = 1 if grad_when == "step" else m
    if kind == "ddp":
        sizes = ddp_buckets(tensors(w), g_comm, w["bucket_mb"])
    elif kind == "megatron" and not dist:
        sizes = ddp_buckets([P_local], g_comm, w["bucket_mb"])
    else:
        grad_op = "reduce_scatter" if dist else grad_op
        sizes = ([u * g_comm for u in units] if lay.params == "microbatch"
                 else chunks(P_local * g_comm, DEEPSPEED_BUCKET_ELEMS * g_comm))
    grad, last = tl.add(f"gradient {grad_op}" + (" per micro-batch" if per_mb > 1 else ""), grad_op, sizes,
                        dp_place, repeat=per_mb)
    dp_total = grad.seconds
    exposed_list = []
    if lay.params == "microbatch":
        unit_p = [u * sb["p"] for u in units]
        agf, first = tl.add("parameter all_gather per unit (forward)", "all_gather", unit_p, dp_place, repeat=m)
        agb, _ = tl.add("parameter all_gather per unit (backward" + (", from the node's copy)" if lay.hpz else ")"),
                        "all_gather", unit_p, g["node"] if lay.hpz else dp_place, repeat=m)
        dp_total += agf.seconds + agb.seconds
        if lay.replicas and g["replicas"][1] > 1:
            rep, _ = tl.add("shard all_reduce across nodes per micro-batch", "all_reduce",
                            [u * g_comm / shard for u in units], g["replicas"], repeat=m)
            dp_total += rep.seconds
        # forward hides the forward all_gathers; backward the rest (backward all_gathers,
        # gradient reduce_scatter, the replicas' all_reduce)
        fwd_ag = agf.seconds / m
        rest = (dp_total - agf.seconds) / m
        exposed_list.append(m * (max(first.seconds, fwd_ag - F * (t_mb - bwd)) + max(0.0, rest - F * bwd)))
    else:
        exposed_list.append(per_mb * max(last.seconds, grad.seconds / per_mb - F * bwd) if grad.seconds else 0.0)
        if lay.params == "step" or dist:
            ag, _ = tl.add("parameter all_gather (after the step)", "all_gather",
                           chunks(P_local * sb["p"], DEEPSPEED_BUCKET_ELEMS * sb["p"]), dp_place)
            dp_total += ag.seconds
            exposed_list.append(ag.seconds)
    exposed = sum(exposed_list)
    step = t_pipe + exposed
    ref = compute.seconds(w["micro_batch"], 1, 1.0, "none", False) / w["micro_batch"]
    comm = sum(i["seconds"] for i in tl.items)
    out.update(comm_s=comm, exposed_comm_s=exposed + m * (tp_mb + pp_mb), compute_s=m * t_mb,
               bubble=bubble / (m + bubble), step_s=step, efficiency=gb * ref / (N * step),
               samples_per_s=gb / step, tokens_per_s=gb * w["seq_len"] / step,
               comm_source=worst(*(i["source"] for i in tl.items)) if tl.items else "measured",
               collectives=tl.items, feasible=True, reason=f"fits: {mem / 1e9:.1f} of {usable:.1f} GB usable")
    return out


def _no_batch(out, gb, b, dp):
    """A configuration the global batch cannot be split into (gb % (b x dp) != 0)."""
    out.update(feasible=False, reason=f"global batch {gb} is not a multiple of micro-batch x dp = {b * dp} "
                                      f"(--global-batch)", model_states_gb=None, activations_gb=None,
               buffers_gb=None, memory_gb=None, step_s=None, efficiency=None, comm_s=None, exposed_comm_s=None,
               compute_s=None, bubble=None, samples_per_s=None, tokens_per_s=None, comm_source=None,
               collectives=[], overlap=None, overlap_source=None)
    return out
