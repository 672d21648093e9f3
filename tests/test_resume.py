"""`sweep --resume`: an interrupted run's document is continued, never re-measured or duplicated."""
import collections
import json

import pytest

from comm_bench.run import resume
from comm_bench.errors import UsageError

from cbtest import assert_no_traceback, load_results, run_cli

ARGS = ["sweep", "-t", "tcp", "--nprocs", "3", "-b", "4K", "-e", "64K", "-f", "4", "-n", "5", "-w", "1",
        "--no-progress", "--resume"]


def keys(doc):
    """The first pass's records (the default confirm phase re-measures suspects of each run
    in records of its own, which differ run to run)."""
    return collections.Counter(resume.record_key(r) for r in doc["results"] if "confirm" not in r)


def test_resume_continues_an_interrupted_document(tmp_path):
    out = tmp_path / "r.json"
    run_cli(*ARGS, "-o", out, check_rc=0)          # no document yet: --resume starts afresh
    full = load_results(out)
    assert "resumed" not in full and sum(keys(full).values()) == 6 * 3
    # what a killed run leaves: the first records, status failed
    cut = dict(full, results=full["results"][:4], status="failed",
               failure={"rank": 1, "host": "h", "reason": "killed"})
    out.write_text(json.dumps(cut))
    run_cli(*ARGS, "-o", out, check_rc=0)
    doc = load_results(out)
    assert doc["status"] == "ok" and keys(doc) == keys(full)        # every record once
    assert doc["results"][:4] == full["results"][:4]                # kept, not measured again
    [entry] = doc["resumed"]
    assert entry["records_kept"] == 4 and entry["previous_status"] == "failed"
    assert entry["previous_failure"]["reason"] == "killed" and entry["previous_run_id"] == full["run_id"]
    assert entry["after"] == {k: full["results"][3].get(k) for k in ("op", "size", "src", "dst", "round")}
    assert doc["started"] == full["started"] and doc["run_id"] != full["run_id"]
    # the schema takes the resumed document: validate reads it (2 would be bad input); its
    # verdict on three loopback ranks sharing a loaded CI machine's cores may be a finding (1)
    p = run_cli("validate", out)
    assert p.returncode in (0, 1) and p.stdout.startswith("validate: "), (p.returncode, p.stdout, p.stderr)
    assert_no_traceback(p)


def test_resume_refuses_another_sweeps_document(tmp_path):
    out = tmp_path / "r.json"
    run_cli(*ARGS, "-o", out, check_rc=0)
    before = out.read_bytes()
    p = run_cli(*[a if a != "64K" else "256K" for a in ARGS], "-o", out)
    assert p.returncode == 2 and "--resume" in p.stderr and "sizes" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert_no_traceback(p)
    assert out.read_bytes() == before


def test_kept_records_follow_their_hosts_when_ranks_are_renumbered():
    """torchrun's c10d rendezvous may give a host another rank after a restart."""
    old = {"ranks": [{"rank": 0, "host": "a", "local_rank": 0}, {"rank": 1, "host": "b", "local_rank": 0}],
           "results": [{"op": "sendrecv", "size": 8, "src": 0, "dst": 1, "src_host": "a", "dst_host": "b"}]}
    new = {"ranks": [{"rank": 0, "host": "b", "local_rank": 0}, {"rank": 1, "host": "a", "local_rank": 0}]}
    [rec] = resume.renumbered(old, new, "r.json")
    assert (rec["src"], rec["dst"], rec["src_host"], rec["dst_host"]) == (1, 0, "a", "b")
    with pytest.raises(UsageError, match="rank 1 on b"):
        resume.renumbered(old, {"ranks": [{"rank": 0, "host": "a", "local_rank": 0},
                                          {"rank": 1, "host": "c", "local_rank": 0}]}, "r.json")
