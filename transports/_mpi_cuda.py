"""Is this MPI library CUDA-aware (can it read and write GPU memory itself)?

Open MPI answers MPIX_Query_cuda_support() once MPI is initialised (the C function in
libmpi, called through ctypes: mpi4py does not wrap it) and `ompi_info` before that
(mpi_built_with_cuda_support). MPICH and MVAPICH2 say it through their run-time switches
(MPIR_CVAR_ENABLE_GPU, MV2_USE_CUDA). Each answer is (True | False | None for unknown,
how it was found), recorded with every GPU-buffer record and shown by `doctor`.
"""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys

_ON = ("1", "true", "yes", "on")


def _env_answer():
    for var, lib in (("MPIR_CVAR_ENABLE_GPU", "MPICH"), ("MV2_USE_CUDA", "MVAPICH2")):
        if var in os.environ:
            return os.environ[var].strip().lower() in _ON, f"{lib}: {var}={os.environ[var]}"
    return None


@functools.lru_cache(maxsize=1)
def cuda_aware_before_init() -> tuple:
    """(aware, how) without initialising MPI (the spawner, doctor). Never raises."""
    env = _env_answer()
    if env:
        return env
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    tool = shutil.which("ompi_info", path=path)
    if not tool:
        return None, "unknown: no ompi_info (not Open MPI?); MPICH: set MPIR_CVAR_ENABLE_GPU=1 on a GPU build"
    try:
        out = subprocess.run([tool, "--parsable", "--all"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"unknown: ompi_info failed ({exc})"
    for line in out.splitlines():
        if line.startswith("mca:mpi:base:param:mpi_built_with_cuda_support:value:"):
            aware = line.rsplit(":", 1)[1].strip() == "true"
            return aware, f"ompi_info: mpi_built_with_cuda_support={'true' if aware else 'false'}"
    return None, "unknown: ompi_info does not list mpi_built_with_cuda_support"


def cuda_aware_in_rank() -> tuple:
    """(aware, how) in a rank, MPI initialised: Open MPI's MPIX_Query_cuda_support()
    (built with CUDA and the run time supports it), else the answer before MPI_Init."""
    env = _env_answer()
    if env:
        return env
    query = None
    mpi = sys.modules.get("mpi4py.MPI")
    for where in (None, getattr(mpi, "__file__", None)):   # global symbols, then mpi4py's libmpi
        try:
            query = ctypes.CDLL(where).MPIX_Query_cuda_support
            break
        except (OSError, AttributeError, TypeError):
            continue
    if query is None:
        return cuda_aware_before_init()
    query.restype = ctypes.c_int
    aware = bool(query())
    return aware, f"MPIX_Query_cuda_support() = {int(aware)}"
