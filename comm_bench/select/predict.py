"""The configuration of one candidate shape: the fastest that fits.

A shape (strategies.py: kind, tp, cp, pp, dp, ep) is tried with each micro-batch size b (the
given one, else 1, 2, 4, 8 while b x dp <= the global batch), each interleaving v of the
pipeline schedule (virtual_stages), and the memory switches in order of cost (configs);
the first switch set that fits is that (b, v)'s configuration, and the fastest (b, v) per
sample is the candidate. step.evaluate prices one configuration (memory, the stage's
compute and model-parallel traffic, the pipeline, the data-parallel collectives and what
hides them: docs/selection.md, sections 4 and 5):
  step = (m + (pp - 1)/v) x (stage compute + exposed tp / cp / ep / pp traffic per micro-batch)
         + exposed data-parallel communication
  efficiency = B x (one GPU's time per sample, no parallelism) / (N x step)
"""
from __future__ import annotations

from . import pipeline as P
from .layouts import config_lines
from .workload import PARTIAL
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


def overlap_for(overlap, dp_placement, mechanism="backward"):
    """(--overlap a candidate uses, where it comes from): the user's, else none for a
    layout that does not overlap, else the default of its DP group's scope."""
    if overlap is not None:
        return overlap, "given"
    if mechanism == "none":
        return 0.0, "none: Megatron-LM reduces gradients after the pipeline flush (--overlap-grad-reduce off)"
    scope = "inter-node" if dp_placement[1] > 1 else "intra-node"
    return DEFAULT_OVERLAP[scope], f"{scope} default, {'measured' if scope == 'intra-node' else 'assumed'}"


def _modules(w, kind):
    """The module recomputations auto tries for a shaped model under Megatron-Core (no other
    framework has them): the norms' outputs, then the experts' activations too (MoE), then
    MLA's up-projections too (DeepSeek-V3's own set)."""
    if "ffn_hidden" not in w or kind != "megatron":
        return []
    moe = ",moe_act" if w.get("experts") else ""
    return (["modules:layernorm"] + ([f"modules:layernorm{moe}"] if moe else [])
            + ([f"modules:layernorm,mla_up_proj{moe}"] if w.get("mla") else []))


def configs(kind, tp, w):
    """Memory switches in order of cost: (recompute, distributed optimizer, sequence parallel,
    reshard after forward)."""
    rcs = [w["recompute"]] if w["recompute"] != "auto" else (
        ["none", *_modules(w, kind), *PARTIAL, "full"] if w["attention"] == "flash"
        else ["none", "selective", *PARTIAL, "full"])
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
    """Interleaving v where every stage gets whole chunks, up to one layer per chunk (v <= L / pp):
    a split of pipeline.options with every stage a multiple of v (even, first / last sizes), or
    Megatron-Core's --account-for-embedding-in-pipeline-split / -loss-: (layers + 2) % (pp v) == 0
    (the first and last stage one layer fewer, as Llama 3's 126 layers over 16 stages); with
    --pp-layout, the v its stages allow."""
    if pp <= 1 or w["kind"] != "transformer":
        return [1]
    L = w["layers"]
    if w.get("pp_layout"):
        return [v for v in range(1, max(1, (L + 2) // pp) + 1) if P.given(w["pp_layout"], L, pp, v)] or [1]
    return [1] + [v for v in range(2, (L + 2) // pp + 1) if P.options(L, pp, v)]


def predict(c, w, cluster, lm, compute, overlap=None, headroom=0.1, force=None, virtual=None):
    """The fastest configuration of shape c that fits (or the leanest one, infeasible);
    force: one (recompute, distributed optimizer, sequence parallel[, reshard[, gradients
    sharded]]) set instead of
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
                    leaner = lambda o: (o["memory_gb"] is None, o["memory_gb"] or 0)  # noqa: E731 - a one-line sort key
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
