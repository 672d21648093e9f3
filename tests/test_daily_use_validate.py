"""Issue 42: `validate` takes several documents (validate *.json, as the Slurm example writes
one per transport): one verdict over all, each finding naming its document; and it says on
screen which sizes it left out and why."""
import json

from cbtest import assert_no_traceback, run_cli
from test_heatmap import make_doc, write


def _real(tmp_path, name, *args):
    out = tmp_path / name
    run_cli("sweep", *args, "--nprocs", "3", "--pattern", "pairwise", "-b", "8K", "-e", "2M", "-f", "16",
            "-n", "5", "-w", "1", "--confirm", "0", "--no-progress", "--no-verdict", "-o", out, timeout=300,
            check_rc=0)
    return out


def _slow_host_doc(tmp_path):
    """4 NVLink nodes' worth of pairs, node002's all at a third: a finding on any run."""
    slow = lambda s, d, size, rnd: (45.0 if 2 in (s // 2, d // 2) else 370.0) * rnd.uniform(0.99, 1.01)  # noqa
    return write(tmp_path, make_doc(nodes=4, gpn=2, value=slow), "slow.json")


def test_several_documents_one_verdict_findings_name_their_document(tmp_path):
    tcp = _real(tmp_path, "tcp.json", "-t", "tcp")
    gloo = _real(tmp_path, "gloo.json", "-t", "gloo")
    p = run_cli("validate", tcp, gloo, "--json")
    out = json.loads(p.stdout)
    # one verdict: the worst of the documents' (a shared 2-core machine's loopback may have findings)
    each = [d["status"] for d in out["documents"]]
    worst = "fail" if "fail" in each else "unconfirmed" if "unconfirmed" in each else "pass"
    assert out["status"] == worst and p.returncode == {"fail": 1, "unconfirmed": 3, "pass": 0}[worst]
    p = run_cli("validate", tcp, gloo)
    assert "== tcp.json" in p.stdout and "== gloo.json" in p.stdout
    last = p.stdout[p.stdout.rindex("\nvalidate: "):]           # the verdict over all closes the output
    assert last.startswith(f"\nvalidate: {worst.upper()} over 2 documents (tcp.json "), last
    assert all(ln.startswith(("FINDING tcp.json: ", "FINDING gloo.json: ")) or "]" in ln and
               ln.split("] ", 1)[1].startswith(("tcp.json: ", "gloo.json: "))
               for ln in p.stdout.splitlines() if ln.startswith("FINDING"))
    slow = _slow_host_doc(tmp_path)
    p = run_cli("validate", tcp, slow, gloo)
    assert p.returncode == 1, (p.stdout, p.stderr)               # one document's findings fail them all
    findings = [ln for ln in p.stdout.splitlines() if ln.startswith("FINDING")]
    assert any("] slow.json: " in ln for ln in findings), findings
    assert "validate: FAIL over 3 documents (tcp.json " in " ".join(p.stdout.split())
    out = json.loads(run_cli("validate", slow, tcp, "--json", check_rc=1).stdout)
    assert out["status"] == "fail" and [d["document"] for d in out["documents"]] == ["slow.json", "tcp.json"]
    assert out["documents"][0]["report"]["findings"]
    assert all(f["document"] == d["document"] and f["message"].startswith(d["document"] + ": ")
               for d in out["documents"] for f in d["report"]["findings"])


def test_several_documents_every_output_says_the_verdict_over_all(tmp_path):
    """--junit, --drain-list, --prometheus, --node-problem, --slurm-drain --dry-run and
    --baseline with several documents: the verdict over all, the slow node of one document
    named with its document."""
    good = write(tmp_path, make_doc(nodes=4, gpn=2), "good.json")
    slow = _slow_host_doc(tmp_path)
    j, d, m = tmp_path / "j.xml", tmp_path / "drain.txt", tmp_path / "v.prom"
    p = run_cli("validate", good, slow, "--junit", j, "--drain-list", d, "--prometheus", m)
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = d.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("node002\tcomm-bench: slow host"), lines
    junit = j.read_text()
    assert 'name="good.json: nvlink sendrecv 1M"' in junit and 'name="slow.json: ib sendrecv 4M"' in junit
    assert 'failures="2"' in junit and "slow.json: host node002" in junit     # bad-host and the node's case
    prom = m.read_text()
    assert 'comm_bench_validate_ok{transport="nccl",world_size="8"} 0.0' in prom
    assert 'comm_bench_host_ok{host="node002",transport="nccl",world_size="8"} 0.0' in prom
    assert 'comm_bench_host_ok{host="node001",transport="nccl",world_size="8"} 1.0' in prom
    # the clean document alone: an empty drain list, every host ok
    run_cli("validate", good, good, "--drain-list", d, check_rc=0)
    assert d.read_text() == ""
    # NPD: one line and its exit code, for a node of either document
    p = run_cli("validate", good, slow, "--node-problem", "node002", check_rc=1)
    assert p.stdout.startswith("comm-bench: node002: slow host") and len(p.stdout.splitlines()) == 1
    p = run_cli("validate", good, slow, "--node-problem", "node001", check_rc=0)
    assert p.stdout.startswith("comm-bench: node001 ok")
    p = run_cli("validate", good, slow, "--slurm-drain", "--dry-run", check_rc=1)
    assert [ln for ln in p.stdout.splitlines() if ln.startswith("scontrol")] == [
        "scontrol update NodeName=node002 State=DRAIN 'Reason=" + lines[0].split("\t", 1)[1] + "'"]
    # --baseline: each document against the baseline of its transport; a regression in one fails all
    sizes = tuple(1 << k for k in range(20, 26))        # 6 sizes: enough for the signed-rank test
    base = write(tmp_path, make_doc(nodes=2, gpn=2, sizes=sizes), "base.json")
    same = write(tmp_path, make_doc(nodes=2, gpn=2, sizes=sizes, seed=1), "same.json")
    half = write(tmp_path, make_doc(nodes=2, gpn=2, sizes=sizes, seed=2,
                                    value=lambda s, d, size, rnd: (185.0 if s // 2 == d // 2 else 22.5)
                                    * rnd.uniform(0.97, 1.03)), "half.json")
    p = run_cli("validate", same, half, "--baseline", base, check_rc=1)
    text = " ".join(p.stdout.split())
    assert text.count("baseline base.json: ") == 2 and "FINDING [regression] half.json: " in text, text
    assert "FINDING [regression] same.json" not in text
    p = run_cli("validate", good, slow, "--baseline", write(tmp_path, make_doc(transport="tcp"), "tcp.json"),
                check_rc=2)
    assert_no_traceback(p)
    assert p.stderr.startswith("comm-bench: --baseline: no transport, op, mode and size in common")


def test_left_out_sizes_are_said_on_screen(tmp_path):
    tcp = _real(tmp_path, "tcp.json", "-t", "tcp")
    p = run_cli("validate", tcp)
    assert p.returncode in (0, 1, 3), p.stderr
    text = " ".join(p.stdout.split())
    assert p.stdout.startswith("validate: ")
    assert "left out: 8K, 128K, below the rules' min_size 1M" in text, text
    assert "small transfers measure latency" in text
    rep = json.loads(run_cli("validate", tcp, "--json").stdout)
    assert rep["left_out"]["sizes"] == [8192, 131072]
