"""CPU-side checks of the GPU transports (run on CI, no GPU needed): registration,
probes that never raise, GPU choice per rank, libnccl discovery, NVML without a
driver, and the planning/formulas the multi-GPU runs rely on for N GPUs."""
import ast
import os
import shutil
import subprocess
import sys

import pytest

from comm_bench.system import nvml_counters as nvml
from comm_bench import ops, registry
from comm_bench.schedule import schedule
from comm_bench.errors import TransportUnavailable
from comm_bench.transports.base import RankContext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GPU_TRANSPORTS = ("cuda", "nccl", "torch-nccl")


def ctx(rank=0, local_rank=0, world=1, **options):
    return RankContext(rank=rank, world_size=world, local_rank=local_rank, local_world_size=world,
                       host="h", addr="127.0.0.1", store=None, timeout=5.0, options=options)


@pytest.mark.parametrize("name", GPU_TRANSPORTS)
def test_registered_and_probe_never_raises(name):
    cls = registry.get(name)
    ok, why = cls.probe()
    assert isinstance(ok, bool) and isinstance(why, str)
    if not ok:
        assert why and "\n" not in why  # one line that says what to do


@pytest.mark.parametrize("name", ["nccl", "torch-nccl"])
def test_nccl_transports_cover_every_collective(name):
    cls = registry.get(name)
    assert set(ops.COLLECTIVES) <= set(cls.ops)
    assert set(cls.dtypes) <= set(ops.DTYPES)
    assert {"collective", "pair", "pairwise"} <= set(cls.patterns)


def test_shared_gpu_flag_has_one_type():
    merged = {opt.flag: opt for opt, users in registry.all_options() if opt.flag == "--gpu"}
    for name in GPU_TRANSPORTS:
        for opt in registry.get(name).options:
            if opt.flag == "--gpu":
                assert opt.type is merged["--gpu"].type is int


@pytest.mark.parametrize("path", ["transports/cuda.py", "transports/nccl.py", "transports/torch_nccl.py"])
def test_module_level_imports_are_stdlib_only(path):
    """Importing a GPU transport pulls in no optional library (torch, CUDA): the standard
    library, .base, comm_bench.errors and comm_bench.ops (numpy, a required dependency) only."""
    tree = ast.parse(open(os.path.join(ROOT, path)).read())
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] in allowed for a in node.names), ast.dump(node)
        elif isinstance(node, ast.ImportFrom):
            internal = (node.level == 1 and node.module == "base") or (
                node.level == 2 and (node.module in ("ops", "errors") or (node.module is None and
                                                              [a.name for a in node.names] == ["ops"])))
            assert internal or (node.level == 0 and node.module.split(".")[0] in allowed), ast.dump(node)


def test_pick_gpu_one_rank_per_gpu():
    from comm_bench.transports.cuda import pick_gpu

    assert pick_gpu(ctx(local_rank=1), -1, 2) == 1
    assert pick_gpu(ctx(local_rank=0), 1, 2) == 1
    with pytest.raises(TransportUnavailable, match="--nprocs 2"):
        pick_gpu(ctx(rank=2, local_rank=2), -1, 2)
    with pytest.raises(TransportUnavailable, match="--gpu 3"):
        pick_gpu(ctx(), 3, 2)


def test_nccl_library_search_order(tmp_path, monkeypatch):
    from comm_bench.transports.nccl import nccl_candidates, version_string

    assert nccl_candidates("/x/libnccl.so.2") == ["/x/libnccl.so.2"]
    fake = tmp_path / "nvidia" / "nccl" / "lib"
    fake.mkdir(parents=True)
    (fake / "libnccl.so.2").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COMM_BENCH_NCCL_LIB", "/env/libnccl.so.2")
    found = nccl_candidates()
    assert found[0] == "/env/libnccl.so.2"
    assert str(fake / "libnccl.so.2") in found
    assert found[-2:] == ["libnccl.so.2", "libnccl.so"]  # the system's loader last
    assert version_string(22809) == "2.28.9" and version_string(2708) == "2.7.8"


def test_nvml_never_raises_without_library(monkeypatch):
    monkeypatch.setitem(nvml._state, "init", False)
    monkeypatch.setitem(nvml._state, "nvml", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    try:
        ok, why = nvml.available()
        assert not ok and "nvidia-ml-py" in why
        assert nvml.devices() == [] and nvml.device(index=0) == {} and nvml.counters("0000:00:06.0") == {}
        assert nvml.system()["available"] is False
        with nvml.Sampler(["0000:00:06.0"]) as s:
            pass
        assert s.result == {}
    finally:
        nvml._state.update(init=False, nvml=None, why=None)


def test_nvml_bus_ids_and_deltas():
    assert nvml.normalize_bus_id("00000000:1B:00.0") == "0000:1b:00.0"
    assert nvml.normalize_bus_id("0000:1b:00.0") == "0000:1b:00.0"
    assert nvml.delta({"pcie_tx": 10, "x": 1}, {"pcie_tx": 25, "y": 3}) == {"pcie_tx": 15}


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_gpu_matrix_planning(n):
    """--pattern pairwise visits every ordered GPU pair once; -concurrent keeps each GPU in one pair."""
    pairwise = [p for rnd in schedule("pairwise", n) for p in rnd]
    assert sorted(pairwise) == [(s, d) for s in range(n) for d in range(n) if s != d]
    conc = schedule("pairwise-concurrent", n)
    assert sorted(p for rnd in conc for p in rnd) == sorted(pairwise)
    for rnd in conc:
        busy = [r for p in rnd for r in p]
        assert len(busy) == len(set(busy))


@pytest.mark.parametrize("n,ar,ag", [(1, 0.0, 0.0), (2, 1.0, 0.5), (4, 1.5, 0.75), (8, 1.75, 0.875)])
def test_bus_factors_for_n_gpus(n, ar, ag):
    """nccl-tests' busbw factors, which the NCCL records use at world size n."""
    assert ops.get("all_reduce").bus_factor(n) == pytest.approx(ar)
    for name in ("all_gather", "reduce_scatter", "alltoall"):
        assert ops.get(name).bus_factor(n) == pytest.approx(ag)
    for name in ("broadcast", "reduce", "sendrecv"):
        assert ops.get(name).bus_factor(n) == 1.0


def test_copy_ops_are_declared_and_count_bytes_once():
    """Each rank's own copies (h2d, d2h, bidir, d2d) are ops of the collective pattern
    declared in comm_bench.ops (an undeclared name would pass for a pair op); the
    peer copies are pair ops; every copy counts its bytes once."""
    from comm_bench.transports.cuda import LOCAL_OPS, PEER_OPS

    for name in LOCAL_OPS:
        assert name in ops.LOCAL_OPS and ops.get(name).collective, name
    for name in PEER_OPS:
        assert not ops.get(name).collective, name
    for name in LOCAL_OPS + PEER_OPS:
        assert [ops.get(name).bus_factor(n) for n in (1, 2, 8)] == [1.0, 1.0, 1.0], name


def test_nvlink_version_enum_and_rate():
    """NVML says 6 for Hopper's NVLink 4.0 (18 links x 25 GB/s = 450 GB/s per direction on an H200)."""

    class FakeNvml:
        NVML_NVLINK_MAX_LINKS = 18

        def nvmlDeviceGetNvLinkState(self, h, link):
            return 1

        def nvmlDeviceGetNvLinkVersion(self, h, link):
            return 6

        def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
            raise RuntimeError("not supported")

        def nvmlDeviceGetFieldValues(self, h, ids):
            raise RuntimeError("not supported")

    out = nvml._nvlinks(FakeNvml(), None)
    assert out["links_up"] == 18 and out["version"] == 4  # NVML code 6 is NVLink 4.0
    assert out["theoretical_gbps_per_direction"] == pytest.approx(450.0)


LOADER_MAIN = r"""
#include "nccl_loader.h"
#include <iostream>
int main() {
  try { cb::nccl::load({"libnccl-absent.so.2", "/nonexistent/libnccl.so.2"}); }
  catch (const std::exception& e) { std::cout << e.what() << "\n"; }
}
"""


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++ to build the libnccl loader")
def test_nccl_load_failure_names_each_library_once(tmp_path):
    # doctor's NCCL line is this message: dlerror() already starts with the name
    src = tmp_path / "t.cpp"
    src.write_text(LOADER_MAIN)
    subprocess.run(["g++", "-std=c++17", "-I", os.path.join(ROOT, "csrc"), "-I", os.path.join(ROOT, "csrc", "cuda"),
                    str(src), "-o",
                    str(tmp_path / "t"), "-ldl"], check=True, timeout=300)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=60).stdout
    assert "libnccl-absent.so.2: cannot open" in out and "/nonexistent/libnccl.so.2: cannot" in out
    assert "libnccl-absent.so.2: libnccl-absent.so.2" not in out
    assert "/nonexistent/libnccl.so.2: /nonexistent/libnccl.so.2" not in out
