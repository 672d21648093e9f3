"""select for mixture-of-experts models (issue 32): the expert-parallel all-to-all is priced
from the measured alltoall curve of the link it crosses, so a slower inter-node alltoall
changes the answer; the alltoall cost model; published runs' layouts are expressible and
feasible under their settings (tools/check_select_runs.py)."""
from __future__ import annotations

import os
import sys

import pytest

import select_docs as SD
from comm_bench.select import collectives as CO
from comm_bench.select import select

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

A2A = ("alltoall",)


def test_alltoall_cost_model():
    """Pairwise alltoall of a rank's S-byte buffer over n ranks: (n-1) steps, (n-1)/n of S
    leaves the rank (ops.py's bus factor); across nodes only the inter-node share."""
    a, b = 10e-6, 50e9
    assert CO.ring("alltoall", 1e9, 4, a, b) == pytest.approx(3 * a + 0.75 * 1e9 / b)
    assert CO.hierarchical_stages("alltoall", 1e9, 8, 2) == [("alltoall", 1e9, 2, "inter-node")]


def _cluster(tmp_path, a2a_busbw):
    """8 nodes x 2 H200 (NVLink pair inside, 800G NIC per GPU), NCCL measured: the pair's
    collectives and alltoall, all_reduce over 8 x 2, and alltoall over 2 x 2 GPUs."""
    hosts = [f"n{i}" for i in range(8)]
    docs = {"intra": SD.collective_doc(["n0"], 2, 8e-6, 360e9, ops=("all_reduce", "all_gather", "reduce_scatter")
                                       + A2A),
            "inter": SD.collective_doc(hosts, 2, 20e-6, 90e9),
            "a2a": SD.collective_doc(hosts[:2], 2, 20e-6, a2a_busbw, ops=A2A)}
    return [SD.write(tmp_path / f"{k}.json", d) for k, d in docs.items()]


def test_slower_inter_node_alltoall_changes_the_moe_answer(tmp_path):
    """gpt-oss-120b (128 experts, top-4) on 8 x 2 H200 with an 800G NIC per GPU: with a 2 x 2 alltoall
    at 138 GB/s busbw (half of each buffer crosses the node at 0.925 x 100 GB/s: 0.75 S / t)
    the answer's expert-parallel group crosses nodes (tp2 x ep2: the ep pair is a node apart);
    made 4x slower (34.5 GB/s), it keeps expert parallelism inside a node (tp1 x ep2) and
    pipelines deeper instead."""
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    fast.mkdir(), slow.mkdir()
    answers = {}
    for folder, busbw in ((fast, 138e9), (slow, 34.5e9)):
        res = select(_cluster(folder, busbw), model="gpt-oss-120b", gpus_per_node=2, gpu="H200")
        rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
        a2a = [i for i in rec["collectives"] if i["op"] == "alltoall"]
        answers[busbw] = (rec, a2a)
    (fast_rec, fast_a2a), (slow_rec, slow_a2a) = answers[138e9], answers[34.5e9]
    assert fast_rec["ep"] > 1 and fast_a2a[0]["n_inter"] > 1          # experts spread across nodes
    assert slow_rec["layout"] != fast_rec["layout"]
    assert slow_rec["ep"] > 1 and all(i["n_inter"] == 1 for i in slow_a2a)   # EP inside a node only
    assert slow_rec["tokens_per_s"] < fast_rec["tokens_per_s"]
    assert any("--expert-model-parallel-size" in line or "expert_parallel_degree" in line
               for line in fast_rec["config"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("runs"))
    return [RUNS.check_row(d, *r) for r in RUNS.RUNS]


def test_published_layouts_are_expressible_and_feasible(runs):
    """Every published run of tools/check_select_runs.py is a feasible layout under its own
    settings (how close each lands is docs/benchmarks/selection-runs.md's table)."""
    for r in runs:
        assert r["published_config"]["feasible"], r
        assert r["recommended"] and r["recommended_vs_published"] >= 1 - 1e-3, r
    assert sum(r["seq"] >= 8192 for r in runs) >= 2
    assert sum(r["model"] in ("gpt-oss-120b", "mixtral-8x7b", "deepseek-v3") for r in runs) >= 2
