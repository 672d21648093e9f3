"""`select --eager` (issue 41): a micro-batch takes at least the host's time to launch its
kernels one by one, from the H100 measurements in docs/benchmarks (selection-launch-h100.json,
selection-moe-megatron-h100.json)."""
from __future__ import annotations

import json
import os
import statistics
import sys

import pytest

from comm_bench import cli
from comm_bench.select import select
from comm_bench.select import launch as LN

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

BENCH = os.path.join(ROOT, "docs", "benchmarks")
SMALL = dict(layers=4, hidden=512, heads=4, kv_heads=1, ffn_hidden=1536, vocab=32000, seq_len=1024,
             micro_batch=1, global_batch=8, nodes=1, gpus_per_node=8)


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def test_constants_are_the_measurements():
    """HOST_LAYER_S: the median eager step of the cases whose CUDA graph replays in under a
    quarter of it (host-bound); MOE_DISPATCH_HOST_S: Megatron-Core's router, preprocess,
    dispatch and combine, forward + backward, at 1,024 tokens."""
    with open(os.path.join(BENCH, "selection-launch-h100.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bound = [c["eager_s"] for c in cases if c["graph_s"] < c["eager_s"] / 4]
    assert len(bound) >= 3
    assert LN.HOST_LAYER_S == pytest.approx(statistics.median(bound), rel=1e-3)
    with open(os.path.join(BENCH, "selection-moe-megatron-h100.json"), encoding="utf-8") as f:
        runs = {r["shape"]["tokens"]: r["megatron"] for r in json.load(f)["runs"]}
    disp = sum(runs[1024][k]["fwd_bwd_s"] for k in ("route", "preprocess_permute_sync", "dispatch_postprocess",
                                                    "combine_unpermute"))
    assert LN.MOE_DISPATCH_HOST_S == pytest.approx(disp, rel=1e-3)


def _seconds(h100, **kw):
    res = select(h100, **kw)
    comp = res["context"][3]
    return res, comp.seconds(1, 1, 1.0, logits=False)


def test_small_layers_wait_for_the_host(h100):
    """A 512-wide layer of 1,024 tokens runs in well under a millisecond on the GPU: eager, the
    micro-batch takes the host's 4 x 2.24 ms (a third more with full recomputation)."""
    _, graphs = _seconds(h100, **SMALL)
    res, eager = _seconds(h100, eager=True, **SMALL)
    assert graphs < 4 * LN.HOST_LAYER_S / 2
    assert eager == pytest.approx(4 * LN.HOST_LAYER_S)
    comp = res["context"][3]
    assert comp.seconds(1, 1, 1.0, "full", logits=False) >= 4 * LN.HOST_LAYER_S * (1 + LN.RECOMPUTE_SHARE) * 0.999
    assert "--eager" in res["workload"]["compute_note"] and "MoE" not in res["workload"]["compute_note"]
    best = [c for c in res["candidates"] if c["feasible"]][0]
    plain = {c["layout"]: c for c in select(h100, **SMALL)["candidates"]}[best["layout"]]
    assert best["step_s"] > plain["step_s"]


def test_large_layers_hide_the_host(h100):
    """Llama 3 8B at 8,192 tokens: ~17 ms of GEMMs a layer, the host's 2.24 ms hidden."""
    kw = dict(model="llama3-8b", nodes=2, micro_batch=1, seq_len=8192)
    _, graphs = _seconds(h100, **kw)
    _, eager = _seconds(h100, eager=True, **kw)
    assert eager == graphs and graphs > 32 * LN.HOST_LAYER_S


def test_moe_layers_add_the_dispatcher(h100):
    kw = dict(SMALL, experts=8, experts_per_token=2)
    res, eager = _seconds(h100, eager=True, **kw)
    assert eager == pytest.approx(4 * (LN.HOST_LAYER_S + LN.MOE_DISPATCH_HOST_S))
    assert "5.39 ms a MoE layer's dispatcher" in res["workload"]["compute_note"]


def test_cli_flag(h100, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *h100, "--model", "llama3-8b", "--nodes", "2", "--eager", "--json"])
    out = capsys.readouterr().out
    assert e.value.code in (0, 1)
    assert "--eager: each layer" in json.loads(out)["workload"]["compute_note"]
