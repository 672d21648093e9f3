"""The rdma transport: host-side checks, then the real thing in the Soft-RoCE VM.

The VM (tools/softroce_vm.py) boots once per session and runs tests/rdma_vm
inside; each in-VM test is reported here as its own test. They skip only when
the VM cannot boot here (the reason says which package is missing).
They include the real `comm-bench sweep -t rdma` in the VM
(tests/rdma_vm/test_sweep_cli.py, ~5 min: each rank imports torch under emulation);
COMM_BENCH_VM_SWEEP=0 leaves those out for a quick local run.
"""
import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VM_TESTS = os.path.join(HERE, "rdma_vm")
sys.path.insert(0, os.path.join(REPO, "tools"))

from softroce_vm import run_in_vm, vm_unavailable  # noqa: E402

HOST_HAS_RDMA = os.path.isdir("/sys/class/infiniband") and bool(os.listdir("/sys/class/infiniband"))
no_device_here = pytest.mark.skipif(HOST_HAS_RDMA, reason="this host has an RDMA device")


def _vm_test_names() -> list:
    names = []
    for fname in sorted(os.listdir(VM_TESTS)):
        if fname.startswith("test_") and fname.endswith(".py"):
            with open(os.path.join(VM_TESTS, fname)) as f:
                tree = ast.parse(f.read())
            names += [f"{fname[:-3]}::{n.name}" for n in tree.body
                      if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    return names


# -- on this host (no RDMA device: the CI machine) -------------------------------
@no_device_here
def test_probe_says_how_to_try_soft_roce():
    from comm_bench.transports.rdma import RdmaTransport

    ok, why = RdmaTransport.probe()
    assert not ok
    assert "no RDMA device" in why and "Soft-RoCE" in why and "rdma link add" in why


@no_device_here
def test_setup_without_device_is_unavailable():
    from comm_bench.errors import TransportUnavailable
    from comm_bench.transports.base import RankContext
    from comm_bench.transports.rdma import RdmaTransport

    ctx = RankContext(rank=0, world_size=2, local_rank=0, local_world_size=2, host="h", addr="127.0.0.1",
                      store=None, timeout=5, max_bytes=4096)
    with pytest.raises(TransportUnavailable, match="no RDMA device found") as info:
        RdmaTransport().setup(ctx)
    assert info.value.exit_code == 2


@no_device_here
def test_sweep_without_device_exits_2_with_one_line():
    exe = os.path.join(os.path.dirname(sys.executable), "comm-bench")
    if not os.path.exists(exe):
        pytest.skip("comm-bench is not installed in this environment")
    proc = subprocess.run([exe, "sweep", "-t", "rdma", "-b", "8", "-e", "8", "--no-progress", "-o", os.devnull],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Soft-RoCE" in lines[0], proc.stderr


def test_options_and_gpu_memory_note_are_plain():
    from comm_bench.transports.rdma import RdmaTransport

    flags = {o.flag for o in RdmaTransport.options}
    assert {"--device", "--ib-port", "--gid-index", "--qps", "--tx-depth", "--bidir", "--inline-size",
            "--use-dmabuf"} <= flags
    dmabuf = next(o for o in RdmaTransport.options if o.flag == "--use-dmabuf")
    assert "NOT WORKING YET" in dmabuf.help


def test_rdma_sysfs_helpers(tmp_path, monkeypatch):
    from comm_bench.system import rdma_sysfs

    port = tmp_path / "rxe0" / "ports" / "1"
    (port / "gids").mkdir(parents=True)
    (port / "gid_attrs" / "types").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    for i, (gid, kind) in enumerate([("fe80:0000:0000:0000:0200:00ff:fe00:0000", "RoCE v2"),
                                     ("0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1"),
                                     ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2")]):
        (port / "gids" / str(i)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(i)).write_text(kind + "\n")
    (port / "link_layer").write_text("Ethernet\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "hw_counters" / "sent_pkts").write_text("10\n")
    monkeypatch.setattr(rdma_sysfs, "ROOT", str(tmp_path))
    assert rdma_sysfs.devices() == ["rxe0"]
    assert rdma_sysfs.port_state("rxe0", 1) == "ACTIVE"
    assert rdma_sysfs.auto_gid_index("rxe0", 1) == 2  # RoCE v2 with an IPv4 address
    before = rdma_sysfs.counters("rxe0", 1)
    (port / "hw_counters" / "sent_pkts").write_text("25\n")
    assert rdma_sysfs.counter_delta(before, rdma_sysfs.counters("rxe0", 1)) == {"sent_pkts": 15}
    # hw_counters are cached by the kernel for `lifespan` ms: that file is a setting, and
    # readings must wait it out (plus a jiffy) after traffic
    assert rdma_sysfs.counter_settle_s("rxe0", 1) == 0.0
    (port / "hw_counters" / "lifespan").write_text("10\n")
    assert "lifespan" not in rdma_sysfs.counters("rxe0", 1)
    assert 0.02 <= rdma_sysfs.counter_settle_s("rxe0", 1) <= 0.03
    assert rdma_sysfs.pick_device("a,b", 3) == "b"


def test_auto_device_is_numa_local(tmp_path, monkeypatch):
    """--device auto: four NICs, two per NUMA node (named against their order)."""
    from comm_bench.system import rdma_sysfs

    for name, node in (("mlx5_0", 1), ("mlx5_1", 0), ("mlx5_2", 1), ("mlx5_3", 0)):
        (tmp_path / name / "device").mkdir(parents=True)
        (tmp_path / name / "device" / "numa_node").write_text(f"{node}\n")
    monkeypatch.setattr(rdma_sysfs, "ROOT", str(tmp_path))
    # unpinned ranks: every NIC once, node 0's first
    assert [rdma_sysfs.pick_device("auto", r, cpu_node=-1) for r in range(4)] == \
        ["mlx5_1", "mlx5_3", "mlx5_0", "mlx5_2"]
    # ranks pinned to node 1 (local ranks 2 and 3 of a 4-rank node) use node 1's NICs
    assert [rdma_sysfs.pick_device("auto", r, cpu_node=1) for r in (2, 3)] == ["mlx5_0", "mlx5_2"]
    assert rdma_sysfs.pick_device("auto", 0, cpu_node=5) == "mlx5_1"  # no NIC there: any, in order
    assert rdma_sysfs.cpu_numa_node() in (-1, 0)  # this host: one node, or unknown


# -- inside the Soft-RoCE VM ---------------------------------------------------------
@pytest.fixture(scope="session")
def vm_run(tmp_path_factory):
    why = vm_unavailable()
    if why:
        pytest.skip(f"Soft-RoCE VM cannot boot here: {why}")
    out = tmp_path_factory.mktemp("rdma_vm")
    junit = out / "junit.xml"
    sweep = "" if os.environ.get("COMM_BENCH_VM_SWEEP") == "0" else "COMM_BENCH_VM_SWEEP=1 "
    cmd = (f"{sweep}COMM_BENCH_VM_OUT={out} python -m pytest {VM_TESTS} -q -p no:cacheprovider "
           f"--junitxml={junit} -o junit_family=xunit1")
    res = run_in_vm(cmd, rwdirs=[str(out)], timeout=1500)
    print(res.output[-6000:])
    if not junit.exists():
        pytest.fail(f"the VM ran no tests (exit {res.returncode}, {res.seconds:.0f} s):\n{res.output[-4000:]}")
    cases = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name', '').split('[')[0]}"
        bad = [c for c in case if c.tag in ("failure", "error")]
        skipped = [c for c in case if c.tag == "skipped"]
        entry = cases.setdefault(name, {"failed": [], "passed": 0, "skipped": []})
        if bad:
            entry["failed"].append(f"{case.get('name')}: {(bad[0].get('message') or '')[:800]}\n"
                                   f"{(bad[0].text or '')[-2000:]}")
        elif skipped:
            entry["skipped"].append(skipped[0].get("message", ""))
        else:
            entry["passed"] += 1
    return cases


@pytest.mark.rdma
@pytest.mark.slow
@pytest.mark.parametrize("name", _vm_test_names())
def test_in_softroce_vm(vm_run, name):
    entry = vm_run.get(name)
    assert entry is not None, f"{name} did not run in the VM"
    assert not entry["failed"], "\n".join(entry["failed"])
    if not entry["passed"] and entry["skipped"]:
        pytest.skip(entry["skipped"][0])
