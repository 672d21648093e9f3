"""The one CUDA kernel the Numba buffers need (Numba arrays have no elementwise compare):
imported only by _gpu_buffers' Numba adapter, never by the registry (a leading _)."""
from numba import cuda


@cuda.jit
def count_mismatches(a, b, out):
    """out[0] += the number of i with a[i] != b[i]."""
    i = cuda.grid(1)
    if i < a.size and a[i] != b[i]:
        cuda.atomic.add(out, 0, 1)
