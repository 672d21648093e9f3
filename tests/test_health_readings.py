"""Reading a GPU's and an RDMA port's health (issue 40): comm_bench/system/gpu_health.py,
rdma_health.py and rank_health.py. Real NVML readings are checked on the GPU machine
(docs/benchmarks/health.md); here: no NVML (this machine has no driver), a port's sysfs
tree as an mlx5 NIC lays it out, which rank reads what, and doctor's [health] lines."""
import json

from cbtest import run_cli
from comm_bench.system import gpu_health, rdma_health, rdma_sysfs
from comm_bench.validate.health import errors_between
from comm_bench.system.rank_health import block, targets


def test_clock_event_reasons_are_decoded():
    assert gpu_health.decode_reasons(0) == []
    assert gpu_health.decode_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert gpu_health.decode_reasons(0x1 | 0x1000) == ["gpu_idle", "bit_0x1000"]
    assert gpu_health.decode_reasons(-1) == [] and gpu_health.decode_reasons("4") == []


def test_without_nvml_a_reading_says_why_and_never_raises():
    ok, why = gpu_health.nvml_counters.available()
    r = gpu_health.reading(index=0, watch=True)
    if ok:      # a machine with a GPU: a real reading
        assert r["available"] and r["gpu"]["index"] == 0
        return
    assert r == {"available": False, "why": why} and why
    assert gpu_health.summary(r) == why


def _port(tmp_path, symbol_error=0):
    port = tmp_path / "mlx5_2" / "ports" / "1"
    for sub in ("counters", "hw_counters"):
        (port / sub).mkdir(parents=True, exist_ok=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port / "link_layer").write_text("InfiniBand\n")
    for name, v in (("symbol_error", symbol_error), ("link_downed", 0), ("port_rcv_errors", 0),
                    ("port_xmit_data", 123456789), ("port_rcv_packets", 5000)):
        (port / "counters" / name).write_text(f"{v}\n")
    # rxe's ack_deferred rises over clean traffic and is no error ("err" inside a word)
    for name, v in (("local_ack_timeout_err", 0), ("out_of_sequence", 0), ("rx_write_requests", 99),
                    ("lifespan", 10), ("ack_deferred", 7)):
        (port / "hw_counters" / name).write_text(f"{v}\n")


def test_port_reading_keeps_error_counters_state_and_rate(tmp_path, monkeypatch):
    _port(tmp_path, symbol_error=3)
    monkeypatch.setattr(rdma_sysfs, "ROOT", str(tmp_path))
    before = rdma_health.reading("mlx5_2", 1)
    assert before["state"] == "ACTIVE" and before["phys_state"] == "LinkUp" and before["rate_gbps"] == 400.0
    assert before["counters"] == {"symbol_error": 3, "link_downed": 0, "port_rcv_errors": 0}   # no data counters
    assert before["hw_counters"] == {"local_ack_timeout_err": 0, "out_of_sequence": 0}         # no settings
    _port(tmp_path, symbol_error=1207)
    after = rdma_health.reading("mlx5_2", 1)
    assert errors_between(before, after) == {"symbol_error": 1204}
    assert "symbol_error 1,207" in rdma_health.summary(after)
    assert rdma_health.reading("mlx5_2", 2) == {"available": False, "device": "mlx5_2", "port": 2,
                                                "why": "no port 2 of mlx5_2 in sysfs"}
    json.dumps(after)       # goes into the results document as it is


def test_what_each_rank_reads_follows_its_transport():
    assert targets({"device": "cuda:0", "gpu": {"pci_bus_id": "0000:1B:00.0"}}) == {"gpu": ("0000:1B:00.0", None)}
    assert targets({"device": "mlx5_2:1", "link_layer": "InfiniBand"}) == {"nic": ("mlx5_2", 1)}
    assert targets({"device": "10.0.0.1"}) == {} and targets(None) == {}
    assert block(None, None) is None
    assert block({"gpu": {"x": 1}}, None) == {"gpu": {"before": {"x": 1}, "after": None}}


def test_doctor_shows_a_health_group():
    checks = json.loads(run_cli("doctor", "--json", check_rc=0).stdout)
    health = [c for c in checks if c["group"] == "health"]
    assert health, checks
    ok, _ = gpu_health.nvml_counters.available()
    if not ok:
        assert health[0]["name"] == "GPU health (NVML)" and not health[0]["ok"]
        assert health[0]["detail"].startswith("nothing to read: ")
    assert "[health]" in run_cli("doctor", check_rc=0).stdout


def test_a_host_sweep_records_no_health_block(tmp_path):
    out = tmp_path / "t.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "2", "--no-progress",
            "-o", out, check_rc=0)
    doc = json.loads(out.read_text())
    assert [("health" in r) for r in doc["ranks"]] == [False, False]
    proc = run_cli("validate", "--json", out)
    assert proc.returncode == 0 and "health" not in json.loads(proc.stdout)["checked"]
