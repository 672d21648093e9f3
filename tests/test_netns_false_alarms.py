"""Issue 39's verdicts on 8 network-namespace hosts, every link shaped to 2 Gbit/s, the
runs of tools/bench_false_alarms.py once each (its 20-run series and figures are in
docs/benchmarks/false-alarms.md): each rank runs `comm-bench sweep --transport tcp
--pattern pairwise --mode lat -b 8 -e 1K -n 2000 -w 100` with the default confirm phase,
then `comm-bench validate run.json` with no flags.
- no fault: exit 0, and the sweep's closing `# verdict:` line says PASS too;
- one direction of one pair behind a 3 Mbit/s bucket (3x its peers' one-way latency at 8 B,
  48x at 1 KiB): that pair, both ordered directions, named alone, exit 1, and the sweep says
  FAIL with the same findings.
Needs root + iproute2; every namespace is deleted at the end (also on failure)."""
import pytest

from netns_launch import netns_fabric     # puts tools/ on sys.path
import bench_false_alarms as fa

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]


def explain(row):
    return "\n".join([f"validate exit {row['validate_rc']}, status {row['status']}", str(row["sweep_verdict"]),
                      *(f"{k}: {m} ({c})" for k, m, c in row["findings"])])


def test_clean_latency_fabric_passes_and_the_sweep_agrees(tmp_path):
    row = fa.one_run("clean-lat", 8, tmp_path, timeout=900)
    assert row["ranks_rc"] == [0] * 8, explain(row)
    assert row["as_expected"] and row["validate_rc"] == 0, explain(row)
    assert row["agree"] and row["sweep_verdict"].startswith("# verdict: PASS"), explain(row)


def test_a_pair_at_3x_latency_is_named_alone(tmp_path):
    row = fa.one_run("slow-pair-lat", 8, tmp_path, timeout=900)
    assert row["as_expected"] and row["validate_rc"] == 1, explain(row)
    assert row["agree"] and row["sweep_verdict"].startswith("# verdict: FAIL: 2 finding(s)"), explain(row)
    assert all(k == "high-latency-pair" and c >= 0.95 for k, _, c in row["findings"]), explain(row)
