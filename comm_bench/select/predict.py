"""Predicted memory, communication and step time of one candidate layout.

Per step (global batch B = micro-batch b x data-parallel dp x m micro-batches per GPU):
  compute     t_c = m x t_mb / (tp pp), t_mb = one micro-batch forward + backward of the
              whole model on one GPU (--step-time, or FLOPs / (peak x MFU))
  DDP         gradient all_reduce in buckets as PyTorch forms them (first 1 MiB, then
              --bucket-mb; a bucket closes once it reaches its cap), once per step
  ZeRO-1/2    gradient reduce_scatter + parameter all_gather in DeepSpeed's 5e8-element
              buckets
  ZeRO-3/FSDP per unit (one transformer layer): parameter all_gather in forward and
              again in backward for each micro-batch, gradient reduce_scatter once
  TP          4 all_reduces of b s h activations per layer per micro-batch (6 with full
              recomputation) inside the tensor-parallel group, not overlapped
  PP          2 sends of b s h activations per micro-batch between stages, plus the
              bubble: pipeline time = t_c (m + pp - 1) / m (GPipe / 1F1B)
Overlap (a stated assumption, --overlap F; default per DP scope, DEFAULT_OVERLAP below):
gradient communication hides behind F x the
backward of the last micro-batch (2/3 of its compute; ZeRO-3/FSDP: behind F x all
compute), never less than the last bucket / first unit exposed.
step = pipeline time + exposed DP communication + TP + PP communication;
efficiency = t_c / step (throughput on N GPUs / N x one GPU's at the same micro-batch).
"""
from __future__ import annotations

import math

from . import memory as M
from .linkmodel import ZERO, Est, worst
from .strategies import groups
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


def overlap_for(overlap, dp_placement):
    """(--overlap a candidate uses, where it comes from): the user's, else the default of
    its DP group's scope."""
    if overlap is not None:
        return overlap, "given"
    scope = "inter-node" if dp_placement[1] > 1 else "intra-node"
    return DEFAULT_OVERLAP[scope], f"{scope} default, {'measured' if scope == 'intra-node' else 'assumed'}"


FIRST_BUCKET = 1 << 20              # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DEEPSPEED_BUCKET_ELEMS = 5e8        # DeepSpeed reduce_bucket_size / allgather_bucket_size


def ddp_buckets(elems, nbytes, bucket_mb):
    """Bucket sizes (bytes) as DDP forms them: parameters in reverse order, a bucket closes
    once it reaches its cap (the first cap is 1 MiB)."""
    cap, out, cur = FIRST_BUCKET, [], 0
    for n in reversed(elems):
        cur += n * nbytes
        if cur >= cap:
            out.append(cur)
            cur, cap = 0, bucket_mb * (1 << 20)
    if cur:
        out.append(cur)
    return out


def chunks(total, size):
    n = max(1, math.ceil(total / size))
    return [total / n] * n


class Timeline:
    """The collectives of one step: (what, count, size, Est)."""

    def __init__(self, lm):
        self.lm, self.items = lm, []

    def add(self, what, op, sizes, placement, repeat=1, scope=None):
        n_intra, n_inter = placement
        if n_intra * n_inter <= 1 and op != "p2p":
            return ZERO, ZERO
        total, last = ZERO, ZERO
        cache = {}
        for S in sizes:
            key = round(S)
            if key not in cache:
                cache[key] = (self.lm.op_time("p2p", S, 2, scope) if op == "p2p"
                              else self.lm.collective(op, S, n_intra, n_inter))
            last = cache[key]
            total = total + Est(last.seconds * repeat, last.source, "")
        notes = list(dict.fromkeys(e.note for e in cache.values() if e.note))
        note = "; ".join(notes[:2]) + (f"; (+{len(notes) - 2} more sizes)" if len(notes) > 2 else "")
        self.items.append({"what": what, "op": op, "count": len(sizes) * repeat,
                           "bytes": sum(sizes) * repeat, "seconds": total.seconds, "source": total.source,
                           "n_intra": n_intra, "n_inter": n_inter, "note": note})
        return total, last


def predict(c, w, cluster, lm, t_mb, overlap=None, headroom=0.1):
    tp, pp, dp, kind = c["tp"], c["pp"], c["dp"], c["kind"]
    b = w["bytes"]
    out = dict(c)
    micro = w["micro_batch"]
    gb = w["global_batch"] or micro * cluster["world_size"]
    if gb % (micro * dp):
        return _infeasible(out, f"global batch {gb} is not a multiple of micro-batch x dp = {micro * dp}")
    m = gb // (micro * dp)
    # memory
    states = M.model_states_bytes(w["params"], b["p"], b["g"], b["k"], kind, dp, tp, pp)
    acts = M.activation_bytes(w, tp, pp, m)
    units = fsdp_units(w)
    buffers = (2 * max(units) * b["p"] + max(units) * b["g"]) if kind in ("zero-3", "fsdp") else 0.0
    mem = states + acts + buffers
    usable = cluster["gpu_mem_gb"] * (1 - headroom)
    out.update(model_states_gb=round(states / 1e9, 3), activations_gb=round(acts / 1e9, 3),
               buffers_gb=round(buffers / 1e9, 3), memory_gb=round(mem / 1e9, 3), microbatches=m,
               global_batch=gb)
    # time
    t_c = m * t_mb / (tp * pp)
    bwd = t_mb / (tp * pp) * (0.75 if w["recompute"] == "full" else 2 / 3)
    g = groups(c, cluster["gpus_per_node"])
    overlap, out["overlap_source"] = overlap_for(overlap, g["dp"])
    out["overlap"] = overlap
    tl = Timeline(lm)
    P_local = w["params"] / (tp * pp)
    if kind in ("ddp", "megatron"):
        elems = tensors(w) if kind == "ddp" else [P_local]
        sizes = ddp_buckets(elems, b["g"], w["bucket_mb"])
        grad, last = tl.add("gradient all_reduce (DDP buckets)", "all_reduce", sizes, g["dp"])
        exposed = max(last.seconds, grad.seconds - overlap * bwd) if grad.seconds else 0.0
        dp_comm = grad
    elif kind in ("zero-1", "zero-2"):
        rs, last = tl.add("gradient reduce_scatter", "reduce_scatter",
                          chunks(P_local * b["g"], DEEPSPEED_BUCKET_ELEMS * b["g"]), g["dp"])
        ag, _ = tl.add("parameter all_gather (after the step)", "all_gather",
                       chunks(P_local * b["p"], DEEPSPEED_BUCKET_ELEMS * b["p"]), g["dp"])
        exposed = (max(last.seconds, rs.seconds - overlap * bwd) if rs.seconds else 0.0) + ag.seconds
        dp_comm = rs + ag
    else:                                    # zero-3 / fsdp
        ag, first = tl.add("parameter all_gather per unit (forward + backward)", "all_gather",
                           [u * b["p"] for u in units], g["dp"], repeat=2 * m)
        rs, _ = tl.add("gradient reduce_scatter per unit", "reduce_scatter", [u * b["g"] for u in units], g["dp"])
        dp_comm = ag + rs
        exposed = max(first.seconds, dp_comm.seconds - overlap * t_c) if dp_comm.seconds else 0.0
    tp_comm = pp_comm = ZERO
    if tp > 1:
        act = micro * w["seq_len"] * w["hidden"] * b["act"]
        per_layer = 6 if w["recompute"] == "full" else 4
        tp_comm, _ = tl.add("tensor-parallel activation all_reduce", "all_reduce",
                            [act] * (per_layer * math.ceil(w["layers"] / pp)), g["tp"], repeat=m)
    bubble = 0.0
    if pp > 1:
        act = micro * w["seq_len"] * w["hidden"] * b["act"]
        pp_comm, _ = tl.add("pipeline activation send/recv", "p2p", [act] * 2, (2, 1), repeat=m,
                            scope=g["pp_scope"])
        bubble = (pp - 1) / (m + pp - 1)
    t_pipe = t_c / (1 - bubble)
    step = t_pipe + exposed + tp_comm.seconds + pp_comm.seconds
    comm = dp_comm + tp_comm + pp_comm
    out.update(comm_s=comm.seconds, exposed_comm_s=exposed + tp_comm.seconds + pp_comm.seconds,
               compute_s=t_c, bubble=bubble, step_s=step, efficiency=t_c / step if step else 0.0,
               samples_per_s=gb / step, tokens_per_s=gb * w["seq_len"] / step,
               comm_source=worst(*(i["source"] for i in tl.items)) if tl.items else "measured",
               collectives=tl.items)
    if mem / 1e9 > usable:                  # usable: GPU memory less the headroom
        out.update(feasible=False, reason=f"needs {mem / 1e9:.1f} > {usable:.1f} GB/GPU")
    else:
        out.update(feasible=True, reason=f"fits: {mem / 1e9:.1f} of {usable:.1f} GB usable")
    return out


def _infeasible(out, reason):
    out.update(feasible=False, reason=reason, model_states_gb=None, activations_gb=None, buffers_gb=None,
               memory_gb=None, comm_s=None, exposed_comm_s=None, compute_s=None, bubble=None, step_s=None,
               efficiency=None, samples_per_s=None, tokens_per_s=None, comm_source=None, collectives=[])
    return out
