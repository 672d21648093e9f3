"""Launcher environments: torchrun, Open MPI / PMI, Slurm, none."""
import pytest

from comm_bench.errors import UsageError
from comm_bench.launch import detect, first_slurm_host, own_address


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
                                         ("x-1,x-2", "x-1")])
def test_first_slurm_host(nodes, first):
    assert first_slurm_host(nodes) == first


def test_bad_nodelist():
    with pytest.raises(UsageError):
        first_slurm_host("[")


def test_own_address():
    assert own_address("127.0.0.1") == "127.0.0.1"
    assert own_address("10.1.2.3", "10.9.9.9") == "10.9.9.9"
