"""Optimizer-state precision (issue 41): --optimizer-states fp32|bf16|fp8|8bit and --main-params
fp32|bf16 in memory, in each framework's configuration, and refused where a framework has no
such option."""
from __future__ import annotations

import os
import sys

import pytest

from comm_bench import cli
from comm_bench.select import select
from comm_bench.select.layouts import BLOCK, MOMENT_BYTES, state_bytes
from comm_bench.select.predict import predict
from comm_bench.select.step import split_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402

SHAPE = {"layout": "x", "kind": "megatron", "tp": 8, "cp": 1, "pp": 1, "dp": 8, "ep": 1}


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def _res(h100, **kw):
    return select(h100, model="llama3-70b", nodes=8, micro_batch=1, **kw)


def test_bytes_per_parameter(h100):
    """k = main parameters + two moments: fp32 Adam 4 + 4 + 4 = 12 (the ZeRO paper's); bf16
    moments 4 + 2 + 2; Megatron's 16-bit main parameters (--main-params-dtype fp16) 2 + 1 + 1 with
    fp8 moments; 8-bit Adam 4 + 1 + 1 + one fp32 scale per block per moment."""
    cases = {("fp32", "fp32"): {"megatron": 12, "zero-1": 12, "fsdp": 12},
             ("bf16", "fp32"): {"megatron": 4 + 2 * MOMENT_BYTES["bf16"]},
             ("fp8", "bf16"): {"megatron": 2 + 2 * MOMENT_BYTES["fp8"], "fsdp": 2 * (1 + 4 / BLOCK["torchao"])},
             ("8bit", "fp32"): {"zero-1": 4 + 2 * (1 + 4 / BLOCK["bitsandbytes"]),
                                "fsdp-tp": 4 + 2 * (1 + 4 / BLOCK["torchao"])}}
    for (opt, main), want in cases.items():
        w = _res(h100, optimizer_states=opt, main_params=main)["workload"]
        for kind, k in want.items():
            assert state_bytes(kind, w)[0]["k"] == pytest.approx(k), (opt, main, kind)
    # fp32 parameters (amp) are their own master copy: the moments alone
    w = _res(h100, precision="amp", optimizer_states="8bit")["workload"]
    assert state_bytes("zero-1", w)[0]["k"] == pytest.approx(2 * (1 + 4 / BLOCK["bitsandbytes"]))


def test_memory_and_flags(h100):
    """Megatron tp8 dp8 with the distributed optimizer: bf16 moments save 4 B per parameter
    sharded over dp, 16-bit main parameters 2 more; the flags say so."""
    out = {}
    for opt, main in (("fp32", "fp32"), ("bf16", "fp32"), ("bf16", "bf16")):
        res = _res(h100, optimizer_states=opt, main_params=main)
        w, cl, lm, comp, ov, hr = res["context"]
        out[(opt, main)] = predict(SHAPE, w, cl, lm, comp, ov, hr, force=("full", True, True))
    psi = split_params(w, SHAPE)[0]
    base = out[("fp32", "fp32")]["model_states_gb"]
    assert base - out[("bf16", "fp32")]["model_states_gb"] == pytest.approx(4 * psi / 8 / 1e9, abs=2e-3)
    assert base - out[("bf16", "bf16")]["model_states_gb"] == pytest.approx(6 * psi / 8 / 1e9, abs=2e-3)
    line = " ".join(out[("bf16", "bf16")]["config"])
    assert ("--use-precision-aware-optimizer --main-params-dtype fp16 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
            in line)
    assert "--use-precision-aware-optimizer" not in " ".join(out[("fp32", "fp32")]["config"])


def test_frameworks_without_the_option_are_refused(h100):
    res = _res(h100, optimizer_states="bf16")
    fsdp = [c for c in res["candidates"] if c["kind"] in ("fsdp", "fsdp-tp", "zero-3")]
    assert fsdp and all(not c["feasible"] and "--optimizer-states bf16" in c["reason"] for c in fsdp)
    res = _res(h100, main_params="bf16")
    zero = [c for c in res["candidates"] if c["kind"].startswith("zero-")]
    assert zero and all(not c["feasible"] and "fp32 master" in c["reason"] for c in zero)
    res = _res(h100, optimizer_states="8bit")
    c = next(c for c in res["candidates"] if c["kind"] == "zero-1")
    if c["feasible"]:
        assert any("bitsandbytes.optim.Adam8bit" in x and "deepspeed.initialize" in x for x in c["config"])


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_bad_input(h100, capsys):
    code, _, err = run(capsys, *h100, "--model", "llama3-8b", "--precision", "amp", "--main-params", "bf16")
    assert code == 2 and "--main-params bf16" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, *h100, "--model", "llama3-8b", "--optimizer-states", "int4")
    assert code == 2 and "Traceback" not in err
