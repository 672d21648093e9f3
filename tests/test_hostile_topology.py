"""A host's topology and a record's devices are read as untrusted input too: a fuzzed
document whose GPU list was an object, a NIC's addresses a number, a record's dst_device
an object, or a pair record without its dst made validate, report and compare exit 70 (an
internal error). Each
now ends as one line and exit 2 naming the field; the control (the same document with
its recorded DGX H100 topology unharmed) is read by every reader as before."""
import copy

import pytest

from cbtest import assert_no_traceback, run_cli
from comm_bench.errors import UsageError
from comm_bench.results.document import load
from test_heatmap import write
from test_hostile_figures import base as shared_base


def base():
    """The hostile-figures document, its own copy: the fixture topology object is shared."""
    return copy.deepcopy(shared_base())


def _topo(doc):
    return next(h["topology"] for h in doc["hosts"] if h.get("topology"))


def _drop_last(rows):
    rows.pop()


# (name, how the document is harmed, what the one line must name)
CASES = [
    ("gpus-object", lambda d: _topo(d).update(gpus={"a": 1}), "topology.gpus"),
    ("gpu-index-text", lambda d: _topo(d)["gpus"][1].update(index="1"), "topology.gpus[1].index"),
    ("gpu-name-list", lambda d: _topo(d)["gpus"][0].update(name=["H100"]), "topology.gpus[0].name"),
    ("nvlink-peers-list", lambda d: _topo(d)["gpus"][0]["nvlink"].update(peers=[1, 2]), "nvlink.peers"),
    ("nic-addrs-number", lambda d: _topo(d)["nics"][0].update(addrs=1e308), "topology.nics[0].addrs"),
    ("nic-rate-negative", lambda d: _topo(d)["nics"][2].update(rate_gbs=-50.0), "topology.nics[2].rate_gbs"),
    ("nic-a-string", lambda d: _topo(d)["nics"].append("mlx5_9"), "topology.nics[13]"),
    ("matrix-kinds-short", lambda d: _drop_last(_topo(d)["matrix"]["kinds"]), "topology.matrix.kinds"),
    ("matrix-cells-ragged", lambda d: _drop_last(_topo(d)["matrix"]["cells"][3]), "topology.matrix.cells"),
    ("matrix-rates-missing", lambda d: _topo(d)["matrix"].pop("rates_gbs"), "topology.matrix.rates_gbs"),
    ("dst-device-object", lambda d: d["results"][1].update(dst_device={"a": 1}), "results[1].dst_device"),
    ("src-device-list", lambda d: d["results"][4].update(src_device=[1, 2]), "results[4].src_device"),
    ("pair-without-dst", lambda d: d["results"][4].pop("dst"), "results[4]) has a src but no dst"),
]


def test_the_control_topology_is_read():
    doc = base()
    assert _topo(doc)["gpus"] and _topo(doc)["matrix"]["labels"]


@pytest.mark.parametrize("name,harm,names", CASES, ids=[c[0] for c in CASES])
def test_hostile_topology_is_refused_naming_the_field(tmp_path, name, harm, names):
    doc = base()
    harm(doc)
    with pytest.raises(UsageError, match="is not a valid comm-bench results document") as exc:
        load(write(tmp_path, doc))
    assert names in str(exc.value), str(exc.value)


@pytest.mark.parametrize("name,harm,names", [c for c in CASES if c[0] in ("gpus-object", "nic-addrs-number",
                                                                          "matrix-cells-ragged", "dst-device-object",
                                                                          "pair-without-dst")],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_every_reader_refuses_it_with_one_line(tmp_path, name, harm, names):
    control = write(tmp_path, base(), name="control.json")
    doc = base()
    harm(doc)
    path = write(tmp_path, doc)
    for args in (["validate", path], ["validate", path, "--json"], ["report", path], ["compare", control, path],
                 ["validate", control, "--baseline", path], ["heatmap", path, "-o", "x.png"]):
        p = run_cli(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.returncode, p.stdout[-500:], p.stderr[-500:])
        assert_no_traceback(p)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and names in lines[0], (args, p.stderr)
    assert run_cli("validate", control, cwd=tmp_path).returncode == 1     # the control: rank 4's finding
