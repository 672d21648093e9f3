"""Compute time of one micro-batch on one GPU (docs/selection.md, "Compute").

Four ways, in order of preference:
  --step-time T   measured (tools/bench_train_step.py on the user's GPU): T seconds per
                  micro-batch of the whole model, scaled by the share of the model a GPU
                  holds and the micro-batch size;
  --mfu F         FLOPs / (peak x F), one utilisation for every layer;
  --compute-from  the roofline below with the GEMM efficiency measured by
                  tools/bench_train_step.py on the user's GPU (its model is GEMMs only:
                  efficiency = 6 P tokens / (compute seconds x peak)), interpolated in
                  log(hidden / tp) between its cases;
  default         a roofline per transformer layer: matrix FLOPs / (peak x GEMM_EFFICIENCY)
                  + bytes the element-wise kernels move / HBM bandwidth, where those bytes
                  are ELEMENTWISE_PASSES x the activations a layer keeps (Korthikanti et al.
                  2022, Table 2, without recomputation: layer norms, dropouts, GeLU and, with
                  unfused attention, the a s^2 score matrix). Small hidden sizes spend more
                  of their time in those memory-bound kernels, which a single MFU misses.
GEMM_EFFICIENCY and ELEMENTWISE_PASSES are assumptions (labelled so in every answer); with
them the SC'21 Table 1 runs come out within 15% (docs/benchmarks/selection-published.md).
A CNN (no layer shapes) takes FLOPs / (peak x CNN_MFU)."""
from __future__ import annotations

import functools
import json
import math
import os

from ..errors import UsageError
from . import gpus as GP
from . import launch as LN
from . import memory as M
from . import shapes as SH
from . import workload as W

GEMM_EFFICIENCY = 0.7        # share of the dense peak that transformer GEMMs reach (assumed)
ELEMENTWISE_PASSES = 8       # times each kept activation byte crosses HBM per step (assumed)
CNN_MFU = 0.4                # no layer shapes to build a roofline from (assumed)
# Flash attention, forward + backward, causal, bf16: select's count (3 x the causal forward
# FLOPs) / (seconds x the dense peak), measured by tools/check_select_kernels.py on H200s
# (torch's SDPA, cuDNN backend, torch 2.11), by head dimension and sequence (log-linear in s
# between the points, held at the ends). Sustained figures: the kernel inside its layer's
# GEMMs, run for minutes at the 700 W cap as training holds the card (SM ~1,450-1,530 MHz;
# docs/benchmarks/selection-kernels-sustained-h200.json, mean of two machines where both
# ran it); alone on a cool card it reads 10-20% higher (0.327 / 0.421 / 0.479,
# selection-kernels-h200.json), which a training step never sees. The GEMMs in the same
# mixes read 0.66-0.75, so GEMM_EFFICIENCY stays. Hopper GPUs share SMs, clocks and the
# 700 W cap (H100, H200, GH200); elsewhere attention runs at the GEMM efficiency.
ATTENTION_EFFICIENCY = {64: [(4096, 0.270)], 128: [(8192, 0.340), (32768, 0.433)]}
# --precision fp8: the linear layers' GEMMs (forward, data and weight gradients; the routed
# experts' by their own measured table, below) run at this share of the dense FP8 peak on Hopper:
# e4m3 GEMMs with per-tensor scales (torch._scaled_mm) inside a Llama 3 70B tp4 layer beside
# bf16 cuDNN attention, 60 s at the 700 W cap, FLOP-weighted (0.58-0.65 by shape; alone on a
# cool card 0.51-0.66; docs/benchmarks/selection-kernels-fp8-h200.json). Elsewhere the
# GEMM_EFFICIENCY of the FP8 peak, assumed.
FP8_GEMM_EFFICIENCY = 0.63
# Bytes per element to cast a GEMM operand to FP8 with current scaling (Transformer Engine's
# Float8CurrentScaling, torchao's tensorwise): read bf16 for the amax, read it again and
# write e4m3 row-wise plus the transposed copy the other GEMM needs: 2 + 2 + 1 + 1.
FP8_CAST_BYTES = 6
MEASURED_ON = ("H100", "H200", "GH200", "H800", "H100 96GB")   # Hopper SXM at 700 W (gpus.py)
# --power-cap W (issue 41). Measured (docs/benchmarks/selection-kernels-sustained-h200.json,
# two H200s): under a training layer's kernels at the 700 W cap the card draws 691-692 W and
# holds its SM clock at 1,455 / 1,530 MHz (median; boost 1,980) with "SW power cap" the
# throttle reason; every efficiency select uses was measured there or on cooler cards, so a
# cap at or above the card's TDP changes nothing. Derived, not measured: below it the SM clock
# and with it compute-bound throughput fall as the dynamic power does, P - P_static ~ f V^2
# ~ f^3 (voltage roughly follows frequency in the DVFS range), P_static = STATIC_SHARE x TDP
# (assumed): rate(W) / rate(TDP) = ((W - P_static) / (TDP - P_static))^(1/3). HBM bandwidth is
# not scaled (its clock is not power-managed the same way).
STATIC_SHARE = 0.15


def power_factor(cap_w, tdp_w):
    """Sustained compute rate at a power cap over the rate at the card's TDP (<= 1)."""
    if cap_w is None or not tdp_w or cap_w >= tdp_w:
        return 1.0
    static = STATIC_SHARE * tdp_w
    if cap_w <= static:
        raise UsageError(f"--power-cap {cap_w:g} W: below the card's static power ({static:g} W assumed, "
                         f"{STATIC_SHARE:g} x its {tdp_w:g} W TDP)")
    return ((cap_w - static) / (tdp_w - static)) ** (1.0 / 3.0)
# A MoE layer's routed experts, forward + backward (data and weight gradients): FLOPs /
# (seconds x the dense bf16 or FP8 peak) by the expert's shape (hidden, expert FFN) and the
# tokens M each expert gets per micro-batch, measured on one H200 for each MoE preset's shape
# at M = 128 ... 8,192 (comm_bench/data/select_expert_gemms.json, derived from
# docs/benchmarks/selection-kernels-experts-h200.json: 8 local experts, the faster of a loop
# of GEMMs and one grouped kernel; bf16 0.08-0.68, FP8 0.07-0.61 of the FP8 peak: small
# experts at small M fill little of the GPU). The nearest measured shape (log h, log f),
# log-linear in M, held at the ends; Hopper GPUs only.
EXPERT_TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                            "select_expert_gemms.json")


@functools.lru_cache(maxsize=1)
def expert_shapes():
    with open(EXPERT_TABLE, encoding="utf-8") as f:
        return json.load(f)["shapes"]


def measured_gemm_efficiency(path, peak_tflops):
    """[(hidden, efficiency)] of a tools/bench_train_step.py file (its cases' local compute)."""
    from ..results.safefile import read_bounded
    raw = read_bounded(path, "bench_train_step file")
    try:
        bench = json.loads(raw)
        tokens = bench["micro_batch"] * bench["seq_len"]
        pts = sorted((float(c["hidden"]), 6.0 * c["params"] * tokens / (c["compute_s"] * peak_tflops * 1e12))
                     for c in bench["cases"] if c.get("compute_s"))
    except (ValueError, KeyError, TypeError, ZeroDivisionError, RecursionError) as e:
        raise UsageError(f"--compute-from {path}: not a bench_train_step file ({e})") from None
    if not pts or not all(0 < e <= 1 for _, e in pts):
        raise UsageError(f"--compute-from {path}: no case with a compute time at or below the GPU's peak")
    return pts, bench.get("device") or "?"


class Compute:
    """Seconds of one micro-batch of b samples on one GPU holding 1/tp of each of `layers`
    layers (plus the logits when `logits`), with recomputation `recompute`."""

    def __init__(self, w, gpu, step_time=None, mfu=None, gpu_tflops=None, compute_from=None, power_cap=None,
                 eager=False):
        self.w, self.gpu = w, gpu
        self.eager = eager
        self.gemm_points = None
        self.step_time, self.mfu = step_time, mfu
        self.power = power_factor(power_cap, gpu.get("tdp_w"))
        peak = (gpu_tflops or gpu["peak_tflops"]) * self.power
        if w["precision"] == "fp32" and not gpu_tflops:
            peak /= 2
        self.peak = peak * 1e12
        self.fp8_peak = None
        if w["precision"] == "fp8":
            if not (gpu_tflops or gpu.get("fp8_tflops")):
                raise UsageError(f"--precision fp8: the {gpu.get('name') or 'GPU'} has no FP8 tensor cores "
                                 f"(H100, H200, GH200, B200, L40S have; or give --gpu-tflops)")
            self.fp8_peak = (2 * gpu_tflops * 1e12 if gpu_tflops else gpu["fp8_tflops"] * 1e12) * self.power
        self.hbm = gpu["hbm_tbs"] * 1e12
        self.power_note = (f"--power-cap {power_cap:g} W: compute x {self.power:.3f} of its {gpu.get('tdp_w'):g} W "
                           f"rate (derived: ((cap - {STATIC_SHARE:g} TDP) / (0.85 TDP))^(1/3))"
                           if power_cap is not None and self.power < 1 else
                           f"--power-cap {power_cap:g} W: at or above the card's {gpu.get('tdp_w'):g} W, no change"
                           if power_cap is not None else "")
        if step_time is not None:
            self.note = f"--step-time {step_time:g} s per micro-batch of {w['micro_batch']} (given)"
        elif mfu is not None:
            self.note = f"FLOPs / ({peak:g} TFLOPS {gpu['source']} x --mfu {mfu:g})"
        elif w["kind"] != "transformer":
            self.note = f"FLOPs / ({peak:g} TFLOPS {gpu['source']} x MFU {CNN_MFU:g}, assumed)"
        else:
            eff = f"GEMM efficiency {GEMM_EFFICIENCY:g}, assumed"
            if compute_from:
                self.gemm_points, device = measured_gemm_efficiency(compute_from, peak)
                eff = ("GEMM efficiency " + ", ".join(f"{e:.3g} at hidden {h:g}" for h, e in self.gemm_points)
                       + f", measured on {device} ({compute_from})")
            self.note = (f"matrix FLOPs / ({peak:g} TFLOPS {gpu['source']} x {eff}) + {ELEMENTWISE_PASSES} x "
                         f"kept activations / {gpu['hbm_tbs']:g} TB/s HBM (assumed passes)")
            if self.attention_efficiency():
                self.note += (f"; flash attention at {self.attention_efficiency():.3g} of the peak "
                              "(measured on an H200, tools/check_select_kernels.py)")
            if self.fp8_peak:
                self.note += (f"; linear layers in FP8 at {self.fp8_peak / 1e12:g} TFLOPS x {self.fp8_efficiency():g}"
                              + (" (measured on an H200)" if self.gpu.get("name") in MEASURED_ON else ", assumed")
                              + f" + {FP8_CAST_BYTES} B per operand element cast / HBM")
        if self.power_note:
            self.note += "; " + self.power_note
        if eager:
            self.note += "; " + LN.note(w)

    def attention_efficiency(self):
        """Measured flash-attention efficiency at the nearest measured head dimension, on a
        GPU of the measured kind; None (the GEMM efficiency) otherwise or for unfused attention."""
        w = self.w
        if not W.executes_causal(w) or self.gpu.get("name") not in MEASURED_ON:
            return None
        import numpy as np
        m = w.get("mla")
        d = (m["qk_nope"] + m["qk_rope"]) if m else SH.head_dim(w) if "ffn_hidden" in w else w["hidden"] // w["heads"]
        pts = ATTENTION_EFFICIENCY[min(ATTENTION_EFFICIENCY, key=lambda k: abs(math.log(k / d)))]
        return float(np.interp(math.log(w["seq_len"]), [math.log(q) for q, _ in pts], [e for _, e in pts]))

    def fp8_efficiency(self):
        return FP8_GEMM_EFFICIENCY if self.gpu.get("name") in MEASURED_ON else GEMM_EFFICIENCY

    def fp8_cast_seconds(self, b, tp, layer_share):
        """HBM time of casting every linear layer's input and output gradient to FP8, forward
        and backward, for a micro-batch: FP8_CAST_BYTES x (K + N) per token per weight, 1/tp
        of it per GPU."""
        w = self.w
        if not self.fp8_peak:
            return 0.0
        if "ffn_hidden" in w:
            n_moe = SH.moe_layers(w)
            io = (w["layers"] - n_moe) * SH.linear_io_per_token(w) + (
                n_moe * SH.linear_io_per_token(w, True) if n_moe else 0)
        else:                                 # GPT: QKV h -> 3h, out h -> h, MLP h -> 4h -> h
            io = w["layers"] * 16 * w["hidden"]
        return self.hbm_seconds(b, tp, io * layer_share, FP8_CAST_BYTES)

    def gemm_efficiency(self, width):
        """The GEMM efficiency at a per-GPU hidden width: measured points (log-linear in
        width, held at the ends), else the assumed constant."""
        pts = self.gemm_points
        if not pts:
            return GEMM_EFFICIENCY
        import numpy as np
        return float(np.interp(math.log(width), [math.log(h) for h, _ in pts], [e for _, e in pts]))

    def expert_efficiency(self, b, ep, tp=1, etp=None):
        """Measured efficiency of the routed experts' GEMMs (bf16, or FP8 of the FP8 peak) at
        their shape and M = the tokens each expert gets per micro-batch (ep etp x b s / tp x k
        / E: the ep x etp GPUs' tokens over E experts, sequence parallel over tp), on a GPU of
        the measured kind; else the dense GEMMs' (the FP8 one in FP8)."""
        w = self.w
        if self.gpu.get("name") not in MEASURED_ON or self.gemm_points:
            return self.fp8_efficiency() if self.fp8_peak else self.gemm_efficiency(w["hidden"])
        import numpy as np
        shape = min(expert_shapes(), key=lambda s: math.hypot(math.log(s["hidden"] / w["hidden"]),
                                                             math.log(s["ffn"] / w["expert_ffn"])))
        pts = shape["fp8" if self.fp8_peak else "bf16"]
        tokens = ep * (etp or tp) * b * w["seq_len"] / tp * w["experts_per_token"] / w["experts"]
        return float(np.interp(math.log(max(tokens, 1.0)), [math.log(m) for m, _ in pts], [e for _, e in pts]))

    def expert_rate(self, b, ep, tp=1, etp=None):
        """FLOP/s of the routed experts' GEMMs: the measured efficiency x the bf16 or FP8 peak."""
        return (self.fp8_peak or self.peak) * self.expert_efficiency(b, ep, tp, etp)

    def expert_flops(self, b, tp, layer_share, recompute):
        """The routed experts' FLOPs of a micro-batch (forward x 3, a recomputed forward added)."""
        w = self.w
        n_moe = SH.moe_layers(w) * layer_share if "ffn_hidden" in w else 0
        if not n_moe:
            return 0.0
        mlp = SH.mlp_params(w["hidden"], w["expert_ffn"], w["glu"])
        return (3 + W.recompute_share(recompute)) * 2.0 * b * w["seq_len"] * w["experts_per_token"] * mlp * n_moe / tp

    def expert_weight_wait(self, b, tp, layer_share, recompute, ep, etp=None):
        """Seconds a micro-batch's expert GEMMs wait on HBM beyond their FLOPs (roofline of the
        routed experts, a MoE layer's GEMMs per expert are small: M = the tokens routed to
        it): each pass (forward; backward's data and weight gradients; a recomputed forward)
        reads the GPU's experts' weights, (E / ep) 3 h f_e / etp x p bytes per MoE layer;
        what exceeds the experts' FLOP time is added. ep = 1 on many experts reads them all."""
        w = self.w
        n_moe = SH.moe_layers(w) * layer_share if "ffn_hidden" in w else 0
        if not n_moe:
            return 0.0
        passes = 3 + W.recompute_share(recompute)
        mlp = SH.mlp_params(w["hidden"], w["expert_ffn"], w["glu"])
        flops = self.expert_flops(b, tp, layer_share, recompute)
        reads = passes * (w["experts"] / ep) * mlp * n_moe / (etp or tp) * w["bytes"]["p"]
        return max(0.0, reads / self.hbm - flops / self.expert_rate(b, ep, tp, etp))

    def permute_seconds(self, b, tp, layer_share, recompute, ep, etp=None):
        """Seconds a micro-batch's MoE token permutation moves through HBM (memory-bound
        gathers and scatters, no FLOPs): per MoE layer and pass (forward, backward, a
        recomputed forward) the dispatcher's permute reads a token's h and writes its k copies,
        the unpermute reads the k copies and writes h (Megatron-Core's moe_utils.permute /
        unpermute): 2 (k + 1) h elements per token; with ep > 1 and several local experts
        the received tokens (gathered over etp) are sorted by local expert and back
        (sort_chunks_by_idxs): + 4 k h etp. Tokens per GPU: b s / tp (sequence parallel)."""
        w = self.w
        n_moe = SH.moe_layers(w) * layer_share if "ffn_hidden" in w else 0
        if not n_moe:
            return 0.0
        k, h = w["experts_per_token"], w["hidden"]
        elems = 2 * (k + 1) * h + (4 * k * h * (etp or tp) if ep > 1 and w["experts"] // ep > 1 else 0)
        passes = 2 + W.recompute_share(recompute)
        return self.hbm_seconds(b, tp, passes * n_moe * elems, w["bytes"]["act"])

    def module_recompute_seconds(self, b, tp, layer_share, recompute):
        """HBM time of Megatron-Core's module recomputation in backward: each norm reads and
        writes h per token (layernorm), each routed expert reads gate and up and writes their
        product, 3 f_e per token copy (moe_act); MLA's up-projections run again (mla_up_proj:
        2 (q_lora a (nope + rope) + kv_lora a (nope + v)) FLOPs per token a layer, 1/tp of the
        heads per GPU, at the linear layers' rate)."""
        w, modules = self.w, SH.recompute_modules(recompute)
        if not modules:
            return 0.0
        elems = (4 * w["hidden"] * w["layers"] if "layernorm" in modules else 0) + (
            3 * w["expert_ffn"] * w["experts_per_token"] * SH.moe_layers(w) if "moe_act" in modules else 0)
        t = self.hbm_seconds(b, tp, layer_share * elems, w["bytes"]["act"])
        m = w.get("mla")
        if "mla_up_proj" in modules and m:
            per_token = 2.0 * w["heads"] * ((m["q_lora"] or w["hidden"]) * (m["qk_nope"] + m["qk_rope"])
                                            + m["kv_lora"] * (m["qk_nope"] + m["v"]))
            rate = (self.fp8_peak * self.fp8_efficiency() if self.fp8_peak
                    else self.peak * self.gemm_efficiency(w["hidden"] / tp))
            t += b * w["seq_len"] * w["layers"] * layer_share * per_token / tp / rate
        return t

    def hbm_seconds(self, b, tp, elems_per_token, elem_bytes):
        """Seconds a GPU's HBM needs to move elems_per_token elements of elem_bytes for each
        of its b s / tp tokens (sequence parallel) of a micro-batch."""
        return b * self.w["seq_len"] / tp * elems_per_token * elem_bytes / self.hbm

    def seconds(self, b, tp=1, layer_share=1.0, recompute="none", sp=False, ep=1, logits=True, etp=None):
        """One micro-batch of b samples through layer_share of the layers, 1/tp of each (the
        experts of MoE layers 1/ep, each split over etp, tp when not given), and the output
        layer when `logits` (it runs on the last pipeline stage alone: Megatron-Core's and
        torchtitan's stage split). --eager: at least the host's time to launch it (launch.py)."""
        t = self._gpu_seconds(b, tp, layer_share, recompute, sp, ep, logits, etp)
        return max(t, LN.host_seconds(self.w, layer_share, recompute)) if self.eager else t

    def _gpu_seconds(self, b, tp, layer_share, recompute, sp, ep, logits, etp):
        etp = etp or tp
        w = self.w
        counted, executed = W.logits_flops_per_sample(w, recompute)
        layers = W.flops_per_sample(w, recompute, executed=True) - counted
        flops = (layers * layer_share + (executed if logits else 0.0)) * b / tp
        if self.step_time is not None:
            ref = W.flops_per_sample(w, "none", executed=True) * w["micro_batch"]
            return self.step_time * flops / ref
        if self.mfu is not None:
            return flops / (self.peak * self.mfu)
        if w["kind"] != "transformer":
            return flops / (self.peak * CNN_MFU)
        kept = M.layer_activation_bytes(w, b, tp, "none", sp, etp) * w["layers"] * layer_share
        eff = self.gemm_efficiency(w["hidden"] / tp)
        attn = W.attention_flops_per_sample(w, recompute, executed=True) * b * layer_share / tp
        attn_eff = self.attention_efficiency() or eff
        experts = self.expert_flops(b, tp, layer_share, recompute)
        # linear layers (routed experts too) in FP8 where asked
        gemm_rate = self.fp8_peak * self.fp8_efficiency() if self.fp8_peak else self.peak * eff
        expert_rate = self.expert_rate(b, ep, tp, etp) if experts else 1.0
        return ((flops - attn - experts) / gemm_rate + attn / (self.peak * attn_eff)
                + experts / expert_rate
                + self.fp8_cast_seconds(b, tp, layer_share)
                + ELEMENTWISE_PASSES * kept / self.hbm
                + self.expert_weight_wait(b, tp, layer_share, recompute, ep, etp)
                + self.permute_seconds(b, tp, layer_share, recompute, ep, etp)
                + self.module_recompute_seconds(b, tp, layer_share, recompute))


def gpu_figures(cluster, gpu_name=None):
    """The data-sheet entry used (with 'source'): --gpu, else the GPU in the results, else assumed."""
    name = gpu_name or cluster.get("gpu_name")
    entry, key = GP.lookup(name)
    if entry:
        return dict(entry, source=f"{key} data sheet", name=key)
    return dict(GP.ASSUMED, source="assumed H100-class (no GPU named: give --gpu)", name=None)
