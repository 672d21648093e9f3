"""Workloads: model presets with their sources, or explicit shapes; precision; batch.

Transformer shapes: params, layers L, hidden h, heads a, default sequence length s.
Training FLOPs per step: 6 x params x tokens (Kaplan et al. 2020, arXiv 2001.08361:
2 for the forward pass, 4 for the backward); full recomputation adds one forward (x 4/3).
resnet50 is a CNN: FLOPs and activation bytes per sample come from its preset.
"""
from __future__ import annotations

import math

from ..errors import UsageError

PRESETS = {
    "resnet50": {"params": 25_557_032, "kind": "cnn", "micro_batch": 32,
                 # 4.1 GMAC forward per 224x224 image x 2 FLOP/MAC x 3 (forward + backward)
                 "flops_per_sample": 24.6e9,
                 # 16-bit activations kept for backward per image (~ 100 MB in fp32
                 # measured by torch memory stats; half in bf16)
                 "act_bytes_per_sample": 50e6,
                 "source": "He et al. 2015 (arXiv 1512.03385); torchvision resnet50 parameter count"},
    "bert-large": {"params": 340_000_000, "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 512,
                   "source": "Devlin et al. 2018 (arXiv 1810.04805), BERT-large"},
    "gpt2-1.5b": {"params": 1_558_000_000, "layers": 48, "hidden": 1600, "heads": 25, "seq_len": 1024,
                  "source": "Radford et al. 2019, GPT-2 (1558M)"},
    "llama2-7b": {"params": 6_738_000_000, "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096,
                  "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 7B"},
    "llama2-13b": {"params": 13_016_000_000, "layers": 40, "hidden": 5120, "heads": 40, "seq_len": 4096,
                   "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 13B"},
    "llama2-70b": {"params": 68_977_000_000, "layers": 80, "hidden": 8192, "heads": 64, "seq_len": 4096,
                   "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 70B"},
}

# bytes per parameter: p (parameters as stored and gathered), g (gradients as reduced),
# k (optimizer states: Adam m and v, plus an fp32 master copy when p is 16-bit);
# act: bytes per activation element.
PRECISIONS = {
    "bf16": {"p": 2, "g": 2, "k": 12, "act": 2,
             "note": "bf16 parameters and gradients, fp32 master weights + Adam (Megatron, DeepSpeed)"},
    "amp": {"p": 4, "g": 4, "k": 8, "act": 2,
            "note": "fp32 parameters and gradients, bf16 compute (torch.autocast), Adam fp32"},
    "fp32": {"p": 4, "g": 4, "k": 8, "act": 4, "note": "fp32 throughout, Adam fp32"},
}
RECOMPUTE = ("none", "selective", "full")
SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(text, what="--params"):
    """'350M', '1.5B', '7e9', '6738000000' -> int."""
    s = str(text).strip().upper()
    mult = SUFFIX.get(s[-1:], None) if s[-1:].isalpha() else 1
    try:
        v = float(s[:-1] if s[-1:].isalpha() else s) * (mult or 0)
    except ValueError:
        v = 0
    if not mult or not math.isfinite(v) or v <= 0:      # 1e400 reads as inf
        raise UsageError(f"{what}: bad count {text!r} (use e.g. 350M, 1.5B, 7e9)")
    return int(v)


MAX_PARAMS = 1e13      # 10 trillion: far beyond any model; 1e30 hung the shape derivation


def _derived_shape(params):
    """(layers, hidden) of a transformer of `params` when only the count is given:
    params = 12 L h^2 with hidden = 128 L (GPT-like aspect ratio)."""
    layers = max(1, round((params / (12 * 128 ** 2)) ** (1 / 3)))
    hidden = max(64, int(round(math.sqrt(params / (12 * layers)) / 64)) * 64)
    return layers, hidden


def build(model=None, params=None, layers=None, hidden=None, heads=None, seq_len=None,
          micro_batch=None, global_batch=None, precision="bf16", bucket_mb=25.0, recompute="selective"):
    if model and params:
        raise UsageError("give --model or --params, not both")
    if model:
        key = model.lower()
        if key not in PRESETS:
            raise UsageError(f"unknown --model {model!r} (known: {', '.join(PRESETS)}; or --params N)")
        w = dict(PRESETS[key], name=key)
        for k, v in (("layers", layers), ("hidden", hidden), ("heads", heads)):
            if v:
                w[k] = v
    elif params:
        w = {"name": "custom", "params": int(params), "source": "--params"}
        if layers and hidden:
            w.update(layers=layers, hidden=hidden)
        else:
            w["layers"], w["hidden"] = _derived_shape(params)
            if layers:
                w["layers"] = layers
            if hidden:
                w["hidden"] = hidden
            w["shape_note"] = "layers/hidden derived: params = 12 L h^2, hidden = 128 L"
        w["heads"] = heads or max(1, w["hidden"] // 128)
        w["seq_len"] = 2048
    else:
        raise UsageError("give --model NAME or --params N (see --help)")
    w.setdefault("kind", "transformer")
    if not 0 < w["params"] <= MAX_PARAMS:
        raise UsageError(f"--params must be > 0 and at most {MAX_PARAMS:g} (got {w['params']:g})")
    if seq_len:
        w["seq_len"] = seq_len
    if w["kind"] != "transformer":
        w["seq_len"] = 1                     # one sample is the unit: throughput in samples/s
    w["micro_batch"] = micro_batch or w.get("micro_batch", 1)
    w["global_batch"] = global_batch        # None: one micro-batch per GPU per step
    if precision not in PRECISIONS:
        raise UsageError(f"unknown --precision {precision!r} (amp, bf16, fp32)")
    w["precision"] = precision
    w["bytes"] = {k: v for k, v in PRECISIONS[precision].items() if k != "note"}
    w["precision_note"] = PRECISIONS[precision]["note"]
    if bucket_mb is None or bucket_mb <= 0:
        raise UsageError("--bucket-mb must be > 0")
    w["bucket_mb"] = bucket_mb
    if recompute not in RECOMPUTE:
        raise UsageError(f"unknown --recompute {recompute!r} ({', '.join(RECOMPUTE)})")
    w["recompute"] = recompute if w["kind"] == "transformer" else "none"
    return w        # given sizes were range-checked by select.check_numbers; presets are > 0


def flops_per_sample(w):
    """Training FLOPs of one sample (one sequence), recomputation included."""
    if w["kind"] != "transformer":
        return w["flops_per_sample"]
    f = 6.0 * w["params"] * w["seq_len"]
    return f * 4 / 3 if w["recompute"] == "full" else f


def tensors(w):
    """Parameter tensors (element counts) in registration order, as DDP buckets see them:
    per layer qkv 3h^2, proj h^2, fc1 4h^2, fc2 4h^2, scaled by params / (12 L h^2) so
    they add up to the model (embeddings and llama's larger MLP spread over the layers).
    A CNN is taken as tensors of 1M elements (resnet50's largest are 2-2.4M)."""
    if w["kind"] != "transformer":
        n, r = divmod(w["params"], 1_000_000)
        return [1_000_000] * n + ([r] if r else [])
    h2 = w["hidden"] ** 2
    f = w["params"] / (12 * w["layers"] * h2)
    return [round(k * h2 * f) for k in (3, 1, 4, 4)] * w["layers"]


def units(w):
    """FSDP / ZeRO-3 units: one per transformer layer (params / L each); a CNN's tensors."""
    if w["kind"] != "transformer":
        return tensors(w)
    return [w["params"] / w["layers"]] * w["layers"]
