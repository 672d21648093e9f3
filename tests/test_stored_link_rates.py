"""The repository's 2 x H200 documents, read as a user reads them: they were recorded
before the NVML NVLink-version fix (nvlink: {links: 18, version: 6 (NVML's enum for
NVLink 4.0), gbs: null}), so readers derive the rate from links x generation; and the
peer_bidir records of the method since found wrong must not pass validate."""
import copy
import json
import os

import pytest

from comm_bench.views.heatmap import build, legend_text
from comm_bench.views.plot import build as plot_build
from comm_bench import links as L
from comm_bench.topology.linkmap import LinkMap
from cbtest import run_cli

H200X2 = os.path.join(os.path.dirname(__file__), "..", "docs", "benchmarks", "gpu-h200x2")


def doc(name):
    with open(os.path.join(H200X2, name), encoding="utf-8") as f:
        return json.load(f)


def test_stored_nvml_enum_reads_as_its_generation():
    assert L.stored_generation(6) == 4 and L.stored_generation(7) == 5
    assert L.stored_generation(4) == 4                # since the fix: the generation itself
    assert L.gpu_nvlink_gbs({"links": 18, "version": 6, "gbs": None}) == 450.0
    assert L.gpu_nvlink_gbs({"links": 18, "version": 4, "gbs": None}, links=9) == 225.0
    assert L.gpu_nvlink_gbs({"links": 18, "version": 6, "gbs": 400.0}) == 400.0   # recorded wins
    assert L.gpu_nvlink_gbs({"links": 18, "version": None, "gbs": None}) is None
    assert L.gpu_nvlink_gbs(None) is None


def test_h200_pair_classifies_as_450_gbs_nvlink():
    d = doc("nccl_pw.json")
    assert LinkMap(d).classify(0, 1) == ("nvlink", 450.0)
    # the rate follows what the document holds: half the links, half the rate
    for h in d["hosts"]:
        for g in h["topology"]["gpus"]:
            g["nvlink"]["peers"] = {k: 9 for k in g["nvlink"]["peers"]}
    assert LinkMap(d).classify(0, 1) == ("nvlink", 225.0)


def test_validate_nccl_collectives_pass_with_the_nvlink_rate_shown():
    p = run_cli("validate", os.path.join(H200X2, "nccl_ws2.json"), check_rc=0)
    assert p.stdout.startswith("validate: PASS")
    assert "all_reduce         4G  collective  busbw 346 GB/s  (link 450 GB/s, expected min 252)" in p.stdout


def test_validate_nccl_pairs_pass_and_hold_the_large_size_to_the_link_rate():
    p = run_cli("validate", os.path.join(H200X2, "nccl_pw.json"), check_rc=0)
    assert "sendrecv         256M       2 pairs  median 358 GB/s  (link 450 GB/s, expected min 315)" in p.stdout
    assert "sendrecv           8M       2 pairs  median 181 GB/s  (link 450 GB/s, peers only)" in p.stdout


def test_validate_nccl_pairs_fail_when_the_large_size_is_slow(tmp_path):
    d = doc("nccl_pw.json")
    for r in d["results"]:
        if r["size"] == 256 << 20:
            r["busbw"] = r["algbw"] = r["busbw"] * 0.8       # 286 GB/s: below 0.70 x 450
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(d))
    p = run_cli("validate", path, "--json", check_rc=1)
    assert [f["kind"] for f in json.loads(p.stdout)["findings"]] == ["class-below-expected"]


def test_validate_refuses_to_pass_the_superseded_peer_bidir_records(tmp_path):
    p = run_cli("validate", os.path.join(H200X2, "cuda_pw_ce.json"), "--json", check_rc=1)
    rep = json.loads(p.stdout)
    assert [f["kind"] for f in rep["findings"]] == ["superseded-method"]
    assert rep["findings"][0]["records"] == 6 and "re-run" in rep["findings"][0]["message"]
    # their figures are not checked against anything (they are not link figures)
    assert {g["op"] for g in rep["checked"]["groups"]} == {"peer", "peer_read"}
    # the same records as the current method writes them (both directions recorded) pass
    d = doc("cuda_pw_ce.json")
    for r in d["results"]:
        if r["op"] == "peer_bidir":
            r["busbw"] = r["algbw"] = 391.8 if r["size"] == 1 << 30 else r["busbw"]
            r["extra"]["per_direction_gbps"] = {"src->dst": r["busbw"], "dst->src": r["busbw"]}
    path = tmp_path / "rerun.json"
    path.write_text(json.dumps(d))
    run_cli("validate", path, check_rc=0)


def test_heatmap_cells_read_share_of_the_nvlink_rate_and_flag_superseded():
    data = build(doc("nccl_pw.json"))
    big = data.panels[-1]
    assert big["size"] == 256 << 20 and not big["relative"].any()
    assert big["util"][0, 1] == pytest.approx(357.6 / 450, abs=0.01)
    assert "nvlink: 450 GB/s" in legend_text(data) and "NOT VALID" not in legend_text(data)
    bidir = build(doc("cuda_pw_ce.json"), op="peer_bidir")
    assert "NOT VALID: peer_bidir measured by the method replaced" in legend_text(bidir)


def test_plot_draws_the_nvlink_line():
    _, rates = plot_build([("nccl_ws2.json", doc("nccl_ws2.json"))])
    assert rates == {"nvlink": 450.0}
    d = copy.deepcopy(doc("nccl_ws2.json"))
    for h in d["hosts"]:
        for g in h["topology"]["gpus"]:
            g["nvlink"]["version"] = None                 # nothing to derive a rate from
    assert plot_build([("x", d)])[1] == {}
