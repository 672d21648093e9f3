"""Transformer shapes of today, with parameters and FLOPs derived from the shape
(docs/selection.md, section 3, "Shapes").

A shape: layers L, hidden h, query heads a of head_dim d (h / a unless given), kv_heads
(grouped-query attention; a = classic multi-head), ffn_hidden f with `glu` (SwiGLU: gate,
up and down matrices, 3 h f; GeLU: 2 h f), vocabulary V (`tied`: one matrix for the
embedding and the output layer), and for a mixture of experts: experts E of expert_ffn
f_e each, experts_per_token k, shared_experts (always active), moe_layers (the last ones;
the first L - moe_layers are dense, as DeepSeek-V3's first 3). `mla`: multi-head latent
attention (DeepSeek-V2/V3) with q_lora, kv_lora, qk_nope, qk_rope and v head dimensions.
Norm weights (2 h per layer + h) are counted; biases are not (none of these models has any).
"""
from __future__ import annotations


def attention_params(s):
    """Weights of one attention block."""
    h, a = s["hidden"], s["heads"]
    m = s.get("mla")
    if m:       # q: h -> q_lora -> a (nope + rope); kv: h -> kv_lora (+ rope key) -> a (nope + v); out a v -> h
        q = (h * m["q_lora"] + m["q_lora"] * a * (m["qk_nope"] + m["qk_rope"])) if m["q_lora"] \
            else h * a * (m["qk_nope"] + m["qk_rope"])
        kv = h * (m["kv_lora"] + m["qk_rope"]) + m["kv_lora"] * a * (m["qk_nope"] + m["v"])
        return q + kv + a * m["v"] * h + m["q_lora"] + m["kv_lora"]     # + the two latent norms
    d = head_dim(s)
    return h * a * d + 2 * h * s["kv_heads"] * d + a * d * h


def head_dim(s):
    return s.get("head_dim") or s["hidden"] // s["heads"]


def mlp_params(h, f, glu):
    return (3 if glu else 2) * h * f


def moe_layers(s):
    return s.get("moe_layers", s["layers"]) if s.get("experts") else 0


def layer_params(s, moe, active=False):
    """Weights of one layer: attention + (dense MLP | router + experts + shared experts) + 2 norms.
    active: only the experts a token goes through (k of E)."""
    h = s["hidden"]
    if not moe:
        ffn = mlp_params(h, s["ffn_hidden"], s["glu"])
    else:
        e = s["experts_per_token"] if active else s["experts"]
        ffn = h * s["experts"] + (e + s.get("shared_experts", 0)) * mlp_params(h, s["expert_ffn"], s["glu"])
    return attention_params(s) + ffn + 2 * h


def embedding_params(s):
    return s["vocab"] * s["hidden"] * (1 if s.get("tied") else 2)


def params(s, active=False, mtp=True):
    """Total (or active per token) parameters of the shape; mtp: with the multi-token-prediction
    modules (DeepSeek-V3's 671B and 37B leave them out)."""
    n_moe = moe_layers(s)
    dense = s["layers"] - n_moe
    moe = n_moe * layer_params(s, True, active) if n_moe else 0
    extra = sum(mtp_params(s, active)) if mtp else 0
    return dense * layer_params(s, False) + moe + embedding_params(s) + s["hidden"] + extra


def mtp_params(s, active=False):
    """(dense, routed-expert) weights of the multi-token-prediction modules (DeepSeek-V3 report,
    arXiv 2412.19437, section 2.2): each a transformer layer like the model's last (a MoE one if
    it has any), a projection of the concatenated [h; h] to h (2 h^2) and two norms (2 h); the
    embedding and the output head are the model's own (shared)."""
    n = s.get("mtp", 0)
    if not n:
        return 0, 0
    moe = bool(moe_layers(s))
    layer = layer_params(s, moe, active)
    routed = ((s["experts_per_token"] if active else s["experts"]) * mlp_params(s["hidden"], s["expert_ffn"], s["glu"])
              if moe else 0)
    h = s["hidden"]
    return n * (layer - routed + 2 * h * h + 2 * h), n * routed


def expert_params(s, mtp=False):
    """Weights of the routed experts (all layers; mtp: the MTP modules' too): the part expert
    parallelism shards."""
    main = moe_layers(s) * s["experts"] * mlp_params(s["hidden"], s["expert_ffn"], s["glu"])
    return main + (mtp_params(s)[1] if mtp else 0)


def attention_flops_per_token(s, seq, causal=False):
    """Forward FLOPs of the attention scores and their use, per token per layer (averaged
    over the layers): 2 x keys x a (d_qk + d_v). Model FLOPs (causal False) count the whole
    s x s matrix, the convention of Megatron-LM's formula (Narayanan et al. 2021) and
    torchtitan's 6 N + 12 l h s; a layer with a sliding window w (window_layers of them,
    gpt-oss) attends to min(s, w) keys. causal True: the FLOPs a causal kernel executes
    (FlashAttention skips the blocks above the diagonal; its benchmarks count causal FLOPs
    so, Dao 2023, arXiv 2307.08691, section 4): query i attends to i + 1 keys, (s + 1) / 2
    on average, and to min(i + 1, w) under a window."""
    m = s.get("mla")
    dqk, dv = ((m["qk_nope"] + m["qk_rope"]), m["v"]) if m else (head_dim(s), head_dim(s))
    full = (seq + 1) / 2.0 if causal else seq
    keys = full
    if s.get("window"):
        share = s["window_layers"] / s["layers"]
        win = min(seq, s["window"])
        if causal:                            # mean over i < seq of min(i + 1, w)
            win = (win * (win + 1) / 2.0 + (seq - win) * win) / seq
        keys = (1 - share) * full + share * win
    return 2.0 * keys * s["heads"] * (dqk + dv)


def forward_flops_per_token(s, seq, causal=False):
    """2 x the active weights a token multiplies (the input embedding is a lookup, the
    output layer a matrix) + the attention scores (causal: as a causal kernel executes them)."""
    matmul = params(s, active=True) - s["vocab"] * s["hidden"] * (0 if s.get("tied") else 1)
    n_mtp = s.get("mtp", 0)                   # each MTP module: its layer's attention and the output head again
    return (2.0 * matmul + (s["layers"] + n_mtp) * attention_flops_per_token(s, seq, causal)
            + n_mtp * 2.0 * s["vocab"] * s["hidden"])


def mtp_flops_per_token(s, seq, causal=False):
    """The MTP modules' share of forward_flops_per_token (they run on the last pipeline stage,
    with the loss: Megatron-Core's MTP placement)."""
    n = s.get("mtp", 0)
    if not n:
        return 0.0
    return (2.0 * sum(mtp_params(s, True)) + n * attention_flops_per_token(s, seq, causal)
            + n * 2.0 * s["vocab"] * s["hidden"])


# Megatron-Core's --recompute-granularity selective --recompute-modules: element-wise modules
# whose outputs backward recomputes instead of keeping (no GEMM is redone): `layernorm`, the
# two norms' outputs (the inputs of the QKV and first MLP projections), and `moe_act`, the
# routed experts' activation output (SwiGLU's gate x up product, GeLU's output); and
# `mla_up_proj`, multi-head latent attention's query and key/value up-projections (their
# outputs, the attention's q, k and v, are rebuilt in backward from the kept latents: one
# GEMM pair redone). DeepSeek-V3 trained with the norms and MLA up-projections recomputed and
# the MoE SwiGLU's output recomputed from its cached inputs (DeepSeek-V3 technical report,
# arXiv 2412.19437, section 3.3.2 "Recomputation of RMSNorm and MLA Up-Projection", and
# 3.3.3 "Low-Precision Storage": "we cache the inputs of the SwiGLU operator and recompute
# its output in the backward pass"): modules:layernorm,mla_up_proj,moe_act.
MODULE_RECOMPUTE = ("modules:layernorm", "modules:moe_act", "modules:layernorm,moe_act", "modules:mla_up_proj",
                    "modules:layernorm,mla_up_proj", "modules:layernorm,mla_up_proj,moe_act")


def recompute_modules(recompute):
    """{'layernorm', 'moe_act', 'mla_up_proj'} named by a modules:... recomputation, else empty."""
    return set(recompute.split(":", 1)[1].split(",")) if recompute.startswith("modules:") else set()


def attention_widths(s):
    """(query, key-or-value, attention output) widths per token: a h_d, kv h_d, a h_d; MLA's
    per-head nope + rope queries, its keys and values averaged, and v per head."""
    m = s.get("mla")
    hq = s["heads"] * (m["qk_nope"] + m["qk_rope"] if m else head_dim(s))
    hkv = s["heads"] * (m["qk_nope"] + m["qk_rope"] + m["v"]) / 2 if m else s["kv_heads"] * head_dim(s)
    return hq, hkv, (s["heads"] * m["v"] if m else hq)


def linear_io_per_token(s, moe=False):
    """Elements one token's linear layers read and write in a layer's forward (K + N of each
    K x N weight a token goes through): what FP8 training casts (compute.Compute.fp8_cast_seconds)."""
    h = s["hidden"]
    hq, hkv, hv = attention_widths(s)

    def mlp(f):                 # first projection h -> (2) f, second f -> h
        return h + (2 if s["glu"] else 1) * f + f + h
    ffn = ((s["experts_per_token"] + s.get("shared_experts", 0)) * mlp(s["expert_ffn"]) if moe
           else mlp(s["ffn_hidden"]))
    return h + hq + 2 * hkv + hv + h + ffn


def activation_bytes_per_token(s, tp=1, sp=True, recompute="none", moe=False, act_bytes=2, fp8=False, etp=1):
    """Bytes one layer keeps for backward per token (16-bit elements; flash attention keeps
    no score matrix; no dropout), generalising Korthikanti et al. 2022 (arXiv 2205.05198)
    to GQA and SwiGLU: the two norms' inputs (2 h) and the inputs of the QKV and first MLP
    projections (2 h), replicated over tp unless sequence parallel; q, k, v (h_q + 2 h_kv)
    and the attention output (h_q) for flash attention's backward; the MLP's intermediates
    (SwiGLU: gate, up and their product, 3 f; GeLU: its input and output, 2 f). A MoE layer
    keeps the intermediates of each of the k routed experts (+ shared experts) per token and
    their inputs (h each; a routed copy's input whole on each of the etp GPUs that split its
    expert, gathered there: Megatron-Core's dispatcher with expert tensor parallelism etp,
    the default etp = tp). full recomputation keeps the layer input only; modules:
    recomputation drops the norms' outputs (layernorm) and the experts' activation output,
    the second projection's input (moe_act), MLA's q, k and v (mla_up_proj: the query and
    key/value latents, replicated over tp, are what it keeps). fp8: the projections keep their inputs as the
    1-byte copies their weight gradients read (Transformer Engine), and the output
    projection its own copy of the attention output, which flash attention keeps in 16 bits."""
    h = s["hidden"]
    shared = (2 * h) if sp else 2 * h * tp      # LN inputs, in elements x tp (divided below)
    if recompute == "full":
        return act_bytes * (h if sp else h * tp) / tp
    hq, hkv, hv = attention_widths(s)
    modules = recompute_modules(recompute)
    lin = 1 if fp8 else act_bytes               # bytes of a kept projection input
    linear_in = 0 if "layernorm" in modules else (2 * h) if sp else 2 * h * tp
    m = s.get("mla")
    # MLA: the up-projections' inputs, the normed query and key/value latents (and the shared
    # rotary key), kept for their weight gradients; mla_up_proj recomputation keeps only these
    # and the attention output, rebuilding q, k and v in backward
    latents = (m["q_lora"] + m["kv_lora"] + m["qk_rope"]) if m else 0
    attn = (hv if "mla_up_proj" in modules and m else hq + 2 * hkv + hv)
    act_in = 2 if s["glu"] else 1               # the activation's inputs: gate and up, or one
    if moe:
        k, n, f = s["experts_per_token"], s["experts_per_token"] + s.get("shared_experts", 0), s["expert_ffn"]
        # each expert's two projection inputs: h (routed copies: etp h, gathered) and f
        mlp_lin = (n - k + k * etp) * h + n * (0 if "moe_act" in modules else f)
        mlp_act = n * act_in * f
    else:
        f = s["ffn_hidden"]
        mlp_lin, mlp_act = f, act_in * f
    return (act_bytes * (shared + attn + mlp_act) + lin * (linear_in + mlp_lin + latents * tp)
            + (lin * hv if fp8 else 0)) / tp


def _llama3(layers, hidden, heads, ffn, name):
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": 8, "ffn_hidden": ffn, "glu": True,
            "vocab": 128256, "seq_len": 8192, "global_batch": 2048,
            "source": f"Llama 3 paper (Grattafiori et al. 2024, arXiv 2407.21783), Table 3; HF meta-llama/{name} config",
            "recipe_source": "Llama 3 paper, section 3.4.1: 16M tokens per batch at sequence 8,192 (405B)"}


def _mixtral(layers, hidden, heads, expert_ffn, vocab, name):
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": 8, "ffn_hidden": expert_ffn,
            "glu": True, "vocab": vocab, "experts": 8, "experts_per_token": 2, "expert_ffn": expert_ffn,
            "seq_len": 4096, "global_batch": 256,
            "source": f"Jiang et al. 2024 (arXiv 2401.04088), Table 1; HF mistralai/{name} config",
            "recipe_source": "no published recipe: 256 x 4,096 = 1M tokens, NeMo's performance recipe (assumed)"}


def _qwen3_moe(layers, hidden, heads, expert_ffn, name):
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": 4, "head_dim": 128,
            "ffn_hidden": expert_ffn, "glu": True, "vocab": 151936, "experts": 128, "experts_per_token": 8,
            "expert_ffn": expert_ffn, "seq_len": 4096, "global_batch": 1024,
            "source": f"Qwen3 technical report (arXiv 2505.09388), Table 2; HF Qwen/{name} config "
                      "(every layer MoE, no shared expert; QK norms not counted)",
            "recipe_source": "no published recipe: 1,024 x 4,096, Megatron-Bridge's performance recipe (assumed)"}


# Shaped presets: parameters and FLOPs follow from the shape (checked against the
# published totals in tests/test_select_shapes.py).
PRESETS = {
    "llama3-8b": _llama3(32, 4096, 32, 14336, "Meta-Llama-3-8B"),
    "llama3-70b": _llama3(80, 8192, 64, 28672, "Meta-Llama-3-70B"),
    "llama3-405b": _llama3(126, 16384, 128, 53248, "Llama-3.1-405B"),
    "mixtral-8x7b": _mixtral(32, 4096, 32, 14336, 32000, "Mixtral-8x7B-v0.1"),
    "mixtral-8x22b": _mixtral(56, 6144, 48, 16384, 32768, "Mixtral-8x22B-v0.1"),
    "gpt-oss-120b": {"layers": 36, "hidden": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64, "ffn_hidden": 2880,
                     "glu": True, "vocab": 201088, "experts": 128, "experts_per_token": 4, "expert_ffn": 2880,
                     "window": 128, "window_layers": 18, "seq_len": 4096, "global_batch": 512,
                     "source": "OpenAI gpt-oss model card (arXiv 2508.10925), Table 1; HF openai/gpt-oss-120b config "
                               "(biases and attention sinks not counted)",
                     "recipe_source": "no published recipe: 512 x 4,096, Megatron-Bridge's performance recipe (assumed)"},
    "qwen3-30b-a3b": _qwen3_moe(48, 2048, 32, 768, "Qwen3-30B-A3B"),
    "qwen3-235b-a22b": _qwen3_moe(94, 4096, 64, 1536, "Qwen3-235B-A22B"),
    "deepseek-v3": {"layers": 61, "hidden": 7168, "heads": 128, "kv_heads": 128, "ffn_hidden": 18432, "glu": True,
                    "vocab": 129280, "experts": 256, "experts_per_token": 8, "shared_experts": 1,
                    "expert_ffn": 2048, "moe_layers": 58,
                    "mla": {"q_lora": 1536, "kv_lora": 512, "qk_nope": 128, "qk_rope": 64, "v": 128}, "mtp": 1,
                    "seq_len": 4096, "global_batch": 15360,
                    "source": "DeepSeek-V3 technical report (arXiv 2412.19437), sections 2.2 and 4.2; HF "
                              "deepseek-ai/DeepSeek-V3 config (one multi-token-prediction module, depth 1)",
                    "recipe_source": "DeepSeek-V3 report, section 4.2: batch 15,360 sequences of 4,096"},
}
