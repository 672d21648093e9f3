"""select at cluster scale (issue: 32 to 3,000 GPUs): published runs, the inter-node share
per GPU, measured shapes read as measured, data parallelism for small models on Ethernet,
and the flags every answer names."""
from __future__ import annotations

import os
import sys

import pytest

from comm_bench.select import select
from comm_bench.select.linkfit import fit_documents
from comm_bench.select.linkmodel import LinkModel
from comm_bench.select import cluster as C
from comm_bench.select.layouts import DP_LAYOUTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_published as CK  # noqa: E402


@pytest.fixture(scope="module")
def a100(tmp_path_factory):
    return CK.cluster_documents(str(tmp_path_factory.mktemp("a100")))


@pytest.mark.parametrize("row", CK.TABLE1, ids=[r[0] for r in CK.TABLE1])
def test_megatron_sc21_table1(a100, row):
    """The paper's layout is a feasible candidate, predicted within 15% of the published
    teraFLOP/s per GPU, and select's answer is predicted at least as fast."""
    r = CK.check_row(a100, *row)
    assert r["paper_layout_candidate"], r
    assert abs(r["ratio"] - 1) <= 0.15, r
    assert r["at_least_as_fast"], r
    assert r["recommended_config"], r


def test_zero_memory_example():
    assert all(z["ok"] for z in CK.zero_example())


def _inter_per_gpu(paths):
    docs = [(p, __import__("json").load(open(p))) for p in paths]
    cl = C.describe(docs)
    lk = LinkModel(fit_documents(docs), cl).link("inter-node")
    return lk.beta * lk.share


def test_inter_node_share_full_node_collective_vs_nic_pair(a100):
    """A 2 x 8 all_reduce measures the node's 8 NICs together; one NIC pair one NIC:
    the per-GPU figure derived from each agrees (within 15%)."""
    from_collective = _inter_per_gpu([a100[0], a100[1]])
    from_pair = _inter_per_gpu([a100[0], a100[2]])
    assert from_collective == pytest.approx(CK.NODE_GBS * 1e9 / 8, rel=0.02)
    assert from_pair == pytest.approx(CK.PAIR_GBS * 1e9, rel=0.02)
    assert abs(from_collective / from_pair - 1) <= 0.15


def test_one_ethernet_port_is_shared_by_the_node(tmp_path):
    docs = CK.cluster_documents(str(tmp_path), nic_gbs=12.5, nic_kind="ethernet", pair_gbs=11.5, node_gbs=11.5)
    assert _inter_per_gpu([docs[0], docs[1]]) == pytest.approx(11.5e9 / 8, rel=0.02)
    assert _inter_per_gpu([docs[0], docs[2]]) == pytest.approx(11.5e9 / 8, rel=0.02)


def test_measured_shape_is_read_off_its_curve(a100):
    """DDP over exactly the 2 x 8 GPUs that were measured: the all_reduce time is the
    input's own curve (log-log interpolation), labelled measured, never recomposed."""
    res = select([a100[0], a100[1]], model="megatron-1.7b", nodes=2, gpu="A100", micro_batch=1)
    ddp = next(c for c in res["candidates"] if c["layout"] == "ddp")
    (grad,) = [i for i in ddp["collectives"] if i["op"] == "all_reduce"]
    assert grad["source"] == "measured" and "8 rank(s)/node" in grad["note"]
    _, _, lm, _, _, _ = res["context"]
    (g,) = [g for g in lm.groups if g.scope == "inter-node" and g.op == "all_reduce"]
    S = 64 << 20
    assert lm.collective("all_reduce", S, 8, 2).seconds == pytest.approx(g.interpolate(S), rel=1e-12)
    assert lm.collective("all_reduce", S, 8, 2).source == "measured"
    # a shape that was not measured (4 nodes) is composed and says so
    assert lm.collective("all_reduce", S, 8, 4).source == "extrapolated"


@pytest.mark.parametrize("model", ["bert-large", "resnet50"])
def test_small_model_on_ethernet_gets_data_parallelism(tmp_path, model):
    """4 nodes x 8 A100 over one 100 GbE port each, the preset's recipe batch: data
    parallelism (DDP, or sharded data parallelism whose parameter all_gathers hide behind
    forward), never tensor or pipeline parallelism; the configuration is named."""
    docs = CK.cluster_documents(str(tmp_path), nic_gbs=12.5, nic_kind="ethernet", pair_gbs=11.5, node_gbs=11.5)
    res = select(docs, model=model, nodes=4, gpu="A100")
    rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
    assert rec["kind"] in DP_LAYOUTS and rec["tp"] == 1 and rec["pp"] == 1, rec["layout"]
    assert rec["global_batch"] == 256
    assert any(line.startswith("set: ") for line in res["recommendation"]["rationale"])
    if model == "resnet50":                  # 25 M parameters: nothing to shard
        assert rec["kind"] == "ddp"


@pytest.mark.parametrize("model,nodes", [("llama2-70b", 8), ("megatron-530b", 315), ("llama2-7b", 2)])
def test_every_answer_names_its_flags(a100, model, nodes):
    res = select(a100, model=model, nodes=nodes, gpu="A100")
    sets = [line for line in res["recommendation"]["rationale"] if line.startswith("set: ")]
    assert sets, res["recommendation"]
    rec = next(c for c in res["candidates"] if c["layout"] == res["recommendation"]["layout"])
    if rec["kind"] == "megatron":
        flags = sets[0]
        assert f"--tensor-model-parallel-size {rec['tp']}" in flags
        assert f"--pipeline-model-parallel-size {rec['pp']}" in flags
        assert ("--use-distributed-optimizer" in flags) == rec["distributed_optimizer"]
        assert ("--recompute-granularity full" in flags) == (rec["recompute"] == "full")


def test_megatron_defaults_need_a_switch_to_fit(a100):
    """Megatron-LM's defaults keep 18 B/param (fp32 main gradients, unsharded optimizer):
    the 1T model on tp8-pp64 does not fit without recomputation; select names what does."""
    from comm_bench.select import plan_layout
    res = select(a100, model="megatron-1t", nodes=384, gpu="A100")
    plain = plan_layout(res, "megatron", 8, 64, recompute="none")
    assert not plain["feasible"]
    paper = plan_layout(res, "megatron", 8, 64, recompute="full")
    assert paper["feasible"] and paper["model_states_gb"] == pytest.approx(18 * (
        res["workload"]["params"] + 63 * 51200 * 25600) / 512 / 1e9, abs=1e-3)   # rounded to MB


def test_uneven_pipeline_stages_are_candidates(a100):
    """BLOOM-style tp4-pp12 of 70 layers: stages of 6, the first and last 5 (the embedding and
    the loss count as a layer: Megatron-Core's account-for flags, issue 32); 71 layers over
    pp12: first and last stage sizes searched (issue 41)."""
    res = select(a100, params=176e9, layers=70, hidden=14336, heads=112, nodes=48, gpu="A100", global_batch=2048)
    c = next(c for c in res["candidates"] if c["layout"] == "tp4-pp12-dp8")
    if c["feasible"]:
        assert any("--account-for-embedding-in-pipeline-split" in line for line in c["config"])
    from comm_bench.select.pipeline import best, options
    assert (5,) + (6,) * 10 + (5,) in [x.stages for x in options(70, 12)]
    assert (7,) + (8,) * 14 + (7,) in [x.stages for x in options(126, 16)]
    assert (6,) * 16 in [x.stages for x in options(96, 16)]
    # 71 over 12: never the remainder on one stage (16 + 5 x 11, before issue 41)
    assert max(best(71, 12, 1, 32, 0.0, 1.0, 1.0, 0.0, 0.0).stages) == 6
