"""validate and the GPUs' and NICs' own health (issue 40): recorded health blocks, each
showing one fault, through the real CLI. Each fault is named as the cause beside the
slow-host finding and as a finding of its own (also when the figures pass); a healthy
block adds no cause; a malformed block is refused in one line (exit 2)."""
import json

import pytest

from cbtest import assert_no_traceback, run_cli
from health_docs import FAULTS, fast_hosts, slow_host, with_health, write


def validate_json(path):
    proc = run_cli("validate", "--json", path)
    assert_no_traceback(proc)
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-800:])
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("name,fault,cause,kind", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_named_beside_the_slow_host_and_on_its_own(tmp_path, name, fault, cause, kind):
    rc, rep = validate_json(write(tmp_path, with_health(slow_host(), fault)))
    assert rc == 1
    host = [f for f in rep["findings"] if f["kind"] == "bad-host"]
    assert len(host) == 1 and host[0]["ranks"] == [4]
    assert "; cause: " in host[0]["message"] and cause in host[0]["message"], host[0]["message"]
    own = [f for f in rep["findings"] if f["kind"] == kind]
    assert len(own) == 1 and own[0]["host"] == "node004" and own[0]["ranks"] == [4], rep["findings"]
    assert cause in own[0]["message"] and own[0]["confidence"] == 1.0
    # only the faulty rank has a health finding
    assert not [f for f in rep["findings"] if f["kind"] not in ("bad-host", kind)], rep["findings"]


def test_healthy_blocks_invent_no_cause(tmp_path):
    rc, rep = validate_json(write(tmp_path, with_health(slow_host())))
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["bad-host"]
    assert "cause" not in rep["findings"][0]["message"] and "causes" not in rep["findings"][0]
    assert rep["checked"]["health"] == {"ranks": 6, "gpus": 6, "nics": 6, "problems": []}
    text = run_cli("validate", write(tmp_path, with_health(fast_hosts()), "ok.json"))
    assert text.returncode == 0, text.stdout
    assert "6 GPU(s), 6 NIC port(s) of 6 rank(s) read before and after the sweep: no problems" in text.stdout


def test_health_problem_is_a_finding_when_figures_pass(tmp_path):
    proc = run_cli("validate", write(tmp_path, with_health(fast_hosts(), FAULTS[1][1], rank=2)))
    assert proc.returncode == 1, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FINDING")]
    assert len(lines) == 1 and "[gpu-throttled] host node002 (rank 2): GPU0 throttled: power cap" in lines[0]
    assert "power limit 300 W of its default 700 W" in lines[0] and "power cap 41.5 s of the run" in lines[0]


def test_idle_pcie_gen_is_no_problem_but_busy_is(tmp_path):
    """GPUs lower their PCIe generation when idle (NVML says gpu_idle): not a fault then."""
    def idle(h):
        h["gpu"]["after"]["pcie"]["gen"] = 1
        h["gpu"]["after"]["clock_events"] = {"mask": 1, "active": ["gpu_idle"]}
    rc, rep = validate_json(write(tmp_path, with_health(fast_hosts(), idle)))
    assert rc == 0 and rep["findings"] == []

    def busy(h):
        h["gpu"]["after"]["pcie"]["gen"] = 4
    rc, rep = validate_json(write(tmp_path, with_health(fast_hosts(), busy)))
    assert rc == 1 and "GPU0 at PCIe Gen4 of Gen5 while busy" in rep["findings"][0]["message"]


def test_nvlink_not_wired_on_any_gpu_is_no_fault(tmp_path):
    """A PCIe card without a bridge reports its links inactive everywhere: nothing is down."""
    doc = with_health(fast_hosts())
    for r in doc["ranks"]:
        for side in ("before", "after"):
            r["health"]["gpu"][side]["nvlink"]["links"] = [{"link": i, "up": False} for i in range(18)]
    rc, rep = validate_json(write(tmp_path, doc))
    assert rc == 0 and rep["findings"] == []


def test_documents_without_health_read_as_before(tmp_path):
    rc, rep = validate_json(write(tmp_path, slow_host()))
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["bad-host"]
    assert "health" not in rep["checked"] and "cause" not in rep["findings"][0]["message"]


def _set(path, value):
    def harm(doc):
        obj = doc["ranks"][1]["health"]
        *head, last = path.split(".")
        for k in head:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        obj[last] = value
    return harm


MALFORMED = [
    ("width-string", _set("gpu.after.pcie.width", "x16"), "ranks[1].health.gpu.after.pcie.width"),
    ("width-negative", _set("gpu.after.pcie.width", -8), "ranks[1].health.gpu.after.pcie.width"),
    ("links-not-list", _set("gpu.before.nvlink.links", {"0": True}), "ranks[1].health.gpu.before.nvlink.links"),
    ("link-up-number", _set("gpu.before.nvlink.links.0.up", 1), "ranks[1].health.gpu.before.nvlink.links[0].up"),
    ("counter-float", _set("nic.after.counters.symbol_error", 1.5), "ranks[1].health.nic.after.counters.symbol_error"),
    ("reason-too-long", _set("gpu.after.clock_events.active", ["x" * 300]), "clock_events.active[0]"),
    ("xid-bool", _set("gpu.after.xid.events", [{"xid": True}]), "ranks[1].health.gpu.after.xid.events[0].xid"),
    ("block-list", lambda doc: doc["ranks"][1].__setitem__("health", [1, 2]), "ranks[1].health"),
    ("reading-string", _set("gpu.before", "ok"), "ranks[1].health.gpu.before"),
]


@pytest.mark.parametrize("name,harm,where", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_health_is_one_line_exit_2(tmp_path, name, harm, where):
    doc = with_health(slow_host())
    harm(doc)
    proc = run_cli("validate", write(tmp_path, doc))
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    assert_no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and where in lines[0] and "not a valid comm-bench results document" in lines[0], lines
    assert "\x1b" not in proc.stderr
