"""`comm-bench validate --slurm-drain` on a real Slurm cluster (tools/slurm_cluster.py, as in
tests/test_slurm.py): node n3's link is shaped slow, a pairwise sweep runs under srun, and
validate, run where scontrol reaches the cluster's slurmctld, leaves n3 drained with its
reason in `sinfo -R` and the other nodes idle. Needs root, iproute2 and Debian's
munge/slurmd/slurmctld/slurm-client (tools/install.sh --test)."""
import time

import pytest

from cbtest import COMM_BENCH
from test_slurm import NODES, SHAPED, pytestmark, slurm_cluster, srun  # noqa: F401 - the same marks


@pytest.fixture(scope="module")
def cluster():
    """A cluster of its own: this test drains a node, which the other Slurm tests need."""
    with slurm_cluster.SlurmCluster(NODES, prefix="cbdrain", subnet="10.78.18", shape={SHAPED: "500mbit"}) as sc:
        yield sc


def states(cluster):
    p = cluster.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=60)
    return dict(line.split() for line in p.stdout.splitlines() if line.strip())


def settled(cluster, timeout=60):
    """Node states once no node is still completing the sweep's job."""
    deadline = time.monotonic() + timeout
    while True:
        now = states(cluster)
        if not any(s.startswith(("comp", "mix", "alloc")) for s in now.values()) or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def validate(cluster, cwd, *args):
    return cluster.run([COMM_BENCH, "validate", "run.json", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=120)


def test_slurm_drain_drains_the_shaped_node_alone(cluster, tmp_path):
    srun(cluster, tmp_path, COMM_BENCH, "sweep", "-t", "tcp", "--pattern", "pairwise", "-b", "1M", "-e", "4M",
         "-n", "10", "-w", "2", "--no-progress", "-o", "run.json", timeout=400)
    assert set(settled(cluster).values()) == {"idle"}
    # a dry run prints the one command and changes nothing
    p = validate(cluster, tmp_path, "--slurm-drain", "--dry-run", "--drain-list", "drain.txt")
    assert p.returncode == 1, (p.stdout[-3000:], p.stderr[-2000:])
    lines = (tmp_path / "drain.txt").read_text().splitlines()
    assert len(lines) == 1, (lines, p.stdout[-3000:])       # the shaped node alone
    (line,) = lines
    node, why = line.split("\t")
    assert node == f"n{SHAPED}" and why.startswith("comm-bench: slow host: ") and " GB/s (" in why, line
    assert p.stdout.splitlines()[-1].startswith(f"scontrol update NodeName=n{SHAPED} State=DRAIN 'Reason={why}")
    assert set(states(cluster).values()) == {"idle"}
    p = validate(cluster, tmp_path, "--slurm-drain")
    assert p.returncode == 1 and f"slurm: drained n{SHAPED}: {why}" in p.stderr, (p.stdout[-3000:], p.stderr)
    reasons = cluster.run(["sinfo", "-R", "-h", "-o", "%N|%E"], capture_output=True, text=True, timeout=60).stdout
    assert reasons.splitlines() == [f"n{SHAPED}|{why}"], reasons
    assert settled(cluster) == {f"n{i}": ("drain" if i == SHAPED else "idle") for i in range(1, NODES + 1)}
