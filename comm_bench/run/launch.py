"""Who am I in this run? torchrun, mpirun and srun environments, Kubernetes pods (an Indexed
Job, a JobSet, a Kubeflow PyTorchJob or MPIJob: k8s_env.py), or local ranks.

With no launcher environment, `--nprocs N` spawns N local ranks (see spawn.py),
each of which then looks like a torchrun rank to this module.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass

from ..errors import UsageError
from ..system.netutil import free_port, source_addr_towards
from . import k8s_env
from .envvars import env_int as _int

DEFAULT_PORT = 29500


@dataclass
class LaunchInfo:
    launcher: str           # torchrun | pytorchjob | mpirun | srun | indexed-job | jobset | single
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: int | None
    agent_store: bool = False  # torchrun's agent already hosts the store on MASTER_PORT
    wait_dns: bool = False     # a Kubernetes pod: rank 0's name may not resolve yet


def _checked(info: LaunchInfo) -> LaunchInfo:
    """Launcher variables that make sense together, or one UsageError naming them."""
    if info.world_size < 1:
        raise UsageError(f"the launcher's world size is {info.world_size}; it must be at least 1")
    if not 0 <= info.rank < info.world_size:
        raise UsageError(f"rank {info.rank} is outside 0..{info.world_size - 1} (world size "
                         f"{info.world_size}): check RANK/WORLD_SIZE or the launcher's")
    if info.local_rank < 0 or info.local_world_size < 1:
        raise UsageError(f"local rank {info.local_rank} of {info.local_world_size}: check "
                         "LOCAL_RANK/LOCAL_WORLD_SIZE or the launcher's")
    if info.master_port is not None and not 0 < info.master_port < 65536:
        raise UsageError(f"MASTER_PORT={info.master_port} is not a TCP port (1-65535)")
    return info


def detect(env=None) -> LaunchInfo:
    """The launch environment, in order: torchrun-style (a PyTorchJob's too), Open MPI / PMI
    (an MPIJob's ranks), Slurm, an Indexed Job or JobSet pod, none."""
    return _checked(_detect(os.environ if env is None else env))


def _detect(env) -> LaunchInfo:
    port = _int(env, "MASTER_PORT")
    pytorchjob = k8s_env.check_pytorchjob(env)
    if env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
        ws = _int(env, "WORLD_SIZE")
        # a PyTorchJob started without torchrun runs one process a pod
        return LaunchInfo(pytorchjob or "torchrun", _int(env, "RANK"), ws, _int(env, "LOCAL_RANK") or 0,
                          _int(env, "LOCAL_WORLD_SIZE") or (1 if pytorchjob else ws),
                          env.get("MASTER_ADDR", "127.0.0.1"),
                          port or DEFAULT_PORT,
                          agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
                          wait_dns=k8s_env.in_kubernetes(env))
    rank = _int(env, "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
    size = _int(env, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    if rank is not None and size is not None:
        local = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID") or 0
        local_size = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS") or size
        return LaunchInfo("mpirun", rank, size, local, local_size, env.get("MASTER_ADDR"), port)
    if env.get("SLURM_PROCID") is not None and _int(env, "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"):
        size = _int(env, "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS")
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        master = env.get("MASTER_ADDR") or (first_slurm_host(nodes) if nodes else None)
        if port is None:  # one port per job step, so concurrent steps do not collide
            port = DEFAULT_PORT + (_int(env, "SLURM_JOB_ID") or 0) % 1000 + 1
        return LaunchInfo("srun", _int(env, "SLURM_PROCID"), size, _int(env, "SLURM_LOCALID") or 0,
                          local_tasks(env, size), master, port)
    pod = k8s_env.detect(env)
    if pod is not None:   # one rank per pod; several GPUs a pod run under torchrun (docs/kubernetes.md)
        launcher, rank, size, master, port = pod
        return LaunchInfo(launcher, rank, size, 0, 1, master, port or DEFAULT_PORT, wait_dns=True)
    return LaunchInfo("single", 0, 1, 0, 1, None, None)


def local_tasks(env, size: int) -> int:
    """Tasks on this node: SLURM_TASKS_PER_NODE ('8,4', '2(x3),1') at SLURM_NODEID."""
    per_node = []
    for item in filter(None, env.get("SLURM_TASKS_PER_NODE", "").split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not m:
            return size
        per_node += [int(m.group(1))] * int(m.group(2) or 1)
    node = _int(env, "SLURM_NODEID") or 0
    return per_node[min(node, len(per_node) - 1)] if per_node else size


_NODE_ITEM = re.compile(r"(?:[^,\[\]]+|\[[^\[\]]+\])+")


def slurm_hosts(nodelist: str) -> list:
    """Hosts of a Slurm node list: Slurm's own `scontrol show hostnames` where it runs,
    else parse_nodelist()."""
    return scontrol_hostnames(nodelist) or parse_nodelist(nodelist)


def scontrol_hostnames(nodelist: str):
    """`scontrol show hostnames LIST`, or None where scontrol is missing, has no Slurm
    configuration, or cannot read the list (it exits 0 then, saying so on stderr)."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, "show", "hostnames", nodelist], capture_output=True, text=True,
                           timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    hosts = p.stdout.split()
    return hosts if p.returncode == 0 and hosts and not p.stderr.strip() else None


def parse_nodelist(nodelist: str) -> list:
    """Hosts of a Slurm node list: 'gpu[003-004],n[1-2]-ib' -> gpu003 gpu004 n1-ib n2-ib
    (ranges keep their zero padding; several brackets in one name multiply)."""
    items = []
    pos, text = 0, nodelist.strip()
    while True:
        m = _NODE_ITEM.match(text, pos)
        if not m:
            raise UsageError(f"cannot read the Slurm node list '{nodelist}'; set MASTER_ADDR")
        items.append(m.group(0))
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != ",":
            raise UsageError(f"cannot read the Slurm node list '{nodelist}'; set MASTER_ADDR")
        pos += 1
    hosts = []
    for item in items:
        parts = re.split(r"\[([^\]]+)\]", item)   # literal, ranges, literal, ...
        choices = [[p] if i % 2 == 0 else _ranges(p, nodelist) for i, p in enumerate(parts)]
        hosts += ["".join(c) for c in itertools.product(*choices)]
    return hosts


def _ranges(spec: str, nodelist: str) -> list:
    out = []
    for r in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", r)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise UsageError(f"cannot read the Slurm node list '{nodelist}' (range '{r}'); set MASTER_ADDR")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        out += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
    return out


def first_slurm_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'gpu[003-010,012],cpu01' -> 'gpu003'."""
    return slurm_hosts(nodelist)[0]


def rendezvous_address(info: LaunchInfo):
    """(host, port) of the store. Under mpirun without MASTER_ADDR, rank 0 offers
    its own address through MPI (mpi4py), the launcher's own channel."""
    if info.master_addr and info.master_port:
        if info.wait_dns:
            k8s_env.wait_resolvable(info.master_addr, info.master_port)
        return info.master_addr, info.master_port
    if info.launcher == "mpirun":
        try:
            from mpi4py import MPI
        except ImportError:
            raise UsageError("launched by mpirun without MASTER_ADDR/MASTER_PORT and without mpi4py: "
                             "`pip install mpi4py`, or export MASTER_ADDR and MASTER_PORT") from None
        comm = MPI.COMM_WORLD
        addr = None
        if info.rank == 0:
            host = socket.gethostname()
            try:
                ip = socket.gethostbyname(host)
            except OSError:
                ip = "127.0.0.1"
            addr = (ip, free_port("0.0.0.0"))
        return tuple(comm.bcast(addr, root=0))
    if info.launcher == "srun":
        raise UsageError("launched by srun but the first node is unknown: export MASTER_ADDR")
    return "127.0.0.1", free_port()


def own_address(master_addr: str, explicit: str | None = None) -> str:
    """The address peers reach this rank on: --addr / COMM_BENCH_ADDR, else the
    local address of the route towards the store's host."""
    if explicit:
        return explicit
    if master_addr.startswith("127.") or master_addr == "localhost":
        return "127.0.0.1"
    return source_addr_towards(master_addr)
