"""Pipeline stage splits (issue 41): first and last stage sizes searched with equal middle
stages (Megatron-Core's --decoder-first/last-pipeline-num-layers), the split's memory on every
rank that can be fullest, --pp-layout, interleaving up to one layer per chunk."""
from __future__ import annotations

import itertools
import json
import os
import sys

import pytest

from comm_bench import cli
from comm_bench.select import memory as M
from comm_bench.select import pipeline as P
from comm_bench.select import select
from comm_bench.select.predict import predict, virtual_stages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

def run(capsys, *args):
    """(exit code, stdout, stderr) of `comm-bench select ARGS` (real click parsing and exit codes)."""
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


DSV3 = {"layout": "x", "kind": "megatron", "tp": 1, "cp": 1, "pp": 16, "dp": 128, "ep": 64}


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def _dsv3(h100, **kw):
    res = select(h100, model="deepseek-v3", nodes=256, micro_batch=1, precision="fp8", recompute="full", **kw)
    w, cl, lm, comp, ov, hr = res["context"]
    return res, w, (cl, lm, comp, ov, hr)


def _layer_times(w, comp, c):
    """(one layer's, the output layer's) seconds of a micro-batch on candidate c's GPUs."""
    kw = dict(recompute=c["recompute"], sp=c["sequence_parallel"], ep=c["ep"], etp=c.get("etp"))
    one = comp.seconds(c["micro_batch"], c["tp"], 1.0 / w["layers"], logits=False, **kw)
    out = comp.seconds(c["micro_batch"], c["tp"], 0.0, logits=True, **kw)
    return one, out


def test_deepseek_v3_61_layers_over_16_stages_is_balanced(h100):
    """Before issue 41 the first of 16 stages took the remainder: 16 layers, 3 on every other.
    Now no stage holds more than ceil(61 / 16) = 4, the slowest stage (the output layer's
    compute on the last counted) is the least of every first / last split, and the flags say it."""
    res, w, ctx = _dsv3(h100)
    c = predict(DSV3, w, *ctx, force=("full", True, False))
    st = c["pp_split"]
    assert sum(st) == 61 and len(st) == 16 and max(st) == 4 and st[0] < 16
    one, out = _layer_times(w, ctx[2], c)
    o = out / one
    t = P.stage_time(P.Split(tuple(st), c["pp_split_how"]), o)
    brute = [P.stage_time(P.Split((f,) + (y,) * 14 + (61 - 14 * y - f,), "x"), o)
             for y in range(1, 5) for f in range(1, 61 - 14 * y)]
    assert t <= min(brute) * (1 + P.TIME_TOLERANCE)
    assert any(f"--decoder-first-pipeline-num-layers {st[0]} --decoder-last-pipeline-num-layers {st[-1]}" in x
               for x in c["config"])
    # the old split, stated with --pp-layout: 16 + 3 x 15, slower and fuller
    old = predict(DSV3, dict(w, pp_layout=(16,) + (3,) * 15), *ctx, force=("full", True, False))
    assert old["pp_split"] == [16] + [3] * 15
    assert old["memory_gb"] > c["memory_gb"]
    if old["feasible"]:
        assert old["step_s"] > c["step_s"]


def test_search_matches_brute_force():
    """best() keeps the fastest slowest stage of every first / last split with equal middles
    (searched here without the pruning bound), then the least memory among those within 1%."""
    for L, pp, o in ((61, 16, 1.3), (80, 8, 1.1), (32, 4, 1.8), (94, 8, 0.7), (71, 12, 0.0), (48, 3, 2.5)):
        s, a, e = 1.0, 3.0, 2.0
        got = P.best(L, pp, 1, 64, o, s, a, e, e)
        every = [P.Split((f,) + (y,) * (pp - 2) + (L - (pp - 2) * y - f,), "x")
                 for y in range(1, L) for f in range(1, L - (pp - 2) * y)] if pp > 2 else \
            [P.Split((f, L - f), "x") for f in range(1, L)]
        fastest = min(P.stage_time(x, o) for x in every)
        assert P.stage_time(got, o) <= fastest * (1 + P.TIME_TOLERANCE), (L, pp)
        near = [x for x in every if P.stage_time(x, o) <= fastest * (1 + P.TIME_TOLERANCE)]
        assert P.stage_memory(got, 1, 64, s, a, e, e) == pytest.approx(
            min(P.stage_memory(x, 1, 64, s, a, e, e) for x in near)), (L, pp)


def test_embedding_and_loss_accounting_kept():
    """Llama 3's 126 layers over 16 stages: 7 + 8 x 14 + 7 (its paper), with Megatron's
    account-for flags; even where pp divides the layers and the output layer is light."""
    x = P.best(126, 16, 1, 32, 0.6, 1.0, 1.0, 0.0, 0.0)
    assert x.stages == (7,) + (8,) * 14 + (7,) and x.how == "embedding-loss"
    assert "--account-for-embedding-in-pipeline-split" in P.megatron_flags(x, 1)
    assert P.best(96, 16, 1, 32, 0.3, 1.0, 1.0, 0.0, 0.0).how == "even"
    # a heavy output layer (o = 1.8 layers, Llama 3 8B's vocabulary over 32 layers): the last stage lighter
    y = P.best(32, 4, 1, 32, 1.8, 1.0, 1.0, 0.0, 0.0)
    assert y.stages[-1] < 8 and P.stage_time(y, 1.8) < 8 + 1.8


def test_in_flight_on_later_ranks():
    """Rank r of 1F1B holds min(pp - r, m) micro-batches; interleaved, its warm-up
    (pp - r - 1) x 2 + (v - 1) x pp chunk passes plus one (Megatron-Core's schedules.py)."""
    assert M.in_flight_layers(16, 1, 32, [8], rank=1) == 15 * 8
    assert M.in_flight_layers(16, 1, 32, [2], rank=15) == 2
    for r in (0, 1, 7, 15):
        assert M.in_flight_layers(16, 4, 64, [1.0] * 4, rank=r) == (15 - r) * 2 + 3 * 16 + 1
        assert P.in_flight_chunks(16, 4, 64, r) == (15 - r) * 2 + 3 * 16 + 1


def test_chunks_and_layout_strings():
    x = P.Split((7,) + (8,) * 14 + (7,), "embedding-loss")
    assert x.chunks(0, 8) == [0.0] + [1.0] * 7 and x.chunks(15, 8) == [1.0] * 7 + [0.0]
    assert x.chunks(3, 8) == [1.0] * 8
    g = P.Split((3, 4, 4, 2), "given")
    assert P.layout_string(g, 1) == "Et*3|t*4|t*4|ttL"
    assert P.split_points(g, 1) == ["layers.3", "layers.7", "layers.11"]
    assert P.megatron_flags(g, 1) == ("--decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 2"
                                       " (the other stages 4 each)")
    u = P.Split((3, 5, 4, 1), "given")
    assert P.megatron_flags(u, 1) == '--pipeline-model-parallel-layout "Et*3|t*5|t*4|tL"'


def test_interleaving_up_to_one_layer_per_chunk():
    """v up to L / pp (issue 41: a published 340B layout, 96 layers over pp 8, uses 12)."""
    w = {"kind": "transformer", "layers": 96}
    vs = virtual_stages(w, 8)
    assert 12 in vs and max(vs) == 12
    assert all(96 % (8 * v) == 0 or (98 % (8 * v) == 0) or P.options(96, 8, v) for v in vs)
    assert virtual_stages({"kind": "transformer", "layers": 126}, 16)[-1] == 8   # 128 / 16: one layer a chunk


def test_pp_layout_given(h100):
    """--pp-layout FIRST,LAST: equal middles; a list: one count per stage; what does not apply
    to a candidate's pp makes it infeasible with the reason."""
    res, w, ctx = _dsv3(h100, pp_layout="4,1")
    c = predict(DSV3, w, *ctx, force=("full", True, False))
    assert c["pp_split"] == [4] + [4] * 14 + [1]
    bad = predict(dict(DSV3, pp=8, dp=256), w, *ctx, force=("full", True, False))
    assert not bad["feasible"] and "--pp-layout 4,1" in bad["reason"]


@pytest.mark.parametrize("value,msg", [("a,b", "--pp-layout"), ("0,3", "at least 1"), ("30,40", "hold 70 layers"),
                                       ("1,2,3", "the model has 61")])
def test_pp_layout_bad_input(h100, capsys, value, msg):
    code, out, err = run(capsys, *h100, "--model", "deepseek-v3", "--nodes", "256", "--pp-layout", value)
    assert code == 2, err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_pp_layout_cli_json(h100, capsys):
    code, text, err = run(capsys, *h100, "--model", "llama3-8b", "--nodes", "2", "--pp-layout", "9,7", "--json")
    assert code in (0, 1), err
    out = json.loads(text)
    pipes = [c for c in out["candidates"] if c["pp"] == 4 and c["feasible"]]
    assert pipes and all(c["pp_split"] == [9, 8, 8, 7] for c in pipes)
    assert all(not c["feasible"] for c in out["candidates"] if c["pp"] not in (1, 4) and c["pp"] > 1)


def test_options_never_lose_the_even_split():
    for L, pp in itertools.product((24, 32, 61, 126), (2, 3, 4, 8, 16)):
        if L % pp == 0:
            assert P.even(L, pp) in P.options(L, pp)
        assert all(sum(x.stages) == L and len(x.stages) == pp for x in P.options(L, pp))
