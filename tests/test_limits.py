"""Limits and launcher variables: what the host cannot run, or the launcher got wrong,
is refused at once with one line and exit 2 (never a hang, never an internal error),
and any --iters the loop accepts gives a record."""
import os
import subprocess
import sys
import time

import pytest

from comm_bench.run.limits import check_host, mem_available
from comm_bench.system.netutil import free_port
from comm_bench.registry import get

from cbtest import assert_no_traceback, load_results, run_cli


def _too_big():
    """A size whose send + receive buffers on 2 ranks exceed this host's memory."""
    have = mem_available()
    size = 1 << 20
    while size < have:
        size <<= 1
    return f"{size >> 20}M"


@pytest.mark.parametrize("args,words", [
    (["--nprocs", "100000"], "more than this host can run"),
    (["-e", "__too_big__"], "available"),
    (["-e", "99999999999999999999999G"], "larger than any buffer"),
    (["--timeout", "nan"], "--timeout"),
    (["--timeout", "inf"], "--timeout"),
    (["-f", "nan"], "--stepfactor"),
    (["-n", "1000001"], "--iters"),
])
def test_bad_values_are_refused_at_once(tmp_path, args, words):
    args = [_too_big() if a == "__too_big__" else a for a in args]
    start = time.monotonic()
    proc = run_cli("sweep", *args, "-o", tmp_path / "r.json", timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert time.monotonic() - start < 30
    assert not (tmp_path / "r.json").exists()


def test_64g_is_refused_where_memory_is_short(tmp_path):
    if mem_available() > 2 * 2 * (64 << 30):
        pytest.skip("this host has the memory for -e 64G")
    proc = run_cli("sweep", "-e", "64G", "-o", tmp_path / "r.json", timeout=60)
    assert proc.returncode == 2 and "GiB" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("env,words", [
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "RANK='abc'"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "rank -1 is outside"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 is outside"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "99999"}, "MASTER_PORT=99999"),
    ({"COMM_BENCH_TIMEOUT": "nan"}, "--timeout"),
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "no-such-host.invalid"}, "does not resolve"),
])
def test_bad_launcher_variables_are_refused_at_once(tmp_path, env, words):
    env = dict({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}, **env)
    start = time.monotonic()
    proc = run_cli("sweep", "-o", tmp_path / "r.json", env=env, timeout=90)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert time.monotonic() - start < 30  # not the 60 s default timeout


def test_oversubscribe_lifts_the_limits():
    with pytest.raises(Exception):  # noqa: B017 - any refusal; the point is that one comes
        check_host(get("tcp"), 1 << 50, 2, 100000, spawning=True, oversubscribe=False)
    check_host(get("tcp"), 1 << 50, 2, 100000, spawning=True, oversubscribe=True)


@pytest.mark.slow
def test_half_a_million_iterations_give_a_record(tmp_results):
    """Every sample reaches rank 0 through the store, whose messages are capped at 8 MB."""
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "8", "-n", "500000",
                   "-w", "0", "--no-progress", "-o", tmp_results, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    doc = load_results(tmp_results)
    assert doc["status"] == "ok" and len(doc["results"]) == 1
    rec = doc["results"][0]
    assert rec["iters"] == 500000 and rec["time_us"] > 0 and rec["latency_us"]["p999"] > 0


def test_setup_failure_is_one_line_and_claims_no_results_file(tmp_path):
    """Every rank fails before the document exists: one line, and no 'results ... are in X'."""
    proc = run_cli("sweep", "--nprocs", "2", "--addr", "192.0.2.1", "--timeout", "10",
                   "-o", tmp_path / "r.json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot listen on 192.0.2.1" in lines[0], proc.stderr
    assert "stopping" not in lines[0] and "results" not in lines[0]
    assert not (tmp_path / "r.json").exists()


def test_internal_error_is_not_exit_1(tmp_path):
    """A bug (here: a command that raises) exits 70, never 1, which means a failed run."""
    (tmp_path / "boom_cmd.py").write_text(
        "import click\n@click.command()\ndef boom():\n    raise RuntimeError('a bug')\n")
    code = ("import sys\nfrom comm_bench import cli\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "cli.COMMANDS['boom'] = 'boom_cmd:boom'\ncli.main(['boom'])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "COMM_BENCH_DEBUG"})
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "comm-bench: internal error: RuntimeError: a bug (rerun with --debug for the traceback, "
        "and please report it)"]
