"""tools/bench_train_step.py (real DDP and FSDP steps, 2 ranks over gloo on CPU) and
tools/compare_select.py (its figures against select's predictions) end to end."""
import json
import os
import socket
import subprocess
import sys

import pytest

import select_docs as SD

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")


def _bench_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_train_step", os.path.join(TOOLS, "bench_train_step.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_min_over_ranks_takes_each_collective_from_its_shortest_rank():
    m = _bench_module()
    # rank 0 waited 90 us for rank 1 in the first collective, rank 1 waited 40 in the second
    assert m.min_over_ranks_us([[100.0, 20.0], [10.0, 60.0]]) == 30.0
    # unmatched counts (a dropped event): the mean of the ranks' sums, never a mix-up
    assert m.min_over_ranks_us([[100.0, 20.0], [10.0]]) == 65.0


def test_each_nccl_kernel_counts_once():
    """The profiler puts an "nccl:all_reduce" GPU annotation over each NCCL kernel: counting
    it too read every collective twice (the 2x of the first selection benchmarks)."""
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType
    m = _bench_module()

    def ev(name, dev, start, dur):
        return NS(name=name, device_type=dev, time_range=NS(start=start, elapsed_us=lambda: dur))
    gpu = [ev("nccl:all_reduce", DeviceType.CUDA, 10, 240.0),
           ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", DeviceType.CUDA, 10, 240.0),
           ev("ncclKernel_AllGather_RING_LL_Sum_int8", DeviceType.CUDA, 5, 100.0),
           ev("nccl:all_reduce", DeviceType.CPU, 1, 30.0),
           ev("ampere_bf16_s16816gemm", DeviceType.CUDA, 2, 999.0)]
    assert m.comm_durations_us(NS(events=lambda: gpu), True) == [100.0, 240.0]
    cpu = [ev("c10d::allreduce_", DeviceType.CPU, 1, 50.0), ev("gloo:all_reduce", DeviceType.CPU, 2, 40.0)]
    assert m.comm_durations_us(NS(events=lambda: cpu), False) == [40.0]


def test_bench_dry_run_shapes():
    out = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_train_step.py"), "--dry-run",
                          "--params", "350M,1B", "--layers", "16"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # 12 L h^2 with h a multiple of 128 closest to the asked count
    assert "params 380633088" in out.stdout and "hidden 1408" in out.stdout
    assert "params 1019215872" in out.stdout and "hidden 2304" in out.stdout


@pytest.mark.slow
def test_bench_two_ranks_then_compare(tmp_path):
    bench = tmp_path / "train.json"
    with socket.socket() as sk:               # torchrun's static rendezvous needs a real port
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(port),
           os.path.join(TOOLS, "bench_train_step.py"), "--device", "cpu", "--params", "1.5M", "--layers", "2",
           "--seq-len", "32", "--micro-batch", "2", "--warmup", "1", "--steps", "2", "--profile-steps", "1",
           "-o", str(bench)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(bench.read_text())
    assert doc["world_size"] == 2 and doc["backend"] == "gloo"
    (case,) = doc["cases"]
    assert case["params"] == 12 * case["layers"] * case["hidden"] ** 2 and case["compute_s"] > 0
    for strat in ("ddp", "fsdp"):
        s = case["strategies"][strat]
        assert s["step_s"] > 0 and s["nosync_step_s"] > 0 and s["comm_kernel_s"] > 0
        assert 0 < s["comm_kernel_min_s"] <= s["comm_kernel_max_s"] * 1.000001
        assert s["comm_cost_s"] >= 0
    assert case["strategies"]["fsdp"]["solo_step_s"] > 0
    results = SD.write(tmp_path / "links.json", SD.collective_doc(["n0"], 2, 20e-6, 1e9))
    out = subprocess.run([sys.executable, os.path.join(TOOLS, "compare_select.py"), str(bench), "--results",
                          results, "--json", str(tmp_path / "cmp.json")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "communication time per step" in out.stdout
    rows = json.loads((tmp_path / "cmp.json").read_text())["rows"]
    assert {r["strategy"] for r in rows} == {"ddp", "fsdp"}
    for r in rows:
        assert r["pred_comm_s"] > 0 and r["meas_comm_from"] == "steps"
        # the error is there unless the tiny CPU step measured no cost at all (noise)
        assert (r["err_comm"] is not None) == (r["meas_comm_s"] > 0)
