"""Utilisation heatmaps from synthetic results documents (no network needed), the HTML
page in a real headless browser, and the 1,024-rank timing."""
import json
import math
import os
import random
import shutil
import subprocess

import pytest

from comm_bench.views import heatmap, heatmap_output, report_html
from comm_bench.errors import UsageError
from comm_bench.topology import fixture_root, snapshot
from cbtest import run_cli

_DGX = None


def dgx_snapshot():
    global _DGX
    if _DGX is None:
        _DGX = snapshot(fixture_root("dgx-h100"))
    return _DGX


def make_doc(nodes=2, gpn=8, transport="nccl", sizes=(1 << 20, 4 << 20), value=None, pairs=None,
             topo=True, seed=0, op="sendrecv", pattern="pairwise", same_hostname=False, device=None):
    """A results document like the sweep writes (schema 1) for nodes x gpn ranks.

    value(src, dst, size, rnd) -> GB/s; default: intra-node 370 (NVLink), else 45 (IB),
    +-3% noise. same_hostname: every node is a namespace of one host called "vm"
    (one rank each, distinct addresses), as in the network-namespace test."""
    rnd = random.Random(seed)
    snap = (dgx_snapshot() if topo is True else topo) if topo else None
    n = nodes * gpn
    host = (lambda r: "vm") if same_hostname else (lambda r: f"node{r // gpn:03d}")
    addr = lambda r: f"10.0.{r // gpn // 250}.{r // gpn % 250 + 1}"  # noqa: E731
    dev = device or (lambda r: f"cuda:{r % gpn}")
    ranks = [{"rank": r, "host": host(r), "local_rank": r % gpn, "pid": 1000 + r, "addr": addr(r),
              "devices": {"device": dev(r)}} for r in range(n)]
    hosts = {}
    for r in range(n):
        h = hosts.setdefault(host(r), {"host": host(r), "ranks": [], "topology": snap})
        h["ranks"].append(r)
    if pairs is None:
        pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    recs = []
    for size in sizes:
        for s, d in pairs:
            if value:
                bw = value(s, d, size, rnd)
            else:
                bw = (370.0 if s // gpn == d // gpn else 45.0) * rnd.uniform(0.97, 1.03)
            if bw is None:
                continue
            recs.append({"transport": transport, "op": op, "mode": "bw", "pattern": pattern, "size": size,
                         "count": size // 4, "dtype": "float32", "iters": 20, "warmup": 5,
                         "time_us": size / bw / 1e3, "algbw": bw, "busbw": bw, "wrong": 0,
                         "src": s, "dst": d, "src_host": host(s), "dst_host": host(d),
                         "src_device": dev(s), "dst_device": dev(d), "round": 0, "extra": {}})
    return {"schema_version": 1, "tool": "comm-bench", "version": "0.1.0", "command": ["synthetic"],
            "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00",
            "status": "ok", "failure": None, "transport": transport, "world_size": n, "pattern": pattern,
            "options": {}, "hosts": list(hosts.values()), "ranks": ranks, "environment": {}, "results": recs}


def write(tmp_path, doc, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def cell(data, p, a, b):
    return data.panels[p]["util"][data.labels.index(a), data.labels.index(b)]


# ----------------------------------------------------------------------------- model
def test_build_by_rank():
    def value(s, d, size, rnd):
        if (s, d) == (3, 12):
            return None                       # never measured
        return 360.0 if s // 8 == d // 8 else 40.0
    data = heatmap.build(make_doc(value=value))
    assert data.n == 16 and data.labels[0] == "node000:GPU0" and data.labels[9] == "node001:GPU1"
    assert [p["size"] for p in data.panels] == [1 << 20, 4 << 20]
    assert cell(data, 0, "node000:GPU0", "node000:GPU1") == pytest.approx(360 / 450)
    assert cell(data, 0, "node000:GPU0", "node001:GPU0") == pytest.approx(40 / 50)
    assert math.isnan(cell(data, 0, "node000:GPU3", "node001:GPU4"))      # N/A
    assert math.isnan(cell(data, 0, "node000:GPU0", "node000:GPU0"))
    assert data.panels[0]["classes"][0, 1] == "nvlink" and data.panels[0]["classes"][0, 8] == "ib"
    assert data.classes_seen == {"nvlink": [450.0], "ib": [50.0]}


def test_build_by_host_gpu_nic():
    doc = make_doc()
    host = heatmap.build(doc, by="host")
    assert host.labels == ["node000", "node001"]
    assert host.panels[0]["classes"][0, 0] == "nvlink" and host.panels[0]["classes"][0, 1] == "ib"
    nic = heatmap.build(doc, by="nic")
    assert "node000:mlx5_0" in nic.labels and "node001:mlx5_11" in nic.labels
    gpu = heatmap.build(doc, by="gpu")
    assert gpu.labels[:2] == ["node000:GPU0", "node000:GPU1"]


def test_size_classes():
    sizes = [1 << k for k in range(3, 28)]
    picks = heatmap.size_classes(sizes)
    assert len(picks) == 4 and picks[0] == 8 and picks[-1] == 1 << 27
    assert heatmap.size_classes([5, 7]) == [5, 7]


def test_relative_when_no_theoretical():
    """namespace hosts on veth: no rate known -> utilisation relative to the class's median
    pair (issue 42: not the best, which one lucky pair makes everyone else's red)."""
    doc = make_doc(nodes=4, gpn=1, transport="tcp", same_hostname=True, topo=None,
                   value=lambda s, d, size, rnd: 0.1 if 2 in (s, d) else 2.0,
                   device=lambda r: f"10.0.0.{r + 1}")
    data = heatmap.build(doc)
    assert data.labels == ["vm/10.0.0.1", "vm/10.0.0.2", "vm/10.0.0.3", "vm/10.0.0.4"]
    p = data.panels[0]
    # 12 pairs, 6 of them through rank 2 at 0.1: the median is between 0.1 and 2.0
    assert p["relative"][0, 1] and p["util"][0, 1] == pytest.approx(2.0 / 1.05)
    assert p["util"][0, 2] == pytest.approx(0.1 / 1.05)


def test_counter_series():
    doc = make_doc(nodes=2, gpn=1, transport="rdma", sizes=(1 << 20,), device=lambda r: "mlx5_0")
    t0 = 1000.0
    doc["results"][0]["extra"]["counters"] = {
        "device": "mlx5_0", "t": [t0, t0 + 1, t0 + 2, t0 + 3],
        "port_xmit_data": [0, 10e9 / 4, 20e9 / 4, 45e9 / 4]}         # 4-byte words
    data = heatmap.build(doc)
    assert len(data.counters) == 1
    s = data.counters[0]
    assert s["gbs"] == pytest.approx([10.0, 10.0, 25.0])
    assert s["util"] == pytest.approx([0.2, 0.2, 0.5])               # of the 50 GB/s NDR port


def test_counter_deltas_as_transports_record_them():
    """rdma: extra.counters deltas + extra.device; nccl: extra.nvml_counters per bus id."""
    doc = make_doc(nodes=2, gpn=1, transport="rdma", sizes=(1 << 20, 4 << 20), device=lambda r: "mlx5_0",
                   value=lambda s, d, size, rnd: 40.0)
    for rec in doc["results"]:
        dur = rec["time_us"] * (rec["iters"] + rec["warmup"]) / 1e6
        rec["extra"] = {"device": "mlx5_0:1",
                        "counters": {"port_xmit_data": int(40e9 * dur / 4), "port_xmit_bytes": int(40e9 * dur)},
                        "dst": {"device": "mlx5_0:1", "counters": {"port_rcv_data": int(40e9 * dur / 4)}}}
    series = heatmap.build(doc).counters
    assert sorted(s["label"] for s in series) == ["node000:mlx5_0 rx", "node000:mlx5_0 tx",
                                                  "node001:mlx5_0 rx", "node001:mlx5_0 tx"]
    for s in series:
        assert len(s["t"]) == 2 and s["util"] == pytest.approx([0.8, 0.8], rel=1e-3)
    # NVML refreshes its counters coarsely: a 1 MiB record (~0.1 ms) gives no point, 4 GiB does
    doc = make_doc(nodes=1, gpn=2, sizes=(1 << 20, 4 << 30), value=lambda s, d, size, rnd: 300.0)
    for rec in doc["results"]:
        dur = rec["time_us"] * (rec["iters"] + rec["warmup"]) / 1e6
        rec["extra"] = {"nvml_counters": {"00000000:18:00.0": {"nvlink_tx": 225e9 * dur, "pcie_tx": 0}}}
    series = {s["label"]: s for s in heatmap.build(doc).counters}
    s = series["node000:GPU0 nvlink_tx"]
    assert s["rate_gbs"] == 450.0 and s["util"] == pytest.approx([0.5, 0.5], rel=1e-3)
    assert len(s["t"]) == 2  # the two 4 GiB records (0 -> 1, 1 -> 0); the 1 MiB ones are skipped


# ----------------------------------------------------------------------------- rendering
def test_png_8_ranks(tmp_path):
    doc = make_doc(nodes=1, gpn=8, value=lambda s, d, size, rnd: 100.0 if 5 in (s, d) else 380.0)
    out = tmp_path / "h.png"
    info = heatmap_output.make(write(tmp_path, doc), str(out))
    assert info["cells"] == 8 and info["panels"] == 2 and info["measured_pairs"] == 112
    img = _read_png(out)
    assert img.shape[0] > 400 and img.shape[1] > 600
    assert _has_colour(img, "red") and _has_colour(img, "green")


def test_counters_panel_png(tmp_path):
    doc = make_doc(nodes=2, gpn=1, transport="rdma", sizes=(1 << 20,), device=lambda r: "mlx5_0")
    doc["results"][0]["extra"]["counters"] = {"device": "mlx5_0", "t": [0, 1, 2],
                                              "tx_bytes": [0, 20e9, 40e9]}
    heatmap_output.make(write(tmp_path, doc), str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 10000


def _read_png(path):
    import matplotlib.image as mpimg
    return mpimg.imread(str(path))


def _has_colour(img, which):
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    if which == "red":
        mask = (r > 0.6) & (g < 0.25) & (b < 0.25)
    else:
        mask = (g > 0.45) & (r < 0.35) & (b < 0.4)
    return int(mask.sum()) > 200


def test_html_self_contained(tmp_path):
    doc = make_doc(nodes=1, gpn=4)
    out = tmp_path / "h.html"
    heatmap_output.make(write(tmp_path, doc), str(out))
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
    for bad in ("http://", "https://", "<script src", "<link "):
        assert bad not in html


def test_report_html(tmp_path):
    doc = make_doc(nodes=2, gpn=2, value=lambda s, d, size, rnd: 10.0 if 3 in (s, d) and s // 2 != d // 2 else
                   (370.0 if s // 2 == d // 2 else 45.0))
    out = tmp_path / "report.html"
    report_html.render(doc, str(out))
    html = out.read_text()
    for part in ("Findings", "Heatmap", "Results", "Topology", "NV18", "data:image/png;base64,", "bad-"):
        assert part in html, part
    assert "https://" not in html


def test_cli(tmp_path):
    path = write(tmp_path, make_doc(nodes=1, gpn=2))
    p = run_cli("heatmap", path, "-o", str(tmp_path / "x.png"), "--by", "host", check_rc=0)
    assert "x.png" in p.stdout
    p = run_cli("heatmap", path, "-o", str(tmp_path / "x.pdf"), check_rc=2)
    assert ".png or .html" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("heatmap", str(tmp_path / "missing.json"), "-o", str(tmp_path / "y.png"), check_rc=2)
    assert "not found" in p.stderr
    (tmp_path / "bad.json").write_text("{\"results\": [")
    p = run_cli("heatmap", str(tmp_path / "bad.json"), "-o", str(tmp_path / "y.png"), check_rc=2)
    assert "not valid JSON" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    run_cli("heatmap", "--help", check_rc=0)


def test_empty_results_are_bad_input(tmp_path):
    """No records: nothing to draw (issue 31: this wrote a 0 x 0 PNG); UsageError, exit 2."""
    doc = make_doc(nodes=1, gpn=2, value=lambda *a: None)
    with pytest.raises(UsageError, match="holds no records"):
        heatmap_output.make(write(tmp_path, doc), str(tmp_path / "e.png"))
    assert not (tmp_path / "e.png").exists()


# ----------------------------------------------------------------------------- browser
def _browser():
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    for path in ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium"):
        if os.path.exists(path):
            return path
    return None


@pytest.mark.slow
def test_html_in_headless_browser(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser: apt-get install chromium-headless-shell (or chromium)")
    doc = make_doc(nodes=1, gpn=8, value=lambda s, d, size, rnd: 60.0 if 6 in (s, d) else 380.0)
    page = tmp_path / "h.html"
    heatmap_output.make(write(tmp_path, doc), str(page))
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--allow-file-access-from-files", f"--screenshot={shot}", "--window-size=1400,1400",
           f"file://{page}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert shot.exists(), (p.returncode, p.stderr[-2000:])
    img = _read_png(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    # the page drew the inline heatmap: the slow GPU's red cells and the green ones
    assert _has_colour(img, "red") and _has_colour(img, "green")


# ----------------------------------------------------------------------------- scale
def _write_1024(path, gpn=8, nodes=128, slow_rank=517):
    """1,024 ranks: all intra-node pairs + every rank to the same GPU index on every other
    node (rail pairs), one size; written line by line as the sweep does."""
    snap = dgx_snapshot()
    n = gpn * nodes
    rnd = random.Random(1)
    head = make_doc(nodes=nodes, gpn=gpn, sizes=())
    head.pop("results")
    for h in head["hosts"]:
        h["topology"] = snap
    tmpl = ('{"transport":"nccl","op":"sendrecv","mode":"bw","pattern":"pairwise-concurrent",'
            '"size":4194304,"count":1048576,"dtype":"float32","iters":20,"warmup":5,"time_us":%.3f,'
            '"algbw":%.4f,"busbw":%.4f,"wrong":0,"src":%d,"dst":%d,"src_host":"node%03d",'
            '"dst_host":"node%03d","src_device":"cuda:%d","dst_device":"cuda:%d","round":0,"extra":{}}')
    count = 0
    with open(path, "w") as f:
        f.write(json.dumps(head)[:-1] + ',"results":[\n')
        first = True
        for s in range(n):
            for d in range(n):
                if s == d or (s // gpn != d // gpn and s % gpn != d % gpn):
                    continue
                bw = (370.0 if s // gpn == d // gpn else 45.0) * rnd.uniform(0.95, 1.05)
                if slow_rank in (s, d) and s // gpn != d // gpn:
                    bw = 12.0
                f.write(("" if first else ",\n") + tmpl % (4194304 / bw / 1e3, bw, bw, s, d, s // gpn,
                                                          d // gpn, s % gpn, d % gpn))
                first = False
                count += 1
        f.write("\n]}\n")
    return count


@pytest.mark.slow
def test_1024_ranks_heatmap_and_validate(tmp_path):
    """How long they take is tools/bench_heatmap_1024.py's (docs/benchmarks/readers.md), not
    a timed test's: here, that the 1,024-rank picture and verdict are right."""
    path = tmp_path / "r1024.json"
    count = _write_1024(path)
    assert count == 128 * 56 + 1024 * 127
    out = tmp_path / "h1024.png"
    info = heatmap_output.make(str(path), str(out))
    assert info["cells"] == 1024 and info["measured_pairs"] == count
    img = _read_png(out)
    assert _has_colour(img, "red")                       # the slow rank's row and column
    html = tmp_path / "h1024.html"
    heatmap_output.make(str(path), str(html), by="host")
    assert html.stat().st_size > 10000
    # validate on the same document (with its diagnosis: suspects, confidences, topology)
    from comm_bench.validate import checks as validate
    rep = validate.run(str(path))
    assert [(f["kind"], f["rank"]) for f in rep["findings"]] == [("bad-device", 517)]
    assert rep["findings"][0]["confidence"] >= 0.99


def test_bidirectional_records_count_per_direction(tmp_path):
    """peer_bidir (both GPUs writing to each other at once): each direction is compared with
    the link's one-direction rate (392 of 450 GB/s = 87%), never the total (784: 174%); the
    direction the pair pattern did not run on its own (1->0) gets its own cell; validate
    passes the healthy pair and flags a direction that runs at half."""
    def value(s, d, size, rnd):
        return 392.0
    doc = make_doc(nodes=1, gpn=2, transport="cuda", op="peer_bidir", pattern="pair", pairs=[(0, 1)],
                   sizes=(256 << 20,), value=value)
    rec = doc["results"][0]
    rec["extra"] = {"per_direction_gbps": {"src->dst": 392.0, "dst->src": 196.0}, "total_gbps": 588.0}
    data = heatmap.build(doc)
    assert cell(data, 0, "node000:GPU0", "node000:GPU1") == pytest.approx(392 / 450)
    assert cell(data, 0, "node000:GPU1", "node000:GPU0") == pytest.approx(196 / 450)
    path = write(tmp_path, doc)
    proc = run_cli("validate", path, "--json")
    assert proc.returncode == 1, proc.stderr
    found = json.loads(proc.stdout)["findings"]
    # two pairs are too few to single one out: the class finding carries the slow direction alone
    assert [f["kind"] for f in found] == ["class-below-expected"], found
    assert "1 of 2 nvlink pairs" in found[0]["message"]
    assert found[0]["measured_gbs"] == pytest.approx(196.0)
    rec["extra"]["per_direction_gbps"]["dst->src"] = 390.0
    rec["extra"]["total_gbps"] = 782.0
    proc = run_cli("validate", write(tmp_path, doc, "ok.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
