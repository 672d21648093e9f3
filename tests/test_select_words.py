"""select's rationales say why a layout is no choice instead of printing a missing figure
as 'n/a%' (issue 41: "DDP n/a% slower" where DDP did not fit)."""
from __future__ import annotations

import os
import sys

import pytest

from comm_bench.select import select
from comm_bench.select.facts import vs_fastest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as RUNS  # noqa: E402


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    return RUNS.documents(str(tmp_path_factory.mktemp("h100")), "H100")


def test_vs_fastest_words():
    top = {"efficiency": 0.5, "feasible": True}
    assert vs_fastest({"efficiency": 0.4, "feasible": True}, top) == "25.0% slower than the fastest"
    assert vs_fastest({"efficiency": None, "feasible": False, "reason": "needs 80.2 > 77.0 GB/GPU"}, top) \
        == "not feasible: needs 80.2 > 77.0 GB/GPU"
    assert vs_fastest(None, top, "not a candidate on this cluster") == "not a candidate on this cluster"


def _why(h100, **kw):
    res = select(h100, **kw)
    return res["facts"], " ".join(res["recommendation"]["rationale"])


def test_ddp_that_does_not_fit_says_so(h100):
    """5B parameters on 2 x 8 H100: DDP needs 80 GB of model states, ZeRO-1 is the answer."""
    facts, why = _why(h100, params=5e9, nodes=2, micro_batch=1, seq_len=1024, global_batch=64)
    assert facts["best_layout"] == "zero-1" and not facts["fits_ddp"]
    assert "DDP not feasible: needs 80.2 > 77.0 GB/GPU" in why and "n/a" not in why


def test_no_megatron_layout_says_so(h100):
    """Llama 3 70B on 2 x 8 H100: only torchtitan layouts fit."""
    facts, why = _why(h100, model="llama3-70b", nodes=2, micro_batch=1)
    assert not facts["fits_megatron"] and facts["fits_fsdptp"]
    assert "best Megatron-Core layout: none is feasible" in why and "n/a" not in why
