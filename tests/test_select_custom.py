"""Custom models from the command line (issue 41): --vocab, multi-head latent attention
(--kv-lora-rank, --q-lora-rank, --qk-rope-dim, --qk-nope-dim, --v-head-dim) and
multi-token-prediction modules (--mtp-layers) state what before needed a Python preset."""
from __future__ import annotations

import json
import os
import sys

import pytest

from comm_bench import cli
from comm_bench.select import shapes as SH
from comm_bench.select import workload as W

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

V3_FLAGS = dict(ffn_hidden=18432, experts=256, experts_per_token=8, shared_experts=1, moe_layers=58, expert_ffn=2048,
                vocab=129280, q_lora_rank=1536, kv_lora_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_head_dim=128,
                mtp_layers=1)


def test_deepseek_v3_from_flags_is_the_preset():
    """The flags rebuild the preset: the same parameters, active parameters and FLOPs."""
    ds = W.build("deepseek-v3")
    c = W.build(layers=61, hidden=7168, heads=128, seq_len=4096, shape=V3_FLAGS)
    for key in ("params", "active_params", "mtp_params"):
        assert c[key] == ds[key], key
    assert W.flops_per_sample(c) == pytest.approx(W.flops_per_sample(ds))
    assert c["mla"] == ds["mla"] and c["mtp"] == 1


def test_mla_attention_by_hand():
    """MLA weights: q h x q_lora + q_lora x a (nope + rope); kv h x (kv_lora + rope) + kv_lora x a
    (nope + v); out a v x h; two latent norms."""
    w = W.build(layers=4, hidden=1024, heads=8, shape=dict(kv_lora_rank=256, q_lora_rank=384, qk_rope_dim=32))
    m = w["mla"]
    assert m == {"kv_lora": 256, "q_lora": 384, "qk_rope": 32, "qk_nope": 128, "v": 128}
    h, a = 1024, 8
    want = h * 384 + 384 * a * (128 + 32) + h * (256 + 32) + 256 * a * (128 + 128) + a * 128 * h + 384 + 256
    assert SH.attention_params(w) == want


def test_mtp_module_by_hand():
    """One MTP module: a layer like the last (MoE: router + all experts + shared), 2 h^2 projection,
    two norms; its FLOPs run on the last stage with another output-head pass."""
    w = W.build(layers=4, hidden=512, heads=4, seq_len=1024,
                shape=dict(ffn_hidden=1024, experts=8, experts_per_token=2, vocab=1000, mtp_layers=1))
    h = 512
    dense, routed = SH.mtp_params(w)
    assert routed == 8 * 3 * h * 1024
    assert dense + routed == SH.layer_params(w, True) + 2 * h * h + 2 * h
    assert w["params"] == SH.params(w, mtp=False) + dense + routed
    counted, executed = W.logits_flops_per_sample(w)
    s = 1024
    head = 2 * s * 1000 * h
    mtp_fwd = 2 * sum(SH.mtp_params(w, True)) + SH.attention_flops_per_token(w, s) + 2 * 1000 * h
    assert counted == pytest.approx(3 * (head + s * mtp_fwd))


def test_vocab_with_params_and_for_a_shape():
    p = W.build(params=7e9, shape=dict(vocab=128000))
    assert p["vocab"] == 128000 and p["params"] == 7_000_000_000
    s = W.build(layers=8, hidden=1024, heads=8, shape=dict(ffn_hidden=4096, vocab=32000))
    assert s["params"] == SH.params(dict(s, vocab=0)) + 2 * 32000 * 1024


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def test_cli_custom_mla_mtp(h100, capsys):
    code, out, err = run(capsys, *h100, "--layers", "16", "--hidden", "2048", "--heads", "16", "--vocab", "50000",
                         "--kv-lora-rank", "256", "--q-lora-rank", "512", "--mtp-layers", "1", "--nodes", "2",
                         "--json")
    assert code in (0, 1), err
    w = json.loads(out)["workload"]
    assert w["vocab"] == 50000 and w["mla"]["kv_lora"] == 256 and w["mtp"] == 1


@pytest.mark.parametrize("args,msg", [(("--layers", "4", "--hidden", "512", "--q-lora-rank", "64"), "--kv-lora-rank"),
                                      (("--params", "7B", "--mtp-layers", "1"), "need --layers and --hidden"),
                                      (("--model", "llama3-8b", "--vocab", "0"), "--vocab must be"),
                                      (("--model", "resnet50", "--vocab", "1000"), "describe a transformer")])
def test_cli_bad_input(h100, capsys, args, msg):
    code, _, err = run(capsys, *h100, *args)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
