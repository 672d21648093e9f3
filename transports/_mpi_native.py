"""The mpi transport's timed pair loop in C++ (comm_bench._C.mpi_pair_loop): MPI_Send and
MPI_Recv of the libmpi that mpi4py loaded, called through their addresses, so no Python
runs per iteration (an mpi4py call costs about a microsecond of its own, more than half an
MPI round trip over shared memory). The data check's extra iteration stays in Python.
"""
from __future__ import annotations

import ctypes


def loop_for(MPI, comm):
    """timed(inp, out, ack, nbytes, peer, src, lat, iters, warmup) -> samples (us), or None
    where the C++ part or the MPI symbols are missing (the Python loop runs then)."""
    from ..system.native import load
    C, _ = load("_C")
    if C is None or not hasattr(C, "mpi_pair_loop"):
        return None
    try:
        lib = ctypes.CDLL(MPI.__file__)       # dlsym searches its libmpi too
        send, recv = (ctypes.cast(getattr(lib, n), ctypes.c_void_p).value for n in ("MPI_Send", "MPI_Recv"))
        byte, handle = MPI._handleof(MPI.BYTE), MPI._handleof(comm)
    except (OSError, AttributeError, TypeError):
        return None

    def timed(inp, out, ack, nbytes, peer, src, lat, iters, warmup):
        return C.mpi_pair_loop(send, recv, byte, handle, peer, inp, out, ack, nbytes, src, lat, iters, warmup)
    return timed
