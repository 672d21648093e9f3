"""The results file keeps its promises (docs/reliability.md, "The results file"): one
writer per file, atomic replacement (a full disk leaves the previous valid document),
foreign files and devices are not overwritten, and reads are bounded."""
import json
import os
import subprocess
import time

import pytest

from comm_bench.results import document as results
from comm_bench.errors import RunFailed, UsageError

from cbtest import COMM_BENCH, assert_no_traceback, load_results, run_cli
from test_failures import wait_for_records
from test_results import _doc, _record

SHORT = ["-b", "8", "-e", "64K", "-n", "5", "-w", "1", "--no-progress"]
LONG = ["-b", "8", "-e", "32M", "-n", "100", "-w", "2", "--no-progress", "--timeout", "30"]


def sweep_proc(args, cwd):
    return subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "2", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def one_line(proc_err):
    lines = [ln for ln in proc_err.splitlines() if ln.strip()]
    assert len(lines) == 1, proc_err
    return lines[0]


# ----------------------------------------------------------------------------- one writer per file
def test_second_sweep_on_the_same_file_is_refused(tmp_path):
    # (without --force the second run would keep the file and write results.1.json: test_output_keep.py)
    first = sweep_proc(["-o", "results.json", *LONG], tmp_path)
    try:
        wait_for_records(tmp_path / "results.json")
        second = run_cli("sweep", "--nprocs", "2", "--force", *SHORT, cwd=tmp_path, timeout=120)
        assert second.returncode == 2, second.stderr
        assert_no_traceback(second)
        assert "being written by another comm-bench run" in one_line(second.stderr)
        assert f"pid {first.pid}" in second.stderr
    finally:
        out, err = first.communicate(timeout=400)
    assert first.returncode == 0, err[-2000:]
    doc = load_results(tmp_path / "results.json")
    assert doc["status"] == "ok" and doc["command"][-len(LONG):] == LONG


def test_two_sweeps_started_together_one_writes(tmp_path):
    # --force: both want this very file (without it the second takes results.1.json: test_output_keep.py)
    procs = [sweep_proc(["-o", "results.json", "--force", *SHORT], tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [(p.returncode, e[-500:]) for p, (_, e) in zip(procs, outs)]
    doc = results.load(str(tmp_path / "results.json"))
    assert doc["status"] == "ok" and doc["results"]
    assert sorted(os.listdir(tmp_path)) == ["results.json"]   # no lock or temporary left


# ----------------------------------------------------------------------------- what -o may replace
def test_foreign_file_is_kept_unless_forced(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    proc = run_cli("sweep", "--nprocs", "2", "-o", notes, *SHORT, cwd=tmp_path)
    assert proc.returncode == 2 and "--force" in one_line(proc.stderr)
    assert notes.read_text() == "my notes\n"
    run_cli("sweep", "--nprocs", "2", "-o", notes, "--force", *SHORT, cwd=tmp_path, check_rc=0)
    assert load_results(notes)["status"] == "ok"
    # a comm-bench document (the one just written) is kept, the run writing the next numbered
    # name; an empty file is replaced without asking
    run_cli("sweep", "--nprocs", "2", "-o", notes, *SHORT, cwd=tmp_path, check_rc=0)
    assert load_results(tmp_path / "notes.1.txt")["status"] == "ok"
    empty = tmp_path / "empty.json"
    empty.write_text("")
    run_cli("sweep", "--nprocs", "2", "-o", empty, *SHORT, cwd=tmp_path, check_rc=0)


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null"])
def test_output_to_a_device_is_refused_at_once(tmp_path, target):
    t = time.monotonic()
    proc = run_cli("sweep", "--nprocs", "2", "-o", target, *SHORT, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-1000:]
    assert "not a regular file" in one_line(proc.stderr)
    assert time.monotonic() - t < 60
    assert os.path.exists(target) and not os.path.isfile(target)  # the device is still a device


def test_output_folder_missing_is_one_line(tmp_path):
    proc = run_cli("sweep", "--nprocs", "2", "-o", tmp_path / "nope" / "r.json", *SHORT, cwd=tmp_path)
    assert proc.returncode == 2 and "nope" in one_line(proc.stderr)


# ----------------------------------------------------------------------------- atomic replacement
def test_writer_replaces_through_fresh_temporaries(tmp_path):
    path = tmp_path / "r.json"
    w = results.ResultsWriter(str(path), _doc())
    inode = path.stat().st_ino
    w.append(_record(8))
    assert path.stat().st_ino != inode          # a new file renamed over the old one
    assert sorted(os.listdir(tmp_path)) == [".r.json.lock", "r.json"]
    with pytest.raises(UsageError, match="being written by another"):
        results.ResultsWriter(str(path), _doc())
    w.close("ok")
    assert os.listdir(tmp_path) == ["r.json"]
    assert results.load(str(path))["results"][0]["size"] == 8


@pytest.fixture
def small_disk(tmp_path):
    """mount(kib) -> a tmpfs of that size of our own (root only), unmounted afterwards."""
    mnt = tmp_path / "small"
    mnt.mkdir()

    def mount(kib):
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs",
                                                str(mnt)], capture_output=True).returncode:
            pytest.skip("needs root to mount a small tmpfs")
        return mnt
    yield mount
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_keeps_the_last_valid_document(small_disk):
    small_disk = small_disk(64)
    path = small_disk / "r.json"
    w = results.ResultsWriter(str(path), _doc())
    with pytest.raises(RunFailed) as err:
        for size in range(8, 8 * 10000, 8):
            w.append(_record(size))
    msg = str(err.value)
    assert "small (tmpfs" in msg and "is full" in msg and "\n" not in msg
    doc = results.load(str(path))           # still complete and valid
    assert doc["status"] == "running" and 10 < len(doc["results"]) == w.written
    w.close("failed", {"rank": 0, "host": "h", "reason": msg})
    assert [n for n in os.listdir(small_disk)] == ["r.json"]


FULL_DISK_ARGS = ["--nprocs", "2", "-t", "tcp", "--pattern", "pairwise", "-n", "3", "-w", "0", "--no-progress"]


def sweep_onto_a_full_disk(tmp_path, small_disk, args=FULL_DISK_ARGS):
    """(mount, output path, the finished run) of a sweep whose output file system has room
    for two copies of this host's header and 2 records: it fills during the run."""
    probe = tmp_path / "probe.json"
    run_cli("sweep", *args, "-b", "8", "-e", "8", "-o", probe, cwd=tmp_path, check_rc=0)
    mnt = small_disk((2 * probe.stat().st_size + (8 << 10)) // 4096 * 4 + 4)
    out = mnt / "r.json"
    proc = run_cli("sweep", *args, "-b", "8", "-e", "64M", "-o", out, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert_no_traceback(proc)
    assert "internal error" not in proc.stderr
    return mnt, out, proc


def test_sweep_on_a_full_disk_says_so(tmp_path, small_disk):
    small_disk, out, proc = sweep_onto_a_full_disk(tmp_path, small_disk)
    named = [ln for ln in proc.stderr.splitlines() if f"the file system at {small_disk} (tmpfs" in ln]
    assert named and "is full" in named[0], proc.stderr
    doc = results.load(str(out))
    assert doc["results"], "the records written before the disk filled are kept"
    assert os.listdir(small_disk) == ["r.json"]


# ----------------------------------------------------------------------------- bounded reads
@pytest.mark.parametrize("command", [["validate"], ["report"], ["heatmap", "-o", "h.png"]])
def test_endless_input_is_refused_quickly(tmp_path, command):
    t = time.monotonic()
    proc = run_cli(command[0], "/dev/zero", *command[1:], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "/dev/zero" in one_line(proc.stderr)
    assert time.monotonic() - t < 60


def test_endless_rules_file_is_refused(tmp_path):
    doc = tmp_path / "r.json"
    doc.write_text(json.dumps(dict(_doc(), results=[])))
    proc = run_cli("validate", doc, "--rules", "/dev/zero", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "/dev/zero" in one_line(proc.stderr)


def test_a_run_that_fails_before_writing_leaves_an_older_document_alone(tmp_path):
    """A sweep whose ranks fail before rank 0 writes anything (here: an --addr that is not
    this host's, so the tcp listener cannot bind) must not mark the previous run's document
    at that path as failed: the spawner finalises only its own run's document."""
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "--no-progress", "-o", out,
            check_rc=0)
    before = out.read_text()
    assert json.loads(before)["status"] == "ok"
    # --force: the failing runs write this very path (without it they would take r.1.json)
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "--no-progress", "--force",
                   "--addr", "192.0.2.1", "--timeout", "20", "-o", out, timeout=120)
    assert proc.returncode in (1, 2), proc.stderr
    assert_no_traceback(proc)
    assert out.read_text() == before, "the older document was changed"
    assert "results measured before are in" not in proc.stderr
    # interrupted while its ranks are still starting (before rank 0 writes): the same
    proc = subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64",
                             "--no-progress", "--force", "-o", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    children = f"/proc/{proc.pid}/task/{proc.pid}/children"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not open(children).read().strip():
        time.sleep(0.01)  # the ranks exist (and are still starting): stop the run now
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert out.read_text() == before, "the older document was marked by the interrupted run"
