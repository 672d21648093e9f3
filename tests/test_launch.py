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


# Kubernetes pods (comm_bench/run/k8s_env.py; the namespace-host tests: tests/test_k8s_launch.py)
def test_indexed_job_finds_rank0_through_the_headless_service():
    from comm_bench.run import k8s_env
    env = {"JOB_COMPLETION_INDEX": "2", "WORLD_SIZE": "4"}
    assert k8s_env.detect(env, "bench-2", "bench-2.bench-svc.team.svc.cluster.local") == \
        ("indexed-job", 2, 4, "bench-0.bench-svc.team.svc.cluster.local", None)
    assert k8s_env.detect(dict(env, MASTER_ADDR="x", MASTER_PORT="7"), "bench-2", "bench-2")[3:] == ("x", 7)


def test_jobset_rank_is_job_index_times_pods_plus_completion_index():
    from comm_bench.run import k8s_env
    env = {"JOB_COMPLETION_INDEX": "1", "JOBSET_NAME": "js", "JOBSET_REPLICATEDJOB_NAME": "w",
           "JOBSET_JOB_INDEX": "2", "JOBSET_JOB_GLOBAL_INDEX": "2", "JOBSET_REPLICATEDJOB_REPLICAS": "3",
           "WORLD_SIZE": "12"}
    assert k8s_env.detect(env, "js-w-2-1", "js-w-2-1.js.ns.svc.cluster.local") == \
        ("jobset", 9, 12, "js-w-0-0.js.ns.svc.cluster.local", None)
    coord = dict(env, JOBSET_JOB_GLOBAL_INDEX="5", JOBSET_COORDINATOR="js-lead-0-0.js")
    assert k8s_env.detect(coord, "js-w-2-1", "js-w-2-1.js")[3] == "js-lead-0-0.js"
    rank0 = dict(coord, JOB_COMPLETION_INDEX="0", JOBSET_JOB_INDEX="0", JOBSET_JOB_GLOBAL_INDEX="0")
    assert k8s_env.detect(rank0, "js-lead-0-0", "js-lead-0-0.js")[1:4] == (0, 12, "js-lead-0-0.js")
    with pytest.raises(UsageError, match="not rank 0's pod"):
        k8s_env.detect(rank0, "js-w-0-0", "js-w-0-0.js")


@pytest.mark.parametrize("env,host,fqdn,says", [
    ({"JOB_COMPLETION_INDEX": "1"}, "b-1", "b-1.s", "WORLD_SIZE"),
    ({"JOB_COMPLETION_INDEX": "4", "WORLD_SIZE": "4"}, "b-4", "b-4.s", "outside 0..3"),
    ({"JOB_COMPLETION_INDEX": "1", "WORLD_SIZE": "4"}, "node7", "node7.lan", "hostNetwork"),
    ({"JOB_COMPLETION_INDEX": "1", "WORLD_SIZE": "4"}, "b-1", "b-1", "subdomain"),
    ({"JOB_COMPLETION_INDEX": "x", "WORLD_SIZE": "4"}, "b-1", "b-1.s", "whole number"),
    ({"JOB_COMPLETION_INDEX": "0", "JOBSET_NAME": "js", "WORLD_SIZE": "4"}, "js-w-0-0", "js-w-0-0.js",
     "JOBSET_JOB_INDEX"),
    ({"JOB_COMPLETION_INDEX": "0", "JOBSET_NAME": "js", "JOBSET_JOB_INDEX": "0", "JOBSET_REPLICATEDJOB_REPLICAS": "3",
      "WORLD_SIZE": "4"}, "js-w-0-0", "js-w-0-0.js", "whole number of pods"),
])
def test_kubernetes_pods_without_what_they_need_say_what_to_set(env, host, fqdn, says):
    from comm_bench.run import k8s_env
    with pytest.raises(UsageError, match=says):
        k8s_env.detect(env, host, fqdn)


def test_pytorchjob_variables():
    env = {"MASTER_ADDR": "pj-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2",
           "PET_NODE_RANK": "2", "PET_NNODES": "3", "PET_NPROC_PER_NODE": "auto", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    info = detect(env)
    assert (info.launcher, info.rank, info.world_size, info.local_world_size, info.master_addr, info.wait_dns) == \
        ("pytorchjob", 2, 3, 1, "pj-master-0", True)
    assert detect(dict(env, TORCHELASTIC_RUN_ID="x", PET_NPROC_PER_NODE="2")).launcher == "torchrun"
    with pytest.raises(UsageError, match="nprocPerNode 2"):
        detect(dict(env, PET_NPROC_PER_NODE="2", WORLD_SIZE="6"))
    with pytest.raises(UsageError, match="elasticPolicy"):
        detect({"PET_NNODES": "1:4", "PET_RDZV_ENDPOINT": "pj-worker-0:23456"})
