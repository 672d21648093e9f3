"""The same sweeps launched by torchrun and mpirun work and agree with local ranks."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from comm_bench.system.netutil import free_port

from cbtest import COMM_BENCH, load_results, run_cli

BIN = Path(sys.executable).parent
ARGS = ["-b", "4K", "-e", "1M", "-f", "16", "-n", "10", "-w", "2", "-c", "--no-progress"]


def launched(cmd, out, timeout=240):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load_results(out)


def spawned(transport, out, extra=()):
    run_cli("sweep", "-t", transport, "--nprocs", 2, *ARGS, *extra, "-o", out, check_rc=0, timeout=240)
    return load_results(out)


def assert_agree(a, b):
    key = lambda r: (r["op"], r["size"], r["count"], r["pattern"], r.get("src"), r.get("dst"))  # noqa: E731
    assert sorted(map(key, a["results"])) == sorted(map(key, b["results"]))
    assert a["world_size"] == b["world_size"] == 2
    for doc in (a, b):
        assert doc["status"] == "ok" and all(r["wrong"] == 0 for r in doc["results"])
    # same machine, same transport: the largest size's median iteration within a broad band,
    # as 2 shared cores swing with load; a launch mistake such as ranks not talking would
    # change it. Not the minimum: one buffered 1 MiB tcp send read 46 us (22 GB/s on
    # loopback) against the other run's 608 us in a fresh-clone CI run; not the mean: a few
    # slow iterations of busy-polling MPI ranks under load put one run 12x the other.
    big = lambda d: max(d["results"], key=lambda r: r["size"])["latency_us"]["median"]  # noqa: E731
    assert 0.1 < big(a) / big(b) < 10


def torchrun_cmd(transport, out):
    return [str(BIN / "torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()),
            "--no-python", COMM_BENCH, "sweep", "-t", transport, *ARGS, "-o", str(out)]


def mpirun_cmd(transport, out):
    return [str(BIN / "mpirun"), "-np", "2", "--oversubscribe", COMM_BENCH, "sweep", "-t", transport,
            *ARGS, "-o", str(out)]


@pytest.mark.parametrize("transport", ["tcp", "gloo"])
def test_torchrun_agrees_with_local_ranks(tmp_path, transport):
    assert_agree(launched(torchrun_cmd(transport, tmp_path / "t.json"), tmp_path / "t.json"),
                 spawned(transport, tmp_path / "s.json"))


@pytest.mark.parametrize("transport", ["mpi", "tcp"])
def test_mpirun_agrees_with_local_ranks(tmp_path, transport):
    doc = launched(mpirun_cmd(transport, tmp_path / "m.json"), tmp_path / "m.json")
    assert_agree(doc, spawned(transport, tmp_path / "s.json"))
    assert doc["ranks"][1]["pid"] != doc["ranks"][0]["pid"]


def test_srun_environment_is_honoured(tmp_path):
    """Two ranks started with the variables srun sets (no Slurm here, the same env)."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank),
                   SLURM_TASKS_PER_NODE="2", SLURM_STEP_NODELIST="localhost", SLURM_JOB_ID="77",
                   MASTER_PORT=str(port))
        for var in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
            env.pop(var, None)
        procs.append(subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", *ARGS, "-o", "r.json"], env=env,
                                      cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    doc = load_results(tmp_path / "r.json")
    assert doc["world_size"] == 2 and all(r["wrong"] == 0 for r in doc["results"])
