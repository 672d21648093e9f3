"""Pipeline in-flight activations (Megatron-Core's schedules replayed on rank 0), causal
attention FLOPs, MoE token permutation traffic."""
import pytest

from comm_bench.select import memory as M


def test_interleaved_matches_korthikanti_for_even_chunks():
    # Korthikanti et al. 2022: L (1 + (pp - 1) / (pp v)) layers of one micro-batch when m > pp
    L, pp = 128, 16
    for v in (2, 4, 8):
        assert M.in_flight_layers(pp, v, 4 * pp, [L / pp / v] * v) == L * (1 + (pp - 1) / (pp * v))


def test_plain_1f1b_holds_min_pp_m_microbatches():
    assert M.in_flight_layers(16, 1, 32, [8]) == 16 * 8
    assert M.in_flight_layers(16, 1, 4, [8]) == 4 * 8


def test_never_more_than_every_microbatch():
    # m = pp: warm-up would exceed the m v chunk passes; rank 0 then holds all m of its layers
    assert M.in_flight_layers(16, 2, 16, [4, 4]) == 16 * 8


def test_llama3_embedding_chunk():
    # 126 layers over 16 stages (first and last 7), v = 8: chunk 0 holds only the embedding,
    # so interleaving costs no activation memory over plain 1F1B (Llama 3 section 3.3.2)
    chunks = M.stage_chunks(7, 8, 8)
    assert chunks == [0.0] + [1.0] * 7
    assert M.in_flight_layers(16, 8, 32, chunks) == M.in_flight_layers(16, 1, 32, [7]) == 112
    assert M.stage_chunks(7, 8, 2) == [3.0, 4.0]


def test_causal_attention_executed_flops():
    # flash attention on a decoder executes (s + 1) / 2 keys per query; model FLOPs keep s
    from comm_bench.select import shapes as SH
    from comm_bench.select import workload as W
    w = W.build(model="llama3-8b")
    s = w["seq_len"]
    full, causal = SH.attention_flops_per_token(w, s), SH.attention_flops_per_token(w, s, causal=True)
    assert causal == full * (s + 1) / (2 * s)
    attn = w["layers"] * (full - causal) * s * 3
    assert W.flops_per_sample(w) - W.flops_per_sample(w, executed=True) == attn
    unfused = dict(w, attention="unfused")    # computes the whole matrix: nothing skipped
    assert W.flops_per_sample(unfused, executed=True) == W.flops_per_sample(unfused)


def test_windowed_causal_keys():
    from comm_bench.select import shapes as SH
    s = {"hidden": 64, "heads": 1, "kv_heads": 1, "layers": 2, "window": 4, "window_layers": 1}
    # a full layer: mean of i + 1 over i < 8 = 4.5; a window of 4: (1 + 2 + 3 + 4 x 5) / 8 = 3.25
    assert SH.attention_flops_per_token(s, 8, causal=True) == 2.0 * (4.5 + 3.25) / 2 * 1 * (64 + 64)


def test_moe_permutation_hbm_traffic():
    # gpt-oss-120b (k 4, h 2880, 128 experts): ep 8 adds the local sort, 2(k+1)h + 4kh elements
    from comm_bench.select import gpus as GP
    from comm_bench.select import workload as W
    from comm_bench.select.compute import Compute
    w = W.build(model="gpt-oss-120b")
    c = Compute(w, dict(GP.GPUS["H100"], source="test"))
    h, k = w["hidden"], w["experts_per_token"]
    per = w["seq_len"] * w["moe_layers"] * 2 / c.hbm   # one sample, 2-byte elements
    assert c.permute_seconds(1, 1, 1.0, "none", 1) == pytest.approx(2 * 2 * (k + 1) * h * per)
    assert c.permute_seconds(1, 1, 1.0, "full", 8) == pytest.approx(3 * (2 * (k + 1) * h + 4 * k * h) * per)
