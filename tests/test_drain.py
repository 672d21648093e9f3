"""validate's scheduler-facing output (issue 39): the drain list, `--slurm-drain` (through a
stand-in scontrol and `--dry-run`; tests/test_slurm_drain.py drains a real Slurm node), the
per-host JUnit cases and the Prometheus verdict gauges, from recorded runs (tests/data)."""
import datetime as dt
import json
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from comm_bench.validate import drain
from comm_bench.validate.finding_kinds import FINDING_KINDS
from comm_bench.validate.output import HOSTS_CLASS, write_junit
from cbtest import assert_no_traceback, run_cli

DATA = Path(__file__).resolve().parent / "data"
HEALTHY = DATA / "validate" / "h200x2_nccl_healthy.json"
SIX_PCT = DATA / "diagnose" / "rank0_jitter_with_6pct_host.json"   # rank 2 at 6%, pair 4->6 slow
FLAPPING = DATA / "diagnose" / "intermittent_host.json"            # rank 3 slow and unstable


def one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def on_hosts(src, dst, name=lambda r: f"node{r + 1}"):
    """The recorded namespace run (every rank on host "vm", nodes "vm/addr") as if each rank had
    run on a host of its own, as srun's ranks do."""
    doc = json.loads(Path(src).read_text())
    for r in doc["ranks"]:
        r["host"] = name(r["rank"])
    for rec in doc["results"]:
        for side in ("src", "dst"):
            if isinstance(rec.get(side), int):
                rec[f"{side}_host"] = name(rec[side])
    dst.write_text(json.dumps(doc))
    return dst


def validate(*args, rc):
    p = run_cli("validate", *args, check_rc=rc)
    assert_no_traceback(p)
    return p


def lines(path):
    text = Path(path).read_text()
    assert text == "" or text.endswith("\n")
    return [ln.split("\t") for ln in text.splitlines()]


# ----------------------------------------------------------------------------- drain list
def test_clean_run_writes_an_empty_drain_list(tmp_path):
    out = tmp_path / "drain.txt"
    out.write_text("stale\tfrom an earlier run\n")
    validate(HEALTHY, "--drain-list", out, rc=0)
    assert out.read_bytes() == b""


def test_slow_host_is_one_line_and_the_slow_pair_names_no_node(tmp_path):
    doc, out = on_hosts(SIX_PCT, tmp_path / "r.json"), tmp_path / "drain.txt"
    p = validate(doc, "--json", "--drain-list", out, rc=1)
    kinds = [f["kind"] for f in json.loads(p.stdout)["findings"]]
    assert kinds == ["bad-host", "bad-pair"]          # pair 4->6: nodes 5 and 7 stay in service
    assert lines(out) == [["node3", "comm-bench: slow host: 0.0143 of 0.251 GB/s (6%), network 2M, "
                                    "confidence 0.996"]]


def test_several_findings_of_one_host_make_one_reason_worst_first(tmp_path):
    out = tmp_path / "drain.txt"
    validate(on_hosts(FLAPPING, tmp_path / "r.json"), "--drain-list", out, rc=1)
    ((node, why),) = lines(out)
    assert node == "node4"
    first, second = why.removeprefix(drain.PREFIX).split("; ")
    assert first.startswith("unstable host: 2.6x as unsteady as known-good pairs")     # 1 / 2.6 = 38%
    assert second == "slow host: 0.158 of 0.239 GB/s (66%), confidence 0.996"


def test_namespaces_of_one_host_drain_that_host(tmp_path):
    """Ranks in network namespaces of one machine are nodes "vm/addr" to validate; Slurm
    knows the machine, by the host name the ranks recorded."""
    out = tmp_path / "drain.txt"
    validate(SIX_PCT, "--drain-list", out, rc=1)
    assert lines(out) == [["vm", "comm-bench: slow host vm/10.77.17.3: 0.0143 of 0.251 GB/s (6%), virtual 2M, "
                                 "confidence 0.996"]]


def test_control_characters_are_escaped_and_no_node_list_reaches_scontrol(tmp_path):
    evil = "node3\tx\n[1-9]\x1b"
    doc, out = on_hosts(SIX_PCT, tmp_path / "r.json", lambda r: evil if r == 2 else f"node{r + 1}"), \
        tmp_path / "drain.txt"
    validate(doc, "--drain-list", out, rc=1)
    raw = out.read_text()
    assert raw.count("\n") == 1 and raw.count("\t") == 1 and "\x1b" not in raw
    # the reader escapes the ESC as it loads names (printable.py); the drain list its tab and newline
    assert lines(out)[0][0] == "node3\\tx\\n[1-9]\\u001b"
    p = validate(doc, "--slurm-drain", "--dry-run", rc=2)     # bad input: nothing run, nothing printed
    assert "is not a Slurm node name" in one_line(p.stderr) and "scontrol" not in p.stdout


def test_reason_from_a_finding_s_own_fields():
    doc = {"ranks": [{"rank": r, "host": f"node{r // 2}"} for r in range(8)]}
    fs = [{"kind": "bad-host", "host": "node1", "ranks": [2, 3], "measured_gbs": 7.2, "peer_median_gbs": 12.0,
           "link_class": "ib", "size": 16 << 20, "confidence": 1.0, "message": "m1"},
          {"kind": "high-latency-rank", "host": "node1", "ranks": [3], "rank": 3, "measured_us": 9.0,
           "peer_median_us": 3.0, "link_class": "ib", "size": 8, "confidence": 0.9, "message": "m2"},
          {"kind": "bad-device", "host": "node2", "ranks": [5], "rank": 5, "device": "GPU1", "measured_gbs": 9.0,
           "peer_median_gbs": 12.0, "size": 1 << 30, "confidence": 0.5, "message": "m3"},
          {"kind": "link-degraded", "host": "node0", "device": "GPU0", "link": "pcie", "measured": "x8",
           "expected": "x16", "confidence": 1.0, "message": "m4"},
          {"kind": "bad-pair", "src": 0, "dst": 6, "measured_gbs": 1.0, "peer_median_gbs": 12.0, "message": "m5"},
          {"kind": "run-failed", "host": "node3", "rank": 6, "message": "m6"}]
    assert [k for k in FINDING_KINDS if drain.names_node({"kind": k})] == [
        "bad-host", "bad-device", "bad-rank", "unstable-host", "unstable-rank", "high-latency-host",
        "high-latency-rank", "link-degraded"]
    rows = drain.hosts({"findings": fs}, doc)
    assert [(n, [f["message"] for f in f_]) for n, f_, _ in rows] == \
        [("node0", ["m4"]), ("node1", ["m2", "m1"]), ("node2", ["m3"]), ("node3", [])]
    assert drain.drain_list(rows).splitlines() == [
        "node0\tcomm-bench: degraded pcie link of GPU0: x8 of x16, confidence 1.00",
        "node1\tcomm-bench: high latency rank 3: 9 us one-way where peers take 3 us (3x), ib 8B, confidence 0.9; "
        "slow host: 7.2 of 12 GB/s (60%), ib 16M, confidence 1.00",
        "node2\tcomm-bench: slow device GPU1 (rank 5): 9 of 12 GB/s (75%), 1G, confidence 0.5"]
    many = drain.reason([dict(fs[0], message=str(i)) for i in range(20)], "node1")
    shown, more = many.rsplit("; +", 1)
    assert len(many) <= drain.MAX_REASON and more == f"{20 - len(shown.split('; '))} more finding(s)"


# ----------------------------------------------------------------------------- --slurm-drain
def fake_scontrol(folder, rc=0, said=""):
    """An scontrol that records its argv (one JSON list a line) and answers rc."""
    folder.mkdir()
    exe = folder / "scontrol"
    exe.write_text(f"#!/bin/sh\n{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "
                   f"\"$@\" >> {folder / 'calls'}\necho '{said}' >&2\nexit {rc}\n")
    exe.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def calls(folder):
    f = folder / "calls"
    return [json.loads(ln) for ln in f.read_text().splitlines()] if f.exists() else []


def test_dry_run_prints_the_commands_it_would_run(tmp_path):
    doc, out = on_hosts(FLAPPING, tmp_path / "r.json"), tmp_path / "drain.txt"
    env = fake_scontrol(tmp_path / "bin")
    p = run_cli("validate", doc, "--drain-list", out, "--slurm-drain", "--dry-run", env=env, check_rc=1)
    ((node, why),) = lines(out)
    assert shlex.split(p.stdout.splitlines()[-1]) == ["scontrol", "update", "NodeName=node4", "State=DRAIN",
                                                      f"Reason={why}"]
    assert not calls(tmp_path / "bin")
    p = run_cli("validate", doc, "--json", "--slurm-drain", "--dry-run", env=env, check_rc=1)
    assert json.loads(p.stdout)["status"] == "fail" and one_line(p.stderr).startswith("scontrol update")
    p = validate(HEALTHY, "--slurm-drain", "--dry-run", rc=0)
    assert "scontrol" not in p.stdout
    assert "give --slurm-drain too" in one_line(validate(doc, "--dry-run", rc=2).stderr)


def test_slurm_drain_runs_scontrol_once_per_bad_node(tmp_path):
    doc = on_hosts(SIX_PCT, tmp_path / "r.json")
    p = run_cli("validate", doc, "--slurm-drain", env=fake_scontrol(tmp_path / "bin"), check_rc=1)
    assert calls(tmp_path / "bin") == [["update", "NodeName=node3", "State=DRAIN", "Reason=comm-bench: slow host: "
                                        "0.0143 of 0.251 GB/s (6%), network 2M, confidence 0.996"]]
    assert "slurm: drained node3" in one_line(p.stderr)
    run_cli("validate", HEALTHY, "--slurm-drain", env=fake_scontrol(tmp_path / "bin2"), check_rc=0)
    assert not calls(tmp_path / "bin2")


def test_slurm_drain_without_or_with_a_failing_scontrol(tmp_path):
    doc = on_hosts(SIX_PCT, tmp_path / "r.json")
    (tmp_path / "empty").mkdir()
    for path in (doc, HEALTHY):    # a clean run does not pass where the drain could not have run
        p = run_cli("validate", path, "--slurm-drain", env={"PATH": str(tmp_path / "empty")}, check_rc=2)
        assert_no_traceback(p)
        assert "needs Slurm's scontrol on PATH" in one_line(p.stderr) and not p.stdout
    env = fake_scontrol(tmp_path / "bin", rc=1, said="slurm_update error: Invalid node name specified")
    p = run_cli("validate", doc, "--slurm-drain", env=env, check_rc=1)
    assert_no_traceback(p)
    line = one_line(p.stderr)
    assert "NodeName=node3" in line and "Invalid node name specified" in line and "0 of 1" in line
    assert "FINDING [bad-host]" in p.stdout


# ----------------------------------------------------------------------------- JUnit
def host_cases(junit):
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuite"
    return {tc.get("name"): tc.find("failure") for tc in root if tc.get("classname") == HOSTS_CLASS}, root


def test_junit_has_a_case_per_host(tmp_path):
    junit = tmp_path / "j.xml"
    validate(on_hosts(SIX_PCT, tmp_path / "r.json"), "--junit", junit, rc=1)
    cases, root = host_cases(junit)
    assert list(cases) == [f"node{i}" for i in range(1, 9)]
    assert [n for n, fail in cases.items() if fail is not None] == ["node3"]
    fail = cases["node3"]
    assert fail.get("message") == "slow host: 0.0143 of 0.251 GB/s (6%), network 2M, confidence 0.996"
    assert fail.get("type") == "bad-host" and "host node3 (rank 2" in fail.text
    per_check = [tc.get("name") for tc in root if tc.get("classname") != HOSTS_CLASS and tc.find("failure") is not None]
    assert per_check == ["bad-host", "bad-pair"] and root.get("failures") == "3" and root.get("tests") == str(
        len(list(root)))
    validate(HEALTHY, "--junit", junit, rc=0)
    cases, root = host_cases(junit)
    assert list(cases) == ["vm"] and cases["vm"] is None and root.get("failures") == "0"


def test_junit_escapes_control_characters(tmp_path):
    junit = tmp_path / "j.xml"
    doc = {"ranks": [{"rank": 0, "host": "a\x01b"}, {"rank": 1, "host": "c"}]}
    report = {"findings": [{"kind": "bad-rank", "rank": 0, "ranks": [0], "host": "a\x01b",
                            "message": "rank 0 on host a\x01b is slow"}], "checked": {}}
    write_junit(report, junit, drain.hosts(report, doc))
    cases, _ = host_cases(junit)                      # parses: XML 1.0 has no \x01
    assert list(cases) == ["a\\x01b", "c"] and cases["a\\x01b"].text == "rank 0 on host a\\x01b is slow"


# ----------------------------------------------------------------------------- Prometheus
def families(path):
    """The textfile through both parsers: OpenMetrics (strict, # EOF) and the Prometheus text
    format node_exporter's textfile collector reads. {name: {labels: value}}."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families as prom

    text = Path(path).read_text()
    out = {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples} for f in om(text)}
    assert out == {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples} for f in prom(text)}
    assert all(f.type == "gauge" for f in prom(text))
    return out


def when(doc, key):
    return dt.datetime.fromisoformat(json.loads(Path(doc).read_text())[key]).timestamp()


def test_validate_prometheus_verdict_per_host(tmp_path):
    pytest.importorskip("prometheus_client")
    doc, prom = on_hosts(SIX_PCT, tmp_path / "r.json"), tmp_path / "v.prom"
    validate(doc, "--prometheus", prom, rc=1)
    fams = families(prom)
    run = (("transport", "tcp"), ("world_size", "8"))
    assert fams["comm_bench_run_timestamp_seconds"] == {(("command", "validate"),) + run: when(doc, "finished")}
    assert fams["comm_bench_validate_ok"] == {run: 0} and fams["comm_bench_validate_findings"] == {run: 2}
    ok = {dict(k)["host"]: v for k, v in fams["comm_bench_host_ok"].items()}
    assert ok == {f"node{i}": (0 if i == 3 else 1) for i in range(1, 9)}
    count = {dict(k)["host"]: v for k, v in fams["comm_bench_host_findings"].items()}
    assert count == {f"node{i}": (1 if i == 3 else 0) for i in range(1, 9)}
    validate(on_hosts(FLAPPING, tmp_path / "f.json"), "--prometheus", prom, rc=1)
    assert {dict(k)["host"]: v for k, v in families(prom)["comm_bench_host_findings"].items()}["node4"] == 2
    validate(HEALTHY, "--prometheus", prom, rc=0)
    fams = families(prom)
    assert list(fams["comm_bench_validate_ok"].values()) == [1]
    assert {dict(k)["host"]: v for k, v in fams["comm_bench_host_ok"].items()} == {"vm": 1}
    evil = on_hosts(SIX_PCT, tmp_path / "e.json", lambda r: "node3\tx\n\x1b" if r == 2 else f"node{r + 1}")
    validate(evil, "--prometheus", prom, rc=1)
    ok = {dict(k)["host"]: v for k, v in families(prom)["comm_bench_host_ok"].items()}
    # the ESC as the reader escapes it on load (printable.py), the tab and newline as the export does
    assert ok["node3\\tx\\n\\u001b"] == 0 and "\x1b" not in prom.read_text()


def test_report_prometheus_has_the_run_time(tmp_path):
    pytest.importorskip("prometheus_client")
    doc, prom, vprom = on_hosts(SIX_PCT, tmp_path / "r.json"), tmp_path / "r.prom", tmp_path / "v.prom"
    run_cli("report", doc, "--prometheus", prom, check_rc=0)
    stamp = families(prom)["comm_bench_run_timestamp_seconds"]
    assert stamp == {(("command", "report"), ("transport", "tcp"), ("world_size", "8")): when(doc, "finished")}
    # report's and validate's files side by side in one textfile folder: no series in both
    validate(doc, "--prometheus", vprom, rc=1)
    series = lambda f: {(n, k) for n, s in families(f).items() for k in s}   # noqa: E731
    assert not series(prom) & series(vprom)
    # a run that never finished: its start; no time at all: no sample, not a made-up one
    d = json.loads(doc.read_text())
    for finished, started, want in ((None, d["started"], when(doc, "started")), (None, "garbage", None)):
        doc.write_text(json.dumps(dict(d, finished=finished, started=started)))
        run_cli("report", doc, "--prometheus", prom, check_rc=0)
        got = families(prom).get("comm_bench_run_timestamp_seconds")
        assert (list(got.values()) if got else None) == ([want] if want else None)


@pytest.mark.parametrize("option", ["--drain-list", "--prometheus"])
def test_new_outputs_refuse_a_symlink_and_keep_its_target(tmp_path, option):
    """Written as every named output is (results/safefile.py): never through a link."""
    pytest.importorskip("prometheus_client")
    real, link = tmp_path / "precious.txt", tmp_path / "out"
    real.write_text("keep me\n")
    link.symlink_to(real)
    p = validate(on_hosts(SIX_PCT, tmp_path / "r.json"), option, link, rc=2)
    assert "symbolic link" in one_line(p.stderr) and real.read_text() == "keep me\n"
