"""Topology discovery on recorded fixture trees, the link model, NVML without a GPU, and
`comm-bench topo`."""
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from comm_bench.topology import fixture_names, fixture_root, format_text, record, snapshot
from comm_bench import links as L
from comm_bench.system.sysfs import parse_config, parse_cpulist, parse_ib_rate, parse_link_speed, read_pci
from comm_bench.topology.matrix import pci_relation
from comm_bench.topology.nvml_snapshot import norm_bdf, read_nvml
from cbtest import run_cli

REPO = Path(__file__).resolve().parent.parent
DGX = fixture_root("dgx-h100")


@pytest.fixture(scope="module")
def dgx():
    return snapshot(DGX)


def cell(snap, a, b):
    m = snap["matrix"]
    return m["cells"][m["labels"].index(a)][m["labels"].index(b)]


def label_of(snap, name):
    return next(n["label"] for n in snap["nics"] if n["name"] == name)


# ----------------------------------------------------------------------------- package
def test_top_level_import_refused():
    p = subprocess.run([sys.executable, "-c", "import topology"], cwd=REPO, capture_output=True, text=True)
    assert p.returncode != 0 and "import comm_bench.topology" in p.stderr


def test_fixtures_shipped():
    assert {"dgx-h100", "dev-vm"} <= set(fixture_names())


# ----------------------------------------------------------------------------- parsers
def test_parsers():
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []
    assert parse_link_speed("32.0 GT/s PCIe") == 32.0
    assert parse_link_speed("2.5 GT/s") == 2.5
    assert parse_link_speed("Unknown") is None
    assert parse_ib_rate("400 Gb/sec (4X NDR)") == (400.0, "4X NDR")
    assert parse_ib_rate("2.5 Gb/sec (1X SDR)") == (2.5, "1X SDR")
    assert norm_bdf("00000000:18:00.0") == "0000:18:00.0"
    assert norm_bdf(b"0000:1A:00.0") == "0000:1a:00.0"


def test_config_space_acs_and_port_type():
    raw = bytearray(0x108)
    raw[6] = 0x10
    raw[0x34] = 0x40
    raw[0x40] = 0x10
    raw[0x42:0x44] = struct.pack("<H", 6 << 4)          # downstream port
    raw[0x100:0x104] = struct.pack("<I", 0x000D | (1 << 16))
    raw[0x106:0x108] = struct.pack("<H", 0x1D)          # SV RR CR UF
    out = parse_config(bytes(raw))
    assert out["port_type"] == "downstream"
    assert out["acs"]["enabled"] == ["SV", "RR", "CR", "UF"] and out["acs"]["p2p_redirect"]
    assert parse_config(b"")["acs"] is None            # unprivileged read: 64 bytes or nothing


def test_link_model():
    assert L.pcie_gbs(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert L.pcie_gbs(4, 16) == pytest.approx(31.5, rel=1e-3)
    assert L.pcie_gbs(3, 8) == pytest.approx(7.88, rel=1e-3)
    assert L.nvlink_gbs(4, 18) == 450.0          # H100: 900 GB/s both directions
    assert L.nvlink_gbs(3, 12) == 300.0          # A100: 600 GB/s both directions
    assert L.nvlink_gbs(5, 18) == 900.0          # Blackwell
    assert L.ib_gbs(400) == 50.0 and L.ib_gbs(200) == 25.0
    assert L.eth_gbs(100000) == 12.5 and L.eth_gbs(-1) is None
    assert L.pcie_gbs(None, 16) is None and L.nvlink_gbs(4, 0) is None


# ----------------------------------------------------------------------------- DGX fixture
def test_dgx_devices(dgx):
    assert len(dgx["gpus"]) == 8 and not dgx["errors"]
    assert all(g["name"] == "NVIDIA H100 80GB HBM3" for g in dgx["gpus"])
    assert [g["numa_node"] for g in dgx["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    ib = [n for n in dgx["nics"] if n["kind"] == "ib"]
    roce = [n for n in dgx["nics"] if n["kind"] == "roce"]
    eth = [n for n in dgx["nics"] if n["kind"] == "ethernet"]
    assert len(ib) == 8 and len(roce) == 4 and [n["name"] for n in eth] == ["eno3"]
    assert all(n["rate_gbs"] == 50.0 and n["state"] == "ACTIVE" for n in ib)
    assert ib[0]["netdev"] == "ibp25s0" and ib[0]["link_layer"] == "InfiniBand"
    assert eth[0]["rate_gbs"] == 1.25
    g0 = dgx["gpus"][0]
    assert g0["pcie"]["cur_gen"] == 5 and g0["pcie"]["cur_width"] == 16
    assert g0["nvlink"]["links"] == 18 and g0["nvlink"]["version"] == 4 and g0["nvlink"]["gbs"] == 450.0
    assert len(dgx["numa"]) == 2 and dgx["numa"][1]["cpulist"] == "56-111,168-223"
    assert dgx["warnings"] == []
    json.dumps(dgx)


def test_dgx_matrix_like_nvidia_smi(dgx):
    assert all(cell(dgx, f"GPU{i}", f"GPU{j}") == ("X" if i == j else "NV18")
               for i in range(8) for j in range(8))
    # each GPU shares a PCIe switch with one compute NIC
    for gpu, nic in enumerate(["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]):
        assert cell(dgx, f"GPU{gpu}", label_of(dgx, nic)) == "PIX"
    assert cell(dgx, "GPU0", label_of(dgx, "mlx5_3")) == "NODE"     # same socket
    assert cell(dgx, "GPU0", label_of(dgx, "mlx5_6")) == "SYS"      # other socket
    assert cell(dgx, label_of(dgx, "mlx5_1"), label_of(dgx, "mlx5_2")) == "PIX"   # two ports, one card
    m = dgx["matrix"]
    i, j = m["labels"].index("GPU0"), m["labels"].index("GPU5")
    assert m["classes"][i][j] == "nvlink" and m["rates_gbs"][i][j] == 450.0
    k = m["labels"].index(label_of(dgx, "mlx5_0"))
    assert m["rates_gbs"][i][k] == 50.0
    text = format_text(dgx)
    assert "NV18" in text and "PIX" in text and "Legend" in text and "NDR" in text


def _copy_dgx(tmp_path):
    dst = tmp_path / "dgx"
    shutil.copytree(DGX, dst)
    return dst


def _pci_dir(root, bdf):
    for dirpath, dirnames, _ in os.walk(root / "sys" / "devices"):
        if os.path.basename(dirpath) == bdf:
            return Path(dirpath)
    raise AssertionError(bdf)


def test_degraded_link_acs_and_port_down(tmp_path):
    root = _copy_dgx(tmp_path)
    g3 = _pci_dir(root, "0000:5d:00.0")
    (g3 / "current_link_width").write_text("8\n")
    (g3 / "current_link_speed").write_text("16.0 GT/s PCIe\n")
    dp = _pci_dir(root, "0000:17:00.0")                      # switch port above GPU0
    cfg = bytearray((dp / "config").read_bytes())
    cfg[0x106:0x108] = struct.pack("<H", 0x1D)
    (dp / "config").write_bytes(bytes(cfg))
    port = next(root.rglob("infiniband/mlx5_4/ports/1"))
    (port / "state").write_text("1: DOWN\n")
    snap = snapshot(str(root))
    w = "\n".join(snap["warnings"])
    assert "GPU3" in w and "gen4 x8" in w and "gen5 x16" in w
    assert "0000:17:00.0: ACS redirect" in w
    assert "mlx5_4" in w and "DOWN" in w
    g3s = snap["gpus"][3]
    assert g3s["pcie"]["cur_gbs"] == pytest.approx(15.75, rel=1e-3)
    m = snap["matrix"]
    i, k = m["labels"].index("GPU3"), m["labels"].index(label_of(snap, "mlx5_5"))
    assert m["rates_gbs"][i][k] == pytest.approx(15.75, rel=1e-3)      # the slow link is the bottleneck


def _dev(path, cls, ptype=None, numa=0):
    path.mkdir(parents=True)
    (path / "class").write_text(cls + "\n")
    (path / "vendor").write_text("0x10de\n" if cls.startswith("0x03") else "0x1000\n")
    (path / "numa_node").write_text(f"{numa}\n")
    if ptype is not None:
        raw = bytearray(0x50)
        raw[6], raw[0x34], raw[0x40] = 0x10, 0x40, 0x10
        raw[0x42:0x44] = struct.pack("<H", {"root_port": 4, "upstream": 5, "downstream": 6}[ptype] << 4)
        (path / "config").write_bytes(bytes(raw))


def test_pxb_and_phb(tmp_path):
    """two switch levels -> PXB; two root ports of one root complex -> PHB; other socket -> SYS."""
    rc = tmp_path / "sys" / "devices" / "pci0000:00"
    rp = rc / "0000:00:01.0"
    _dev(rp, "0x060400", "root_port")
    up = rp / "0000:01:00.0"
    _dev(up, "0x060400", "upstream")
    for k, sub in ((0, "02"), (1, "05")):
        dp = up / f"0000:02:0{k}.0"
        _dev(dp, "0x060400", "downstream")
        up2 = dp / f"0000:{sub}:00.0"
        _dev(up2, "0x060400", "upstream")
        dp2 = up2 / f"0000:{int(sub) + 1:02d}:00.0"
        _dev(dp2, "0x060400", "downstream")
        _dev(dp2 / f"0000:{int(sub) + 2:02d}:00.0", "0x030200")
    rp2 = rc / "0000:00:02.0"
    _dev(rp2, "0x060400", "root_port")
    _dev(rp2 / "0000:10:00.0", "0x030200")
    _dev(tmp_path / "sys" / "devices" / "pci0000:80" / "0000:80:01.0", "0x060400", "root_port", numa=1)
    _dev(tmp_path / "sys" / "devices" / "pci0000:80" / "0000:80:01.0" / "0000:81:00.0", "0x030200", numa=1)
    pci = read_pci(str(tmp_path))
    assert pci_relation("0000:04:00.0", "0000:07:00.0", pci) == "PXB"
    assert pci_relation("0000:04:00.0", "0000:10:00.0", pci) == "PHB"
    assert pci_relation("0000:04:00.0", "0000:81:00.0", pci) == "SYS"
    snap = snapshot(str(tmp_path), nvml=False)
    assert [g["pci"] for g in snap["gpus"]] == ["0000:04:00.0", "0000:07:00.0", "0000:10:00.0", "0000:81:00.0"]


# ----------------------------------------------------------------------------- NVML
def test_nvml_without_library_never_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)        # import fails
    doc = read_nvml()
    assert doc["available"] is False and doc["gpus"] == [] and "nvidia-ml-py" in doc["reason"]


def _fake_pynvml(n=2):
    """A stand-in for pynvml with n GPUs, GPU0 <-> GPU1 joined by 4 NVLink 4 links."""
    m = types.ModuleType("pynvml")
    bus = [f"00000000:{0x18 + 0x10 * i:02X}:00.0" for i in range(n)]
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: "580.65"
    m.nvmlSystemGetNVMLVersion = lambda: "13.580.65"
    m.nvmlSystemGetCudaDriverVersion = lambda: 13000
    m.nvmlDeviceGetCount = lambda: n
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=bus[h].encode())
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=150 << 30)
    m.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    m.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    m.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    m.nvmlDeviceGetNumaNodeId = lambda h: 0

    def state(h, link):
        if link >= 4:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return 1
    m.nvmlDeviceGetNvLinkState = state
    m.nvmlDeviceGetNvLinkVersion = lambda h, link: 6  # NVML enum: NVLink 4.0 (Hopper)
    m.nvmlDeviceGetNvLinkRemotePciInfo = lambda h, link: types.SimpleNamespace(busId=bus[1 - h].encode())
    m.nvmlDeviceGetNvLinkRemoteDeviceType = lambda h, link: 0
    return m


def test_nvml_reader_with_fake_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    doc = read_nvml()
    assert doc["available"] and doc["driver_version"] == "580.65" and len(doc["gpus"]) == 2
    g = doc["gpus"][0]
    assert g["pci"] == "0000:18:00.0" and g["pcie"]["cur_gen"] == 5
    assert len(g["nvlinks"]) == 4 and g["nvlinks"][0]["remote_pci"] == "0000:28:00.0"
    assert g["nvlinks"][0]["remote_type"] == "GPU" and g["nvlinks"][0]["version"] == 4
    # the snapshot turns it into NV4 and 100 GB/s even without a PCI tree
    snap = snapshot("/nonexistent-root", nvml=doc)
    assert cell(snap, "GPU0", "GPU1") == "NV4"
    assert snap["gpus"][0]["nvlink"]["gbs"] == 100.0


def test_nvml_not_supported_nvlink(monkeypatch):
    fake = _fake_pynvml(1)

    def unsupported(h, link):
        raise RuntimeError("Not Supported")
    fake.nvmlDeviceGetNvLinkState = unsupported
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    doc = read_nvml()
    assert doc["gpus"][0]["nvlinks"] == [] and "not supported" in doc["gpus"][0]["nvlink_reason"]


def test_nvml_fixture_inputs(tmp_path):
    doc = read_nvml(os.path.join(DGX, "nvml.json"))
    assert len(doc["gpus"]) == 8
    assert read_nvml(str(tmp_path / "missing.json"))["available"] is False


# ----------------------------------------------------------------------------- live + record
def test_live_snapshot_fast_and_serialisable():
    t = time.monotonic()
    snap = snapshot()
    assert time.monotonic() - t < 1.0
    json.dumps(snap)
    assert snap["source"] == "live" and snap["host"]
    assert snap["errors"] == []


def test_snapshot_never_raises_on_garbage(tmp_path):
    (tmp_path / "sys" / "devices" / "pci0000:00" / "0000:00:01.0").mkdir(parents=True)
    (tmp_path / "sys" / "devices" / "pci0000:00" / "0000:00:01.0" / "class").write_bytes(b"\xff\xfe")
    snap = snapshot(str(tmp_path), nvml=False)
    json.dumps(snap)
    snap2 = snapshot(str(tmp_path / "nope"), nvml=False)
    assert snap2["gpus"] == [] and snap2["nics"] == []


def _strip(s):
    s = json.loads(json.dumps(s))
    for k in ("elapsed_s", "root", "source", "host", "nvml"):
        s.pop(k, None)
    for n in s["nics"]:
        n.pop("addrs", None)
    return s


def test_record_round_trip(tmp_path):
    out = tmp_path / "rec"
    record(str(out), root=DGX, nvml=False)
    a = _strip(snapshot(DGX))
    b = _strip(snapshot(str(out), nvml=os.path.join(DGX, "nvml.json")))
    assert a == b
    assert not [p for p in out.rglob("*") if p.is_symlink()]


def test_dev_vm_fixture_matches_this_kind_of_machine():
    snap = snapshot(fixture_root("dev-vm"))
    assert snap["gpus"] == [] and any(n["name"] == "eth0" for n in snap["nics"])


# ----------------------------------------------------------------------------- CLI
def test_topo_cli():
    p = run_cli("topo", "--fixture", "dgx-h100", check_rc=0)
    assert "NV18" in p.stdout and "PIX" in p.stdout and "mlx5_0" in p.stdout
    p = run_cli("topo", "--json", check_rc=0)
    doc = json.loads(p.stdout)
    assert doc["schema"] == 1 and doc["source"] == "live"
    p = run_cli("topo", "--root", DGX, "--json", check_rc=0)
    assert len(json.loads(p.stdout)["gpus"]) == 8
    p = run_cli("topo", "--fixture", "nope", check_rc=2)
    assert "dgx-h100" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("topo", "--root", "/nonexistent", check_rc=2)
    assert "Traceback" not in p.stderr
    run_cli("topo", "--help", check_rc=0)


def test_topo_record_cli(tmp_path):
    run_cli("topo", "--record", str(tmp_path / "me"), check_rc=0)
    p = run_cli("topo", "--root", str(tmp_path / "me"), check_rc=0)
    assert "NUMA" in p.stdout


def test_record_with_nvml(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    record(str(tmp_path / "rec"), root=DGX)
    doc = json.loads((tmp_path / "rec" / "nvml.json").read_text())
    assert doc["available"] and [g["name"] for g in doc["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]


def test_gpu_machine_fixture():
    """Recorded on the project's 2-GPU machine: 2 x H200, PCIe Gen5 x16, NV18, no RDMA."""
    snap = snapshot(fixture_root("gpu-h200x2"))
    assert [g["name"] for g in snap["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    for g in snap["gpus"]:
        assert (g["pcie"]["max_gen"], g["pcie"]["max_width"]) == (5, 16)
        assert (g["nvlink"]["links"], g["nvlink"]["version"], g["nvlink"]["gbs"]) == (18, 4, 450.0)
    labels, cells = snap["matrix"]["labels"], snap["matrix"]["cells"]
    assert cells[labels.index("GPU0")][labels.index("GPU1")] == "NV18"
    assert snap["matrix"]["rates_gbs"][labels.index("GPU0")][labels.index("GPU1")] == 450
    assert not [n for n in snap["nics"] if n["kind"] in ("ib", "roce")]

def test_format_text_unknown_rates_cuda_version_and_long_names(dgx):
    snap = json.loads(json.dumps(dgx))
    snap["nvml"] = {"available": True, "driver_version": "535.104", "cuda_driver_version": 12020}
    snap["gpus"][0]["pcie"]["cur_gbs"] = None
    snap["nics"][0]["rate_gbs"] = None
    snap["nics"][1]["name"] = "a-very-long-nic-name0"
    text = format_text(snap)
    assert "None" not in text and "unknown" in text
    assert "CUDA 12.2" in text and "12020" not in text
    nic_lines = [ln for ln in text.splitlines()[text.splitlines().index("NICs:") + 1:]
                 if ln.startswith("  ") and "netdev" in ln]
    assert len({ln.index("netdev") for ln in nic_lines}) == 1   # one column, however long the name
    gpu_lines = [ln for ln in text.splitlines() if ln.startswith("  GPU")]
    assert len({ln.index("PCIe") for ln in gpu_lines}) == 1
