"""tools/nccl_tests_compare.py on nccl-tests' real output (kept in docs/benchmarks) and on
a small results document: rows matched by requested size, 0-byte rows left out, ratios
and the reference's spread as the doc reports them."""
import importlib.util
import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "benchmarks", "nccl-tests-h200", "nccl-tests-output")


def _tool():
    spec = importlib.util.spec_from_file_location("nccl_tests_compare",
                                                  os.path.join(ROOT, "tools", "nccl_tests_compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reads_nccl_tests_rows_in_order():
    rows = _tool().ref_rows(os.path.join(OUT, "ref_all_gather_G10_r1.txt"))
    assert len(rows) == 28                      # 8 B .. 1 GiB, factor 2
    assert rows[0][0] == 0 and rows[1][0] == 16  # nccl-tests moves nothing for an 8 B all_gather
    assert rows[-1][0] == 1 << 30 and rows[-1][1] > 100


def test_ratio_spread_and_verdicts(tmp_path):
    tool = _tool()
    for r in (1, 2, 3):
        shutil.copy(os.path.join(OUT, f"ref_all_gather_G10_r{r}.txt"), tmp_path / f"ref_all_gather_G10_r{r}.txt")
        ref = tool.ref_rows(os.path.join(OUT, f"ref_all_gather_G10_r{r}.txt"))
        # comm-bench 10% slower than this round's reference at 1 MiB, equal elsewhere
        recs = [{"op": "all_gather", "size": 8 << i, "time_us": t * (1.1 if (8 << i) == 1 << 20 else 1.0),
                 "extra": {"nccl_api": "ncclAllGather"}} for i, (_, t) in enumerate(ref)]
        (tmp_path / f"cb_G10_r{r}.json").write_text(json.dumps({"results": recs}))
    rows, api = tool.compare(str(tmp_path))
    assert api == {"all_gather": "ncclAllGather"}
    assert [r["size"] for r in rows if not r["comparable"]] == [8]
    one_mib = next(r for r in rows if r["size"] == 1 << 20)
    assert abs(one_mib["ratio"] - 1.1) < 0.05 and not one_mib["in_band"]
    v = tool.verdicts(rows)["G10/all_gather"]
    assert v["outside_band"] == [1 << 20] and v["holds"] is False and v["excluded_sizes"] == [8]
