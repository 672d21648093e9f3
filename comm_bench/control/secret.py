"""The run's secret: the key that authenticates what ranks exchange through the store.

Where it comes from, first match wins (docs/reliability.md):
  1. COMM_BENCH_SECRET_FILE: a file only its owner may read (refused otherwise, like ssh keys);
  2. COMM_BENCH_SECRET: the local spawner sets a fresh random one for its ranks (or you do);
  3. a single rank, or mpirun without MASTER_ADDR: made by rank 0 (and sent through MPI,
     the launcher's own channel, as the store's address is);
  4. otherwise (torchrun, srun, mpirun with MASTER_ADDR): derived from the launch
     environment. That is NOT secret (anyone who can see the job's variables can derive
     it): it keeps runs apart but does not stop an attacker; use 1 for that.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import stat
from typing import Any

from ..errors import UsageError

SECRET_ENV = "COMM_BENCH_SECRET"
SECRET_FILE_ENV = "COMM_BENCH_SECRET_FILE"
PRIVATE_ENV = (SECRET_ENV,)          # never recorded in a results document
MIN_LEN = 16
# variables every rank of one launch sees with the same value
_LAUNCH_IDS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid",
               "PMIX_NAMESPACE")


def new_secret() -> str:
    return secrets.token_hex(32)


def run_secret(info: Any) -> tuple[bytes, str]:
    """(key bytes, where it came from: file | environment | random | mpi | derived)."""
    path = os.environ.get(SECRET_FILE_ENV)
    if path:
        return _from_file(path), "file"
    value = os.environ.get(SECRET_ENV, "")
    if value:
        if len(value) < MIN_LEN:
            raise UsageError(f"{SECRET_ENV} is shorter than {MIN_LEN} characters: use e.g. "
                             "`openssl rand -hex 32`")
        return value.encode(), "environment"
    if info.world_size == 1:
        return new_secret().encode(), "random"
    if info.launcher == "mpirun" and not (info.master_addr and info.master_port):
        from mpi4py import MPI  # present: the store's address came the same way (launch.py)
        return MPI.COMM_WORLD.bcast(new_secret() if info.rank == 0 else None, root=0).encode(), "mpi"
    # not WORLD_SIZE: ranks handed different ones must still meet, to be told so (world_size.py)
    parts = [info.launcher, str(info.master_addr), str(info.master_port)]
    parts += [os.environ.get(name, "") for name in _LAUNCH_IDS]
    return hashlib.sha256("\0".join(["comm-bench derived"] + parts).encode()).hexdigest().encode(), "derived"


def _from_file(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{SECRET_FILE_ENV} '{path}': {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{SECRET_FILE_ENV} '{path}' is not a regular file")
        if st.st_mode & 0o077 or st.st_uid not in (os.geteuid(), 0):
            raise UsageError(f"{SECRET_FILE_ENV} '{path}' may be read or changed by other users "
                             f"(mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): "
                             f"`chmod 600` it, owned by you")
        value = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    if len(value) < MIN_LEN:
        raise UsageError(f"{SECRET_FILE_ENV} '{path}' holds fewer than {MIN_LEN} characters: "
                         "fill it with e.g. `openssl rand -hex 32`")
    return value
