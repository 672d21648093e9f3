"""GPU cards and power caps (issue 41): H800, H20, H100 96GB, H100 PCIe / NVL, GB200 by name
or --gpu, and --power-cap lowering the sustained compute rate below the card's TDP."""
from __future__ import annotations

import os
import sys

import pytest

from comm_bench import cli
from comm_bench.select import select
from comm_bench.select.compute import STATIC_SHARE, power_factor
from comm_bench.select.gpus import GPUS, lookup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402


@pytest.mark.parametrize("name,key", [("NVIDIA H800", "H800"), ("NVIDIA H20", "H20"), ("NVIDIA H200", "H200"),
                                      ("NVIDIA H100 PCIe", "H100 PCIE"), ("NVIDIA H100 NVL", "H100 NVL"),
                                      ("H100-96GB", "H100 96GB"), ("NVIDIA GB200", "GB200"), ("NVIDIA B200", "B200"),
                                      ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA GH200 480GB", "GH200"),
                                      ("h100-nvl", "H100 NVL")])
def test_names_match_their_card(name, key):
    assert lookup(name)[1] == key


def test_data_sheet_figures_are_dense():
    """NVIDIA prints Hopper / Blackwell tensor peaks with 2:4 sparsity; the table keeps the dense
    half, and FP8 is twice bf16 on every card that has it."""
    for key, e in GPUS.items():
        if "fp8_tflops" in e:
            assert e["fp8_tflops"] == pytest.approx(2 * e["peak_tflops"], rel=0.02), key
    assert GPUS["H800"]["peak_tflops"] == GPUS["H100"]["peak_tflops"] and GPUS["H800"]["nvlink_gbs"] < 450


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def _compute(h100, **kw):
    res = select(h100, model="llama3-8b", nodes=2, micro_batch=1, mfu=0.5, **kw)
    w, cl, lm, comp, ov, hr = res["context"]
    return res, comp.seconds(1, 1, 1.0)


def test_gpu_flag_sets_peak_and_memory(h100):
    """--gpu CARD over the GPU in the results: memory from the sheet, compute by its peak."""
    r800, t800 = _compute(h100, gpu="H800")
    r20, t20 = _compute(h100, gpu="H20")
    assert r20["cluster"]["gpu_mem_gb"] == 96.0 and r800["cluster"]["gpu_mem_gb"] == 80.0
    assert t20 / t800 == pytest.approx(GPUS["H800"]["peak_tflops"] / GPUS["H20"]["peak_tflops"])
    _, tgb = _compute(h100, gpu="GB200")
    assert t800 / tgb == pytest.approx(2500 / 989)


def test_power_cap_curve(h100):
    """At or above the TDP nothing changes; below, ((W - 0.15 TDP) / 0.85 TDP)^(1/3) of the rate."""
    assert power_factor(700, 700) == 1.0 and power_factor(900, 700) == 1.0 and power_factor(None, 700) == 1.0
    f = power_factor(500, 700)
    assert f == pytest.approx(((500 - STATIC_SHARE * 700) / (700 - STATIC_SHARE * 700)) ** (1 / 3))
    assert 0.85 < f < 0.9
    res, capped = _compute(h100, power_cap=500)
    _, full = _compute(h100)
    assert capped == pytest.approx(full / f)
    assert "--power-cap 500 W" in res["workload"]["compute_note"]


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        cli.main(["select", *args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("args,msg", [(("--power-cap", "50"), "static power"), (("--power-cap", "-3"), "--power-cap"),
                                      (("--gpu", "H30"), "unknown --gpu")])
def test_bad_input(h100, capsys, args, msg):
    code, _, err = run(capsys, *h100, "--model", "llama3-8b", *args)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
