"""Results are never lost by a rerun (issue 39): an earlier comm-bench document at -o is
kept and the new run writes the next free numbered name (results.1.json, as nccl-tests'
JSON writer does), unless --force (replace) or --resume (continue); the run's last line
names the file it wrote and the command to run next."""
import json
import os
import signal
import subprocess

from comm_bench.system.netutil import free_port

from cbtest import COMM_BENCH, load_results, rank_pids, run_cli
from test_failures import wait_for_records

QUICK = ["--nprocs", "2", "-t", "tcp", "-b", "8", "-e", "64", "-n", "2", "-w", "1", "--no-progress"]
ENV = {k: v for k, v in os.environ.items() if k != "COMM_BENCH_DEBUG"}
KEPT = "is another comm-bench run's results, kept: this run writes"


def sweep(cwd, *args, rc=0):
    """A quick local sweep in `cwd`, stdout and stderr in one stream (in the order printed)."""
    p = subprocess.run([COMM_BENCH, "sweep", *QUICK, *map(str, args)], cwd=cwd, timeout=240, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV)
    assert p.returncode == rc, p.stdout[-3000:]
    assert "Traceback" not in p.stdout, p.stdout[-3000:]
    return p.stdout


def last_line(out):
    return out.strip().splitlines()[-1]


def closing(name):
    return f"# results: {name} (next: comm-bench validate {name})"


def listing(folder):
    return sorted(os.listdir(folder))


def test_a_rerun_keeps_the_document_and_writes_the_next_number(tmp_path):
    out = sweep(tmp_path, "-o", "results.json")
    assert last_line(out) == closing("results.json") and KEPT not in out
    first = (tmp_path / "results.json").read_bytes()
    out = sweep(tmp_path, "-o", "results.json")
    said = [ln for ln in out.splitlines() if KEPT in ln]
    assert said == ["comm-bench: results.json is another comm-bench run's results, kept: this run writes "
                    "results.1.json (--force replaces it, --resume continues it)"], out[-2000:]
    assert out.splitlines()[0] == said[0]                                # said at the start
    assert last_line(out) == closing("results.1.json"), out[-2000:]
    assert (tmp_path / "results.json").read_bytes() == first            # byte-identical
    second = load_results(tmp_path / "results.1.json")
    assert second["status"] == "ok" and second["results"] and second["options"]["output"] == "results.1.json"
    assert second["run_id"] != json.loads(first)["run_id"]
    out = sweep(tmp_path)                                                # the default -o, a third time
    assert last_line(out) == closing("results.2.json"), out[-2000:]
    assert (tmp_path / "results.json").read_bytes() == first
    assert listing(tmp_path) == ["results.1.json", "results.2.json", "results.json"]   # no lock left
    run_cli("validate", tmp_path / "results.2.json", cwd=tmp_path, check_rc=0)


def test_force_replaces_and_resume_continues(tmp_path):
    sweep(tmp_path, "-o", "r.json")
    before = load_results(tmp_path / "r.json")
    out = sweep(tmp_path, "-o", "r.json", "--force")
    assert KEPT not in out and last_line(out) == closing("r.json"), out[-2000:]
    forced = load_results(tmp_path / "r.json")
    assert forced["run_id"] != before["run_id"] and listing(tmp_path) == ["r.json"]
    out = sweep(tmp_path, "-o", "r.json", "--resume")
    assert KEPT not in out and last_line(out) == closing("r.json"), out[-2000:]
    resumed = load_results(tmp_path / "r.json")
    assert resumed["resumed"][-1]["previous_run_id"] == forced["run_id"] and listing(tmp_path) == ["r.json"]


def test_a_file_that_is_not_a_document_is_still_refused_unless_forced(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text("my notes\n")
    out = sweep(tmp_path, "-o", notes, rc=2)
    assert out.strip().splitlines() == [f"comm-bench: -o '{notes}' exists and is not a comm-bench results "
                                        "document; use --force to replace it, or choose another -o"]
    assert notes.read_text() == "my notes\n" and listing(tmp_path) == ["notes.json"]
    out = sweep(tmp_path, "-o", notes, "--force")
    assert last_line(out) == closing(str(notes)) and load_results(notes)["status"] == "ok"
    sweep(tmp_path, "-o", notes)        # now a comm-bench document: kept
    assert listing(tmp_path) == ["notes.1.json", "notes.json"]


def test_the_records_file_follows_the_numbered_name(tmp_path):
    sweep(tmp_path, "--records", "jsonl", "-o", "j.json")
    first = {n: (tmp_path / n).read_bytes() for n in listing(tmp_path)}
    assert sorted(first) == ["j.json", "j.records.jsonl"]
    out = sweep(tmp_path, "--records", "jsonl", "-o", "j.json")
    assert last_line(out) == closing("j.1.json"), out[-2000:]
    assert {n: (tmp_path / n).read_bytes() for n in first} == first
    assert listing(tmp_path) == ["j.1.json", "j.1.records.jsonl", "j.json", "j.records.jsonl"]
    doc = load_results(tmp_path / "j.1.json")
    assert doc["records_file"] == "j.1.records.jsonl"
    assert run_cli("report", tmp_path / "j.1.json", "--format", "jsonl", check_rc=0).stdout.strip()
    # a numbered name whose records file is there (someone removed its document) is not free
    (tmp_path / "j.2.records.jsonl").write_text("")
    out = sweep(tmp_path, "--records", "jsonl", "-o", "j.json")
    assert last_line(out) == closing("j.3.json"), out[-2000:]


def test_runs_started_together_get_different_names(tmp_path):
    for earlier in (False, True):       # with no document there yet, then with one
        before = set(listing(tmp_path))
        procs = [subprocess.Popen([COMM_BENCH, "sweep", *QUICK, "-o", "results.json"], cwd=tmp_path, text=True,
                                  env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(3)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], [o[-1500:] for o in outs]
        named = sorted(last_line(o) for o in outs)
        new = sorted(set(listing(tmp_path)) - before)
        assert named == sorted(closing(n) for n in new) and len(new) == 3, (named, new)
        assert all(load_results(tmp_path / n)["status"] == "ok" for n in new)
        assert (earlier and "results.json" not in new) or (not earlier and "results.json" in new)
    assert not [n for n in listing(tmp_path) if n.startswith(".")]       # no lock or temporary left


def test_launched_ranks_rank_0_names_the_file(tmp_path):
    """torchrun-style ranks (no spawner): rank 0 alone picks the name, says it, and ends with it."""
    sweep(tmp_path, "-o", "r.json")
    first = (tmp_path / "r.json").read_bytes()
    env = dict(ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               LOCAL_WORLD_SIZE="2")
    procs = [subprocess.Popen([COMM_BENCH, "sweep", *QUICK[2:], "-o", "r.json"], cwd=tmp_path, text=True,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for r in range(2)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert last_line(outs[0]) == closing("r.1.json") and KEPT in outs[0], outs[0][-2000:]
    assert "r.1.json" not in outs[1]
    assert (tmp_path / "r.json").read_bytes() == first
    assert load_results(tmp_path / "r.1.json")["status"] == "ok" and listing(tmp_path) == ["r.1.json", "r.json"]


def test_a_failed_run_ends_with_the_file_it_wrote(tmp_path):
    """A rank killed mid-run: the failure's line, then the results line, last."""
    sweep(tmp_path, "-o", "r.json")
    proc = subprocess.Popen([COMM_BENCH, "sweep", "--nprocs", "2", "-t", "tcp", "-b", "8", "-e", "16M", "-n", "200",
                             "--no-progress", "-o", "r.json"], cwd=tmp_path, text=True, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for_records(tmp_path / "r.1.json")
        os.kill(rank_pids(proc.pid)[1], signal.SIGKILL)
    finally:
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1, out[-2000:]
    lines = out.strip().splitlines()
    assert lines[-1] == closing("r.1.json") and "was killed by signal 9" in lines[-2], lines[-3:]
    assert load_results(tmp_path / "r.1.json")["status"] == "failed"
    # a run that fails before writing names no file
    out = sweep(tmp_path, "-o", "r.json", "--addr", "192.0.2.1", "--timeout", "20", rc=1)
    assert "# results:" not in out and listing(tmp_path) == ["r.1.json", "r.json"]


def test_check_keeps_its_document_too(tmp_path):
    args = ["check", "-t", "gloo", "-N", "2", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
            "--expect-busbw", "1e-6", "--no-progress"]
    run_cli(*args, cwd=tmp_path, timeout=180, check_rc=0)
    first = (tmp_path / "check.json").read_bytes()
    p = run_cli(*args, cwd=tmp_path, timeout=180, check_rc=0)
    assert last_line(p.stdout) == closing("check.1.json"), p.stdout[-2000:]
    assert "check.json is another comm-bench run's results, kept: this run writes check.1.json " \
           "(--force replaces it)" in p.stderr
    assert (tmp_path / "check.json").read_bytes() == first
    p = run_cli(*args, "--json", cwd=tmp_path, timeout=180, check_rc=0)
    assert last_line(p.stderr) == closing("check.2.json"), p.stderr    # stdout ends with the report
