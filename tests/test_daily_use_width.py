"""Issue 42: every table fits 80 columns by default (real runs); --wide gives the full form;
output to a file or a pipe is never cut short."""
import json

import pytest

from cbtest import load_results, run_cli

# into a pipe, prose stays one line each (for grep and scripts): validate's and the sweep's
# verdicts; on a terminal it wraps (test_every_command_prose_fits_80_columns)
PROSE = ("# verdict:", "# confirm verdict:", "# results:", "# check:")


def _wide_lines(text, keep=PROSE):
    return [ln for ln in text.splitlines() if len(ln) > 80 and not ln.startswith(keep)
            and " " in ln.strip()]      # a lone word (a path, a URL) cannot wrap


def run_tty(*args, cwd, timeout=300):
    """`comm-bench ARGS` on an 80 x 50 terminal (a pseudo-terminal): (exit status, what it
    showed, colours and carriage returns taken out)."""
    import fcntl
    import os
    import pty
    import re
    import select
    import struct
    import subprocess
    import termios
    import time
    from cbtest import COMM_BENCH
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    env = dict(os.environ, COLUMNS="80", LINES="50", TERM="xterm")
    env.pop("COMM_BENCH_DEBUG", None)
    p = subprocess.Popen([COMM_BENCH, *map(str, args)], stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                         env=env, close_fds=True)
    os.close(slave)
    chunks, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([master], [], [], 1)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:         # the terminal's other end closed: the command is done
                break
            if not data:
                break
            chunks.append(data)
    else:
        p.kill()
        raise AssertionError(f"{args}: still running after {timeout} s")
    os.close(master)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return p.wait(), re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


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
    said = [ln for ln in table.splitlines() if ln.startswith("# check:")]     # prose: one whole line
    assert len(said) == 1 and said[0].endswith("localizing with pairwise-concurrent rounds"), said


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


def test_every_command_prose_fits_80_columns(tmp_path):
    """On a terminal, prose too: validate's check, FINDING and verdict lines (one document and
    several, with --baseline), the sweep's and check's closing verdicts, report's and
    simulate's lines, the reference table, every --help. Run as a user would, in the folder
    of the results."""
    import shutil
    from test_daily_use_validate import _slow_host_doc
    _slow_host_doc(tmp_path)
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "1M", "-e", "2M",
                "-n", "3", "-w", "1", "--confirm", "0", "--no-progress", "-o", tmp_path / "tcp.json", timeout=300)
    assert p.returncode in (0, 1, 3), p.stderr[-2000:]
    shutil.copy(tmp_path / "tcp.json", tmp_path / "tcp2.json")
    for args in (["validate", "tcp.json"], ["validate", "slow.json"], ["validate", "tcp.json", "slow.json"],
                 ["validate", "slow.json", "--baseline", "slow.json"], ["report", "--reference"],
                 ["report", "slow.json"], ["heatmap", "tcp.json", "-o", "h.png"], ["plot", "tcp.json", "-o", "p.png"],
                 ["simulate", "--nodes", "64", "-o", "sim.json"], ["compare", "tcp.json", "tcp2.json"],
                 ["sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "1M", "-e", "1M", "-n", "3",
                  "-w", "1", "--confirm", "0", "--no-progress", "-o", "tty.json"],
                 ["check", "-t", "gloo", "--nprocs", "2", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
                  "--localize", "always", "--no-progress", "-o", "c.json"], ["list"], ["doctor"], ["topo"]):
        rc, out = run_tty(*args, cwd=tmp_path)
        assert rc in (0, 1, 3) and out.strip(), (args, rc, out[-1000:])
        assert not _wide_lines(out, ()), (args, _wide_lines(out, ()))
    rc, out = run_tty("validate", "slow.json", cwd=tmp_path)
    assert "FINDING [bad-host]" in out and "# verdict" not in out
    rc, out = run_tty("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1M", "-e", "1M", "-n", "3", "-w", "1",
                      "--no-progress", "-o", "v.json", cwd=tmp_path)
    assert "# verdict: " in out, out[-1000:]
    # the default confirm phase's line and the results line wrap too (no suspects: 87 characters)
    assert "# confirm" in out and not _wide_lines(out, ()), _wide_lines(out, ())
    for cmd in ("", "sweep", "check", "report", "validate", "compare", "heatmap", "plot", "topo", "list",
                "doctor", "simulate"):                 # select: test_select_prose_fits_80_columns
        rc, out = run_tty(*([cmd] if cmd else []), "--help", cwd=tmp_path)
        assert rc == 0 and not _wide_lines(out, ()), (cmd, _wide_lines(out, ()))


def test_prose_into_a_pipe_is_one_line_each(tmp_path):
    """Into a file or a pipe a finding stays one line, whole (grep FINDING finds all of it)."""
    from test_daily_use_validate import _slow_host_doc
    out = run_cli("validate", _slow_host_doc(tmp_path), check_rc=1).stdout
    finding = [ln for ln in out.splitlines() if ln.startswith("FINDING [bad-host]")]
    assert len(finding) == 1 and finding[0].endswith(")") and "is slow" in finding[0], out


def test_select_prose_fits_80_columns(runs, tmp_path):
    a, _ = runs["tcp"]
    rc, out = run_tty("select", a, "--model", "llama2-7b", "--gpu", "H100", cwd=tmp_path)
    assert rc == 0 and not _wide_lines(out, ()), _wide_lines(out, ())
    assert not _wide_lines(run_tty("select", "--help", cwd=tmp_path)[1], ())
