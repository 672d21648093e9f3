"""Every command's --help, and bad input: one line, exit 2, no traceback."""
import json

import pytest

from comm_bench.cli import COMMANDS

from cbtest import assert_no_traceback, run_cli


@pytest.mark.parametrize("command", [[]] + [[name] for name in COMMANDS])
def test_help_of_every_command(command):
    proc = run_cli(*command, "--help", check_rc=0)
    assert "Usage:" in proc.stdout and "--help" in proc.stdout


def test_sweep_help_lists_conventions_and_transport_options():
    out = run_cli("sweep", "--help", check_rc=0).stdout
    for flag in ("-b, --minbytes", "-e, --maxbytes", "-f, --stepfactor", "-n, --iters",
                 "-w, --warmup_iters", "-c, --check", "--nprocs", "--pattern", "--timeout", "-o, --output"):
        assert flag in out, flag


@pytest.mark.parametrize("args,fragment", [
    (["sweep", "-b", "0"], "at least 1 byte"),
    (["sweep", "-e", "12Q"], "not a size"),
    (["sweep", "-b", "1M", "-e", "1K"], "larger than"),
    (["sweep", "-f", "1"], "greater than 1"),
    (["sweep", "--transport", "carrier-pigeon"], "unknown transport"),
    (["sweep", "--op", "all_reduce"], "has no op 'all_reduce'"),
    (["sweep", "-t", "gloo", "--pattern", "ring"], "unknown --pattern"),
    (["sweep", "-t", "gloo", "--dtype", "float128"], "does not take --dtype"),
    (["sweep", "-n", "0"], "--iters"),
    (["sweep", "-c", "yes"], "-c/--check"),
    (["sweep", "--nprocs", "1", "--pattern", "pairwise"], "needs at least 2 ranks"),
    (["sweep", "--no-such-flag"], "No such option"),
    (["sweep", "-n", "many"], "not a valid integer"),
    (["report", "/nonexistent/results.json"], "not found"),
    (["report", "--format", "xml", "x.json"], "xml"),
    (["no-such-command"], "No such command"),
])
def test_bad_input_is_one_line_exit_2(args, fragment, tmp_path):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert_no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert fragment in lines[0]
    assert not (tmp_path / "results.json").exists()


def test_report_of_a_file_that_is_not_results(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    proc = run_cli("report", bad)
    assert proc.returncode == 2 and "not a comm-bench results document" in proc.stderr
    assert_no_traceback(proc)


def test_env_defaults(tmp_path):
    proc = run_cli("sweep", env={"COMM_BENCH_MINBYTES": "0"}, cwd=tmp_path)
    assert proc.returncode == 2 and "at least 1 byte" in proc.stderr


def test_doctor_says_what_is_there(tmp_path):
    proc = run_cli("doctor", "--json", check_rc=0)
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert checks["native _C (core harness + tcp)"]["ok"]
    assert checks["transport tcp"]["ok"]
    for c in checks.values():
        assert c["ok"] or c["detail"], c  # every absence says why
    text = run_cli("doctor", check_rc=0).stdout
    assert "[devices]" in text and "GPUDirect" in text


def test_list_shows_transports_and_ops():
    rows = {r["transport"]: r for r in json.loads(run_cli("list", "--json", check_rc=0).stdout)}
    assert {"tcp", "gloo", "mpi"} <= set(rows)
    assert "all_reduce" in rows["gloo"]["ops"] and rows["tcp"]["ops"] == ["sendrecv"]
    assert "tcp" in run_cli("list", check_rc=0).stdout
