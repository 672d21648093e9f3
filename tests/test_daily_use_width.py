"""Issue 42: every table fits 80 columns by default (real runs); --wide gives the full form;
output to a file or a pipe is never cut short."""
import json

import pytest

from cbtest import load_results, run_cli

# prose from validate and the confirm phase (sentences, not tables), and the last line naming the file
PROSE = ("# verdict:", "# confirm verdict:", "# results:")


def _wide_lines(text):
    return [ln for ln in text.splitlines() if len(ln) > 80 and not ln.startswith(PROSE)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("width")
    out = {}
    for name, args in {"tcp": ("-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "1K", "-e", "1M",
                               "-f", "32", "--confirm", "0"),
                       "gloo": ("-t", "gloo", "--op", "all_reduce,alltoall", "--nprocs", "2", "-b", "1K",
                                "-e", "64K", "-f", "8"),
                       "lat": ("-t", "tcp", "--mode", "lat", "--nprocs", "3", "--pattern", "pairwise",
                               "-b", "8", "-e", "64", "-f", "8", "-n", "1000", "--confirm", "0")}.items():
        path = d / f"{name}.json"
        p = run_cli("sweep", *args, "-w", "1", "--no-progress", "-o", path, timeout=300)
        assert p.returncode in (0, 1, 3), p.stderr[-2000:]
        out[name] = (path, p.stdout)
    return out


def test_sweep_and_report_tables_fit_80_columns(runs):
    for name, (path, stdout) in runs.items():
        assert not _wide_lines(stdout), (name, _wide_lines(stdout))
        report = run_cli("report", path, check_rc=0).stdout
        assert not _wide_lines(report), (name, _wide_lines(report))
    # the collective table has no always-empty pair column; the pair table has one
    assert "pair" not in next(ln for ln in runs["gloo"][1].splitlines() if "busbw" in ln).split()
    assert "pair" in next(ln for ln in runs["tcp"][1].splitlines() if "busbw" in ln).split()
    # a 3-rank busbw matrix in 80 columns, and a latency table with every percentile (-n 1000)
    assert "src rank (rows) -> dst rank (columns)" in runs["tcp"][1]
    head = next(ln for ln in runs["lat"][1].splitlines() if "median" in ln).split()
    assert {"p99", "p99.9", "max"} <= set(head)


def test_wide_gives_the_nccl_tests_columns(runs):
    path, _ = runs["gloo"]
    wide = run_cli("report", path, "--wide", check_rc=0).stdout
    head = next(ln for ln in wide.splitlines() if "busbw" in ln).split()
    assert head[1:6] == ["size", "count", "type", "redop", "root"], head
    assert max(len(ln) for ln in wide.splitlines()) > 80
    rec = load_results(path)["results"][0]
    row = next(ln for ln in wide.splitlines() if ln.split()[:1] == [str(rec["size"])])
    assert row.split()[2:5] == ["float32", "sum", "-1"], row


def test_compare_topo_list_doctor_check_fit_80_columns(runs, tmp_path):
    a, _ = runs["tcp"]
    for args in (["compare", a, a], ["topo", "--fixture", "dgx-h100"], ["topo"], ["list"], ["doctor"]):
        out = run_cli(*args).stdout
        assert out.strip() and not _wide_lines(out), (args, _wide_lines(out))
    p = run_cli("check", "-t", "gloo", "--nprocs", "2", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
                "--localize", "always", "--no-progress", "-o", tmp_path / "c.json", timeout=300)
    table = p.stdout.split("validate:")[0]          # validate's own report follows the tables
    assert p.returncode in (0, 1, 3) and "busbw" in table and not _wide_lines(table), _wide_lines(table)


def test_select_into_a_file_is_not_cut_short(runs):
    """stdout is a pipe here: no cell cut to "fra…", no cell wrapped over lines."""
    a, _ = runs["tcp"]
    out = run_cli("select", a, "--model", "llama2-7b", "--gpu", "H100", check_rc=0).stdout
    assert "…" not in out
    rows = [ln for ln in out.splitlines() if ln.lstrip().startswith(("*", "zero-", "ddp", "fsdp"))]
    assert any("DeepSpeed ZeRO-1" in ln for ln in rows), rows
    res = json.loads(run_cli("select", a, "--model", "llama2-7b", "--gpu", "H100", "--json", check_rc=0).stdout)
    for c in res["candidates"]:
        if not c["feasible"] and c["layout"] in out:
            assert f"{c['layout']} does not fit: {c['reason']}" in out
