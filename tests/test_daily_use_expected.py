"""Issue 42: `report` and `validate` show "% of expected for this hardware" beside "% of link
rate" when the document's topology matches a profile of comm_bench/data/reference.yaml;
`--profile NAME` chooses one. Documents: the recorded DGX H100 topology (8 x H100, NVLink4,
400G InfiniBand) with figures made up for the test, held against the table's own rows."""
import json

import yaml

from cbtest import assert_no_traceback, run_cli
from test_heatmap import dgx_snapshot, make_doc, write
from test_daily_use_reference import DOC

TABLE = DOC.parents[1] / "comm_bench" / "data" / "reference.yaml"


def _flat(text):
    """The text as one line of words, the report's "#" of each comment line left out."""
    return " ".join(w for ln in text.splitlines() for w in ln.lstrip("#").split())


def _row(profile, op):
    return next(r for r in yaml.safe_load(TABLE.read_text())
                if r["profile"] == profile and op in [o.strip() for o in r["op"].split(",")])


def _h100_node(tmp_path, gpus=8, busbw=452.0):
    doc = make_doc(nodes=1, gpn=gpus, pairs=[], pattern="collective", op="all_reduce")
    for op in ("all_reduce", "alltoall", "broadcast"):
        for size, share in ((1 << 20, 0.3), (1 << 30, 1.0)):
            doc["results"].append({"transport": "nccl", "op": op, "mode": "bw", "pattern": "collective",
                                   "size": size, "count": size // 4, "dtype": "float32", "redop": "sum",
                                   "root": None, "iters": 20, "warmup": 5, "time_us": 1.0, "algbw": busbw,
                                   "busbw": busbw * share, "wrong": 0, "extra": {}})
    return write(tmp_path, doc, f"h100x{gpus}.json")


def test_an_h100_node_is_held_against_its_profile(tmp_path):
    path = _h100_node(tmp_path)
    flat = _flat(run_cli("report", path, check_rc=0).stdout)
    exp = _row("dgx-h100", "all_reduce")["gbs"]
    a2a = _row("dgx-h100", "alltoall")["gbs"]
    assert "% of expected for this hardware (profile dgx-h100, matched on the topology" in flat
    # the largest size's busbw over the table's figure, beside its share of the NVLink rate (18 x 25 GB/s)
    assert (f"all_reduce 1G: busbw 452 GB/s: {100 * 452 / exp:.0f}% of expected {exp:g} GB/s, "
            f"{100 * 452 / 450:.0f}% of link rate 450 GB/s") in flat, flat
    assert f"alltoall 1G: busbw 452 GB/s: {100 * 452 / a2a:.0f}% of expected {a2a:g} GB/s" in flat
    assert "broadcast 1G" not in flat                     # no public figure for it: not made up
    rep = json.loads(run_cli("validate", path, "--json", check_rc=0).stdout)
    got = {r["op"]: r for r in rep["expected"]}
    assert set(got) == {"all_reduce", "alltoall"} and got["all_reduce"]["expected_gbs"] == exp
    assert abs(got["all_reduce"]["pct_expected"] - 100 * 452 / exp) < 1e-9 and got["all_reduce"]["link_gbs"] == 450
    text = run_cli("validate", path, check_rc=0).stdout
    assert f"{100 * 452 / exp:.0f}% of expected {exp:g} GB/s" in " ".join(text.split())


def test_no_profile_when_the_topology_does_not_match(tmp_path):
    """4 of the node's 8 GPUs: an 8-GPU figure does not apply, so nothing is said; --profile
    holds them against it anyway (the user's word), and says which profile."""
    path = _h100_node(tmp_path, gpus=4)
    assert "% of expected" not in run_cli("report", path, check_rc=0).stdout
    out = _flat(run_cli("report", path, "--profile", "azure-ndv5", check_rc=0).stdout)
    exp = _row("azure-ndv5", "all_reduce")["gbs"]
    assert "(profile azure-ndv5, chosen with --profile" in out and f"of expected {exp:g} GB/s" in out
    assert "alltoall 1G" not in out                       # azure-ndv5 has no alltoall figure


def test_an_ib_link_and_its_profile(tmp_path):
    doc = make_doc(nodes=2, gpn=1, transport="rdma", op="write", device=lambda r: "mlx5_0",
                   value=lambda s, d, size, rnd: 46.0)
    path = write(tmp_path, doc, "ib.json")
    row = _row("azure-ndv5", "write")
    out = _flat(run_cli("report", path, check_rc=0).stdout)
    assert (f"write 4M: median busbw 46 GB/s: {100 * 46 / row['gbs']:.0f}% of expected {row['gbs']:g} GB/s, "
            f"92% of link rate 50 GB/s") in out, out
    assert row["source"] in out
    # a profile naming other links says so in one line, and nothing else
    out = run_cli("report", path, "--profile", "roce-400g", check_rc=0).stdout
    assert "--profile roce-400g: none of its figures applies to these records" in _flat(out)


def test_unknown_profile_is_one_line_exit_2(tmp_path):
    path = _h100_node(tmp_path)
    for cmd in ("report", "validate"):
        p = run_cli(cmd, path, "--profile", "dgx-h900", check_rc=2)
        assert_no_traceback(p)
        assert p.stderr.strip().startswith("comm-bench: --profile dgx-h900: no such profile (one of dgx-h100, ")
        assert len(p.stderr.strip().splitlines()) == 1


def test_host_copies_are_held_against_their_pcie_generation(tmp_path):
    """`-t cuda --op h2d,d2h` on the DGX H100 topology (PCIe Gen5 x16, 63 GB/s): the Gen5
    row; the same document with --profile azure-ndv4 against the Gen4 row."""
    doc = make_doc(nodes=1, gpn=1, transport="cuda", pairs=[], pattern="collective", op="h2d")
    for op, gbs in (("h2d", 50.0), ("d2h", 52.0), ("d2d", 1500.0)):
        doc["results"].append({"transport": "cuda", "op": op, "mode": "bw", "pattern": "collective",
                               "size": 1 << 28, "count": 1 << 26, "dtype": "float32", "iters": 20, "warmup": 5,
                               "time_us": 1.0, "algbw": gbs, "busbw": gbs, "wrong": 0, "extra": {}})
    path = write(tmp_path, doc, "copies.json")
    gen5, gen4 = _row("azure-ndv5", "h2d"), _row("azure-ndv4", "h2d")
    assert "Gen5" in gen5["hardware"] and "Gen4" in gen4["hardware"]
    # one GPU's copies: validate has nothing to check (exit 2); report holds them against the row
    out = _flat(run_cli("report", path, check_rc=0).stdout)
    rate = dgx_snapshot()["gpus"][0]["pcie"]["cur_gbs"]   # the recorded GPU0's PCIe Gen5 x16
    for op, gbs in (("h2d", 50), ("d2h", 52)):
        assert (f"{op} 256M: busbw {gbs} GB/s: {100 * gbs / gen5['gbs']:.0f}% of expected {gen5['gbs']:g} GB/s, "
                f"{100 * gbs / rate:.0f}% of link rate {rate:.4g} GB/s") in out, out
    assert "d2d 256M" not in out                           # no public figure for d2d: none shown
    out = _flat(run_cli("report", path, "--profile", "azure-ndv4", check_rc=0).stdout)
    assert f"h2d 256M: busbw 50 GB/s: {100 * 50 / gen4['gbs']:.0f}% of expected {gen4['gbs']:g} GB/s" in out, out
