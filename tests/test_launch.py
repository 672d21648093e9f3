"""Launcher environments: torchrun, Open MPI / PMI, Slurm, none."""
import shutil

import pytest

from comm_bench.errors import UsageError
from comm_bench.run.launch import detect, first_slurm_host, own_address, scontrol_hostnames, slurm_hosts


def test_torchrun():
    info = detect({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                   "MASTER_ADDR": "node1", "MASTER_PORT": "1234"})
    assert (info.launcher, info.rank, info.world_size, info.local_rank, info.local_world_size,
            info.master_addr, info.master_port) == ("torchrun", 3, 8, 1, 2, "node1", 1234)


def test_open_mpi():
    info = detect({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16",
                   "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    assert (info.launcher, info.rank, info.world_size, info.local_rank, info.local_world_size) == \
        ("mpirun", 5, 16, 1, 4)
    assert info.master_addr is None  # agreed through MPI at run time


def test_pmi():
    info = detect({"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"})
    assert (info.launcher, info.rank, info.world_size, info.local_world_size) == ("mpirun", 2, 4, 1)


def test_slurm():
    info = detect({"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
                   "SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_STEP_NODELIST": "gpu[003-010],cpu1",
                   "SLURM_JOB_ID": "4242"})
    assert (info.launcher, info.rank, info.world_size, info.local_rank, info.local_world_size,
            info.master_addr) == ("srun", 9, 16, 1, 8, "gpu003")
    assert info.master_port == 29500 + 242 + 1


def test_torchrun_wins_over_slurm_and_none_is_single():
    env = {"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}
    assert detect(env).launcher == "torchrun"
    assert detect({}).launcher == "single"


@pytest.mark.parametrize("nodes,first", [("n1", "n1"), ("gpu[07-09]", "gpu07"), ("a[1,3],b2", "a1"),
                                         ("x-1,x-2", "x-1"), ("node[1-3]-ib", "node1-ib"),
                                         ("r[2-3]n[09-10]", "r2n09"), ("a[5,1-2]", "a5")])
def test_first_slurm_host(nodes, first):
    assert first_slurm_host(nodes) == first


@pytest.mark.parametrize("nodes,hosts", [
    ("node[1-3]-ib", ["node1-ib", "node2-ib", "node3-ib"]),
    ("gpu[003-004,010],cpu1", ["gpu003", "gpu004", "gpu010", "cpu1"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]), ("x-1,x-2", ["x-1", "x-2"]),
])
def test_slurm_hosts(nodes, hosts):
    assert slurm_hosts(nodes) == hosts


@pytest.mark.parametrize("nodes", ["[", "a[1-", "a]", "a,,b", "a[3-1]", "a[x]", "", "a[]"])
def test_bad_nodelist(nodes, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))    # no scontrol: comm-bench's own parser
    with pytest.raises(UsageError, match="Slurm node list"):
        slurm_hosts(nodes)
    with pytest.raises(UsageError, match="Slurm node list"):
        first_slurm_host(nodes)


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="no scontrol (apt-get install slurm-client)")
def test_slurm_hosts_from_scontrol(monkeypatch, tmp_path):
    """Where Slurm is installed its own expansion is used: 'a,,b' is Slurm's a and b (the
    parser alone refuses it); a list Slurm 22.05 cannot read (n[1-2]-ib) is parsed here."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert scontrol_hostnames("gpu[003-004,010],cpu1") == ["gpu003", "gpu004", "gpu010", "cpu1"]
    assert slurm_hosts("a,,b") == ["a", "b"]
    assert slurm_hosts("n[1-2]-ib") == ["n1-ib", "n2-ib"]
    assert first_slurm_host("r[1-2]n[08-09]") == "r1n08"


@pytest.mark.parametrize("per_node,node_id,want", [
    ("8,4", "0", 8), ("8,4", "1", 4), ("2(x3),1", "2", 2), ("2(x3),1", "3", 1), ("8(x2)", "1", 8),
])
def test_slurm_tasks_on_this_node(per_node, node_id, want):
    info = detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "12", "SLURM_NODEID": node_id,
                   "SLURM_TASKS_PER_NODE": per_node, "SLURM_STEP_NODELIST": "n[1-4]"})
    assert info.local_world_size == want


def test_own_address():
    assert own_address("127.0.0.1") == "127.0.0.1"
    assert own_address("10.1.2.3", "10.9.9.9") == "10.9.9.9"
