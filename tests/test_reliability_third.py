"""Reliability, third pass (issue 27): every output a user names is written as a regular
file only (never into a device node, FIFO or socket, never through a link), a rank
paused for less than --timeout does not fail the run, and the lock file's errors and
leftovers (docs/reliability.md, "Every file comm-bench writes" and "Process lifetime")."""
import os
import signal
import socket
import stat
import subprocess
import time

import pytest

from comm_bench.sizes import size_range

from cbtest import COMM_BENCH, assert_no_traceback, load_results, rank_pids, run_cli
from test_failures import wait_for_records

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def pairs_json(tmp_path_factory):
    """A small real pairwise document every writer can draw (heatmap needs pairs)."""
    path = tmp_path_factory.mktemp("pairs") / "pairs.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "--pattern", "pairwise", "-b", "1K", "-e", "64K", "-n", "5",
            "--no-progress", "-o", path, timeout=120, check_rc=0)
    return path.read_bytes()


def pair_document(path, data):
    path.write_bytes(data)
    return path


def writers(doc):
    """(command line, what) of every writer of a file named by the user, given its target."""
    return {
        "report --prometheus": lambda t: ["report", doc, "--prometheus", t],
        "report --html": lambda t: ["report", doc, "--html", t],
        "heatmap -o (png)": lambda t: ["heatmap", doc, "-o", t],
        "heatmap -o (html)": lambda t: ["heatmap", doc, "-o", t],
        "plot -o": lambda t: ["plot", doc, "-o", t],
        "validate --junit": lambda t: ["validate", doc, "--junit", t],
        "compare --html": lambda t: ["compare", doc, doc, "--html", t],
        "sweep -o": lambda t: ["sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "-n", "2",
                               "--no-progress", "-o", t],
    }


EXT = {"heatmap -o (png)": ".png", "plot -o": ".png", "heatmap -o (html)": ".html"}


def special_file(folder, kind, name):
    """A node of `kind` made in the test's own folder (never a system device)."""
    path = folder / name
    if kind == "char device":      # the numbers of /dev/full: writing into it would fail, replacing it is the bug
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    return path


@needs_root
@pytest.mark.parametrize("kind", ["char device", "FIFO", "socket"])
@pytest.mark.parametrize("writer", list(writers("x")))
def test_writers_refuse_device_fifo_and_socket(tmp_path, pairs_json, kind, writer):
    doc = str(pair_document(tmp_path / "r.json", pairs_json))
    node = special_file(tmp_path, kind, "out" + EXT.get(writer, ""))
    before = os.lstat(node)
    proc = run_cli(*writers(doc)[writer](node), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert_no_traceback(proc)
    line = one_line(proc.stderr)
    assert str(node.name) in line and ("device" in line or "FIFO" in line or "socket" in line), line
    after = os.lstat(node)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    assert after.st_rdev == before.st_rdev
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.json", node.name])  # no temporary left


@pytest.mark.parametrize("writer", list(writers("x")))
def test_writers_refuse_a_symlink_and_keep_its_target(tmp_path, pairs_json, writer):
    doc = str(pair_document(tmp_path / "r.json", pairs_json))
    real = tmp_path / "precious.txt"
    real.write_text("keep me\n")
    link = tmp_path / ("out" + EXT.get(writer, ""))
    link.symlink_to(real)
    proc = run_cli(*writers(doc)[writer](link), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert "symbolic link" in one_line(proc.stderr)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "keep me\n"


@pytest.mark.parametrize("writer", [w for w in writers("x") if w != "sweep -o"])
def test_writers_replace_a_regular_file_atomically(tmp_path, pairs_json, writer):
    """The other side of the rule: a regular file is replaced (a new inode renamed over it),
    keeping its permissions, with no temporary left."""
    doc = str(pair_document(tmp_path / "r.json", pairs_json))
    out = tmp_path / ("out" + EXT.get(writer, ""))
    out.write_text("old")
    out.chmod(0o640)
    inode = out.stat().st_ino
    proc = run_cli(*writers(doc)[writer](out), cwd=tmp_path, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-800:]   # validate: 1 = findings
    assert out.stat().st_ino != inode and out.read_bytes() != b"old" and out.stat().st_size > 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.json", out.name])


def test_topo_record_refuses_a_planted_link(tmp_path):
    out = tmp_path / "tree"
    out.mkdir()
    (tmp_path / "precious.txt").write_text("keep me\n")
    (out / "meta.json").symlink_to(tmp_path / "precious.txt")
    proc = run_cli("topo", "--record", out, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "symbolic link" in one_line(proc.stderr)
    assert (tmp_path / "precious.txt").read_text() == "keep me\n"


# ----------------------------------------------------------------------------- -o checked up front
def test_a_results_name_too_long_for_its_temporary_is_refused_before_the_run(tmp_path):
    """240 characters fit the file system (255), but not the temporary beside it
    (.NAME.<16 hex>.tmp): refused at once, not after the benchmark ran."""
    name = "r" * 235 + ".json"
    t = time.monotonic()
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "1M", "-n", "50",
                   "--no-progress", "-o", name, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-800:]
    line = one_line(proc.stderr)
    assert "shorter name" in line and "record(s)" not in line
    assert time.monotonic() - t < 30
    assert list(tmp_path.iterdir()) == []


def test_a_hand_made_tool_field_is_not_a_document_to_replace(tmp_path):
    """{"tool": "comm-bench"} with no results is someone's file, not a run's document."""
    out = tmp_path / "r.json"
    out.write_text('{"tool": "comm-bench"}')
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "-n", "2",
                   "--no-progress", "-o", out, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "--force" in one_line(proc.stderr)
    assert out.read_text() == '{"tool": "comm-bench"}'
    for more in (["--force"], []):     # with --force; then a document a run wrote is kept (-> r.1.json)
        run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "-n", "2", "--no-progress",
                "-o", out, *more, cwd=tmp_path, timeout=120, check_rc=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.1.json", "r.json"]


# ----------------------------------------------------------------------------- the lock file
def test_a_lock_left_by_kill_9_is_taken_over(tmp_path):
    """kill -9 of the run leaves `.r.json.lock`; its holder is dead, so the next run takes
    it over, and removes it when done."""
    out = tmp_path / "r.json"
    parent = subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "16M",
                               "-n", "200", "--no-progress", "-o", out], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_records(out, 1)
    parent.kill()
    parent.wait()
    assert (tmp_path / ".r.json.lock").exists()
    # --force: this very file (without it the killed run's document is kept and r.1.json written)
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "-n", "2", "--no-progress",
                   "--force", "-o", out, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_dead_writers_temporary_goes_when_the_lock_is_taken(tmp_path):
    """A run killed between writing its document's temporary and renaming it leaves
    `.r.json.<16 hex>.tmp` (a CI run found one beside the next run's results): the next
    holder of r.json's lock removes it; another target's temporary and a look-alike stay."""
    from comm_bench.results.safefile import Target
    dead, other, alike = ".r.json.0123456789abcdef.tmp", ".q.json.0123456789abcdef.tmp", ".r.json.notours.tmp"
    for name in (dead, other, alike):
        (tmp_path / name).write_text("{")
    target = Target(str(tmp_path / "r.json"))
    try:
        assert target.lock()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other, alike, ".r.json.lock"])
    finally:
        target.unlock()
        target.close()


@needs_root
def test_read_only_file_system_lock_error_names_it(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "--no-progress",
                       "-o", ro / "r.json", cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, proc.stderr
        line = one_line(proc.stderr)
        assert "read-only" in line and "remove it" not in line, line
    finally:
        subprocess.run(["umount", str(ro)])


# ----------------------------------------------------------------------------- a paused rank
PAUSE_SWEEP = ["sweep", "-t", "tcp", "--nprocs", "2", "-d", "uint8", "-b", "1K", "-e", "1M", "-f", "1.05",
               "-n", "300", "-w", "1", "--no-progress", "--timeout", "10"]


@pytest.mark.slow
@pytest.mark.parametrize("victim", [1, 0])
def test_a_rank_paused_for_less_than_the_timeout_does_not_fail_the_run(tmp_path, victim):
    """SIGSTOP for 6 s, then SIGCONT, with --timeout 10 (a GC pause, a swap-in, a debugger):
    the run completes, exit 0, every size measured. Rank 0 hosts the store: its pause
    stalls every rank's store calls too."""
    out = tmp_path / "r.json"
    parent = subprocess.Popen([COMM_BENCH, *PAUSE_SWEEP, "-o", out], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_records(out, 3)
        pid = rank_pids(parent.pid)[victim]
        os.kill(pid, signal.SIGSTOP)
        time.sleep(6)
        os.kill(pid, signal.SIGCONT)
        _, err = parent.communicate(timeout=300)
    finally:
        parent.kill()
    assert parent.returncode == 0, err[-1500:]
    doc = load_results(out)
    assert doc["status"] == "ok"
    expected = size_range(1024, 1 << 20, 1.05)
    assert [r["size"] for r in doc["results"]] == expected
    assert len(doc["results"]) > 100 and all(r["wrong"] == 0 for r in doc["results"] if "wrong" in r)
