"""Workloads: model presets with their sources, or explicit shapes; precision; batch.

Transformer shapes: params, layers L, hidden h, heads a, default sequence length s.
Training FLOPs per step: 6 x params x tokens (Kaplan et al. 2020, arXiv 2001.08361:
2 for the forward pass, 4 for the backward); full recomputation adds one forward (x 4/3).
resnet50 is a CNN: FLOPs and activation bytes per sample come from its preset.
"""
from __future__ import annotations

import math

from ..errors import UsageError
from . import shapes as SH

def _gpt(layers, hidden, heads, batch, seq=2048, vocab=51200):
    """A GPT model of Narayanan et al. 2021 (arXiv 2104.04473), Table 1: parameters
    P = 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h)), vocabulary 51,200, sequence 2048,
    its global batch, attention without fused kernels (2021)."""
    p = 12 * layers * hidden ** 2 * (1 + 13 / (12 * hidden) + (vocab + seq) / (12 * layers * hidden))
    return {"params": int(p), "layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq, "vocab": vocab,
            "global_batch": batch, "attention": "unfused",
            "source": "Narayanan et al. 2021 (arXiv 2104.04473), Table 1",
            "recipe_source": "Narayanan et al. 2021, Table 1 (batch size)"}


# Transformer shapes with vocabulary V; `global_batch` is the published recipe's batch
# (sequences or images per step) with its source. attention: "flash" (kernels that keep no
# s x s score matrix: FlashAttention, cuDNN SDPA; today's default) or "unfused" (2021).
PRESETS = {
    "resnet50": {"params": 25_557_032, "kind": "cnn", "micro_batch": 32, "global_batch": 256,
                 # 4.1 GMAC forward per 224x224 image x 2 FLOP/MAC x 3 (forward + backward)
                 "flops_per_sample": 24.6e9,
                 # 16-bit activations kept for backward per image (~ 100 MB in fp32
                 # measured by torch memory stats; half in bf16)
                 "act_bytes_per_sample": 50e6,
                 "source": "He et al. 2015 (arXiv 1512.03385); torchvision resnet50 parameter count",
                 "recipe_source": "He et al. 2015, section 3.4: mini-batch of 256 images"},
    "bert-large": {"params": 340_000_000, "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 512,
                   "vocab": 30522, "global_batch": 256,
                   "source": "Devlin et al. 2018 (arXiv 1810.04805), BERT-large",
                   "recipe_source": "Devlin et al. 2018, appendix A.2: batch of 256 sequences"},
    "gpt2-1.5b": {"params": 1_558_000_000, "layers": 48, "hidden": 1600, "heads": 25, "seq_len": 1024,
                  "vocab": 50257, "global_batch": 512, "source": "Radford et al. 2019, GPT-2 (1558M)",
                  "recipe_source": "Radford et al. 2019, section 2.3: batch size of 512"},
    "llama2-7b": {"params": 6_738_000_000, "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096,
                  "ffn_hidden": 11008, "glu": True, "vocab": 32000, "global_batch": 1024,
                  "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 7B",
                  "recipe_source": "Touvron et al. 2023, section 2.2: 4M tokens per batch"},
    "llama2-13b": {"params": 13_016_000_000, "layers": 40, "hidden": 5120, "heads": 40, "seq_len": 4096,
                   "ffn_hidden": 13824, "glu": True, "vocab": 32000, "global_batch": 1024,
                   "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 13B",
                   "recipe_source": "Touvron et al. 2023, section 2.2: 4M tokens per batch"},
    "llama2-70b": {"params": 68_977_000_000, "layers": 80, "hidden": 8192, "heads": 64, "seq_len": 4096,
                   "kv_heads": 8, "ffn_hidden": 28672, "glu": True, "vocab": 32000, "global_batch": 1024,
                   "source": "Touvron et al. 2023 (arXiv 2307.09288), Llama 2 70B",
                   "recipe_source": "Touvron et al. 2023, section 2.2: 4M tokens per batch"},
    "megatron-1.7b": _gpt(24, 2304, 24, 512), "megatron-3.6b": _gpt(30, 3072, 32, 512),
    "megatron-7.5b": _gpt(36, 4096, 32, 512), "megatron-18b": _gpt(40, 6144, 48, 1024),
    "megatron-39b": _gpt(48, 8192, 64, 1536), "megatron-76b": _gpt(60, 10240, 80, 1792),
    "megatron-146b": _gpt(80, 12288, 96, 2304), "megatron-310b": _gpt(96, 16384, 128, 2160),
    "megatron-530b": _gpt(105, 20480, 128, 2520), "megatron-1t": _gpt(128, 25600, 160, 3072),
}
PRESETS.update(SH.PRESETS)
# shape flags (select's --kv-heads ...): the keys of a shaped workload (shapes.py)
SHAPE_KEYS = ("kv_heads", "ffn_hidden", "experts", "experts_per_token", "shared_experts", "moe_layers",
              "expert_ffn", "vocab", "q_lora_rank", "kv_lora_rank", "qk_nope_dim", "qk_rope_dim", "v_head_dim",
              "mtp_layers")
# the multi-head latent attention flags and their keys in a shape's "mla" (shapes.py)
MLA_KEYS = {"q_lora_rank": "q_lora", "kv_lora_rank": "kv_lora", "qk_nope_dim": "qk_nope", "qk_rope_dim": "qk_rope",
            "v_head_dim": "v"}
ATTENTION = ("flash", "unfused")

# bytes per parameter: p (parameters as stored and gathered), g (gradients as reduced),
# k (optimizer states: Adam m and v, plus an fp32 master copy when p is 16-bit);
# act: bytes per activation element.
PRECISIONS = {
    "bf16": {"p": 2, "g": 2, "k": 12, "act": 2,
             "note": "bf16 parameters and gradients, fp32 master weights + Adam (Megatron, DeepSpeed)"},
    "amp": {"p": 4, "g": 4, "k": 8, "act": 2,
            "note": "fp32 parameters and gradients, bf16 compute (torch.autocast), Adam fp32"},
    "fp32": {"p": 4, "g": 4, "k": 8, "act": 4, "note": "fp32 throughout, Adam fp32"},
    # states as bf16; activations too, but for the projections' inputs (shapes.py)
    "fp8": {"p": 2, "g": 2, "k": 12, "act": 2,
            "note": "FP8 GEMMs with per-tensor current scaling (Transformer Engine, torchao); bf16 parameters, "
                    "gradients, attention and element-wise work; fp32 master weights + Adam"},
}
# Adam's moments (--optimizer-states: Megatron-Core's precision-aware optimizer bf16 / fp8, 8-bit
# Adam of bitsandbytes or torchao) and the main parameters (--main-params); layouts.optimizer_bytes
OPTIMIZER_STATES = ("fp32", "bf16", "fp8", "8bit")
MAIN_PARAMS = ("fp32", "bf16")
HALF = ("bf16", "fp8")          # precisions whose parameters and gradients are bf16
# Megatron-Core's gradient buffer and reduction: fp32 main gradients (its default) or bf16
# (--grad-reduce-in-bf16); the other frameworks' gradients follow PRECISIONS
GRAD_REDUCE = ("fp32", "bf16")
# select also takes "auto": the cheapest that fits; modules:... are Megatron-Core's (shapes.py)
RECOMPUTE = ("none", "selective", *SH.MODULE_RECOMPUTE, "full")
# per-layer recomputation: every K-th layer of a stage recomputed in full (torchtitan's
# selective_ac_option = "K"; Megatron-Core's --recompute-method block), tried by "auto"
PARTIAL = ("partial:4", "partial:2")


def recompute_share(rc):
    """The share of a stage's layers recomputed in full: full 1, partial:K 1/K, else 0."""
    if rc == "full":
        return 1.0
    return 1.0 / int(rc.split(":")[1]) if rc.startswith("partial:") else 0.0
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
          micro_batch=None, global_batch=None, precision="bf16", bucket_mb=25.0, recompute="auto",
          attention=None, shape=None, grad_reduce="fp32", a2a_overlap=True, pp_layout=None,
          optimizer_states="fp32", main_params="fp32"):
    """shape: {kv_heads, ffn_hidden, experts, ...} given on the command line (None: not given);
    a2a_overlap: Megatron-Core's combined 1F1B hides the expert-parallel alltoalls (step.py)."""
    shape = {k: v for k, v in (shape or {}).items() if v is not None}
    mla = {MLA_KEYS[k]: shape.pop(k) for k in list(shape) if k in MLA_KEYS}
    vocab, mtp = shape.get("vocab"), shape.pop("mtp_layers", None)
    if mtp is not None:
        shape["mtp"] = mtp
    if (mla or mtp) and not (model or (layers and hidden)):
        raise UsageError("the MLA flags (--kv-lora-rank ...) and --mtp-layers need --layers and --hidden "
                         "(or a --model to change)")
    if params and not layers and not hidden and set(shape) == {"vocab"}:
        shape = {}                          # --params with a vocabulary: embeddings inside the count
    if model and params:
        raise UsageError("give --model or --params, not both")
    if model:
        key = model.lower()
        if key not in PRESETS:
            raise UsageError(f"unknown --model {model!r} (known: {', '.join(PRESETS)}; or --params N)")
        w = dict(PRESETS[key], name=key)
        if (shape or mla) and w.get("kind", "transformer") != "transformer":
            raise UsageError(f"the shape flags (--vocab, --kv-heads, the MLA and --experts flags, --mtp-layers) "
                             f"describe a transformer, not {key}")
        for k, v in (("layers", layers), ("hidden", hidden), ("heads", heads)):
            if v:
                w[k] = v
        if (shape or mla) and "ffn_hidden" not in w:   # a 2021 preset reshaped: its GeLU MLP of 4 h
            w.update(ffn_hidden=4 * w["hidden"], glu=False, tied=True)
        w.update(shape)
    elif (shape or mla) and layers and hidden:   # a shape: parameters follow from it
        w = {"name": "custom", "layers": layers, "hidden": hidden, "heads": heads or max(1, hidden // 128),
             "ffn_hidden": 4 * hidden, "glu": "ffn_hidden" in shape, "seq_len": 2048, "vocab": 0,
             "source": "the shape given (--layers, --hidden, --ffn-hidden ...)"}
        w.update(shape)
    elif shape:
        raise UsageError("--kv-heads, --ffn-hidden and the --experts flags need --layers and --hidden "
                         "(or a --model to change)")
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
        w["vocab"] = 0                      # unknown: embeddings are counted in params only
    else:
        raise UsageError("give --model NAME or --params N (see --help)")
    w.setdefault("kind", "transformer")
    if vocab and "params" in w and "ffn_hidden" not in w:
        w["vocab"] = vocab
    if (vocab or mla or mtp) and w["kind"] != "transformer":
        raise UsageError(f"--vocab, the MLA flags and --mtp-layers describe a transformer, not {w['name']}")
    if mla:
        _mla(w, mla)
    if "ffn_hidden" in w:
        _complete_shape(w)
    if not 0 < w["params"] <= MAX_PARAMS:
        raise UsageError(f"--params must be > 0 and at most {MAX_PARAMS:g} (got {w['params']:g})")
    if seq_len:
        w["seq_len"] = seq_len
    if w["kind"] != "transformer":
        w["seq_len"] = 1                     # one sample is the unit: throughput in samples/s
    # a given micro-batch is kept; otherwise select tries 1, 2, 4, 8 sequences (a CNN keeps
    # its preset's); w["micro_batch"] is the reference size of --step-time
    w["micro_batch_fixed"] = bool(micro_batch)
    w["micro_batch"] = micro_batch or w.get("micro_batch", 1)
    if global_batch:
        w["global_batch"], w["global_batch_source"] = global_batch, "--global-batch"
    elif w.get("global_batch"):
        w["global_batch_source"] = w.get("recipe_source", w["source"])
    else:                                   # no recipe: one micro-batch per GPU (assumed)
        w["global_batch"], w["global_batch_source"] = None, "assumed: one micro-batch per GPU (give --global-batch)"
    w.setdefault("vocab", 0)
    w["attention"] = attention or w.get("attention", "flash")
    if w["attention"] not in ATTENTION:
        raise UsageError(f"unknown --attention {attention!r} ({', '.join(ATTENTION)})")
    if precision not in PRECISIONS:
        raise UsageError(f"unknown --precision {precision!r} ({', '.join(PRECISIONS)})")
    w["precision"] = precision
    w["bytes"] = {k: v for k, v in PRECISIONS[precision].items() if k != "note"}
    w["precision_note"] = PRECISIONS[precision]["note"]
    if bucket_mb is None or bucket_mb <= 0:
        raise UsageError("--bucket-mb must be > 0")
    w["bucket_mb"] = bucket_mb
    if recompute not in RECOMPUTE + ("auto",):
        raise UsageError(f"unknown --recompute {recompute!r} (auto, {', '.join(RECOMPUTE)})")
    w["recompute"] = recompute if w["kind"] == "transformer" else "none"
    modules = SH.recompute_modules(w["recompute"])
    if modules and "ffn_hidden" not in w:
        raise UsageError(f"--recompute {recompute} needs a model shape (a --model preset of today, or --ffn-hidden)")
    if "moe_act" in modules and not w.get("experts"):
        raise UsageError(f"--recompute {recompute}: moe_act needs a mixture of experts (--experts)")
    if "mla_up_proj" in modules and not w.get("mla"):
        raise UsageError(f"--recompute {recompute}: mla_up_proj needs multi-head latent attention (--kv-lora-rank)")
    if grad_reduce not in GRAD_REDUCE:
        raise UsageError(f"unknown --grad-reduce {grad_reduce!r} ({', '.join(GRAD_REDUCE)})")
    w["grad_reduce"] = grad_reduce
    w["a2a_overlap"] = bool(a2a_overlap)
    if optimizer_states not in OPTIMIZER_STATES:
        raise UsageError(f"unknown --optimizer-states {optimizer_states!r} ({', '.join(OPTIMIZER_STATES)})")
    if main_params not in MAIN_PARAMS:
        raise UsageError(f"unknown --main-params {main_params!r} ({', '.join(MAIN_PARAMS)})")
    if main_params != "fp32" and precision not in HALF:
        raise UsageError(f"--main-params {main_params}: only with bf16 parameters (--precision bf16 or fp8); "
                         f"with --precision {precision} the fp32 parameters are the master copy")
    w["optimizer_states"], w["main_params"] = optimizer_states, main_params
    if pp_layout is not None:                 # --pp-layout: the pipeline split to evaluate (pipeline.py)
        from . import pipeline as P
        if w["kind"] != "transformer":
            raise UsageError("--pp-layout needs a transformer (a --model preset or --layers)")
        counts = P.parse(pp_layout) if isinstance(pp_layout, str) else tuple(pp_layout)
        P.check_given(counts, w["layers"])
        w["pp_layout"] = counts
    return w        # given sizes were range-checked by select.check_numbers; presets are > 0


def _mla(w, given):
    """Multi-head latent attention (DeepSeek-V2/V3) from the flags, over a preset's own: the
    key/value latent rank defines it; the query latent rank 0 is none (a full query projection);
    rope dimension 64, no-rope head dimension h / a and the value head dimension that by default."""
    m = dict(w.get("mla") or {})
    m.update(given)
    if not m.get("kv_lora"):
        raise UsageError("--q-lora-rank, --qk-nope-dim, --qk-rope-dim and --v-head-dim describe multi-head latent "
                         "attention: give --kv-lora-rank too")
    m.setdefault("q_lora", 0)
    m.setdefault("qk_rope", 64)
    m.setdefault("qk_nope", w["hidden"] // w["heads"])
    m.setdefault("v", m["qk_nope"])
    w["mla"] = m
    w["kv_heads"] = w["heads"]                # MLA: every head its own keys and values


def _complete_shape(w):
    """Defaults and checks of a shaped workload, then its parameters from the shape."""
    w.setdefault("kv_heads", w["heads"])
    if w.get("experts"):
        w.setdefault("experts_per_token", 1)
        w.setdefault("expert_ffn", w["ffn_hidden"])
        w.setdefault("moe_layers", w["layers"])
        if not w["experts_per_token"] <= w["experts"] or not 0 < w["moe_layers"] <= w["layers"]:
            raise UsageError(f"--experts-per-token must be at most --experts ({w['experts']}) and --moe-layers "
                             f"at most --layers ({w['layers']})")
    if w["heads"] % w["kv_heads"]:
        raise UsageError(f"--heads ({w['heads']}) must be a multiple of --kv-heads ({w['kv_heads']})")
    w["params"] = SH.params(w)
    w["active_params"] = SH.params(w, active=True)
    w["mtp_params"] = sum(SH.mtp_params(w))


def executes_causal(w):
    """Whether compute time counts attention as a causal kernel executes it: decoder models
    with flash attention (whose kernels skip the masked blocks); unfused attention computes
    the whole s x s score matrix and masks it (Megatron-LM 2021)."""
    return w["kind"] == "transformer" and w.get("attention") == "flash" and w.get("causal", True)


def flops_per_sample(w, recompute="none", executed=False):
    """Training FLOPs of one sample (one sequence) with `recompute`. Transformers
    (Narayanan et al. 2021, section 5.1, generalised to any parameter count P): forward =
    2 s P + 4 s^2 l h (the weights, embeddings and logits included in P, plus attention
    scores and their use); training = 3 x forward; full recomputation adds a forward,
    selective (unfused attention) the attention scores' forward 4 s^2 l h. With
    P = 12 l h^2 + V h this is the paper's 96 B s l h^2 (1 + s/6h + V/16lh) under full
    recomputation. These are model FLOPs (the whole s x s matrix); executed=True counts the
    attention as the kernel runs it (executes_causal: query i against i + 1 keys), the FLOPs
    compute time is priced on."""
    if w["kind"] != "transformer":
        return w["flops_per_sample"]
    causal = executed and executes_causal(w)
    if "ffn_hidden" in w:                  # a shape: shapes.py counts its FLOPs
        fwd = w["seq_len"] * SH.forward_flops_per_token(w, w["seq_len"], causal)
        return (3 + recompute_share(recompute)) * fwd
    s = w["seq_len"]
    attn = 4.0 * s * (s + 1) / 2.0 * w["layers"] * w["hidden"] if causal else 4.0 * s * s * w["layers"] * w["hidden"]
    fwd = 2.0 * s * w["params"] + attn
    extra = fwd * recompute_share(recompute) + (attn if recompute == "selective" and w["attention"] == "unfused"
                                                else 0)
    return 3 * fwd + extra


def logits_flops_per_sample(w, recompute="none"):
    """The output layer's part of flops_per_sample (2 s V h per forward, as counted there)
    and what it executes: (counted, executed). Training runs it 3 times; recomputation
    redoes the transformer layers only (Megatron-Core's and torchtitan's checkpointing wrap
    the layers, not the output layer: Narayanan et al. 2021's 96 B s l h^2 (1 + s/6h +
    V/16lh) counts it 3 x under full recomputation), so a recomputed forward adds none."""
    if w["kind"] != "transformer" or not (w.get("vocab") or w.get("mtp")):
        return 0.0, 0.0
    fwd = 2.0 * w["seq_len"] * w["vocab"] * w["hidden"]
    if w.get("mtp"):                          # the MTP modules run beside the loss on the last stage
        s = w["seq_len"]
        fwd_c = fwd + s * SH.mtp_flops_per_token(w, s)
        fwd_x = fwd + s * SH.mtp_flops_per_token(w, s, executes_causal(w))
        return (3 + recompute_share(recompute)) * fwd_c, 3 * fwd_x
    return (3 + recompute_share(recompute)) * fwd, 3 * fwd


def attention_flops_per_sample(w, recompute="none", executed=False):
    """The attention-score part of flops_per_sample (scores and their use, forward x 3, a
    recomputed forward added): what attention kernels run, priced at their own efficiency."""
    if w["kind"] != "transformer":
        return 0.0
    causal = executed and executes_causal(w)
    s = w["seq_len"]
    if "ffn_hidden" in w:
        fwd = s * w["layers"] * SH.attention_flops_per_token(w, s, causal)
    else:
        fwd = 4.0 * s * ((s + 1) / 2.0 if causal else s) * w["layers"] * w["hidden"]
    extra = fwd if recompute == "selective" and w["attention"] == "unfused" else 0.0
    return (3 + recompute_share(recompute)) * fwd + extra


def attention_share(w):
    """The share of a transformer's executed forward FLOPs in the attention scores and their
    use (what ring attention's sends hide behind)."""
    if w["kind"] != "transformer":
        return 0.0
    s = w["seq_len"]
    causal = executes_causal(w)
    if "ffn_hidden" in w:
        return w["layers"] * SH.attention_flops_per_token(w, s, causal) / SH.forward_flops_per_token(w, s, causal)
    keys = (s + 1) / 2.0 if causal else s
    return 4.0 * keys * w["layers"] * w["hidden"] / (2.0 * w["params"] + 4.0 * keys * w["layers"] * w["hidden"])


def tensors(w):
    """Parameter tensors (element counts) in registration order, as DDP buckets see them:
    per layer qkv 3h^2, proj h^2, fc1 4h^2, fc2 4h^2, scaled by params / (12 L h^2) so
    they add up to the model (embeddings and llama's larger MLP spread over the layers).
    A CNN is taken as tensors of 1M elements (resnet50's largest are 2-2.4M)."""
    if w["kind"] != "transformer":
        n, r = divmod(w["params"], 1_000_000)
        return [1_000_000] * n + ([r] if r else [])
    if "ffn_hidden" in w:                  # a shape: attention and MLP (or experts) per layer
        out = []
        for moe in _layer_kinds(w):
            attn = SH.attention_params(w)
            out += [attn, SH.layer_params(w, moe) - attn]
        return out + _mtp_units(w)
    h2 = w["hidden"] ** 2
    f = w["params"] / (12 * w["layers"] * h2)
    return [round(k * h2 * f) for k in (3, 1, 4, 4)] * w["layers"]


def units(w):
    """FSDP / ZeRO-3 units: one per transformer layer (params / L each); a CNN's tensors."""
    if w["kind"] != "transformer":
        return tensors(w)
    if "ffn_hidden" in w:
        return [SH.layer_params(w, moe) for moe in _layer_kinds(w)] + _mtp_units(w)
    return [w["params"] / w["layers"]] * w["layers"]


def _mtp_units(w):
    """One unit per multi-token-prediction module (its layer, projection and norms)."""
    n = w.get("mtp", 0)
    return [sum(SH.mtp_params(w)) / n] * n if n else []


def _layer_kinds(w):
    """Per layer, in order: is it a MoE layer (the last moe_layers are)."""
    n_moe = SH.moe_layers(w)
    return [i >= w["layers"] - n_moe for i in range(w["layers"])]
