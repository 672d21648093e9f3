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
    family       the framework table's key (data/select_frameworks.yaml)
"""
from __future__ import annotations

from dataclasses import dataclass


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
)}
DP_LAYOUTS = tuple(k for k, l in LAYOUTS.items() if not l.model_parallel)

# Bytes per parameter (p, g, k) a framework keeps by default, by --precision. Megatron-LM
# keeps fp32 main gradients (--accumulate-allreduce-grads-in-fp32, required with bf16) and
# reduces them in fp32: 2 + 4 + 12 = 18 B (Megatron-LM docs, distributed optimizer table);
# DeepSpeed, FSDP and DDP follow the ZeRO paper's mixed-precision accounting (2 + 2 + 12).
MEGATRON_BYTES = {"bf16": {"p": 2, "g": 4, "k": 12}, "amp": {"p": 4, "g": 4, "k": 8},
                  "fp32": {"p": 4, "g": 4, "k": 8}}


def state_bytes(kind, w):
    """{p, g, k} bytes per parameter, and the bytes per gradient element reduced."""
    b = MEGATRON_BYTES[w["precision"]] if kind == "megatron" else w["bytes"]
    return b, b["g"]


def config_lines(c, w):
    """The flags or configuration lines that set candidate c up as predicted."""
    kind, b, m, rc = c["kind"], c["micro_batch"], c["microbatches"] or 1, c["recompute"]
    if kind == "megatron":
        flags = [f"--tensor-model-parallel-size {c['tp']}", f"--pipeline-model-parallel-size {c['pp']}",
                 f"--micro-batch-size {b}", f"--global-batch-size {c['global_batch']}",
                 "--bf16" if w["precision"] == "bf16" else "--fp16" if w["precision"] == "amp" else ""]
        if c["pp"] > 1 and w["layers"] % c["pp"]:
            flags.append(f"--decoder-first-pipeline-num-layers {w['layers'] - (c['pp'] - 1) * (w['layers'] // c['pp'])}"
                         f" (the other stages {w['layers'] // c['pp']} each)")
        if c["virtual_stages"] > 1:
            flags.append(f"--num-layers-per-virtual-pipeline-stage {w['layers'] // (c['pp'] * c['virtual_stages'])}")
        if c["distributed_optimizer"]:
            flags.append("--use-distributed-optimizer")
        if c["sequence_parallel"]:
            flags.append("--sequence-parallel")
        if rc == "selective":
            flags.append("--recompute-activations")
        elif rc == "full":
            flags.append("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
        return ["Megatron-LM: " + " ".join(f for f in flags if f)]
    ckpt = {"none": None, "selective": "checkpoint the attention core",
            "full": "activation checkpointing on every block"}[rc]
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
               f'"{ "bf16" if w["precision"] == "bf16" else "fp16"}": {{"enabled": true}}, '
               f'"train_micro_batch_size_per_gpu": {b}, "gradient_accumulation_steps": {m}}}')
        return [f"DeepSpeed config: {cfg}"] + ([f"deepspeed.checkpointing: {ckpt}"] if ckpt else [])
    strategy = "HYBRID_SHARD" if kind == "fsdp-hybrid" else "FULL_SHARD"
    lines = [f"FSDP(model, sharding_strategy=ShardingStrategy.{strategy}, auto_wrap_policy=one unit per "
             f"transformer block, mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, "
             f"reduce_dtype=torch.float32))",
             f"per-GPU batch {b}" + (f", {m} accumulation steps" if m > 1 else "")]
    if ckpt:
        lines.append(f"apply_activation_checkpointing: {ckpt}")
    return lines
