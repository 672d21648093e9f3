"""--buffer on the host-side transports (mpi, gloo, grpc, tcp), the parts a CPU machine runs:
GPU buffers refused in one line before any rank starts where no GPU library works; host
records say they were host buffers; readers keep host and GPU-buffer records apart.
(The GPU paths themselves: tests/test_gpu_buffers.py, marked gpu.)"""
import copy
import json
import os

import pytest

from comm_bench.transports._gpu_buffers import LIBRARIES, library_status

from cbtest import assert_no_traceback, load_results, run_cli

HOST_TRANSPORTS = ("mpi", "gloo", "grpc", "tcp")
NO_GPU_LIBRARY = not any(library_status(lib)[0] for lib in LIBRARIES)


@pytest.mark.skipif(not NO_GPU_LIBRARY, reason="a GPU array library works here")
@pytest.mark.parametrize("transport", HOST_TRANSPORTS)
@pytest.mark.parametrize("buffer", ["cuda", "cuda:cupy", "cuda:numba", "cuda:torch"])
def test_gpu_buffer_without_gpu_is_one_line_before_any_rank(tmp_path, transport, buffer):
    out = tmp_path / "r.json"
    proc = run_cli("sweep", "-t", transport, "--buffer", buffer, "--nprocs", "2", "-b", "8", "-e", "8",
                   "-n", "2", "--no-progress", "-o", out, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert_no_traceback(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"comm-bench: --buffer {buffer}: "), lines
    if buffer == "cuda":   # says why for every library it tried
        assert all(lib in lines[0] for lib in LIBRARIES), lines
    assert not os.path.exists(out)


@pytest.mark.parametrize("transport, args", [
    ("tcp", ["--mode", "lat"]),
    ("grpc", []),
    ("gloo", ["--op", "all_reduce,sendrecv"]),
    ("mpi", ["--op", "all_gather", "--pattern", "collective"]),
])
def test_host_records_say_host_buffers(tmp_path, transport, args):
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", transport, *args, "--nprocs", "2", "-b", "64", "-e", "64", "-n", "3", "-c", "1",
            "--no-progress", "-o", out, timeout=240, check_rc=0)
    doc = load_results(out)
    assert doc["options"]["transport_options"]["buffer"] == "host"
    assert doc["results"] and all(r["extra"]["buffer"] == {"kind": "host"} and r["wrong"] == 0
                                  for r in doc["results"])


@pytest.fixture(scope="module")
def host_doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("buf") / "host.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1M", "-e", "2M", "-n", "3", "--no-progress",
            "-o", out, timeout=240, check_rc=0)
    return load_results(out)


def _as_gpu(doc, path="staged"):
    """The same records as if measured from CuPy buffers (what a GPU run records)."""
    gpu = copy.deepcopy(doc)
    for r in gpu["results"]:
        r["extra"]["buffer"] = {"kind": "cuda", "library": "cupy", "path": path}
    return gpu


def test_readers_keep_buffers_apart(tmp_path, host_doc):
    from comm_bench.validate.compare import compare, summarise
    from comm_bench.results.records import buffer_label

    gpu = _as_gpu(host_doc)
    assert {buffer_label(r) for r in gpu["results"]} == {"cuda:cupy/staged"}
    assert {buffer_label(r) for r in host_doc["results"]} == {"host"}
    # compare: one row per buffer kind, never a change computed between them
    rows = compare([("host", host_doc), ("gpu", gpu)])["rows"]
    assert {r["buffer"] for r in rows} == {"host", "cuda:cupy/staged"}
    assert all(r["change"] == [None] for r in rows)
    assert not set(summarise(host_doc)) & set(summarise(gpu))
    # validate --baseline: a host baseline has nothing in common with a GPU-buffer run
    (tmp_path / "host.json").write_text(json.dumps(host_doc))
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    proc = run_cli("validate", tmp_path / "gpu.json", "--baseline", tmp_path / "host.json", timeout=120)
    assert proc.returncode == 2 and "no op, mode and size in common" in proc.stderr, proc.stderr
    # report: its own table per buffer kind
    mixed = dict(host_doc, results=host_doc["results"] + gpu["results"])
    (tmp_path / "mixed.json").write_text(json.dumps(mixed))
    proc = run_cli("report", tmp_path / "mixed.json", timeout=120, check_rc=0)
    assert "# op sendrecv\n" in proc.stdout and "# op sendrecv, buffer cuda:cupy/staged\n" in proc.stdout


@pytest.mark.parametrize("command", [["validate"], ["heatmap", "-o", "h.png"]])
def test_mixed_buffers_are_not_one_link(tmp_path, host_doc, command):
    mixed = dict(host_doc, results=host_doc["results"] + _as_gpu(host_doc, "direct")["results"])
    (tmp_path / "mixed.json").write_text(json.dumps(mixed))
    proc = run_cli(command[0], tmp_path / "mixed.json", *command[1:], timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert_no_traceback(proc)
    assert proc.stderr.strip().splitlines() == [
        f"comm-bench: {command[0]}: the records were measured with different buffers "
        "(cuda:cupy/direct, host); a link is judged from one kind at a time: keep one sweep's "
        "records per file"]


def test_list_and_doctor_show_buffer_kinds():
    rows = json.loads(run_cli("list", "--json", check_rc=0).stdout)
    kinds = {r["transport"]: r["buffers"] for r in rows}
    for t in HOST_TRANSPORTS:
        assert [b["buffer"] for b in kinds[t]] == ["host"] + [f"cuda:{lib}" for lib in LIBRARIES]
        assert all(b["available"] or b["why"] for b in kinds[t])   # every absence says why
    assert kinds["nccl"] == []
    checks = json.loads(run_cli("doctor", "--json", timeout=120).stdout)
    buffers = {c["name"]: c for c in checks if c["group"] == "buffers"}
    assert buffers["--buffer host"]["ok"]
    assert all(c["ok"] or c["detail"] for c in buffers.values())
    assert any(name.startswith("CUDA-aware MPI") for name in buffers)
