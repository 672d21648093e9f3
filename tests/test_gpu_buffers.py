"""GPU buffers through the host-side transports, on real GPUs: mpi with CuPy and Numba
buffers (every collective and sendrecv, direct where MPI is CUDA-aware, staged always),
gloo, grpc and tcp, all with -c (compared on the GPU) and 0 wrong.

Marked `gpu`; skips where the array library or 2 GPUs are missing (one rank per GPU).
Run on the GPU machine: pytest -m gpu tests/test_gpu_buffers.py
"""
import os

import pytest

from comm_bench.transports._gpu_buffers import library_status
from comm_bench.transports._mpi_cuda import cuda_aware_before_init

from cbtest import assert_no_traceback, load_results, run_cli

pytestmark = pytest.mark.gpu
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def _gpus(lib):
    ok, why = library_status(lib)
    if not ok:
        return 0, why
    if lib == "torch":
        import torch
        return torch.cuda.device_count(), ""
    if lib == "cupy":
        import cupy
        return cupy.cuda.runtime.getDeviceCount(), ""
    from numba import cuda
    return len(cuda.gpus), ""


def needs(lib):
    n, why = _gpus(lib)
    return pytest.mark.skipif(n < 2, reason=why or f"needs 2 GPUs ({n} here)")


SIZES = ["-b", "8", "-e", "4M", "-f", "32"]


def sweep(tmp_path, transport, *args, name="r.json"):
    out = tmp_path / name
    run_cli("sweep", "-t", transport, "--nprocs", "2", *SIZES, "-n", "5", "-w", "2", "-c", "1",
            "--no-progress", "-o", out, *args, timeout=300, check_rc=0)
    doc = load_results(out)
    assert doc["results"], doc
    for r in doc["results"]:
        assert r["wrong"] == 0, r
    return doc


def buffers(doc):
    return [r["extra"]["buffer"] for r in doc["results"]]


def assert_staged_figures(buf, copies=("d2h_us", "h2d_us")):
    assert buf["path"] == "staged"
    assert all(buf[k] > 0 for k in copies), buf
    assert buf["copy_share"] is None or 0 < buf["copy_share"] < 1, buf


MPI_AWARE = cuda_aware_before_init()[0]


@pytest.mark.parametrize("lib", [pytest.param(lib, marks=needs(lib)) for lib in ("cupy", "numba")])
def test_mpi_every_collective(tmp_path, lib):
    doc = sweep(tmp_path, "mpi", "--buffer", f"cuda:{lib}", "--op", "all", "--pattern", "collective")
    assert {r["op"] for r in doc["results"]} == {"all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                                  "broadcast", "reduce", "sendrecv"}
    for buf in buffers(doc):
        assert buf["kind"] == "cuda" and buf["library"] == lib
        # reported truthfully: the path follows what this MPI says it is
        assert buf["path"] == ("direct" if buf["cuda_aware"] else "staged")
        assert buf["cuda_aware_how"]
    assert [r["devices"]["device"] for r in doc["ranks"]] == ["cuda:0", "cuda:1"]


@pytest.mark.parametrize("lib, mode", [pytest.param("cupy", "bw", marks=needs("cupy")),
                                       pytest.param("numba", "lat", marks=needs("numba"))])
def test_mpi_sendrecv_pair(tmp_path, lib, mode):
    doc = sweep(tmp_path, "mpi", "--buffer", f"cuda:{lib}", "--op", "sendrecv", "--pattern", "pair",
                "--mode", mode)
    assert {(r["src_device"], r["dst_device"]) for r in doc["results"]} == {("cuda:0", "cuda:1")}
    assert all(b["library"] == lib for b in buffers(doc))


@needs("cupy")
def test_mpi_staged_path(tmp_path):
    doc = sweep(tmp_path, "mpi", "--buffer", "cuda:cupy", "--gpu-path", "staged", "--op", "all",
                "--pattern", "collective")
    for buf in buffers(doc):
        assert_staged_figures(buf)
    doc = sweep(tmp_path, "mpi", "--buffer", "cuda:numba", "--gpu-path", "staged", "--op", "sendrecv",
                "--pattern", "pair", name="pair.json")
    for r in doc["results"]:     # a stream: out of the source's GPU, into the destination's
        assert_staged_figures(r["extra"]["buffer"], ("d2h_us",))
        assert_staged_figures(r["extra"]["dst"]["buffer"], ("h2d_us",))


@needs("cupy")
def test_mpi_direct_where_cuda_aware_else_refused(tmp_path):
    args = ("sweep", "-t", "mpi", "--nprocs", "2", "--buffer", "cuda:cupy", "--gpu-path", "direct",
            "-b", "8", "-e", "64K", "-n", "3", "-c", "1", "--no-progress", "-o", tmp_path / "d.json")
    proc = run_cli(*args, timeout=300)
    if MPI_AWARE is False:
        assert proc.returncode == 2, proc.stderr
        assert_no_traceback(proc)
        assert proc.stderr.strip().splitlines() == [
            f"comm-bench: --gpu-path direct: this MPI is not CUDA-aware ({cuda_aware_before_init()[1]}); "
            "use --gpu-path staged (or auto)"]
    else:
        assert proc.returncode == 0, proc.stderr
        assert all(r["wrong"] == 0 and r["extra"]["buffer"]["path"] == "direct"
                   for r in load_results(tmp_path / "d.json")["results"])


@pytest.mark.parametrize("lib", [pytest.param(lib, marks=needs(lib)) for lib in ("torch", "cupy")])
def test_gloo(tmp_path, lib):
    doc = sweep(tmp_path, "gloo", "--buffer", f"cuda:{lib}", "--op", "all", "--pattern", "collective")
    for r in doc["results"]:
        buf = r["extra"]["buffer"]
        assert buf["library"] == lib
        assert buf["path"] == ("direct" if r["op"] in ("all_reduce", "broadcast") else "staged"), r["op"]
    doc = sweep(tmp_path, "gloo", "--buffer", f"cuda:{lib}", "--op", "sendrecv", "--pattern", "pair",
                "--mode", "lat", name="pair.json")
    for buf in buffers(doc):     # a ping-pong copies both ways on both sides
        assert_staged_figures(buf)


@needs("cupy")
@pytest.mark.parametrize("op, mode", [("sendrecv", "bw"), ("sendrecv", "lat"), ("bidir", "bw")])
def test_grpc(tmp_path, op, mode):
    doc = sweep(tmp_path, "grpc", "--buffer", "cuda:cupy", "--op", op, "--mode", mode)
    for buf in buffers(doc):
        assert_staged_figures(buf)
        assert buf["wire_us"] > 0


@pytest.mark.parametrize("lib, mode", [pytest.param("cupy", "bw", marks=needs("cupy")),
                                       pytest.param("torch", "lat", marks=needs("torch")),
                                       pytest.param("numba", "bw", marks=needs("numba"))])
def test_tcp(tmp_path, lib, mode):
    doc = sweep(tmp_path, "tcp", "--buffer", f"cuda:{lib}", "--mode", mode)
    for r in doc["results"]:
        buf = r["extra"]["buffer"]
        assert_staged_figures(buf)
        assert buf["library"] == lib and r["src_device"] == "cuda:0" and r["dst_device"] == "cuda:1"
    # the copies are part of the time: the record is slower than its wire alone
    big = doc["results"][-1]
    assert big["time_us"] > big["extra"]["buffer"]["wire_us"]


@needs("cupy")
def test_tcp_direct_is_refused(tmp_path):
    proc = run_cli("sweep", "-t", "tcp", "--buffer", "cuda", "--gpu-path", "direct", "--nprocs", "2",
                   "-o", tmp_path / "x.json", timeout=120)
    assert proc.returncode == 2 and "tcp sends from host memory only" in proc.stderr, proc.stderr
    assert_no_traceback(proc)


@pytest.mark.parametrize("lib, transport, args", [
    pytest.param("cupy", "mpi", ["--op", "all_reduce", "--pattern", "collective"], marks=needs("cupy")),
    pytest.param("cupy", "mpi", ["--op", "sendrecv", "--pattern", "pair"], marks=needs("cupy")),
    pytest.param("cupy", "gloo", ["--op", "all_gather", "--pattern", "collective"], marks=needs("cupy")),
    pytest.param("cupy", "tcp", [], marks=needs("cupy")),
    pytest.param("cupy", "grpc", [], marks=needs("cupy")),
    pytest.param("numba", "mpi", ["--op", "reduce_scatter", "--pattern", "collective"], marks=needs("numba")),
    pytest.param("numba", "tcp", [], marks=needs("numba")),
    pytest.param("torch", "gloo", ["--op", "sendrecv", "--pattern", "pair"], marks=needs("torch"))])
def test_gpu_check_counts_a_changed_element(tmp_path, lib, transport, args):
    """The checks compare what arrived on the GPU: one element changed there is counted."""
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", transport, "--buffer", f"cuda:{lib}", *args, "--nprocs", "2", "-b", "4K", "-e", "4K",
            "-n", "2", "-c", "1", "--no-progress", "-o", out, timeout=300, check_rc=0,
            env={"COMM_BENCH_TEST_CORRUPT_CHECK": "1"})
    assert [r["wrong"] > 0 for r in load_results(out)["results"]] == [True]


@needs("numba")
@pytest.mark.parametrize("np_dtype", ["uint8", "float16", "float32", "int64"])
def test_numba_compare_counts_each_changed_element(np_dtype):
    """comm_bench._cuda.count_unequal (the Numba arrays' check): 0 on equal data, and exactly
    the elements changed, at the ends and in the middle, for every element width."""
    import numpy as np

    from comm_bench.transports._gpu_buffers import _Numba

    g = _Numba(0)
    want = np.arange(100_003) % 251
    got = g.from_host(want.astype(np_dtype))
    assert g.count_wrong(got, want) == 0
    bad = want.astype(np_dtype)
    for i in (0, 50_000, 100_002):
        bad[i] += 1
    assert g.count_wrong(g.from_host(bad), want) == 3
    assert g.count_wrong(g.from_host(bad), want[:50_000]) == 1      # only the first want.size compared
