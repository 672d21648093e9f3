"""How a sweep's configuration is completed and checked before any rank starts."""
import pytest

from comm_bench import registry
from comm_bench.errors import UsageError
from comm_bench.run.sweep import SweepConfig, resolve


def cfg(transport, ops, **kw):
    return SweepConfig(transport=transport, ops=ops, sizes=[8, 1024], **kw)


@pytest.fixture
def gpu_probes_pass(monkeypatch):
    """The GPU transports' planning, on a machine without a GPU: only probe() is faked."""
    for name in ("cuda", "nccl"):
        monkeypatch.setattr(registry.get(name), "probe", classmethod(lambda cls: (True, "")))


@pytest.mark.parametrize("transport,ops,n,pattern", [
    ("tcp", ["sendrecv"], 2, "pair"), ("tcp", ["sendrecv"], 4, "pairwise"),
    ("gloo", ["all_reduce", "alltoall"], 4, "collective"), ("gloo", ["sendrecv"], 3, "collective"),
    ("cuda", ["h2d", "d2h", "bidir", "d2d"], 1, "collective"), ("cuda", ["peer"], 2, "pair"),
    ("cuda", ["peer", "peer_read"], 8, "pairwise"), ("nccl", ["all_gather"], 8, "collective"),
])
def test_default_pattern(gpu_probes_pass, transport, ops, n, pattern):
    c = cfg(transport, ops)
    resolve(c, n)
    assert c.pattern == pattern


def test_rejections(gpu_probes_pass):
    with pytest.raises(UsageError, match="does not run --pattern collective"):
        resolve(cfg("tcp", ["sendrecv"], pattern="collective"), 2)
    with pytest.raises(UsageError, match="has no op 'write'"):
        resolve(cfg("cuda", ["write"]), 1)
    with pytest.raises(UsageError, match="needs at least 2 ranks"):
        resolve(cfg("cuda", ["peer"]), 1)


def test_gpu_transports_default_to_one_rank_per_gpu_and_others_to_two():
    assert registry.get("tcp").default_ranks() == 2
    for name in ("cuda", "nccl", "torch-nccl"):
        assert registry.get(name).default_ranks() >= 1  # every GPU here; 1 without one


@pytest.mark.parametrize("transport,ops,pattern,mode,runs,waived", [
    ("gloo", ["all_reduce", "sendrecv"], "pair", "bw", ["sendrecv"], ["all_reduce"]),
    ("mpi", ["broadcast", "reduce", "sendrecv"], "pairwise", "lat", ["sendrecv"], ["broadcast", "reduce"]),
    ("nccl", ["all_gather", "sendrecv"], "pairwise-concurrent", "bw", ["sendrecv"], ["all_gather"]),
    ("cuda", ["h2d", "peer"], "pairwise", "bw", ["peer"], ["h2d"]),
    ("cuda", ["h2d", "peer"], "collective", "bw", ["h2d"], ["peer"]),
    ("grpc", ["sendrecv", "bidir"], "pair", "lat", ["sendrecv"], ["bidir"]),
])
def test_ops_a_pattern_cannot_run_are_waived_with_the_reason(gpu_probes_pass, transport, ops, pattern, mode,
                                                              runs, waived):
    """A pair pattern used to run a sendrecv and label it all_reduce (gloo, mpi); now the op
    is waived, recorded with why, and the others run."""
    c = cfg(transport, ops, pattern=pattern, mode=mode)
    resolve(c, 4)
    assert c.ops == runs
    assert [w["op"] for w in c.waived] == waived and all(w["reason"] for w in c.waived)


def test_nothing_runnable_is_one_line(gpu_probes_pass):
    with pytest.raises(UsageError, match="--pattern pair runs sendrecv between two ranks; all_reduce runs"):
        resolve(cfg("gloo", ["all_reduce"], pattern="pair"), 2)
    with pytest.raises(UsageError, match="bidir measures streaming bandwidth only"):
        resolve(cfg("grpc", ["bidir"], mode="lat"), 2)


@pytest.mark.parametrize("transport,pattern,op", [("nccl", "pairwise", "sendrecv"), ("nccl", None, "all_reduce"),
                                                  ("cuda", "pair", "peer"), ("cuda", None, "h2d")])
def test_no_op_given_runs_the_first_op_the_pattern_runs(gpu_probes_pass, transport, pattern, op):
    c = cfg(transport, [], pattern=pattern)
    resolve(c, 2)
    assert c.ops == [op]


def test_a_waived_op_is_in_the_document_and_not_measured(tmp_path):
    from cbtest import load_results, run_cli

    out = tmp_path / "r.json"
    proc = run_cli("sweep", "-t", "gloo", "--op", "all_reduce,sendrecv", "--pattern", "pair", "-N", "2",
                   "-b", "1K", "-e", "1K", "-n", "3", "--no-progress", "-o", out, timeout=180, check_rc=0)
    assert "# waived: all_reduce: --pattern pair runs sendrecv" in proc.stdout
    doc = load_results(out)
    assert [r["op"] for r in doc["results"]] == ["sendrecv"]
    assert doc["options"]["waived"][0]["op"] == "all_reduce"
