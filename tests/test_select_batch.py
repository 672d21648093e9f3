"""select's global batch and its answer (issue 32): a batch that does not divide is rounded
to the nearest multiple and says so under "assumed", never made infeasible by divisibility
alone; the recommendation is the fastest feasible candidate (within the stated 0.1% tie)."""
from __future__ import annotations

import pytest

import select_docs as SD
from comm_bench.select import select
from comm_bench.select.facts import TIE
from comm_bench.select.step import batch_split


def test_batch_split_rounds_to_the_nearest_multiple():
    assert batch_split(512, 1, 5, 1, 1) == (102, 510)          # 512 / 5 = 102.4
    assert batch_split(512, 2, 5, 1, 1) == (51, 510)
    assert batch_split(2048, 1, 128, 16, 2) == (16, 2048)     # interleaved: m % pp == 0
    assert batch_split(3000, 1, 128, 16, 2) == (16, 2048)     # 3000 / 2048 = 1.46 -> one unit
    assert batch_split(1000, 1, 128, 16, 2)[0] == 0           # less than one interleaved unit
    assert batch_split(100, 1, 128, 1, 1)[0] == 0             # fewer sequences than dp ranks


@pytest.fixture
def five_single_gpu_nodes(tmp_path):
    """5 nodes x 1 GPU over 400G IB (one NIC pair measured)."""
    return [SD.write(tmp_path / "pair.json", SD.pairwise_doc([f"n{i}" for i in range(5)], 5e-6, 45e9, "rdma"))]


def test_gpt2_on_five_gpus_rounds_its_batch(five_single_gpu_nodes):
    res = select(five_single_gpu_nodes, model="gpt2-1.5b", gpus_per_node=1, gpu="H100")
    by = {c["layout"]: c for c in res["candidates"]}
    for kind in ("ddp", "zero-1", "zero-2", "fsdp"):
        assert by[kind]["feasible"], by[kind]["reason"]
        assert by[kind]["global_batch"] in (510, 515, 520)      # 512 rounded to a multiple of b x 5
    rec = res["recommendation"]
    assert rec["layout"] is not None and not rec["layout"].startswith("tp1-pp5")
    assert any("global batch 512 rounded to" in line for line in rec["assumed"]), rec["assumed"]


@pytest.mark.parametrize("model, nodes", [("gpt2-1.5b", 4), ("llama2-13b", 4), ("mixtral-8x7b", 2)])
def test_recommendation_is_never_slower_than_a_feasible_candidate(tmp_path, model, nodes):
    hosts = [f"n{i}" for i in range(nodes)]
    docs = [SD.write(tmp_path / "intra.json", SD.collective_doc(["n0"], 8, 10e-6, 360e9)),
            SD.write(tmp_path / "inter.json", SD.collective_doc(hosts, 8, 20e-6, 45e9))]
    res = select(docs, model=model)
    ok = [c for c in res["candidates"] if c["feasible"]]
    rec = next(c for c in ok if c["layout"] == res["recommendation"]["layout"])
    assert rec["efficiency"] >= max(c["efficiency"] for c in ok) * (1 - TIE)
