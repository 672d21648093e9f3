"""torchrun with the c10d rendezvous across four network-namespace hosts, one agent per host
(examples/torchrun-c10d.sh as it is). A rank is killed mid-sweep; the agents restart the group
(--max-restarts 1) and `--resume` continues the same results document: every pair and size
measured once, and the document records the restart. Needs root and iproute2."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cbtest import BIN, load_results, rank_pids
from netns_launch import MARKS, ROOT, netns_hosts

pytestmark = MARKS

HOSTS = ["t0", "t1", "t2", "t3"]
EXAMPLE = ROOT / "examples" / "torchrun-c10d.sh"
SIZES = [64 << 10 << i for i in range(7)]         # the example's -b 64K -e 4M


def records(path):
    try:
        return json.loads(Path(path).read_text())["results"]
    except (OSError, ValueError, KeyError):
        return []        # not written yet


def kill_a_rank_mid_sweep(agents, out, timeout=300):
    """SIGKILL one rank other than 0 once a few records are in; how many there were."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert all(a.poll() is None for a in agents), "an agent ended before the kill"
        n = len(records(out))
        if n >= 3:
            for agent in agents:
                victims = {r: pid for r, pid in rank_pids(agent.pid).items() if r != 0}
                if victims:
                    os.kill(min(victims.items())[1], signal.SIGKILL)
                    return n
        time.sleep(0.05)
    pytest.fail("no records within the time limit")


def test_killed_rank_restarts_and_resumes(tmp_path):
    out = tmp_path / "torchrun.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "LOCAL_", "TORCHELASTIC", "COMM_BENCH"))}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    with netns_hosts.NamedHosts(HOSTS, prefix="cbtorch", subnet="10.79.16") as hosts:
        agents = [hosts.popen(i, [EXAMPLE, HOSTS[0], len(HOSTS), out], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                  for i in range(len(HOSTS))]
        seen = kill_a_rank_mid_sweep(agents, out)
        logs = [a.communicate(timeout=400)[0] for a in agents]
    for a, log in zip(agents, logs):
        assert a.returncode == 0, "\n=====\n".join(l[-2500:] for l in logs)
    doc = load_results(out)
    assert doc["status"] == "ok" and doc["world_size"] == len(HOSTS)
    assert sorted(r["host"] for r in doc["ranks"]) == HOSTS
    pairs = [(s, d) for s in range(len(HOSTS)) for d in range(len(HOSTS)) if s != d]
    # the first pass: the default confirm phase re-measures suspects in records of its own
    keys = sorted((r["src"], r["dst"], r["size"]) for r in doc["results"] if "confirm" not in r)
    assert keys == sorted((s, d, z) for s, d in pairs for z in SIZES)     # each exactly once
    for r in doc["results"]:      # a record's hosts are its ranks' hosts in this numbering
        assert (r["src_host"], r["dst_host"]) == (doc["ranks"][r["src"]]["host"],
                                                  doc["ranks"][r["dst"]]["host"])
    [entry] = doc["resumed"]
    # rank 0 records the failure it saw, unless torchrun stopped it (SIGTERM) first
    assert entry["previous_status"] in ("failed", "running"), entry
    assert entry["previous_status"] == "running" or entry["previous_failure"]["host"] in HOSTS
    assert entry["restart_count"] in (0, 1)    # torchrun counts it on the failed rank's host only
    assert seen <= entry["records_kept"] < len(keys) and entry["after"]["size"] in SIZES
