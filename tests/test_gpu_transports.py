"""The GPU transports on a real GPU: cuda copies, native NCCL, torch-nccl.

Marked `gpu`; every test skips (with the reason) where comm_bench._cuda was not
built or no GPU answers. Multi-GPU tests also skip with fewer than 2 GPUs.
Run on the GPU machine: pytest -m gpu tests/test_gpu_transports.py
"""
import os

import pytest

from cbtest import load_results, run_cli

pytestmark = pytest.mark.gpu


def _gpus():
    from comm_bench.transports.cuda import gpu_count, probe_gpu

    ok, why = probe_gpu()
    return (gpu_count()[0] if ok else 0), why


N_GPUS, WHY = _gpus()
needs_gpu = pytest.mark.skipif(N_GPUS == 0, reason=f"no GPU: {WHY}")
needs_2_gpus = pytest.mark.skipif(N_GPUS < 2, reason=f"needs 2 GPUs ({N_GPUS} here)")
ENV = {"NCCL_NVLS_ENABLE": "0"}
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


@pytest.fixture(scope="module")
def cuda_mod():
    if N_GPUS == 0:
        pytest.skip(f"no GPU: {WHY}")
    from comm_bench.system.native import require

    return require("_cuda")


@needs_gpu
@pytest.mark.parametrize("kind", ["h2d", "d2h", "bidir", "d2d"])
@pytest.mark.parametrize("method,host_mem", [("ce", "pinned"), ("sm", "pinned"), ("ce", "pageable")])
def test_copies_check(cuda_mod, kind, method, host_mem):
    if kind == "d2d" and host_mem == "pageable":
        pytest.skip("device-local copies use no host memory")
    bench = cuda_mod.CopyBench(0, -1)
    for size in (1, 7, 4096 + 3, (1 << 20) + 5, 64 << 20):
        r = bench.run(kind, method, host_mem, size, 4, 1, True, -1, 60.0)
        assert r["wrong"] == 0, (kind, method, host_mem, size)
        assert len(r["samples_us"]) == 4 and all(s > 0 for s in r["samples_us"])


@needs_gpu
def test_copy_rejects_sm_on_pageable(cuda_mod):
    bench = cuda_mod.CopyBench(0, -1)
    with pytest.raises(cuda_mod.NativeError, match="pageable"):
        bench.run("h2d", "sm", "pageable", 4096, 2, 0, False, -1, 10.0)


@pytest.fixture(scope="module")
def nccl1(cuda_mod):
    from comm_bench.transports.nccl import nccl_candidates

    try:
        cuda_mod.nccl_load(nccl_candidates())
    except cuda_mod.NativeError as exc:
        pytest.skip(f"no libnccl: {exc}")
    comm = cuda_mod.NcclBench(0, 1, 0, cuda_mod.nccl_unique_id(), 60.0)
    yield comm
    comm.destroy()


# every op of comm_bench.ops, on nccl (ncclGather/ncclScatter or grouped send/recv for the
# rooted two) and torch-nccl (torch.distributed.gather/scatter) alike
NCCL_OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv",
            "gather", "scatter"]


def _counts(op, size, dtype="float32", n=1):
    """(input, output) elements of one rank, as the nccl transport passes them."""
    from comm_bench import ops

    return ops.get(op).counts(size, n, ops.dtype_size(dtype))


@needs_gpu
@pytest.mark.parametrize("op", NCCL_OPS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "float64", "int64", "uint8", "int32"])
def test_nccl_world1_check(nccl1, op, dtype):
    from comm_bench import ops

    es = ops.dtype_size(dtype)
    for size in (es, 1024 * es + es, 1 << 22):
        for in_place in (False, True):
            r = nccl1.run(op, *_counts(op, size, dtype), dtype, "sum", 0, -1, 3, 1, in_place, 0, True, 60.0)
            assert r["wrong"] == 0, (op, dtype, size, in_place)
            assert len(r["samples_us"]) == 3


@needs_gpu
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "alltoall"])
def test_nccl_world1_cudagraph(nccl1, op):
    r = nccl1.run(op, *_counts(op, 1 << 20), "float32", "sum", 0, -1, 10, 2, False, 2, True, 60.0)
    assert r["wrong"] == 0 and len(r["samples_us"]) == 10 and all(s > 0 for s in r["samples_us"])


def _sweep(tmp_results, *args, timeout=300):
    proc = run_cli("sweep", *args, "-b", "8", "-e", "8M", "-f", "16", "-n", "5", "-w", "2", "-c",
                   "--no-progress", "-o", tmp_results, timeout=timeout, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    doc = load_results(tmp_results)
    assert doc["status"] == "ok" and doc["results"]
    assert all(r["wrong"] == 0 for r in doc["results"]), [r for r in doc["results"] if r["wrong"]]
    return doc


@needs_gpu
def test_sweep_cuda(tmp_results):
    doc = _sweep(tmp_results, "-t", "cuda", "--op", "h2d,d2h,bidir,d2d", "--pattern", "collective",
                 "--nprocs", "1")
    assert {r["op"] for r in doc["results"]} == {"h2d", "d2h", "bidir", "d2d"}
    assert doc["ranks"][0]["devices"]["gpu"]["name"]


@needs_gpu
def test_sweep_nccl_world1(tmp_results):
    doc = _sweep(tmp_results, "-t", "nccl", "--op", "all", "--nprocs", "1")
    assert {r["op"] for r in doc["results"]} == set(NCCL_OPS)
    assert doc["ranks"][0]["devices"]["nccl"]["version"].startswith("2.")


@needs_gpu
def test_sweep_torch_nccl_world1(tmp_results):
    doc = _sweep(tmp_results, "-t", "torch-nccl", "--op", "all", "--nprocs", "1")
    assert {r["op"] for r in doc["results"]} == set(NCCL_OPS)
    for r in doc["results"]:  # nccl-tests' host-clock figure, the GPU time beside it
        assert r["extra"]["timing"]["time_us"].startswith("pass 1: host clock")
        assert r["extra"]["gpu_time_us"] > 0 and r["extra"]["average"] == 1


@needs_2_gpus
@pytest.mark.parametrize("transport", ["nccl", "torch-nccl"])
def test_sweep_nccl_world_n(tmp_results, transport):
    n = min(N_GPUS, 8)
    doc = _sweep(tmp_results, "-t", transport, "--op", "all", "--nprocs", str(n))
    assert {r["op"] for r in doc["results"]} == set(NCCL_OPS)


@needs_2_gpus
def test_sweep_nccl_pairwise(tmp_results):
    n = min(N_GPUS, 4)
    doc = _sweep(tmp_results, "-t", "nccl", "--op", "sendrecv", "--pattern", "pairwise", "--nprocs", str(n))
    assert {(r["src"], r["dst"]) for r in doc["results"]} == {(s, d) for s in range(n) for d in range(n) if s != d}


@needs_2_gpus
@pytest.mark.parametrize("copy", ["ce", "sm"])
def test_sweep_cuda_peer_matrix(tmp_results, copy):
    n = min(N_GPUS, 4)
    doc = _sweep(tmp_results, "-t", "cuda", "--op", "peer,peer_read,peer_bidir", "--pattern", "pairwise",
                 "--copy", copy, "--nprocs", str(n))
    pairs = {(r["src"], r["dst"]) for r in doc["results"]}
    assert pairs == {(s, d) for s in range(n) for d in range(n) if s != d}
    assert all(r["extra"]["copy"] == copy for r in doc["results"])


@needs_gpu
def test_nccl_time_is_the_batch_not_the_samples(nccl1):
    """time_us comes from pass 1 (host clock around the batch and the synchronize, nccl-tests'
    BenchTime), gpu_us from pass 1b (two events around a batch), the samples from pass 2."""
    r = nccl1.run("all_reduce", 2, 2, "float32", "sum", 0, -1, 50, 5, False, 0, False, 60.0)
    assert r["mean_us"] > 0 and r["gpu_us"] > 0 and len(r["samples_us"]) == 50
    # pass 2 adds an event per launch: its mean can only be the same or longer than pass 1b's
    assert r["gpu_us"] <= sum(r["samples_us"]) / 50 * 1.05
    # the host clock spans the GPU work plus the first launch and the final synchronize
    assert r["mean_us"] >= 0.95 * r["gpu_us"], r
    g = nccl1.run("all_reduce", 2, 2, "float32", "sum", 0, -1, 50, 5, False, 4, False, 60.0)
    assert g["mean_us"] > 0 and g["mean_us"] >= 0.95 * g["gpu_us"], g


def _has_symbol(name):
    """Whether the libnccl the transport loads exports `name` (dlsym, as nccl_loader.h looks)."""
    import ctypes

    from comm_bench.transports.nccl import load_nccl

    _, path, _ = load_nccl()
    return hasattr(ctypes.CDLL(path), name)


@needs_gpu
@pytest.mark.parametrize("op, call", [("alltoall", "ncclAlltoAll"), ("gather", "ncclGather"),
                                      ("scatter", "ncclScatter")])
def test_nccl_uses_the_ops_own_call_where_the_library_has_it(nccl1, op, call):
    r = nccl1.run(op, *_counts(op, 1 << 20), "float32", "sum", 0, -1, 3, 1, False, 0, True, 60.0)
    assert r["wrong"] == 0
    assert r["api"] == (call if _has_symbol(call) else "ncclSend/ncclRecv group")
    assert r["alloc"] == ("ncclMemAlloc" if _has_symbol("ncclMemAlloc") else "cudaMalloc")


@needs_gpu
@pytest.mark.parametrize("mode, needs", [(1, "ncclCommRegister"), (2, "ncclCommWindowRegister")])
def test_nccl_registered_buffers_check(cuda_mod, nccl1, mode, needs):
    """nccl-tests' -R: buffers registered with the communicator (1) or as symmetric windows
    (2); the data stay right through growing (re-registered) buffers."""
    if not _has_symbol(needs):
        with pytest.raises(cuda_mod.NativeError, match=f"-R {mode}"):
            cuda_mod.NcclBench(0, 1, 0, cuda_mod.nccl_unique_id(), 60.0, mode)
        return
    comm = cuda_mod.NcclBench(0, 1, 0, cuda_mod.nccl_unique_id(), 60.0, mode)
    try:
        for op in ("all_reduce", "all_gather", "alltoall", "sendrecv"):
            for size in (1 << 10, 1 << 22):
                r = comm.run(op, *_counts(op, size), "float32", "sum", 0, -1, 3, 1, False, 0, True, 60.0)
                assert r["wrong"] == 0, (mode, op, size)
    finally:
        comm.destroy()


@needs_gpu
def test_sweep_nccl_records_method_api_and_options(tmp_results):
    doc = _sweep(tmp_results, "-t", "nccl", "--op", "alltoall,gather", "--nprocs", "1", "-a", "0", "-R", "1")
    for r in doc["results"]:
        x = r["extra"]
        assert x["average"] == 0 and x["register"] == 1 and x["nccl_api"]
        assert x["timing"]["time_us"].startswith("pass 1: host clock")
        assert x["gpu_time_us"] > 0 and x["launch_overhead_us"] == pytest.approx(r["time_us"] - x["gpu_time_us"])


@needs_2_gpus
def test_cudagraph_lowers_small_nccl_time(tmp_path):
    """nccl-tests' -G: a graph of the iterations launched N times removes the launch cost,
    so it is never slower than eager launches, and much faster where the host's launch rate
    bounds them (2 x H200, one machine: ~11 us -> ~5.6 us for an 8 B all_reduce; another
    with faster launches: 6.0 -> 5.5 us). The old -G (an event node after every captured
    launch, one graph launch timed) read 12.3-13.8 us: slower than eager."""
    def time_8b(*extra):
        out = str(tmp_path / f"g{len(extra)}.json")
        proc = run_cli("sweep", "-t", "nccl", "--nprocs", "2", "--op", "all_reduce", "-b", "8", "-e", "8",
                       "-n", "50", "-w", "5", "--no-progress", "-o", out, *extra, timeout=300, env=ENV)
        assert proc.returncode == 0, proc.stderr[-2000:]
        rec = load_results(out)["results"][0]
        assert rec["extra"]["timing"]["time_us"].startswith("pass 1: host clock")
        return rec["time_us"]

    eager, graph = time_8b(), time_8b("-G", "10")
    assert graph <= 1.05 * eager, (eager, graph)


@needs_2_gpus
@pytest.mark.parametrize("copy", ["ce", "sm"])
def test_peer_bidir_total_is_twice_one_direction(tmp_path, cuda_mod, copy):
    """Both GPUs writing to each other at once (nvbandwidth's bidirectional write): on a
    full-duplex link (NVLink, PCIe) each direction keeps about the one-way rate, so the
    total is close to twice a one-direction peer copy."""
    if not cuda_mod.can_access_peer(0, 1):
        pytest.skip("GPU 0 cannot reach GPU 1 directly")
    figures = {}
    for op in ("peer", "peer_bidir"):
        out = str(tmp_path / f"{op}.json")
        proc = run_cli("sweep", "-t", "cuda", "--nprocs", "2", "--pattern", "pair", "--op", op, "--copy", copy,
                       "-b", "256M", "-e", "256M", "-n", "10", "-w", "3", "-c", "--no-progress", "-o", out,
                       timeout=300, env=ENV)
        assert proc.returncode == 0, proc.stderr[-2000:]
        figures[op] = load_results(out)["results"][0]
        assert figures[op]["wrong"] == 0
    one_way = figures["peer"]["algbw"]
    bidir = figures["peer_bidir"]
    directions = bidir["extra"]["per_direction_gbps"]
    assert bidir["algbw"] == pytest.approx(directions["src->dst"])
    assert bidir["extra"]["total_gbps"] == pytest.approx(directions["src->dst"] + directions["dst->src"])
    assert bidir["extra"]["total_gbps"] > 1.8 * one_way, (one_way, directions)


@needs_gpu
@pytest.mark.parametrize("transport, ops", [("cuda", "h2d,d2h,bidir,d2d"), ("nccl", "all"),
                                            ("torch-nccl", "all")])
def test_gpu_check_counts_a_flipped_byte(tmp_results, transport, ops):
    """The GPU data checks see corrupted data: a test hook flips one byte (cuda, nccl) or
    changes one element (torch-nccl) of each checked result after it arrived, and every
    record counts it."""
    proc = run_cli("sweep", "-t", transport, "--op", ops, "--pattern", "collective", "--nprocs", "1",
                   "-b", "4K", "-e", "64K", "-f", "16", "-n", "5", "-w", "1", "-c", "--no-progress",
                   "-o", tmp_results, timeout=600,
                   env=dict(ENV, COMM_BENCH_TEST_CORRUPT_GPU="1", COMM_BENCH_TEST_CORRUPT_CHECK="1"))
    records = load_results(tmp_results)["results"]
    assert records, proc.stderr[-2000:]
    assert all(r["wrong"] >= 1 for r in records), [(r["op"], r["size"], r["wrong"]) for r in records]
