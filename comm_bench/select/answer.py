"""The answer: the recommended layout's configuration, the defaults it rests on, and the
lines that explain it (every figure with its source)."""
from __future__ import annotations

from . import frameworks as FW
from . import rules as R
from .layouts import state_bytes
from .linkmodel import human, human_s
from .workload import HALF


def assumptions(w, cl, lm, c, comp):
    """The defaults in effect that an answer rests on, each with the flag that changes it."""
    out = []
    if w["global_batch_source"].startswith("assumed"):
        out.append("global batch: one micro-batch per GPU (--global-batch)")
    elif w["global_batch_source"] != "--global-batch":
        out.append(f"global batch {w['global_batch']}: the preset's recipe, {w['global_batch_source']} (--global-batch)")
    if c is not None and w["global_batch"] and c["global_batch"] != w["global_batch"]:
        unit = c["micro_batch"] * c["dp"] * (c["pp"] if c["virtual_stages"] > 1 else 1)
        out.append(f"global batch {w['global_batch']} rounded to {c['global_batch']}: the nearest multiple of "
                   f"micro-batch {c['micro_batch']} x dp {c['dp']}" + (f" x pp {c['pp']} (interleaved)"
                   if c["virtual_stages"] > 1 else "") + f" = {unit} (--global-batch)")
    if c is not None and not w["micro_batch_fixed"]:
        out.append(f"micro-batch {c['micro_batch']}: the fastest of 1, 2, 4, 8 that fits (--micro-batch)")
    if c is not None and w["recompute"] == "auto":
        out.append(f"recomputation {c['recompute']}: the cheapest that fits (--recompute)")
    if "assumed" in comp.note:
        out.append(f"compute: {comp.note} (--compute-from, --step-time or --mfu)")
    if w.get("experts") and comp.step_time is None and comp.mfu is None:
        out.append("mixture of experts: predicted 1.4-2.9x faster than every published MoE run it was checked "
                   "against, the more so the smaller the experts (docs/benchmarks/selection-runs.md): plan from a "
                   "measured MoE step (--step-time or --mfu)")
    if c is not None and c["kind"] == "megatron" and w["precision"] in HALF and w["grad_reduce"] != "bf16":
        out.append("gradients: fp32 main gradients, reduced in fp32, Megatron's default (--grad-reduce bf16)")
    for key, flag in (("gpu_mem_gb", "--gpu or --gpu-mem"), ("gpus_per_node", "--gpus-per-node")):
        if "assumed" in str(cl["sources"].get(key, "")):
            out.append(f"{key.replace('_', ' ')}: {cl['sources'][key]} ({flag})")
    if c is not None and c.get("overlap_source") and "assumed" in c["overlap_source"]:
        out.append(f"overlap {c['overlap']:g}: {c['overlap_source']} (--overlap)")
    for scope, flag in (("intra-node", "--intra-node-gbs"), ("inter-node", "--inter-node-gbs")):
        need = cl["gpus_per_node"] > 1 if scope == "intra-node" else cl["nodes"] > 1
        if need:
            try:
                lk = lm.link(scope)
            except Exception:  # noqa: BLE001 - no figure at all: select refused earlier
                continue
            if lk.source == "assumed":
                out.append(f"{scope} link: {lk.note} ({flag} or a results file measured there)")
    return out


def _split_text(c):
    from .layouts import pp_split
    from .pipeline import describe
    return describe(pp_split(c)) + {"even": "", "embedding-loss": " (the embedding and the loss counted as a layer)",
                                    "first-last": " (first and last searched)", "given": " (--pp-layout)"}[c["pp_split_how"]]


def recommendation(c, then, facts, w, cl, ecosystem, elastic, assumed=()):
    if c is None:
        return {"layout": None, "framework": None, "config": [], "assumed": list(assumed),
                "rationale": [R.render(x, facts) for x in then["rationale"]] or ["no feasible layout"]}
    fw = then.get("framework") or c["framework"]
    fam, entry = FW.info(fw)
    lines = [f"cluster: {cl['nodes']} node(s) x {cl['gpus_per_node']} GPU(s) ({cl['gpu_name'] or 'no GPU named'}, "
             f"{cl['gpu_mem_gb']:.1f} GB each: {cl['sources']['gpu_mem_gb']}), NVLink domain "
             f"{cl['nvlink_domain']}; from {', '.join(cl['from'])}",
             f"memory/GPU: model states {c['model_states_gb']:.2f} GB + activations {c['activations_gb']:.2f} GB"
             + (f" + gather buffers {c['buffers_gb']:.2f} GB" if c['buffers_gb'] else "")
             + f" = {c['memory_gb']:.2f} GB ({w['precision']}: {sum(state_bytes(c['kind'], w)[0][k] for k in 'pgk'):.4g} "
             f"B/param unsharded; optimizer states {state_bytes(c['kind'], w)[0]['k']:.4g} B: "
             f"{w.get('main_params', 'fp32')} main parameters, {w.get('optimizer_states', 'fp32')} Adam moments)"]
    for item in c["collectives"]:
        lines.append(f"{item['what']}: {item['count']} x, {human(item['bytes'])} per step -> {human_s(item['seconds'])} "
                     f"[{item['source']}: {item['note']}]")
    switches = [x for x, on in ((f"{c['recompute']} recomputation", c["recompute"] != "none"),
                                ("distributed optimizer", c.get("distributed_optimizer")),
                                ("sequence parallel", c.get("sequence_parallel"))) if on]
    lines.append(f"layout: tp {c['tp']}" + (f" x cp {c['cp']}" if c.get("cp", 1) > 1 else "") + f" x pp {c['pp']}"
                 + (f" (interleaved, {c['virtual_stages']} virtual stages)" if c["virtual_stages"] > 1 else "")
                 + (f", stages of {_split_text(c)} layers" if c.get("pp_split") else "")
                 + f" x dp {c['dp']}" + (f", experts over ep {c['ep']}" if c.get("ep", 1) > 1 else "")
                 + (f", each over etp {c['etp']}" if c.get("ep", 1) > 1 and c.get("etp") else "") + f"; micro-batch {c['micro_batch']} x "
                 f"{c['microbatches']} per step = global batch {c['global_batch']} ({w['global_batch_source']})"
                 + (f"; to fit: {', '.join(switches)}" if switches else ""))
    lines.append(f"step: compute {human_s(c['compute_s'])} ({w['compute_note']}) + exposed communication "
                 f"{human_s(c['exposed_comm_s'])} (--overlap {c['overlap']:g}: {c['overlap_source']})"
                 + (f", pipeline bubble {c['bubble']:.0%}" if c["bubble"] else "")
                 + f" = {human_s(c['step_s'])}; efficiency {c['efficiency']:.1%} vs one GPU")
    if entry:
        lines.append(f"{fam}: backend {entry['backend']}; runs {entry['scheduling_unit']}; k8s: "
                     f"{entry['k8s_operator']}; migration: {entry['migration']}")
    if elastic:
        el = entry.get("elasticity", "unknown")
        lines.append(f"--elastic: {fam} elasticity: {el}")
        if ecosystem == "pytorch" and "TorchElastic" in el and "TorchElastic" not in fw:
            fw = f"{fw} + TorchElastic"
    why = [R.render(x, facts) for x in then["rationale"]]
    return {"layout": c["layout"], "framework": fw, "config": list(c["config"]), "why": why,
            "assumed": list(assumed), "rationale": why + [f"set: {line}" for line in c["config"]] + lines}
