"""What this host has: optional native modules, NVML, RDMA devices, network addresses.

    native.py         the native modules (_C, _ibverbs, _cuda), loaded when present
    nvml_counters.py  NVML readings for GPU runs (nvidia-ml-py)
    rdma_sysfs.py     what /sys/class/infiniband says about the RDMA devices
    sysfs.py          this host's PCI tree, NUMA nodes, RDMA and network devices from sysfs
    verbs.py          RDMA ports through pyverbs, where it imports (the same answers as sysfs)
    netutil.py        small network helpers (free ports, interface addresses)

Imports only the standard library and the leaf modules errors.py and links.py: every other
room may lean on it, and importing it never fails because a GPU, NCCL or an RDMA device is missing.
"""
