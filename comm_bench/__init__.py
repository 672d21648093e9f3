"""comm-bench: communication microbenchmarks for GPU/HPC clusters.

Importing comm_bench never needs a GPU, NCCL, an RDMA device, MPI or gRPC:
native parts and optional libraries are loaded lazily (see comm_bench.system.native).
"""
__version__ = "0.1.0"
