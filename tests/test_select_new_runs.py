"""Five published 2025 runs not cited before issue 41 (docs/benchmarks/selection-runs.md,
"five published 2025 runs"): Megatron-Bridge performance summary archive, the 25.11 DGX-H100
Llama 3 8B row and four 25.09 DGX-B200 rows; two of them held out (reported apart, never used
to set anything). Each is a feasible layout under its publication's settings; the H100 row
lands within 15%."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_select_runs as R  # noqa: E402

SRC = ("NVIDIA Megatron-Bridge performance summary archive (docs/performance-summary-archive.md of "
       "NVIDIA-NeMo/Megatron-Bridge at 067f987), {rel} NeMo container, DGX-{sys} table")
# model, system, gpus, (kind, tp, cp, pp, ep, etp, mb, v), seq, gb, recompute, grad, precision, a2a,
# published tokens/s/GPU, release, held out
ROWS = [
    ("llama3-8b", "H100", 8, ("fsdp-tp", 1, 1, 1, 1, None, 1, None), 8192, 128, "none", "bf16", "fp8", False,
     14451, "25.11", False),
    ("llama3-8b", "B200", 8, ("megatron", 1, 1, 1, 1, None, 2, None), 8192, 128, "none", "bf16", "fp8", False,
     29994, "25.09", False),
    ("qwen3-30b-a3b", "B200", 8, ("megatron", 1, 1, 1, 8, None, 1, None), 4096, 512, "none", "bf16", "fp8", True,
     18066, "25.09", False),
    ("llama3-405b", "B200", 128, ("megatron", 4, 2, 8, 1, None, 1, 8), 8192, 64, "none", "bf16", "fp8", False,
     664, "25.09", True),
    ("qwen3-235b-a22b", "B200", 64, ("megatron", 1, 1, 8, 8, None, 1, 2), 4096, 1024, "none", "bf16", "fp8", True,
     4104, "25.09", True),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("new_runs"))
    out = []
    for model, system, gpus, layout, seq, gb, rc, grad, prec, a2a, pub, rel, held in ROWS:
        r = R.check_row(d, model, system, gpus, layout, seq, gb, rc, grad, prec, a2a, "tokens", pub,
                        SRC.format(rel=rel, sys=system))
        out.append((r, held))
    return out


def test_every_new_run_is_feasible_under_its_layout(results):
    assert len(results) >= 4 and sum(held for _, held in results) == 2
    for r, _ in results:
        pc = r["published_config"]
        assert pc["feasible"], (r["model"], r["system"], pc["reason"])
        assert pc["micro_batch"] == next(x[3][6] for x in ROWS if x[0] == r["model"] and x[1] == r["system"])


def test_the_h100_row_within_15_percent(results):
    r = next(r for r, _ in results if r["system"] == "H100")
    assert abs(r["ratio"] - 1) <= 0.15, r["ratio"]
