"""mpirun across four network-namespace hosts named in a hostfile (examples/mpirun-hostfile.sh
and examples/hostfile as they are): Open MPI starts its daemons through tools/netns_rsh, an
ssh stand-in that enters the host's namespace. Needs root and iproute2."""
import os

import pytest

from cbtest import BIN, load_results
from netns_launch import MARKS, ROOT, netns_hosts

pytestmark = MARKS

HOSTS = ["m0", "m1", "m2", "m3"]
SIZES = [64 << 10, 256 << 10, 1 << 20]          # the example's -b 64K -e 1M -f 4


@pytest.fixture(scope="module")
def hosts():
    with netns_hosts.NamedHosts(HOSTS, prefix="cbmpi", subnet="10.79.17") as h:
        yield h


@pytest.mark.parametrize("transport", ["tcp", "mpi"])
def test_mpirun_pairwise_across_hosts(hosts, tmp_path, transport):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_"))}
    env.update(PATH=f"{BIN}:{env['PATH']}", NETNS_HOSTS=hosts.map_file,
               PRTE_MCA_plm_ssh_agent=str(ROOT / "tools" / "netns_rsh"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = hosts.run(0, [ROOT / "examples" / "mpirun-hostfile.sh", ROOT / "examples" / "hostfile", transport],
                  env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    doc = load_results(tmp_path / f"mpirun-{transport}.json")
    assert doc["status"] == "ok" and doc["world_size"] == len(HOSTS)
    # one rank per host, in hostfile order, each at its own host's address
    assert [(r["host"], r["addr"]) for r in doc["ranks"]] == [(h, hosts.addr(h)) for h in HOSTS]
    pairs = [(s, d) for s in range(len(HOSTS)) for d in range(len(HOSTS)) if s != d]
    # the first pass (the default confirm phase re-measures suspects in records of its own)
    assert sorted((r["src"], r["dst"], r["size"]) for r in doc["results"] if "confirm" not in r) == \
        sorted((s, d, z) for s, d in pairs for z in SIZES)
    assert all(r["wrong"] == 0 for r in doc["results"])
