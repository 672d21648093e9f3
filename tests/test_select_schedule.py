"""Pipeline in-flight activations by replaying Megatron-Core's 1F1B schedules on rank 0."""
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
