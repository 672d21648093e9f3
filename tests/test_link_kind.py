"""Each transport declares what its data crosses (link_kind); the writer records it in the
document and readers take it from there, so a GPU transport's cross-host pairs get their NIC
and no reader imports a transport."""
import json
import subprocess
import sys

import pytest

from comm_bench import registry
from comm_bench.links import LINK_KINDS
from comm_bench.results import records
from comm_bench.results.document import ResultsWriter, load, new_document
from comm_bench.topology.linkmap import LinkMap
from test_heatmap import make_doc


def test_every_registered_transport_declares_a_link_kind():
    for name, cls in registry.transports().items():
        assert cls.link_kind in LINK_KINDS, name


def test_the_kinds_of_documents_before_link_kind_was_recorded_are_the_transports_own():
    table = records.LINK_KIND_BEFORE_RECORDED
    for name, kind in table.items():
        assert registry.get(name).link_kind == kind, name


@pytest.mark.parametrize("transport", ["nccl", "torch-nccl"])
def test_gpu_transports_cross_hosts_through_the_gpus_nic(transport):
    lm = LinkMap(make_doc(nodes=2, gpn=8, transport=transport, pairs=[(0, 8)]))
    cls, rate = lm.classify(0, 8)
    assert cls == "ib" and rate and rate > 0  # the fixture's IB NIC next to GPU0, its rate


def test_an_unknown_transport_has_no_nic_for_a_gpu():
    lm = LinkMap(make_doc(nodes=2, gpn=8, transport="nvshmem", pairs=[(0, 8)]))
    assert lm.classify(0, 8) == ("network", None)


def test_a_recorded_link_kind_is_what_the_reader_uses():
    doc = make_doc(nodes=2, gpn=8, transport="nvshmem", pairs=[(0, 8)])
    doc["link_kind"] = "gpu"           # a transport this version does not know, its kind recorded
    assert LinkMap(doc).classify(0, 8)[0] == "ib"
    del doc["link_kind"]
    for rec in doc["results"]:
        rec["link_kind"] = "gpu"        # a header without it: the records say it
    assert LinkMap(doc).classify(0, 8)[0] == "ib"


def test_the_writer_records_link_kind_in_the_header_and_each_record(tmp_path):
    template = make_doc(nodes=2, gpn=8, transport="nccl", pairs=[(0, 8)])
    doc = new_document(transport="nccl", world_size=16, pattern="pair", options={}, ranks=template["ranks"],
                       hosts=template["hosts"], link_kind="gpu")
    assert doc["link_kind"] == "gpu"
    path = tmp_path / "r.json"
    kept = [dict(template["results"][0])]         # an earlier attempt's record (sweep --resume)
    writer = ResultsWriter(str(path), doc, records=kept)
    writer.append(dict(template["results"][0], size=2 * template["results"][0]["size"]))
    writer.close()
    back = load(str(path))
    assert back["link_kind"] == "gpu" and [r["link_kind"] for r in back["results"]] == ["gpu", "gpu"]
    assert new_document(transport="tcp", world_size=2, pattern="pair", options={}, ranks=[], hosts=[],
                        link_kind="rdma")["link_kind"] == "rdma"


def test_readers_import_no_transport(tmp_path):
    doc = make_doc(nodes=2, gpn=8, transport="rdma", pairs=[(0, 8), (8, 0)])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    code = ("import sys; from comm_bench.results.document import load; "
            "from comm_bench.topology.linkmap import LinkMap; from comm_bench.validate import checks; "
            "from comm_bench.views import heatmap; "
            f"d = load({str(path)!r}); LinkMap(d).classify(0, 8); "
            "print(sorted(m for m in sys.modules if m.startswith(('comm_bench.transports', 'comm_bench.registry'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
