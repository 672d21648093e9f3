"""Reliability, fifth pass (issue 44): a full disk under `--records jsonl` is a failed run
(exit 1, one line naming the file system), its header marked failed, every record before
kept; as the inline writer does. Root: a small tmpfs of our own, unmounted afterwards."""
import json
import os

import pytest

from comm_bench.errors import RunFailed
from comm_bench.results import document as results
from test_reliability_results import FULL_DISK_ARGS, small_disk, sweep_onto_a_full_disk  # noqa: F401 - fixture
from test_results import _doc, _record


def test_sweep_with_records_jsonl_on_a_full_disk_says_so(tmp_path, small_disk):  # noqa: F811
    """Before: exit 70 (an OSError from the append) and the header left "running"."""
    mnt, out, proc = sweep_onto_a_full_disk(tmp_path, small_disk, FULL_DISK_ARGS + ["--records", "jsonl"])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"the file system at {mnt} (tmpfs" in lines[0] and "is full" in lines[0], \
        proc.stderr
    doc = results.load(str(out))
    assert doc["status"] == "failed" and "is full" in doc["failure"]["reason"], doc["failure"]
    assert doc["results"], "the records written before the disk filled are kept"
    assert sorted(os.listdir(mnt)) == ["r.json", "r.records.jsonl"]
    with open(mnt / "r.records.jsonl", "rb") as f:
        assert f.read().endswith(b"\n"), "no torn line left"


def test_the_header_is_marked_failed_in_place_when_no_temporary_fits(small_disk):  # noqa: F811
    """The disk so full that not even the header's temporary fits: the header is rewritten
    within its own blocks, so it still says how the run ended."""
    mnt = small_disk(64)
    path = mnt / "r.json"
    w = results.StreamingWriter(str(path), _doc())
    w.append(_record(8))
    with open(mnt / "filler", "wb", buffering=0) as f:          # every block left
        try:
            while True:
                f.write(b"x" * 512)
        except OSError:
            pass
    with pytest.raises(RunFailed) as err:
        for size in range(16, 8 * 10000, 8):
            w.append(_record(size))
    assert "is full" in str(err.value) and "\n" not in str(err.value)
    w.close("failed", {"rank": 0, "host": "h", "reason": str(err.value)})
    doc = results.load(str(path))
    assert doc["status"] == "failed" and doc["failure"]["reason"] == str(err.value)
    assert len(doc["results"]) == w.written >= 1
    assert sorted(os.listdir(mnt)) == ["filler", "r.json", "r.records.jsonl"]
    json.loads(path.read_text())        # valid JSON, blanks after it included
