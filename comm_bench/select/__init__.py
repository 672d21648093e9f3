"""The framework selection model behind `comm-bench select` (docs/selection.md).

    result = select(paths, options)     # dict: recommendation, candidates, link_model, ...

Measured links (linkfit) -> collective times at each scope (linkmodel) -> per candidate
layout (strategies) memory and step time (memory, predict) -> facts -> YAML rules (rules)
-> a recommendation with its rationale (output formats it).

May import results/ (documents), validate/ (the rules' link classes), views/ (its HTML page)
topology/ and the vocabulary (ops' bus factors and op lists); only commands/select.py imports it.
"""
from __future__ import annotations

import math

from ..errors import UsageError
from ..results.document import check_document, load as load_results
from . import cluster as C
from . import facts as F
from . import frameworks as FW
from . import gpus as GP
from . import rules as R
from . import workload as W
from .answer import assumptions, recommendation
from .compute import Compute, gpu_figures
from .linkfit import fit_documents
from .linkmodel import LinkModel
from .predict import DEFAULT_OVERLAP, predict
from .strategies import candidates


# (lowest, highest, lowest allowed itself) of each number select takes: finite, and far
# beyond any real model or cluster at the top (a 1e30-parameter model hung the command)
NUMBER_RANGES = {
    "layers": (0, 1e5, False), "hidden": (0, 1e7, False), "heads": (0, 1e6, False),
    "seq_len": (0, 1e9, False), "micro_batch": (0, 1e9, False), "global_batch": (0, 1e15, False),
    "nodes": (0, 1e6, False), "gpus_per_node": (0, 4096, False), "step_time": (0, 1e9, False),
    "gpu_tflops": (0, 1e9, False), "mfu": (0, 1, False), "bucket_mb": (0, 1e9, False),
    "min_efficiency": (0, 1, True), "overlap": (0, 1, True), "intra_node_gbs": (0, 1e9, False),
    "inter_node_gbs": (0, 1e9, False), "mem_headroom": (0, 0.99, True),
    "kv_heads": (0, 1e6, False), "ffn_hidden": (0, 1e8, False), "experts": (0, 1e5, False),
    "experts_per_token": (0, 1e5, False), "shared_experts": (0, 1e5, True), "moe_layers": (0, 1e5, False),
    "expert_ffn": (0, 1e8, False), "vocab": (0, 1e8, False), "q_lora_rank": (0, 1e6, True),
    "kv_lora_rank": (0, 1e6, False), "qk_nope_dim": (0, 1e5, False), "qk_rope_dim": (0, 1e5, True),
    "v_head_dim": (0, 1e5, False), "mtp_layers": (0, 100, True), "power_cap": (0, 1e4, False),
}


def check_numbers(**values):
    """UsageError (exit 2, one line) for a number outside NUMBER_RANGES; None is 'not given'."""
    for name, v in values.items():
        if v is None:
            continue
        low, high, low_ok = NUMBER_RANGES[name]
        flag = "--" + name.replace("_", "-")
        if isinstance(v, bool) or not math.isfinite(v) or v > high or v < low or (v == low and not low_ok):
            raise UsageError(f"{flag} must be {'>=' if low_ok else '>'} {low:g} and at most {high:g} (got {v:g})")


def _docs(paths):
    if not paths:
        raise UsageError("give at least one results file")
    docs = []
    for p in paths:
        doc = load_results(p)
        check_document(doc, p)
        docs.append((p, doc))
    return docs


def link_model_only(paths, nodes=None, gpus_per_node=None, gpu_mem=None, intra_node_gbs=None,
                    inter_node_gbs=None):
    """(link-model rows, cluster) for --show-model."""
    check_numbers(nodes=nodes, gpus_per_node=gpus_per_node, intra_node_gbs=intra_node_gbs,
                  inter_node_gbs=inter_node_gbs)
    docs = _docs(paths)
    cl = C.describe(docs, nodes, gpus_per_node, C.parse_mem_gb(gpu_mem))
    lm = LinkModel(fit_documents(docs), cl, intra_node_gbs, inter_node_gbs)
    scopes = [s for s, need in (("intra-node", cl["gpus_per_node"] > 1), ("inter-node", cl["nodes"] > 1)) if need]
    return lm.rows(scopes), cl


def select(paths, model=None, params=None, layers=None, hidden=None, heads=None, seq_len=None,
           micro_batch=None, global_batch=None, precision="bf16", bucket_mb=25.0, recompute="auto",
           nodes=None, gpus_per_node=None, gpu_mem=None, step_time=None, gpu_tflops=None, mfu=None,
           ecosystem="pytorch", elastic=False, rules=None, min_efficiency=None, overlap=None,
           intra_node_gbs=None, inter_node_gbs=None, headroom=0.1, gpu=None, attention=None,
           compute_from=None, grad_reduce="fp32", a2a_overlap=True, pp_layout=None,
           optimizer_states="fp32", main_params="fp32", power_cap=None, eager=False, **shape):
    """shape: the workload's shape flags, W.SHAPE_KEYS (kv_heads, ffn_hidden, experts ...)."""
    unknown = set(shape) - set(W.SHAPE_KEYS)
    if unknown:
        raise TypeError(f"select() got unexpected arguments {sorted(unknown)}")
    check_numbers(**shape)
    rule_list = R.load(rules)                  # bad rules fail before any work
    check_numbers(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, micro_batch=micro_batch,
                  global_batch=global_batch, nodes=nodes, gpus_per_node=gpus_per_node, step_time=step_time,
                  gpu_tflops=gpu_tflops, mfu=mfu, bucket_mb=bucket_mb, min_efficiency=min_efficiency,
                  overlap=overlap, intra_node_gbs=intra_node_gbs, inter_node_gbs=inter_node_gbs,
                  mem_headroom=headroom, power_cap=power_cap)
    docs = _docs(paths)
    cl = C.describe(docs, nodes, gpus_per_node, C.parse_mem_gb(gpu_mem), gpu)
    if not cl["gpu_name"] and not (gpu_mem and gpu_tflops):
        # a CPU run (gloo, tcp) says nothing of the GPUs to plan for: never assume them silently
        raise UsageError(f"the results name no GPU (a CPU run?): say which GPU to plan for with --gpu NAME "
                         f"({', '.join(GP.GPUS)}), or give --gpu-mem and --gpu-tflops")
    w = W.build(model, params, layers, hidden, heads, seq_len, micro_batch, global_batch, precision,
                bucket_mb, recompute, attention, shape, grad_reduce, a2a_overlap, pp_layout,
                optimizer_states, main_params)
    lm = LinkModel(fit_documents(docs), cl, intra_node_gbs, inter_node_gbs)
    comp = Compute(w, gpu_figures(cl, gpu), step_time, mfu, gpu_tflops, compute_from, power_cap, eager)
    w["compute_note"] = comp.note
    cands = [predict(c, w, cl, lm, comp, overlap, headroom) for c in candidates(w, cl)]
    for c in cands:
        c["framework"] = FW.name_for(c["kind"], ecosystem)
    facts = F.build(cands, cl, w, lm, ecosystem, elastic)
    chosen, then, path = R.decide(rule_list, facts, cands)
    rec = recommendation(chosen, then, facts, w, cl, ecosystem, elastic, assumptions(w, cl, lm, chosen, comp))
    scopes = [s for s, need in (("intra-node", cl["gpus_per_node"] > 1), ("inter-node", cl["nodes"] > 1)) if need]
    ok = [c for c in cands if c["feasible"] and (min_efficiency is None or c["efficiency"] >= min_efficiency)]
    cands.sort(key=lambda c: (not c["feasible"], -(c["efficiency"] or 0)))
    return {"recommendation": rec, "candidates": cands, "link_model": lm.rows(scopes), "cluster": cl,
            "workload": w, "facts": facts, "explain": path, "min_efficiency": min_efficiency,
            "meets_min_efficiency": bool(ok), "overlap": overlap if overlap is not None else {"default": DEFAULT_OVERLAP},
            "documents": docs, "context": (w, cl, lm, comp, overlap, headroom)}


def plan_layout(res, kind, tp=1, pp=1, recompute="full", distributed_optimizer=False, sequence_parallel=False):
    """One layout of a selection's cluster and workload with a fixed memory configuration
    (e.g. a published run's), configured and predicted like the candidates."""
    w, cl, lm, comp, overlap, headroom = res["context"]
    shape = {"layout": f"tp{tp}-pp{pp}-dp{cl['world_size'] // (tp * pp)}", "kind": kind, "tp": tp, "pp": pp,
             "dp": cl["world_size"] // (tp * pp)}
    return predict(shape, w, cl, lm, comp, overlap, headroom,
                   force=(recompute, distributed_optimizer, sequence_parallel))
