"""`validate --node-problem HOST`: Node Problem Detector's custom-plugin convention (exit 0 ok,
1 problem, 2 unknown; one line on stdout), on recorded results documents."""
from pathlib import Path

from cbtest import assert_no_traceback, run_cli

DATA = Path(__file__).resolve().parent / "data"
SLOW = DATA / "diagnose" / "intermittent_host.json"      # validate names host vm (slow, unsteady)
HEALTHY = DATA / "validate" / "h200x2_nccl_healthy.json"


def verdict(doc, node):
    p = run_cli("validate", doc, "--node-problem", node, timeout=60)
    assert_no_traceback(p)
    return p.returncode, p.stdout


def test_a_node_with_findings_is_a_problem_named_with_its_cause():
    code, out = verdict(SLOW, "vm")
    assert code == 1 and len(out.splitlines()) == 1
    assert out.startswith("comm-bench: vm: ") and "slow host" in out and "GB/s" in out


def test_a_node_given_by_its_fqdn_is_the_host_it_recorded():
    assert verdict(SLOW, "vm.cluster.example")[0] == 1


def test_a_healthy_node_is_ok():
    assert verdict(HEALTHY, "vm") == (0, "comm-bench: vm ok\n")


def test_a_node_the_run_did_not_measure_is_unknown():
    code, out = verdict(HEALTHY, "gpu-node-17")
    assert code == 2 and out == "comm-bench: gpu-node-17 is not in these results (hosts: vm)\n"


def test_unreadable_results_are_unknown_in_one_line(tmp_path):
    p = run_cli("validate", tmp_path / "none.json", "--node-problem", "vm", timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert_no_traceback(p)
