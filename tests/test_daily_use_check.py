"""Issue 42: `check` behaves like `sweep`: the same option declarations, the data check on by
default, one exit-status text in help and README, a foreign transport option refused, and an
unavailable transport answered with the one that is available."""
import re
from pathlib import Path

import pytest

from comm_bench import registry
from cbtest import assert_no_traceback, load_results, run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
EXIT_TEXT = "Exit status: 0 pass, 1 findings or a failed run, 2 bad input, 3 suspects left unconfirmed."


def _flags(help_text):
    return set(re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", help_text, re.M))


def test_check_declares_sweeps_options_and_only_its_transports():
    sweep = run_cli("sweep", "--help", check_rc=0).stdout
    check = run_cli("check", "--help", check_rc=0).stdout
    shared = {"--minbytes", "--maxbytes", "--stepfactor", "--iters", "--warmup_iters", "--check", "--dtype",
              "--redop", "--root", "--nprocs", "--output", "--force", "--timeout", "--addr", "--oversubscribe",
              "--confirm"}
    assert shared <= _flags(sweep) and shared <= _flags(check), shared - _flags(check)
    # the same help text for the data check in both
    def squash(text):
        return " ".join(text.split())
    assert "Check the data, on unless -c 0" in squash(check)
    # no option of a transport check refuses (rdma, grpc, cuda, tcp)
    for name in ("rdma", "grpc", "cuda"):
        for opt in registry.get(name).options:
            if not any(opt in registry.get(t).options for t in ("gloo", "mpi", "nccl", "torch-nccl")):
                assert opt.flag not in _flags(check), opt.flag


def test_exit_status_is_one_text_in_help_and_readme():
    check = " ".join(run_cli("check", "--help", check_rc=0).stdout.split())
    assert EXIT_TEXT in check
    assert EXIT_TEXT in README.read_text()


def test_check_refuses_an_option_of_another_transport(tmp_path):
    for args in (["check", "-t", "gloo", "--nccl-lib", "x"], ["sweep", "-t", "gloo", "--nccl-lib", "x"]):
        proc = run_cli(*args, "--nprocs", "2", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert_no_traceback(proc)
        assert proc.stderr.strip() == "comm-bench: --nccl-lib is an option of nccl, not of -t gloo"
    assert not list(tmp_path.iterdir())


def test_check_without_its_transport_names_the_available_one(tmp_path):
    if registry.get("nccl").probe()[0]:
        pytest.skip("nccl runs here")
    proc = run_cli("check", "--nprocs", "2", cwd=tmp_path)
    assert proc.returncode == 2
    assert_no_traceback(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "transport 'nccl' is not available here" in lines[0]
    assert "try -t gloo" in lines[0]


def test_check_checks_the_data_by_default(tmp_path):
    """A real 2-rank gloo check: every record's data checked (wrong 0, not None); -c 0 turns it off."""
    proc = run_cli("check", "-t", "gloo", "--nprocs", "2", "-b", "64K", "-e", "128K", "-n", "3", "-w", "1",
                   "--localize", "always", "--no-progress", "-o", tmp_path / "c.json", timeout=180, cwd=tmp_path)
    assert proc.returncode in (0, 1, 3), proc.stderr
    records = load_results(tmp_path / "c.json")["results"]
    assert {r["op"] for r in records} >= {"all_reduce", "sendrecv"}
    assert all(r["wrong"] == 0 for r in records), [r["wrong"] for r in records]
    assert "N/A" not in proc.stdout
    proc = run_cli("check", "-t", "gloo", "--nprocs", "2", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
                   "--localize", "never", "-c", "0", "--no-progress", "-o", tmp_path / "u.json", timeout=180,
                   cwd=tmp_path)
    assert all(r["wrong"] is None for r in load_results(tmp_path / "u.json")["results"])
