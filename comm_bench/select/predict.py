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

from .layouts import config_lines
from .step import Config, evaluate

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
    """Memory switches in order of cost: (recompute, distributed optimizer, sequence parallel,
    reshard after forward)."""
    rcs = [w["recompute"]] if w["recompute"] != "auto" else (
        ["none", "full"] if w["attention"] == "flash" else ["none", "selective", "full"])
    if w["kind"] != "transformer":
        rcs = ["none"]
    if kind == "fsdp-tp":                     # torchtitan: sequence parallel with TP; keep, then reshard
        return [(rc, False, tp > 1, reshard) for rc in rcs for reshard in (False, True)]
    if kind != "megatron":
        return [(rc, False, False, True) for rc in rcs]
    out = [("none" if "none" in rcs else rcs[0], False, False, True)] if "none" in rcs or len(rcs) == 1 else []
    for rc in rcs:
        out.append((rc, True, tp > 1, True))
    return list(dict.fromkeys(out))


def virtual_stages(w, pp):
    """Interleaving v where every stage gets whole chunks: layers % (pp v) == 0, or with
    Megatron-Core's --account-for-embedding-in-pipeline-split / -loss-: (layers + 2) % (pp v)
    == 0 (the first and last stage one layer fewer, as Llama 3's 126 layers over 16 stages)."""
    if pp <= 1:
        return [1]
    return [1] + [v for v in VIRTUAL_STAGES[1:] if w["layers"] % (pp * v) == 0 or (w["layers"] + 2) % (pp * v) == 0]


def predict(c, w, cluster, lm, compute, overlap=None, headroom=0.1, force=None, virtual=None):
    """The fastest configuration of shape c that fits (or the leanest one, infeasible);
    force: one (recompute, distributed optimizer, sequence parallel[, reshard]) set instead of
    the ladder; virtual: the interleaving to use (a published run's)."""
    kind, dp = c["kind"], c["dp"]
    gb = w["global_batch"] or w["micro_batch"] * cluster["world_size"]
    if w["micro_batch_fixed"]:
        bs = [w["micro_batch"]]
    else:                                     # sizes that leave at least one micro-batch per step
        bs = sorted({b for b in MICRO_BATCHES + (w["micro_batch"],) if b * dp <= gb} or {1})
    best, lean = None, None
    for b in bs:
        for v in [virtual] if virtual else virtual_stages(w, c["pp"]):
            for sw in ([tuple(force) + (True,) * (4 - len(force))] if force else configs(kind, c["tp"], w)):
                out = evaluate(c, w, cluster, lm, compute, Config(b, v, *sw), overlap_for, overlap, headroom)
                if not out["feasible"]:
                    leaner = lambda o: (o["memory_gb"] is None, o["memory_gb"] or 0)  # noqa: E731
                    if lean is None or leaner(out) < leaner(lean):
                        lean = out
                    if out["memory_gb"] is None:
                        break                 # the batch is too small for this shape: no switch helps
                    continue
                if best is None or out["step_s"] / out["global_batch"] < best["step_s"] / best["global_batch"]:
                    best = out
                break                         # the cheapest switch set that fits
    res = best or lean
    res["config"] = config_lines(res, w)
    return res
