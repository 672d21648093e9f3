"""Issue 31, readers that stream: a large document is read record by record (results/
stream_read.py) and validate keeps its pair records' figures as columns (validate/pair_obs.py),
not the records. Read so, a document gives the report it gives read whole; every figure is
still checked (the hostile documents of test_hostile_figures are refused with the same line,
naming the same record, also past the first batch); the whole-file limit (1 GiB) is not
applied, and the bound that is (records kept) is one line."""
import json

import pytest

from comm_bench.errors import UsageError
from comm_bench.results import document, stream_read
from comm_bench.results.document import load_measured, render
from comm_bench.validate.checks import check, read
from test_hostile_figures import CASES, base
from test_heatmap import make_doc


def sweep_layout(tmp_path, doc, name="r.json"):
    """The document as the sweep writes it: the header, then one record per line."""
    p = tmp_path / name
    p.write_bytes(render(doc, [json.dumps(r, separators=(",", ":")) for r in doc["results"]]))
    return str(p)


def refused_as_read_whole(path):
    """The streamed read's error line, asserted to be the one load gives reading it whole."""
    with pytest.raises(UsageError) as whole:
        load_measured(path)
    with pytest.raises(UsageError) as exc:
        read(path)
    assert str(exc.value) == str(whole.value)
    return str(exc.value)


@pytest.fixture(params=["in-order", "two-halves"])
def streamed(monkeypatch, request):
    """Every document streamed, in small batches (a bad record lies past the first): read in
    order by one process, or in two halves at once (the second in a forked process)."""
    monkeypatch.setattr(stream_read, "STREAM_FROM", 0)
    monkeypatch.setattr(stream_read, "CHUNK", 2000)
    halves = request.param == "two-halves"
    monkeypatch.setattr(stream_read, "SPLIT_FROM", 0 if halves else 1 << 62)
    monkeypatch.setattr(stream_read, "_cores", lambda: 2)
    return request.param


def slow_node_doc():
    def value(s, d, size, rnd):
        return 45.0 * rnd.uniform(0.97, 1.03) * (0.6 if 5 in (s, d) else 1.0)
    return make_doc(nodes=12, gpn=1, transport="rdma", value=value)


def test_streamed_report_is_the_whole_documents_report(tmp_path, streamed):
    doc = slow_node_doc()
    path = sweep_layout(tmp_path, doc)
    whole = check(load_measured(path))
    head, pairs = read(path)
    assert head["results"] == [] and pairs.count == len(doc["results"])     # figures kept, not records
    assert json.dumps(check(head, None, pairs), sort_keys=True) == json.dumps(whole, sort_keys=True)
    assert [(f["kind"], f["host"]) for f in whole["findings"]] == [("bad-host", "node005")]


def test_confirm_records_are_kept_and_judged_as_read_whole(tmp_path, streamed):
    doc = base()        # rank 4 slow, with confirm records and per-iteration latencies
    path = sweep_layout(tmp_path, doc)
    head, pairs = read(path)
    assert head["results"] and all("confirm" in r for r in head["results"])
    assert json.dumps(check(head, None, pairs), sort_keys=True) == \
        json.dumps(check(load_measured(path)), sort_keys=True)


def test_json_lines_records_are_streamed(tmp_path, streamed):
    doc = slow_node_doc()
    recs = doc.pop("results")
    (tmp_path / "r.records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(dict(doc, records_file="r.records.jsonl", results=[])))
    head, pairs = read(str(path))
    assert pairs.count == len(recs)
    assert [f["host"] for f in check(head, None, pairs)["findings"]] == ["node005"]


@pytest.mark.parametrize("name,harm,names", CASES, ids=[c[0] for c in CASES])
def test_hostile_figure_is_refused_as_read_whole(tmp_path, streamed, name, harm, names):
    doc = base()
    harm(doc)
    refused_as_read_whole(sweep_layout(tmp_path, doc))


@pytest.mark.parametrize("harm", [
    lambda text: text.replace('"busbw":45.0', '"busbw":NaN', 1),
    lambda text: text.replace('"src":3,', '"src":3,"src":4,', 1),
    lambda text: text.replace('"size":1048576', '"size":' + "9" * 30, 1),
    lambda text: text.replace('"busbw":45.0', '"busbw" :45.0', 1),
], ids=["nan", "key-twice", "long-integer", "space-before-colon"])
def test_text_the_fast_parse_cannot_take_is_parsed_as_load_does(tmp_path, streamed, harm):
    doc = slow_node_doc()
    for r in doc["results"]:
        r["busbw"] = r["algbw"] = 45.0 if r["src"] != 5 and r["dst"] != 5 else 27.0
    path = tmp_path / "r.json"
    path.write_text(harm(open(sweep_layout(tmp_path, doc)).read()))
    try:
        whole = check(load_measured(str(path)))
    except UsageError as exc:
        with pytest.raises(UsageError) as streamed_exc:
            read(str(path))
        assert str(streamed_exc.value) == str(exc)
        return
    head, pairs = read(str(path))       # valid JSON (a space before a colon): read as it is
    assert json.dumps(check(head, None, pairs), sort_keys=True) == json.dumps(whole, sort_keys=True)


def test_a_record_given_twice_names_both(tmp_path, streamed):
    doc = slow_node_doc()
    doc["results"].append(dict(doc["results"][7]))
    path = sweep_layout(tmp_path, doc)
    last = len(doc["results"]) - 1
    with pytest.raises(UsageError, match=f"record {last} .* measures what record 7 measured"):
        read(path)


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_bad_figure_is_named_by_its_index_in_the_document(tmp_path, streamed, where):
    """The last record lies in the second half where the halves are read at once: the
    error names it as read in order, with load's line."""
    doc = slow_node_doc()
    doc["results"][0 if where == "first" else -1]["busbw"] = -1.0
    line = refused_as_read_whole(sweep_layout(tmp_path, doc))
    assert f"record {0 if where == 'first' else len(doc['results']) - 1} " in line


def test_the_whole_file_limit_does_not_apply(tmp_path, streamed, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a streamed document is never read whole")
    monkeypatch.setattr(document, "read_bounded", refuse)
    head, pairs = read(sweep_layout(tmp_path, slow_node_doc()))
    assert pairs.count > 0


@pytest.mark.parametrize("bound", ["MAX_TAKEN", "MAX_KEPT"])
def test_the_memory_bound_is_one_line(tmp_path, streamed, monkeypatch, bound):
    monkeypatch.setattr(stream_read, bound, 10)
    doc = base() if bound == "MAX_KEPT" else slow_node_doc()
    if bound == "MAX_KEPT":
        doc["results"] = [dict(r, wrong=1) for r in doc["results"]]     # kept whole: named in findings
    with pytest.raises(UsageError, match="more than 10 .* split the run's records") as exc:
        read(sweep_layout(tmp_path, doc))
    assert "\n" not in str(exc.value)


def test_a_cut_document_is_refused_without_a_whole_read(tmp_path, streamed, monkeypatch):
    """Records read in the sweep's layout, then the text is cut: damage, said by the streamed
    line at once; not read again whole (issue 44: a damaged last line made validate read the
    whole file, 131 MB to 780 MB, to say the same)."""
    path = sweep_layout(tmp_path, slow_node_doc())
    text = open(path).read()
    open(path, "w").write(text[:text.rindex("\n]}")])
    with pytest.raises(UsageError):
        load_measured(path)
    monkeypatch.setattr(document, "load_measured", lambda *a: pytest.fail("read whole"))
    monkeypatch.setattr(stream_read.D, "load_measured", lambda *a: pytest.fail("read whole"))
    with pytest.raises(UsageError, match="ends before its records"):
        read(path)


def test_a_pretty_printed_document_is_read_whole(tmp_path, streamed):
    """Not one record per line (json.dump with indent): read as load reads it, as before."""
    doc = slow_node_doc()
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc, indent=1))
    head, pairs = read(str(path))
    assert pairs is None and len(head["results"]) == len(doc["results"])
    assert [f["host"] for f in check(head)["findings"]] == ["node005"]


def test_an_empty_document_is_refused(tmp_path, streamed):
    doc = slow_node_doc()
    doc["results"] = []
    with pytest.raises(UsageError, match="holds no records"):
        read(sweep_layout(tmp_path, doc))


@pytest.mark.parametrize("by", ["rank", "host"])
def test_streamed_heatmap_is_the_whole_documents(tmp_path, streamed, by):
    import numpy as np

    from comm_bench.views.heatmap import build
    from comm_bench.views.heatmap_output import make, read as read_cells

    doc = make_doc(nodes=3, gpn=4, transport="nccl")      # by host: a cell is the median of 16 records
    path = sweep_layout(tmp_path, doc)
    whole = build(load_measured(path), by=by)
    head, cells = read_cells(path, by)
    assert head["results"] == [] and cells.count == len(doc["results"])
    data = build(head, by=by, cells=cells)
    assert data.labels == whole.labels and len(data.panels) == len(whole.panels) == 2
    for a, b in zip(data.panels, whole.panels):
        for k in ("measured", "theoretical", "util"):
            assert np.array_equal(a[k], b[k], equal_nan=True), k
        assert (a["classes"] == b["classes"]).all()
    info = make(path, str(tmp_path / "x.png"), by=by)
    assert info["cells"] == whole.n and (tmp_path / "x.png").stat().st_size > 0


@pytest.mark.parametrize("share,view", [(1.0, "cells"), (0.02, "aggregated")])
def test_a_streamed_run_past_the_large_size_gets_the_view_its_records_call_for(tmp_path, streamed, monkeypatch,
                                                                                share, view):
    """A run of more than heatmap_large.LARGE ranks is aggregated where it is sparse: the
    records a streamed document held count, not those left in doc["results"]."""
    from comm_bench.views import heatmap_large
    from comm_bench.views.heatmap_output import make

    monkeypatch.setattr(heatmap_large, "LARGE", 8)
    doc = make_doc(nodes=12, gpn=1, transport="rdma")
    doc["results"] = doc["results"][:max(1, int(share * len(doc["results"])))]
    info = make(sweep_layout(tmp_path, doc), str(tmp_path / "x.png"))
    assert ("aggregated" in info) == (view == "aggregated"), info


def test_a_heatmap_of_a_corrupted_streamed_document_is_refused(tmp_path, streamed):
    from comm_bench.views.heatmap_output import make

    doc = make_doc(nodes=3, gpn=4, transport="nccl")
    doc["results"][-1]["busbw"] = -1.0
    path = sweep_layout(tmp_path, doc)
    with pytest.raises(UsageError, match=f"record {len(doc['results']) - 1} .*busbw"):
        make(path, str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()
