"""Kubernetes launch environments, as the operators set them (docs/kubernetes.md cites each):

- an Indexed Job with a headless Service: Kubernetes sets JOB_COMPLETION_INDEX and the pod's
  hostname `<job>-<index>`; with `subdomain: <service>` the pod's FQDN (its /etc/hosts, written
  by the kubelet) is `<job>-<index>.<service>.<ns>.svc.<domain>`. The manifest sets WORLD_SIZE
  (the Job's completions: no variable carries it). Rank = index; rank 0 is `<job>-0.<rest>`.
- a JobSet: every child Job is Indexed; pods are `<jobset>-<rjob>-<jobidx>-<podidx>.<subdomain>`
  and the manifest exposes JobSet's annotations through the downward API as JOBSET_NAME,
  JOBSET_REPLICATEDJOB_NAME, JOBSET_JOB_INDEX (and JOBSET_JOB_GLOBAL_INDEX,
  JOBSET_GLOBAL_REPLICAS or JOBSET_REPLICATEDJOB_REPLICAS, JOBSET_COORDINATOR where set), plus
  WORLD_SIZE. Rank = job index x pods per job + JOB_COMPLETION_INDEX.
- a Kubeflow PyTorchJob: MASTER_ADDR/PORT, WORLD_SIZE, RANK (torchrun-style, launch.py) and
  PET_*; checked here for what a direct start cannot do (nprocPerNode > 1, elastic).
- a Kubeflow MPIJob: mpirun's own OMPI_* variables (launch.py's mpirun case).

A name that the headless Service publishes may not resolve yet when a rank starts (DNS records
appear once the pod runs): launch.rendezvous_address waits for it (wait_resolvable).
"""
from __future__ import annotations

import os
import re
import socket
import sys
import time

from ..errors import UsageError
from .envvars import env_int

RESOLVE_WAIT_ENV = "COMM_BENCH_RESOLVE_TIMEOUT"
RESOLVE_WAIT_DEFAULT = 600      # seconds: image pulls on other nodes can take minutes


def _int(env, name):
    return env_int(env, name, hint=" (check the manifest's env)")


def in_kubernetes(env) -> bool:
    return bool(env.get("KUBERNETES_SERVICE_HOST")) or env.get("JOB_COMPLETION_INDEX") is not None


def check_pytorchjob(env) -> str | None:
    """'pytorchjob' when a Kubeflow PyTorchJob started this process directly (its PET_* variables
    and no torchrun agent above it), None otherwise; UsageError where one rank per pod cannot
    be what the operator meant."""
    if env.get("PET_NNODES") is None or env.get("TORCHELASTIC_RUN_ID") is not None:
        return None
    nproc = env.get("PET_NPROC_PER_NODE", "")
    if nproc.isdigit() and int(nproc) > 1:
        raise UsageError(f"PyTorchJob with nprocPerNode {nproc}: WORLD_SIZE counts {nproc} processes a pod "
                         "but RANK is the pod's: start comm-bench under torchrun (`torchrun --no-python "
                         "comm-bench sweep ...` reads the PET_* variables)")
    if env.get("RANK") is None and env.get("PET_RDZV_ENDPOINT"):
        raise UsageError("PyTorchJob with an elasticPolicy sets no RANK: start comm-bench under torchrun "
                         "(`torchrun --no-python comm-bench sweep ...` reads PET_RDZV_ENDPOINT)")
    return "pytorchjob"


def detect(env, hostname=None, fqdn=None):
    """(launcher, rank, world_size, master_addr, port) of an Indexed Job or JobSet pod, or
    None when JOB_COMPLETION_INDEX is not set. hostname/fqdn: this pod's (tests pass them)."""
    index = _int(env, "JOB_COMPLETION_INDEX")
    if index is None:
        return None
    world = _int(env, "WORLD_SIZE")
    port = _int(env, "MASTER_PORT")
    if env.get("JOBSET_NAME"):
        launcher, rank, world, first = _jobset(env, index, world)
    else:
        if world is None:
            raise UsageError(f"Indexed Job pod (JOB_COMPLETION_INDEX={index}) without WORLD_SIZE: set WORLD_SIZE "
                             "to the Job's completions in the manifest (examples/kubernetes/k8s/indexed-job.yaml)")
        if not 0 <= index < world:
            raise UsageError(f"JOB_COMPLETION_INDEX={index} is outside 0..{world - 1} (WORLD_SIZE={world}): "
                             "set WORLD_SIZE to the Job's completions")
        launcher, rank, first = "indexed-job", index, None
    coordinator = env.get("JOBSET_COORDINATOR")
    if launcher == "jobset" and rank == 0 and coordinator and not env.get("MASTER_ADDR"):
        label = (hostname or socket.gethostname()).split(".")[0]
        if coordinator.split(".")[0] != label:    # rank 0 hosts the store on that name
            raise UsageError(f"the JobSet's coordinator {coordinator} is not rank 0's pod ({label}): point "
                             "spec.coordinator at jobIndex 0, podIndex 0 of the first replicated job")
    master = env.get("MASTER_ADDR") or coordinator or rank0_name(env, index, first, hostname, fqdn)
    return launcher, rank, world, master, port


def _jobset(env, pod, world):
    job = _int(env, "JOBSET_JOB_GLOBAL_INDEX")
    local_job = _int(env, "JOBSET_JOB_INDEX")
    job = local_job if job is None else job
    jobs = _int(env, "JOBSET_GLOBAL_REPLICAS") or _int(env, "JOBSET_REPLICATEDJOB_REPLICAS")
    if job is None or jobs is None or world is None:
        raise UsageError("JobSet pod without its place: expose the annotations jobset.sigs.k8s.io/job-index "
                         "and replicatedjob-replicas as JOBSET_JOB_INDEX and JOBSET_REPLICATEDJOB_REPLICAS, "
                         "and set WORLD_SIZE (examples/kubernetes/k8s/jobset.yaml)")
    if jobs < 1 or world % jobs:
        raise UsageError(f"WORLD_SIZE={world} is not a whole number of pods for each of the JobSet's {jobs} "
                         "job(s): every job needs the same completions")
    per_job = world // jobs
    if not 0 <= pod < per_job:
        raise UsageError(f"JOB_COMPLETION_INDEX={pod} is outside the {per_job} pods a job has "
                         f"(WORLD_SIZE={world} over {jobs} jobs)")
    # rank 0 (global job 0, pod 0) is in this replicated job when its jobs number from 0
    first = None
    if local_job == job and env.get("JOBSET_REPLICATEDJOB_NAME"):
        first = f"{env['JOBSET_NAME']}-{env['JOBSET_REPLICATEDJOB_NAME']}-0-0"
    return "jobset", job * per_job + pod, world, first or ""


def rank0_name(env, index, first, hostname=None, fqdn=None):
    """Rank 0's DNS name, from this pod's FQDN: its first label becomes rank 0's hostname
    (`<job>-0` for an Indexed Job; `first` for a JobSet), the Service's domain stays."""
    hostname = hostname or socket.gethostname()
    label = hostname.split(".")[0]
    if first == "":
        raise UsageError("JobSet pod outside the replicated job that holds rank 0: set MASTER_ADDR, or give the "
                         "JobSet a spec.coordinator and expose its label as JOBSET_COORDINATOR")
    if first is None:
        m = re.fullmatch(r"(.+)-(\d+)", label)
        if not m or int(m.group(2)) != index:
            raise UsageError(f"host name '{label}' is not the Indexed Job pod name <job>-{index} (hostNetwork?): "
                             "set MASTER_ADDR to rank 0's address")
        first = f"{m.group(1)}-0"
    fqdn = fqdn if fqdn is not None else socket.getfqdn(hostname)
    head, dot, domain = fqdn.partition(".")
    if not dot or head != label:
        raise UsageError(f"pod '{label}' has no DNS name under a headless Service: set the pod template's "
                         "subdomain to the Service's name, or MASTER_ADDR")
    return f"{first}.{domain}"


def wait_resolvable(host: str, port: int, timeout: float | None = None) -> None:
    """Wait until `host` resolves: a headless Service publishes a pod's record only once the
    pod exists (and, without publishNotReadyAddresses, once it is ready). Returns at once
    for a name that resolves; after `timeout` the caller's own check names the failure."""
    if timeout is None:
        raw = os.environ.get(RESOLVE_WAIT_ENV) or str(RESOLVE_WAIT_DEFAULT)
        try:
            timeout = float(raw)
        except ValueError:
            raise UsageError(f"{RESOLVE_WAIT_ENV}={raw!r} is not a number of seconds") from None
    deadline, said = time.monotonic() + timeout, False
    while True:
        try:
            socket.getaddrinfo(host, port)
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
        if not said:
            print(f"comm-bench: waiting up to {timeout:.0f}s for {host} to resolve (the headless Service "
                  f"publishes it once that pod runs; {RESOLVE_WAIT_ENV} sets the wait)", file=sys.stderr, flush=True)
            said = True
        time.sleep(1)
