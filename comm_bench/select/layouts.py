"""The layouts select weighs, as one table: what each shards, which collectives it runs
and how often, what hides them, and the configuration that sets it up.

    sharded      model states split over the sharding group: p parameters, g gradients,
                 k optimizer states ("" none)
    shard_group  "dp": the data-parallel group; "node": the GPUs of one node (hybrid)
    grads        (op, how often) of the gradient collective: "step" once per optimizer
                 step (gradient accumulation under no_sync), "microbatch" after each
                 backward (sharded gradients cannot accumulate locally)
    params       parameter all_gather: None, "step" (after the optimizer step), "microbatch"
                 (before forward and again before backward of each unit)
    replicas     hybrid sharding: the shard's gradients are all-reduced across nodes too
    hpz          ZeRO++ hierarchical partitioning (Wang et al. 2023, arXiv 2306.10209): a
                 second copy of the parameters sharded within the node, so the backward
                 all_gather stays inside it (memory: + p psi / GPUs per node)
    overlap      what hides the data-parallel traffic (docs/selection.md, Overlap):
                 "backward" the last micro-batch's backward, "compute" all compute,
                 "none" nothing (Megatron-LM reduces after the pipeline flush)
    cp_comm      how context parallelism moves K and V: "ring" (Megatron-Core / Transformer
                 Engine's default cp_comm_type p2p: each chunk's send hides behind the previous
                 chunk's attention) or "all_gather" (torchtitan's default
                 context_parallel_rotate_method, and Llama 3's CP, arXiv 2407.21783 section
                 3.3.2: K and V all-gathered, "exposed in the critical path"; only the local
                 chunk's attention runs meanwhile)
    family       the framework table's key (data/select_frameworks.yaml)
    model_parallel  a candidate of every tp x cp x pp x dp x ep shape (strategies.py), not one
                 over all N GPUs: "megatron" (Megatron-Core: DDP, or its distributed optimizer
                 with overlapped reduce-scatter / all-gather) and "fsdp-tp" (torchtitan: FSDP2
                 over the data-parallel group with TP, CP, PP and EP on one device mesh;
                 with or without resharding after forward)
"""
from __future__ import annotations

from dataclasses import dataclass

from .workload import HALF


@dataclass(frozen=True)
class Layout:
    kind: str
    family: str
    sharded: str
    shard_group: str
    grads: tuple
    params: str | None
    overlap: str
    replicas: bool = False
    hpz: bool = False
    model_parallel: bool = False
    across_nodes_only: bool = False      # a candidate only where there are several nodes
    cp_comm: str = "ring"


LAYOUTS = {l.kind: l for l in (
    Layout("ddp", "ddp", "", "dp", ("all_reduce", "step"), None, "backward"),
    Layout("zero-1", "zero-1", "k", "dp", ("reduce_scatter", "step"), "step", "backward"),
    Layout("zero-2", "zero-2", "gk", "dp", ("reduce_scatter", "microbatch"), "step", "backward"),
    Layout("zero-3", "zero-3", "pgk", "dp", ("reduce_scatter", "microbatch"), "microbatch", "compute"),
    Layout("fsdp", "fsdp", "pgk", "dp", ("reduce_scatter", "microbatch"), "microbatch", "compute"),
    Layout("fsdp-hybrid", "fsdp", "pgk", "node", ("reduce_scatter", "microbatch"), "microbatch", "compute",
           replicas=True, across_nodes_only=True),
    Layout("zero-3-hpz", "zero-3-hpz", "pgk", "dp", ("reduce_scatter", "microbatch"), "microbatch", "compute",
           hpz=True, across_nodes_only=True),
    Layout("megatron", "megatron", "", "dp", ("all_reduce", "step"), None, "none", model_parallel=True),
    Layout("fsdp-tp", "fsdp-tp", "pgk", "dp", ("reduce_scatter", "microbatch"), "microbatch", "compute",
           model_parallel=True, cp_comm="all_gather"),
)}
MP_LAYOUTS = tuple(k for k, l in LAYOUTS.items() if l.model_parallel)
DP_LAYOUTS = tuple(k for k, l in LAYOUTS.items() if not l.model_parallel)

# Bytes per parameter (p, g, k) a framework keeps by default, by --precision. Megatron-LM
# keeps fp32 main gradients (--accumulate-allreduce-grads-in-fp32, required with bf16) and
# reduces them in fp32: 2 + 4 + 12 = 18 B (Megatron-LM docs, distributed optimizer table);
# DeepSpeed, FSDP and DDP follow the ZeRO paper's mixed-precision accounting (2 + 2 + 12).
MEGATRON_BYTES = {"bf16": {"p": 2, "g": 4, "k": 12}, "amp": {"p": 4, "g": 4, "k": 8},
                  "fp32": {"p": 4, "g": 4, "k": 8}}
MEGATRON_BYTES["fp8"] = MEGATRON_BYTES["bf16"]   # FP8 GEMMs keep bf16's states


def etp(c):
    """Expert tensor parallelism of candidate c: its own, else tp (Megatron-Core's default)."""
    return c.get("etp") or c["tp"]


def _middle(c, w):
    """A middle stage's layers (all of them without a pipeline)."""
    split = pp_split(c)
    return split.middle if split else w["layers"]


def pp_split(c):
    """The candidate's pipeline split (pipeline.Split), None without a pipeline."""
    from .pipeline import Split
    return Split(tuple(c["pp_split"]), c.get("pp_split_how", "given")) if c.get("pp_split") else None


# Optimizer states (issue 41): bytes of each of Adam's two moments by --optimizer-states, and
# the block-wise scales of the quantised ones (one fp32 absmax per block per moment):
# bitsandbytes' 8-bit Adam, block 2,048 (Dettmers et al. 2021, arXiv 2110.02861); torchao's
# AdamW8bit / AdamWFp8, block 256; Megatron-Core's precision-aware optimizer keeps fp8 moments
# with per-tensor scales (negligible).
MOMENT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "8bit": 1.0}
BLOCK = {"bitsandbytes": 2048, "torchao": 256}
# which layouts' frameworks offer which moment precision (optimizer_line says how)
OPT_STATES = {"megatron": ("fp32", "bf16", "fp8"),
              "ddp": ("fp32", "8bit"), "zero-1": ("fp32", "8bit"), "zero-2": ("fp32", "8bit"),
              "zero-3": ("fp32", "8bit"), "zero-3-hpz": ("fp32", "8bit"),
              "fsdp": ("fp32", "fp8", "8bit"), "fsdp-hybrid": ("fp32", "fp8", "8bit"),
              "fsdp-tp": ("fp32", "fp8", "8bit")}


def _library(kind):
    return "torchao" if kind.startswith("fsdp") else "bitsandbytes"


def optimizer_bytes(kind, w):
    """k: bytes per parameter of the optimizer states: the main (master) parameters (fp32 4; with
    --main-params bf16 Megatron-Core's 16-bit copy, --main-params-dtype fp16, 2; elsewhere none:
    the bf16 parameters are updated in place) + two moments (MOMENT_BYTES, + block scales). With
    fp32 or amp parameters the parameters are the master copy: k = the moments."""
    opt, main = w.get("optimizer_states", "fp32"), w.get("main_params", "fp32")
    moments = 2 * MOMENT_BYTES[opt]
    if opt in ("8bit",) or (opt == "fp8" and kind != "megatron"):
        moments += 2 * 4.0 / BLOCK[_library(kind)]
    if w["precision"] not in HALF:
        return moments
    master = 4.0 if main == "fp32" else (2.0 if kind == "megatron" else 0.0)
    return master + moments


def optimizer_unsupported(kind, w):
    """Why kind's framework cannot keep the optimizer states asked for (None: it can)."""
    opt, main = w.get("optimizer_states", "fp32"), w.get("main_params", "fp32")
    if opt not in OPT_STATES[kind]:
        return (f"--optimizer-states {opt}: {kind} offers {', '.join(OPT_STATES[kind])} "
                "(Megatron-Core bf16 / fp8, DeepSpeed 8-bit Adam, FSDP torchao 8-bit / fp8)")
    if main == "bf16" and kind.startswith("zero-"):
        return "--main-params bf16: DeepSpeed's bf16 optimizer keeps fp32 master weights"
    return None


def optimizer_line(kind, w):
    """The configuration of the optimizer states asked for (None for fp32 Adam)."""
    opt, main = w.get("optimizer_states", "fp32"), w.get("main_params", "fp32")
    if opt == "fp32" and main == "fp32":
        return None
    if kind == "megatron":
        return None                           # its flags are in the command line
    parts = []
    if opt == "8bit":
        parts.append("torchao.optim.AdamW8bit(model.parameters())" if _library(kind) == "torchao"
                     else "bitsandbytes.optim.Adam8bit(model.parameters())"
                     + (" passed to deepspeed.initialize(optimizer=...)" if kind.startswith("zero-") else ""))
    elif opt == "fp8":
        parts.append("torchao.optim.AdamWFp8(model.parameters())")
    if main == "bf16":
        parts.append("the model kept in bf16 with no fp32 master copy (the optimizer updates the bf16 "
                     "parameters, e.g. torchao.optim's bf16_stochastic_round=True)")
    return "optimizer: " + "; ".join(parts)


def state_bytes(kind, w):
    """{p, g, k} bytes per parameter, and the bytes per gradient element reduced."""
    b = dict(MEGATRON_BYTES[w["precision"]] if kind == "megatron" else w["bytes"])
    if kind == "megatron" and w["grad_reduce"] == "bf16" and w["precision"] in HALF:
        b = dict(b, g=2)                      # --grad-reduce-in-bf16: a bf16 gradient buffer, reduced in bf16
    b["k"] = optimizer_bytes(kind, w)
    return b, b["g"]


def _fp8_line(kind):
    """How each framework runs its linear layers' GEMMs in FP8 with per-tensor current scaling
    (Megatron-LM's flags are in its command line)."""
    if kind == "fsdp-tp":
        return '[model] converters = ["float8"]; [float8] recipe_name = "tensorwise" (torchao)'
    if kind.startswith("zero-"):
        return ("Transformer Engine: te.Linear layers under te.fp8_autocast(fp8_recipe="
                "recipe.Float8CurrentScaling())")
    return ('torchao.float8.convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name('
            '"tensorwise")) before wrapping')


def config_lines(c, w):
    """The flags or configuration lines that set candidate c up as predicted."""
    lines = _config_lines(c, w)
    opt = optimizer_line(c["kind"], w)
    if opt:
        lines.append(opt)
    if w["precision"] == "fp8" and c["kind"] != "megatron":
        lines.append(_fp8_line(c["kind"]))
    return lines


def _config_lines(c, w):
    kind, b, m, rc = c["kind"], c["micro_batch"], c["microbatches"] or 1, c["recompute"]
    if kind == "megatron":
        flags = [f"--tensor-model-parallel-size {c['tp']}", f"--pipeline-model-parallel-size {c['pp']}",
                 f"--micro-batch-size {b}", f"--global-batch-size {c['global_batch']}",
                 "--bf16" if w["precision"] in HALF else "--fp16" if w["precision"] == "amp" else "",
                 "--fp8-format hybrid --fp8-recipe tensorwise" if w["precision"] == "fp8" else ""]
        split = pp_split(c)
        if split:
            from .pipeline import megatron_flags
            flags.append(megatron_flags(split, c["virtual_stages"]))
        if c["virtual_stages"] > 1:
            flags.append(f"--num-virtual-stages-per-pipeline-rank {c['virtual_stages']}")
        if c.get("cp", 1) > 1:
            flags.append(f"--context-parallel-size {c['cp']} --cp-comm-type p2p")
        if c.get("ep", 1) > 1:
            flags.append(f"--num-experts {w['experts']} --moe-router-topk {w['experts_per_token']} "
                         f"--expert-model-parallel-size {c['ep']} --moe-token-dispatcher-type alltoall")
        if w.get("experts") and etp(c) != c["tp"]:
            flags.append(f"--expert-tensor-parallel-size {etp(c)}")
        if c.get("a2a_overlap"):
            flags.append("--overlap-moe-expert-parallel-comm --delay-wgrad-compute")
        if c["distributed_optimizer"]:
            flags.append("--overlap-grad-reduce --overlap-param-gather")
        if c["distributed_optimizer"]:
            flags.append("--use-distributed-optimizer")
        if c["sequence_parallel"]:
            flags.append("--sequence-parallel")
        if w["grad_reduce"] == "bf16" and w["precision"] in HALF:
            flags.append("--grad-reduce-in-bf16")
        opt, main = w.get("optimizer_states", "fp32"), w.get("main_params", "fp32")
        if opt != "fp32" or main != "fp32":
            flags.append(f"--use-precision-aware-optimizer --main-params-dtype {'fp32' if main == 'fp32' else 'fp16'} "
                         f"--exp-avg-dtype {opt} --exp-avg-sq-dtype {opt}")
        if rc == "selective":
            flags.append("--recompute-activations")
        elif rc == "full":
            flags.append("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
        elif rc.startswith("modules:"):
            flags.append("--recompute-granularity selective --recompute-modules " + rc.split(":")[1].replace(",", " "))
        elif rc.startswith("partial:"):
            every = int(rc.split(":")[1])
            flags.append(f"--recompute-granularity full --recompute-method block --recompute-num-layers "
                         f"{max(1, _middle(c, w) // (every * c['virtual_stages']))}"
                         f" (1 in {every} layers of each stage)")
        return ["Megatron-LM: " + " ".join(f for f in flags if f)]
    if kind == "fsdp-tp":
        return _torchtitan(c, w)
    ckpt = {"none": None, "selective": "checkpoint the attention core",
            "full": "activation checkpointing on every block"}.get(rc) or (
        f"activation checkpointing on every {rc.split(':')[1]}th block" if rc.startswith("partial:") else None)
    if kind == "ddp":
        lines = [f"DistributedDataParallel(model, bucket_cap_mb={w['bucket_mb']:g})",
                 f"per-GPU batch {b}" + (f", {m} accumulation steps under model.no_sync()" if m > 1 else "")]
        if ckpt:
            lines.append(f"torch.utils.checkpoint: {ckpt}")
        return lines
    if kind.startswith("zero-"):
        stage = kind.split("-")[1]
        hpz = f', "zero_hpz_partition_size": {c["hpz_size"]}' if LAYOUTS[kind].hpz else ""
        cfg = (f'{{"zero_optimization": {{"stage": {stage}, "overlap_comm": true{hpz}}}, '
               f'"{ "bf16" if w["precision"] in HALF else "fp16"}": {{"enabled": true}}, '
               f'"train_micro_batch_size_per_gpu": {b}, "gradient_accumulation_steps": {m}}}')
        return [f"DeepSpeed config: {cfg}"] + ([f"deepspeed.checkpointing: {ckpt}"] if ckpt else [])
    # PyTorch FSDP2 (fully_shard): HSDP is a 2-D mesh, replicate across nodes x shard inside one
    mesh = (f'mesh=init_device_mesh("cuda", ({c["dp"] // c["hpz_size"]}, {c["hpz_size"]}), '
            f'mesh_dim_names=("replicate", "shard")), ' if kind == "fsdp-hybrid" else "")
    lines = [f"fully_shard(block, {mesh}reshard_after_forward=True, mp_policy=MixedPrecisionPolicy("
             f"param_dtype=torch.bfloat16, reduce_dtype=torch.float32)) for each transformer block, then "
             f"fully_shard(model) (FSDP2; FSDP1: ShardingStrategy."
             f"{'HYBRID_SHARD' if kind == 'fsdp-hybrid' else 'FULL_SHARD'})",
             f"per-GPU batch {b}" + (f", {m} accumulation steps" if m > 1 else "")]
    if ckpt:
        lines.append(f"apply_activation_checkpointing: {ckpt}")
    return lines


def _torchtitan(c, w):
    """torchtitan's TOML settings (one device mesh: dp_shard x cp x tp, pp, ep) for candidate c."""
    rc = c["recompute"]
    ac = (f'selective", selective_ac_option = "{rc.split(":")[1]}' if rc.startswith("partial:")
          else {"none": "none", "selective": "selective", "full": "full"}.get(rc, "none"))
    par = [f"data_parallel_shard_degree = {c['dp']}", f"tensor_parallel_degree = {c['tp']}",
           f"context_parallel_degree = {c.get('cp', 1)}", f"pipeline_parallel_degree = {c['pp']}",
           f"expert_parallel_degree = {c.get('ep', 1)}",
           f"fsdp_reshard_after_forward = \"{'always' if c['reshard'] else 'never'}\""]
    if w.get("experts"):
        par.insert(5, f"expert_tensor_parallel_degree = {etp(c)}")
    if c["pp"] > 1:
        par.append(f"pipeline_parallel_schedule = \"{'Interleaved1F1B' if c['virtual_stages'] > 1 else '1F1B'}\"")
        split = pp_split(c)
        if split and split.how != "even":
            from .pipeline import split_points
            par.append(f"pipeline_parallel_split_points = {split_points(split, c['virtual_stages'])}".replace("'", '"'))
    return ["torchtitan: [parallelism] " + ", ".join(par),
            f"[training] local_batch_size = {c['micro_batch'] * c['microbatches']}, "
            f"pipeline_parallel_microbatch_size = {c['micro_batch']}, seq_len = {w['seq_len']}, "
            f"mixed_precision_param = \"bfloat16\"; [activation_checkpoint] mode = \"{ac}\""]
