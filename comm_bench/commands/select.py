"""`comm-bench select`: from measured links and a workload to a parallel layout and framework."""
import sys

import click

from ..errors import EXIT_FAILED
from ..select.gpus import GPUS
from ..select.workload import ATTENTION, GRAD_REDUCE, MAIN_PARAMS, OPTIMIZER_STATES, PRECISIONS, PRESETS, RECOMPUTE


def _count(ctx, param, value):
    if value is None:
        return None
    from ..select.workload import parse_count
    return parse_count(value, f"--{param.name.replace('_', '-')}")


@click.command()
@click.argument("results", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--model", default=None, help=f"Preset: {', '.join(PRESETS)}.")
@click.option("--params", default=None, callback=_count, help="Parameter count instead of --model (e.g. 1.5B).")
@click.option("--layers", type=int, default=None, help="Transformer layers.")
@click.option("--hidden", type=int, default=None, help="Hidden size.")
@click.option("--heads", type=int, default=None, help="Attention heads.")
@click.option("--kv-heads", type=int, default=None, help="Key/value heads (grouped-query attention; default: --heads).")
@click.option("--ffn-hidden", type=int, default=None,
              help="MLP width; given, the MLP is SwiGLU (three matrices, as Llama's); default 4 x hidden, GeLU.")
@click.option("--experts", type=int, default=None, help="Routed experts per MoE layer (mixture of experts).")
@click.option("--experts-per-token", type=int, default=None, help="Experts each token is routed to (top-k).")
@click.option("--shared-experts", type=int, default=None, help="Experts every token goes through (DeepSeek).")
@click.option("--moe-layers", type=int, default=None, help="MoE layers, the last ones (default: all).")
@click.option("--expert-ffn-hidden", "expert_ffn", type=int, default=None,
              help="Each expert's MLP width (default: --ffn-hidden).")
@click.option("--vocab", type=int, default=None,
              help="Vocabulary size (embedding and output layer, V h each; default: the preset's, else 0 for a "
                   "custom shape).")
@click.option("--kv-lora-rank", type=int, default=None,
              help="Multi-head latent attention (DeepSeek-V2/V3): the key/value latent rank (512 in V3).")
@click.option("--q-lora-rank", type=int, default=None, help="MLA: the query latent rank (1536 in V3; 0: none).")
@click.option("--qk-rope-dim", type=int, default=None, help="MLA: the rotary part of each query/key head (64).")
@click.option("--qk-nope-dim", type=int, default=None,
              help="MLA: the non-rotary part of each query/key head (default hidden / heads; 128 in V3).")
@click.option("--v-head-dim", type=int, default=None, help="MLA: each value head (default --qk-nope-dim).")
@click.option("--mtp-layers", type=int, default=None,
              help="Multi-token-prediction modules (DeepSeek-V3: 1), each a layer + 2h x h projection on the last "
                   "pipeline stage, sharing the embedding and output head.")
@click.option("--seq-len", type=int, default=None, help="Sequence length (tokens).")
@click.option("--micro-batch", type=int, default=None,
              help="Sequences (or images) per GPU per micro-batch (default: select tries 1, 2, 4, 8).")
@click.option("--global-batch", type=int, default=None,
              help="Samples per step over all GPUs (default: the preset's published recipe; else one "
                   "micro-batch per GPU).")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), default="bf16", show_default=True,
              help="bf16: bf16 params/grads + fp32 master/Adam; amp: fp32 params/grads, bf16 compute; "
                   "fp8: bf16 with the linear layers' GEMMs in FP8 (per-tensor current scaling).")
@click.option("--bucket-mb", type=float, default=25.0, show_default=True, help="DDP gradient bucket size (MiB).")
@click.option("--recompute", type=click.Choice(("auto",) + RECOMPUTE), default="auto", show_default=True,
              metavar="MODE",      # the choices, listed in the help, would run past 80 columns
              help="Activation recomputation; auto: the cheapest that fits, named in the answer. MODE: "
                   + ", ".join(("auto",) + RECOMPUTE) + ".")
@click.option("--grad-reduce", type=click.Choice(GRAD_REDUCE), default="fp32", show_default=True,
              help="Megatron-Core's gradient buffer and its reduction: fp32 (its default, 4 B per parameter) "
                   "or bf16 (--grad-reduce-in-bf16; Megatron-Bridge's grad_reduce_in_fp32=False).")
@click.option("--optimizer-states", type=click.Choice(OPTIMIZER_STATES), default="fp32", show_default=True,
              help="Adam's two moments: fp32 (4 B each), bf16 or fp8 (Megatron-Core's --use-precision-aware-optimizer "
                   "--exp-avg-dtype/--exp-avg-sq-dtype; fp8 also torchao's AdamWFp8 under FSDP), 8bit (8-bit Adam: "
                   "bitsandbytes with DeepSpeed or DDP, torchao under FSDP).")
@click.option("--main-params", type=click.Choice(MAIN_PARAMS), default="fp32", show_default=True,
              help="Master weights beside bf16 parameters: fp32 (4 B) or bf16 (Megatron-Core's 16-bit "
                   "--main-params-dtype fp16, 2 B; FSDP: none, the bf16 parameters are updated in place).")
@click.option("--a2a-overlap/--no-a2a-overlap", default=True, show_default=True,
              help="Megatron-Core layouts with expert parallelism hide the dispatcher's alltoalls behind the "
                   "paired micro-batch's compute (--overlap-moe-expert-parallel-comm --delay-wgrad-compute: "
                   "combined 1F1B); --no-a2a-overlap prices them exposed, Megatron's default.")
@click.option("--pp-layout", default=None,
              help="Pipeline split to evaluate: FIRST,LAST stage layers (equal middle stages, Megatron's "
                   "--decoder-first/last-pipeline-num-layers) or one count per stage, e.g. 3,2 or 3,4,4,2 "
                   "(default: the split whose slowest stage and memory are least, docs/selection.md).")
@click.option("--attention", type=click.Choice(ATTENTION), default=None,
              help="flash: kernels that keep no score matrix (default); unfused: 2021-style attention "
                   "(the Megatron SC'21 presets).")
@click.option("--nodes", type=int, default=None, help="Nodes (default: from the results).")
@click.option("--gpus-per-node", type=int, default=None, help="GPUs per node (default: from the topology).")
@click.option("--gpu", default=None, help=f"Plan for this GPU ({', '.join(GPUS)}): its data-sheet memory, "
                                          "peak and memory bandwidth (default: the GPU in the results).")
@click.option("--power-cap", type=float, default=None,
              help="GPU power limit (W) the job runs at: below the card's TDP the sustained compute rate falls "
                   "as ((W - 0.15 TDP) / 0.85 TDP)^(1/3) (derived from the H200's measured 700 W clocks, "
                   "docs/selection.md).")
@click.option("--eager", is_flag=True,
              help="Kernels launched one by one (eager PyTorch, or torch.compile without CUDA graphs): each "
                   "layer's forward + backward takes at least the host time measured on an H100 (2.24 ms; "
                   "docs/selection.md). Default: CUDA graphs or kernels long enough to hide the host.")
@click.option("--gpu-mem", default=None, help="GPU memory, e.g. 80G (default: NVML's figure in the results).")
@click.option("--step-time", type=float, default=None,
              help="Compute seconds of one micro-batch (forward + backward) of the whole model on one GPU.")
@click.option("--gpu-tflops", type=float, default=None, help="Peak TFLOPS per GPU (default: by GPU name).")
@click.option("--compute-from", default=None, type=click.Path(dir_okay=False),
              help="GEMM efficiency measured on your GPU: a tools/bench_train_step.py JSON file.")
@click.option("--mfu", type=float, default=None,
              help="One model FLOPs utilisation for all compute (default: a per-layer roofline, docs/selection.md).")
@click.option("--ecosystem", type=click.Choice(["pytorch", "jax"]), default="pytorch", show_default=True)
@click.option("--elastic", is_flag=True, help="Fault tolerance / elastic scaling required.")
@click.option("--rules", default=None, type=click.Path(dir_okay=False),
              help="Rules YAML tried before the defaults (mode: replace to use it alone).")
@click.option("--min-efficiency", type=float, default=None,
              help="Exit 1 unless a feasible layout reaches this scaling efficiency (0-1).")
@click.option("--overlap", type=float, default=None,
              help="Share of backward compute that gradient communication can hide behind "
                   "(default 0: none; measured so on NVLink, docs/selection.md).")
@click.option("--intra-node-gbs", type=float, default=None, help="Assumed intra-node bus bandwidth (GB/s).")
@click.option("--inter-node-gbs", type=float, default=None, help="Assumed inter-node bandwidth per GPU (GB/s).")
@click.option("--mem-headroom", type=float, default=0.1, show_default=True,
              help="Share of GPU memory kept free (CUDA context, NCCL buffers, fragmentation).")
@click.option("--html", "html_out", default=None, type=click.Path(dir_okay=False),
              help="Also write 'what this means for training' as one HTML page (with the links' heatmaps).")
@click.option("--show-model", is_flag=True, help="Print the fitted link model only.")
@click.option("--explain", is_flag=True, help="Print the path taken through the rules.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def select(results, show_model, explain, as_json, mem_headroom, html_out, **kw):
    """Choose a distributed-training layout and framework from measured links.

    RESULTS are comm-bench results files (any transport; intra- and inter-node runs).
    Exit status: 0 a feasible layout meets --min-efficiency (or any is feasible), 1 none
    does, 2 bad input. Model and formulas: docs/selection.md.
    """
    from ..results.document import load_measured
    from ..select import link_model_only, select as run
    for path in results:
        load_measured(path)     # an empty document is bad input here as in every reader
    from ..select.output import print_model, print_text, to_json
    if show_model:
        rows, cluster = link_model_only(results, kw["nodes"], kw["gpus_per_node"], kw["gpu_mem"],
                                        kw["intra_node_gbs"], kw["inter_node_gbs"])
        print_model(rows, cluster, as_json)
        return
    res = run(results, headroom=mem_headroom, **kw)
    if html_out:
        from ..select.html import render
        render(res, res["documents"], html_out)
    if as_json:
        click.echo(to_json(res))
    else:
        print_text(res, explain)
    if not res["meets_min_efficiency"]:
        sys.exit(EXIT_FAILED)
