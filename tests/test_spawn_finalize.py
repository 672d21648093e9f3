"""The local spawner marks the document failed when a rank fails with a line of its own and
rank 0 is stopped before it records the failure (the 1,024-rank run on 2 cores left its
document at "running": rank 0 was still writing the first pass). Real processes: a rank 0
that is alive but busy, a rank 1 that prints its error line and exits 1."""
import subprocess
import sys

from comm_bench.metrics import make_record
from comm_bench.results import document as results
from comm_bench.run import spawn

LINE = "comm-bench: rank 1: rank(s) 0 did not reach 'confirm/sendrecv' within 60 s"


def _running_document(path):
    doc = results.new_document(transport="tcp", world_size=2, pattern="pairwise", options={"iters": 3},
                               ranks=[{"rank": 0, "host": "a"}, {"rank": 1, "host": "a"}],
                               hosts=[{"host": "a", "ranks": [0, 1], "topology": None}],
                               link_kind="cpu", command=["comm-bench", "sweep"])
    w = results.ResultsWriter(str(path), doc)
    w.append(dict(make_record(transport="tcp", op="sendrecv", mode="bw", pattern="pairwise", size=1024,
                              dtype="float32", iters=3, warmup=1, n=2, samples_us=[10.0, 11.0, 12.0],
                              wrong=0, extra={}, elem=4), src=0, dst=1))
    return w


def _ranks():
    # each in a session of its own, as the spawner starts ranks (it stops them by process group)
    busy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stderr=subprocess.PIPE,
                            start_new_session=True)
    failing = subprocess.Popen([sys.executable, "-c", f"import sys; print({LINE!r}, file=sys.stderr); sys.exit(1)"],
                               stderr=subprocess.PIPE, start_new_session=True)
    failing.wait(timeout=60)
    return [busy, failing]


def test_a_ranks_own_failure_line_finalizes_a_running_document(tmp_path, capsys):
    out = tmp_path / "r.json"
    _running_document(out)
    procs = _ranks()
    code = spawn._failed(procs, ["rank 0", "rank 1"], str(out), spawn._Lines(procs), [1])
    assert code == 1 and procs[0].poll() is not None          # the busy rank 0 was stopped
    assert LINE in capsys.readouterr().err
    doc = results.load(str(out))
    assert doc["status"] == "failed" and len(doc["results"]) == 1, doc["status"]
    assert doc["failure"]["rank"] == 1
    assert doc["failure"]["reason"] == "rank(s) 0 did not reach 'confirm/sendrecv' within 60 s"


def test_a_failure_rank_0_recorded_stands(tmp_path, capsys):
    out = tmp_path / "r.json"
    w = _running_document(out)
    w.close("failed", {"rank": 0, "host": "a", "reason": "rank 1 stopped answering"})
    procs = _ranks()
    spawn._failed(procs, ["rank 0", "rank 1"], str(out), spawn._Lines(procs), [1])
    assert results.load(str(out))["failure"]["reason"] == "rank 1 stopped answering"
