"""nccl-tests habits (#26 item 5): `-o sum` is its reduction op, not a results file named
`sum`; its -d spellings (float, half, double); --redop and --root (-r), run for real by
the framework transports with the data checked against that reduction and root."""
import re

import numpy as np
import pytest

from comm_bench import ops as ops_mod
from cbtest import load_results, run_cli


def one_line(p):
    return len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_o_with_a_redop_name_is_the_reduction_not_a_file(tmp_path):
    p = run_cli("sweep", "-t", "gloo", "--nprocs", "2", "--op", "all_reduce", "-b", "1K", "-e", "1K",
                "-n", "3", "-c", "-o", "max", "--no-progress", cwd=tmp_path, check_rc=0)
    assert not (tmp_path / "max").exists()
    said = [line for line in p.stderr.splitlines() if "-o max" in line]
    assert said == ["comm-bench: -o max is nccl-tests' reduction op: running --redop max, results in "
                    "results.json (a file named max: -o ./max)"]
    doc = load_results(tmp_path / "results.json")
    assert [(r["redop"], r["wrong"]) for r in doc["results"]] == [("max", 0)]
    assert "# type float32, redop max\n" in p.stdout
    wide = run_cli("report", tmp_path / "results.json", "--wide", check_rc=0).stdout   # nccl-tests' columns
    assert re.search(r"^\s+1024\s+256\s+float32\s+max\s", wide, re.M)
    # a path is a file, even when it is named like a reduction
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "3", "-o", "./sum",
            "--no-progress", cwd=tmp_path, check_rc=0)
    assert load_results(tmp_path / "sum")["results"][0]["op"] == "sendrecv"


@pytest.mark.parametrize("args, fragment", [
    (["-o", "max", "--redop", "min"], "-o max (nccl-tests' reduction op) and --redop min disagree"),
    (["--redop", "avg"], "transport 'gloo' runs all_reduce with --redop sum, prod, max, min, not avg"),
    (["--redop", "mulsum"], "Invalid value for '--redop'"),
    (["-r", "2"], "--root 2: the root must be a rank, 0 to 1"),
    (["-d", "quad"], "quad"),
])
def test_bad_redop_root_dtype_is_one_line(tmp_path, args, fragment):
    p = run_cli("sweep", "-t", "gloo", "--nprocs", "2", "-b", "1K", "-e", "1K", *args, cwd=tmp_path, check_rc=2)
    assert fragment in p.stderr and one_line(p), p.stderr
    assert not (tmp_path / "results.json").exists()


def test_expectations_differ_per_redop_and_root():
    """The data check can tell the reductions and roots apart, so a transport that ran sum
    (or root 0) when asked for another one counts wrong elements."""
    o = ops_mod.get("all_reduce")
    want = {r: o.expected(0, 3, 10, redop=r) for r in ("sum", "prod", "max", "min")}
    for a in want:
        for b in want:
            if a != b:
                assert np.count_nonzero(want[a] != want[b]) >= 8, (a, b)   # (1+2+3 = 1*2*3 at index 0)
    b = ops_mod.get("broadcast")
    assert np.all(b.expected(0, 3, 10, root=1) != b.expected(0, 3, 10, root=0))
    assert ops_mod.get("reduce").expected(1, 3, 10, root=2) is None


@pytest.mark.parametrize("transport, redop", [("gloo", "max"), ("gloo", "prod"), ("mpi", "min")])
def test_redop_and_root_run_and_check(tmp_path, transport, redop):
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", transport, "--nprocs", "3", "--op", "all_reduce,reduce,reduce_scatter,broadcast",
            "-b", "1K", "-e", "1K", "-n", "3", "-w", "1", "-c", "--redop", redop, "-r", "2", "-o", out,
            "--no-progress", timeout=300, check_rc=0)
    doc = load_results(out)
    got = {r["op"]: (r["redop"], r["root"], r["wrong"]) for r in doc["results"]}
    assert got == {"all_reduce": (redop, None, 0), "reduce": (redop, 2, 0),
                   "reduce_scatter": (redop, None, 0), "broadcast": (None, 2, 0)}
    assert doc["options"]["redop"] == redop and doc["options"]["root"] == 2


@pytest.mark.parametrize("theirs, ours", [("float", "float32"), ("half", "float16"), ("double", "float64")])
def test_nccl_tests_dtype_spellings(tmp_path, theirs, ours):
    out = tmp_path / "d.json"
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "3", "-d", theirs, "-o", out,
                "--no-progress", check_rc=0)
    assert {r["dtype"] for r in load_results(out)["results"]} == {ours}
    assert f"# type {ours}\n" in p.stdout         # said once above the 80-column table
