"""select's model shapes of today (issue 32): GQA, SwiGLU, mixture of experts, latent
attention; parameters and FLOPs derived from the shape against each model's published
totals; activations of a shaped layer by hand; the shape flags and their bad input."""
from __future__ import annotations

import json

import pytest

import select_docs as SD
from comm_bench import cli
from comm_bench.select import shapes as SH
from comm_bench.select import workload as W


# published totals (billions): total, active per token
PUBLISHED = {
    "llama3-8b": (8.03, 8.03),        # Llama 3 paper (arXiv 2407.21783), Table 3: 8B
    "llama3-70b": (70.6, 70.6),       # HF Meta-Llama-3-70B: 70.6B
    "llama3-405b": (405.9, 405.9),    # 405B (HF Llama-3.1-405B: 405.85B)
    "llama2-7b": (6.738, 6.738),      # Touvron et al. 2023: 6,738 M
    "llama2-70b": (68.98, 68.98),
    "mixtral-8x7b": (46.7, 12.9),     # Jiang et al. 2024 (arXiv 2401.04088): 47B, 13B active
    "mixtral-8x22b": (140.6, 39.2),   # Mistral AI: 141B, 39B active
    "deepseek-v3": (671.0, 37.5),     # DeepSeek-V3 report (arXiv 2412.19437): 671B, 37B active
    "qwen3-30b-a3b": (30.5, 3.3),     # Qwen3 report (arXiv 2505.09388), HF card: 30.5B, 3.3B activated
    "qwen3-235b-a22b": (235.0, 22.0), # Qwen3 report: 235B, 22B activated
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_from_the_shape_match_the_published_totals(name):
    w = W.build(name)
    total, active = PUBLISHED[name]
    # the published totals leave out DeepSeek-V3's multi-token-prediction module (counted in params)
    assert (w["params"] - w.get("mtp_params", 0)) / 1e9 == pytest.approx(total, rel=0.01)
    assert SH.params(w, active=True, mtp=False) / 1e9 == pytest.approx(active, rel=0.02)


def test_llama3_8b_layer_by_hand():
    """32 heads of 128, 8 KV heads: q, o 4096^2 each, k, v 4096 x 1024 each; SwiGLU 3 x 4096 x 14336."""
    w = W.build("llama3-8b")
    assert SH.attention_params(w) == 2 * 4096 ** 2 + 2 * 4096 * 1024
    assert SH.layer_params(w, False) == SH.attention_params(w) + 3 * 4096 * 14336 + 2 * 4096


def test_moe_flops_count_active_experts_only():
    """Mixtral 8x7B: forward FLOPs/token = 2 x (active params - input embedding) + attention."""
    w = W.build("mixtral-8x7b")
    s = w["seq_len"]
    expect = 2 * (w["active_params"] - 32000 * 4096) + 32 * 2 * s * 32 * 256
    assert SH.forward_flops_per_token(w, s) == pytest.approx(expect)
    assert W.flops_per_sample(w) == pytest.approx(3 * s * expect)
    assert W.flops_per_sample(w, "full") == pytest.approx(4 * s * expect)


def test_activation_bytes_gqa_swiglu_by_hand():
    """llama3-70b, tp 8 with sequence parallelism, no recomputation, per token per layer:
    (norm inputs 2h + projection inputs 2h + q 8192 + k, v 2 x 1024 + attention output 8192
    + SwiGLU 3 x 28672) x 2 bytes / 8."""
    w = W.build("llama3-70b")
    h = 8192
    expect = 2 * (4 * h + h + 2 * 1024 + h + 3 * 28672) / 8
    assert SH.activation_bytes_per_token(w, tp=8, sp=True) == pytest.approx(expect)
    assert SH.activation_bytes_per_token(w, tp=8, sp=True, recompute="full") == pytest.approx(2 * h / 8)


def test_units_and_tensors_add_up_to_the_model():
    w = W.build("deepseek-v3")
    emb = SH.embedding_params(w) + w["hidden"]
    assert sum(W.units(w)) + emb == pytest.approx(w["params"])
    assert sum(W.tensors(w)) == pytest.approx(sum(W.units(w)))


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def dgx2(tmp_path):
    intra = SD.write(tmp_path / "intra.json", SD.collective_doc(["n0"], 8, 10e-6, 360e9))
    inter = SD.write(tmp_path / "inter.json", SD.collective_doc(["n0", "n1"], 8, 20e-6, 45e9))
    return [intra, inter]


def test_shape_flags_give_the_preset_s_params(capsys, dgx2):
    code, out, err = run(capsys, *dgx2, "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
                         "--ffn-hidden", "14336", "--experts", "8", "--experts-per-token", "2", "--json")
    assert code in (0, 1), err
    w = json.loads(out)["workload"]
    assert w["params"] == W.build("mixtral-8x7b")["params"] - 2 * 32000 * 4096    # no vocabulary given
    assert w["active_params"] < w["params"] / 3


@pytest.mark.parametrize("args, needle", [
    (["--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "5"], "multiple of --kv-heads"),
    (["--kv-heads", "8"], "need --layers and --hidden"),
    (["--model", "mixtral-8x7b", "--experts-per-token", "9"], "--experts-per-token must be at most"),
    (["--model", "llama3-8b", "--experts", "0"], "--experts must be"),
])
def test_bad_shapes_exit_2_one_line(capsys, dgx2, args, needle):
    code, _, err = run(capsys, *dgx2, *args)
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_per_layer_recomputation_mixes_none_and_full():
    """partial:K recomputes every K-th layer in full: 1/K of an extra forward, and 1/K of the
    layers keep only their input (torchtitan selective_ac_option K; Megatron block method)."""
    from comm_bench.select import memory as M
    w = W.build("llama3-70b")
    assert W.recompute_share("partial:4") == 0.25 and W.recompute_share("none") == 0
    fwd = W.flops_per_sample(w, "none") / 3
    assert W.flops_per_sample(w, "partial:2") == pytest.approx(3.5 * fwd)
    full, none = (M.layer_activation_bytes(w, 1, 8, rc, True) for rc in ("full", "none"))
    assert M.layer_activation_bytes(w, 1, 8, "partial:4", True) == pytest.approx(0.25 * full + 0.75 * none)


def test_help_lists_the_shape_flags(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for flag in ("--kv-heads", "--ffn-hidden", "--experts", "--experts-per-token", "--shared-experts",
                 "--moe-layers", "--expert-ffn-hidden", "llama3-405b", "deepseek-v3"):
        assert flag in out, flag
