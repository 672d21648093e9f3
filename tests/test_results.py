"""The results document: valid JSON after every append, the schema, final status."""
import json

import pytest

from comm_bench.results import document as results
from comm_bench.errors import UsageError
from comm_bench.metrics import make_record, slowest_per_iteration, stats


def _doc():
    return results.new_document(transport="tcp", world_size=2, pattern="pair", options={"iters": 3},
                                ranks=[{"rank": 0, "host": "a"}, {"rank": 1, "host": "b"}],
                                hosts=[{"host": "a", "ranks": [0], "topology": None}],
                                link_kind="cpu", command=["comm-bench", "sweep"])


def _record(size):
    return make_record(transport="tcp", op="sendrecv", mode="bw", pattern="pair", size=size,
                       dtype="float32", iters=3, warmup=1, n=2, samples_us=[1.0, 2.0, 3.0], wrong=0,
                       extra={}, elem=4)


def test_file_is_valid_json_after_every_append(tmp_path):
    path = tmp_path / "r.json"
    w = results.ResultsWriter(str(path), _doc())
    assert json.loads(path.read_text())["results"] == []
    for i, size in enumerate((8, 16, 32)):
        w.append(_record(size))
        doc = json.loads(path.read_text())  # as a reader would see it mid-run
        assert [r["size"] for r in doc["results"]] == [8, 16, 32][: i + 1]
        assert doc["status"] == "running"
    w.close("ok")
    doc = results.load(str(path))
    assert doc["status"] == "ok" and doc["finished"] and len(doc["results"]) == 3


def test_schema_fields(tmp_path):
    path = tmp_path / "r.json"
    w = results.ResultsWriter(str(path), _doc())
    w.append(_record(4096))
    w.close("ok")
    doc = results.load(str(path))
    for key in ("schema_version", "tool", "version", "command", "hosts", "ranks", "environment",
                "started", "finished", "status", "failure", "transport", "world_size", "results"):
        assert key in doc, key
    assert doc["schema_version"] == results.SCHEMA_VERSION and doc["tool"] == "comm-bench"
    assert {"variables", "python", "libraries"} <= set(doc["environment"])
    rec = doc["results"][0]
    for key in ("transport", "op", "mode", "pattern", "size", "count", "dtype", "iters", "time_us",
                "algbw", "busbw", "bw_peak", "msg_rate_mpps", "latency_us", "wrong", "extra"):
        assert key in rec, key
    assert set(rec["latency_us"]) == {"min", "max", "avg", "stdev", "median", "p99", "p999"}


def test_failed_status_keeps_records_and_first_failure(tmp_path):
    path = tmp_path / "r.json"
    w = results.ResultsWriter(str(path), _doc())
    w.append(_record(8))
    w.close("failed", {"rank": 1, "host": "b", "reason": "was killed by signal 9"})
    results.finalize(str(path), "failed", {"rank": 0, "host": "a", "reason": "later"})
    doc = results.load(str(path))
    assert doc["status"] == "failed" and doc["failure"]["rank"] == 1
    assert len(doc["results"]) == 1


def test_metrics_definitions():
    rec = make_record(transport="x", op="all_reduce", mode="bw", pattern="collective", size=4_000_000,
                      dtype="float32", iters=4, warmup=0, n=4, samples_us=[1000, 1000, 2000, 4000],
                      wrong=0, extra={}, elem=4)
    assert rec["time_us"] == pytest.approx(2000)
    assert rec["algbw"] == pytest.approx(4e6 / 2000e-6 / 1e9)       # S / t in GB/s
    assert rec["busbw"] == pytest.approx(rec["algbw"] * 2 * 3 / 4)  # 2(n-1)/n
    assert rec["bw_peak"] == pytest.approx(4e6 / 1000e-6 / 1e9)
    assert rec["count"] == 1_000_000 and rec["redop"] == "sum"
    assert rec["latency_us"]["median"] == pytest.approx(1500)


def test_every_figure_derives_from_the_raw_samples():
    """Transports return raw figures; the record's derived ones come from metrics only
    (an extra key can no longer override algbw or the message rate)."""
    rec = make_record(transport="rdma", op="write", mode="bw", pattern="pair", size=1000, dtype="uint8",
                      iters=2, warmup=0, n=2, samples_us=[1, 3], wrong=0,
                      extra={"algbw": 12.5, "msg_rate_mpps": 3.0}, elem=1, peak_gbps=1.2)
    assert rec["time_us"] == 2 and rec["algbw"] == 0.5 and rec["busbw"] == 0.5
    assert rec["msg_rate_mpps"] == 0.5 and rec["bw_peak"] == 1.2


def test_both_directions_total_is_twice_per_direction():
    rec = make_record(transport="cuda", op="bidir", mode="bw", pattern="collective", size=4000, dtype="uint8",
                      iters=2, warmup=0, n=1, samples_us=[2, 2], wrong=0, extra={}, elem=1,
                      both_directions=True)
    assert rec["algbw"] == 2.0
    assert rec["extra"]["per_direction_gbps"] == {"src->dst": 2.0, "dst->src": 2.0}
    assert rec["extra"]["total_gbps"] == 4.0


def test_stats_match_numpy():
    np = pytest.importorskip("numpy")
    xs = list(np.random.default_rng(1).exponential(10, 1001))
    st = stats(xs)
    assert st["median"] == pytest.approx(np.percentile(xs, 50))
    assert st["p99"] == pytest.approx(np.percentile(xs, 99))
    assert st["p999"] == pytest.approx(np.percentile(xs, 99.9))
    assert st["stdev"] == pytest.approx(np.std(xs, ddof=1))
    assert st["min"] == min(xs) and st["max"] == max(xs)


def test_slowest_rank_per_iteration():
    assert slowest_per_iteration([[1, 5, 2], [3, 1, 2], []]) == [3, 5, 2]


@pytest.mark.parametrize("content,msg", [
    (None, "not found"), ("{not json", "not valid JSON"), ('{"a": 1}', "not a comm-bench results document"),
    ('{"tool": "comm-bench", "results": [], "schema_version": 99}', "upgrade"),
])
def test_load_rejects_bad_files(tmp_path, content, msg):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=msg):
        results.load(str(path))
