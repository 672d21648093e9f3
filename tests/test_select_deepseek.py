"""DeepSeek-V3's published layout under its own recomputation (issue 41): the RMSNorms and
MLA up-projections recomputed, the MoE SwiGLU output recomputed from its cached inputs
(technical report, arXiv 2412.19437, sections 3.3.2-3.3.3), FP8, bf16 moments, ZeRO-1 over dp
128, PP 16, EP 64 on 2,048 H800: feasible and within 20% of its 180K GPU hours per trillion
tokens (1e12 / (180e3 x 3600) = 1,543 tokens/s/GPU)."""
from __future__ import annotations

import os
import sys

import pytest

from comm_bench import cli
from comm_bench.select import memory as M
from comm_bench.select import select
from comm_bench.select.predict import predict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

DSV3 = {"layout": "x", "kind": "megatron", "tp": 1, "cp": 1, "pp": 16, "dp": 128, "ep": 64}
PUBLISHED = 1e12 / (180e3 * 3600)
REPORT = "modules:layernorm,mla_up_proj,moe_act"


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def _published(h100, rc):
    res = select(h100, model="deepseek-v3", nodes=256, micro_batch=1, precision="fp8", recompute=rc, gpu="H800",
                 optimizer_states="bf16")
    w, cl, lm, comp, ov, hr = res["context"]
    return w, comp, predict(DSV3, w, cl, lm, comp, ov, hr, force=(rc, True, False))


def test_mla_up_projection_recompute_by_hand(h100):
    """Per token and layer, bf16, tp 1: it drops q (128 heads x 192) and k, v (128 x 192 and
    128 x 128), 2 bytes each; the latents (1,536 + 512 + 64) are kept either way."""
    res = select(h100, model="deepseek-v3", nodes=256, micro_batch=1, recompute="none")
    w = res["context"][0]
    s = w["seq_len"]
    none = M.layer_activation_bytes(w, 1, 1, "none")
    up = M.layer_activation_bytes(w, 1, 1, "modules:mla_up_proj")
    assert none - up == pytest.approx(2 * (128 * 192 + 128 * 192 + 128 * 128) * s)
    assert up - M.layer_activation_bytes(w, 1, 1, "modules:layernorm,mla_up_proj") == pytest.approx(2 * 2 * 7168 * s)


def test_the_recompute_costs_the_up_projections_again(h100):
    """Backward runs q_lora x a (nope + rope) and kv_lora x a (nope + v) again: 2 x (1,536 x 24,576
    + 512 x 32,768) FLOPs a token a layer, at the FP8 linear layers' rate."""
    w, comp, _ = _published(h100, REPORT)
    flops = 2 * (1536 * 128 * 192 + 512 * 128 * 256) * w["seq_len"] * w["layers"]
    base = comp.module_recompute_seconds(1, 1, 1.0, "modules:layernorm,moe_act")
    extra = comp.module_recompute_seconds(1, 1, 1.0, REPORT) - base
    assert extra == pytest.approx(flops / (comp.fp8_peak * comp.fp8_efficiency()))


def test_published_layout_feasible_and_within_20_percent(h100):
    _, _, c = _published(h100, REPORT)
    assert c["feasible"], c["reason"]
    per_gpu = c["tokens_per_s"] / 2048
    assert 0.8 < per_gpu / PUBLISHED < 1.2
    assert any("--recompute-granularity selective --recompute-modules layernorm mla_up_proj moe_act" in x
               for x in c["config"])
    # the norms alone (the report's first item without the up-projections) do not fit
    _, _, norms = _published(h100, "modules:layernorm,moe_act")
    assert not norms["feasible"] and "GB/GPU" in norms["reason"]


def test_mla_up_proj_needs_mla(h100, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *h100, "--model", "llama3-8b", "--recompute", "modules:layernorm,mla_up_proj"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "mla_up_proj needs multi-head latent attention" in err[0]
