"""What /sys/class/infiniband says about the RDMA devices of this host.

Used by the rdma transport (device, port and GID choice, counters, NUMA), and
by doctor-style checks. Reads files only: never needs libibverbs.
"""
from __future__ import annotations

import ipaddress
import os
import resource
from .sysfs import parse_cpulist

ROOT = "/sys/class/infiniband"
SOFT_ROCE_HINT = ("no RDMA device found (/sys/class/infiniband is empty); on a machine without "
                  "an RDMA NIC try Soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe "
                  "netdev <eth>` (tools/softroce_vm.py runs one in a VM)")
GPU_MEMORY_NOTE = ("GPU memory regions (GPUDirect RDMA through dma-buf) are designed for but not "
                   "working yet: rdma measures host memory only")


def _read(path: str, default: str = "") -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def devices() -> list:
    try:
        return sorted(os.listdir(ROOT))
    except OSError:
        return []


def ports(dev: str) -> list:
    try:
        return sorted(int(p) for p in os.listdir(f"{ROOT}/{dev}/ports"))
    except OSError:
        return []


def port_state(dev: str, port: int) -> str:
    """e.g. 'ACTIVE' (sysfs says '4: ACTIVE')."""
    return _read(f"{ROOT}/{dev}/ports/{port}/state").split(":")[-1].strip()


def link_layer(dev: str, port: int) -> str:
    return _read(f"{ROOT}/{dev}/ports/{port}/link_layer")


def numa_node(dev: str) -> int:
    try:
        return int(_read(f"{ROOT}/{dev}/device/numa_node", "-1"))
    except ValueError:
        return -1


def gids(dev: str, port: int) -> list:
    """[(index, gid text, type)] for the non-zero GIDs of a port."""
    base = f"{ROOT}/{dev}/ports/{port}"
    try:
        names = os.listdir(f"{base}/gids")
    except OSError:
        return []
    out = []
    for name in sorted(names, key=int):
        gid = _read(f"{base}/gids/{name}")
        if not gid or set(gid.replace(":", "")) <= {"0"}:
            continue
        out.append((int(name), gid, _read(f"{base}/gid_attrs/types/{name}")))
    return out


def _ipv4_mapped(gid: str) -> bool:
    try:
        return ipaddress.IPv6Address(gid).ipv4_mapped is not None
    except ValueError:
        return False


def auto_gid_index(dev: str, port: int) -> int:
    """The GID index perftest users would pick: on Ethernet (RoCE) the first RoCE v2
    GID carrying an IPv4 address, else any RoCE v2, else the first GID; on InfiniBand
    -1 (address by LID)."""
    if link_layer(dev, port) != "Ethernet":
        return -1
    table = gids(dev, port)
    for pick in (lambda g: "v2" in g[2] and _ipv4_mapped(g[1]), lambda g: "v2" in g[2],
                 lambda g: _ipv4_mapped(g[1]), lambda g: True):
        for entry in table:
            if pick(entry):
                return entry[0]
    return 0


def counters(dev: str, port: int) -> dict:
    """Every readable port counter (counters/ and hw_counters/) as integers."""
    out = {}
    for sub in ("counters", "hw_counters"):
        folder = f"{ROOT}/{dev}/ports/{port}/{sub}"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name == "lifespan":  # a setting, not a counter
                continue
            try:
                out[name] = int(_read(f"{folder}/{name}", "x"))
            except ValueError:
                continue
    return out


def counter_settle_s(dev: str, port: int) -> float:
    """How long to wait after traffic before hw_counters show all of it.

    The kernel serves hw_counters from a cache refreshed at most every
    `hw_counters/lifespan` ms (10 by default), rounded up to a jiffy; a reading
    taken sooner after the traffic may be the one from before it (an empty
    delta for a short run). counters/ (the PMA) is read live."""
    lifespan = _read(f"{ROOT}/{dev}/ports/{port}/hw_counters/lifespan")
    if not lifespan.isdigit():
        return 0.0
    return int(lifespan) / 1000 + 0.012  # + one jiffy at HZ=100, and a little


def counter_delta(before: dict, after: dict) -> dict:
    """Changed counters; IB data counters count 4-byte words, so bytes are added for them."""
    delta = {k: after[k] - before[k] for k in after if k in before and after[k] != before[k]}
    for words, name in (("port_xmit_data", "port_xmit_bytes"), ("port_rcv_data", "port_rcv_bytes")):
        if words in delta:
            delta[name] = delta[words] * 4
    return delta


def memlock_problem(nbytes: int) -> str:
    """A one-line reason when `nbytes` cannot be pinned, else ''."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= nbytes or _has_cap_ipc_lock():
        return ""
    return (f"the locked-memory limit ({soft // 1024} KiB) is below the {nbytes // 1024} KiB the "
            f"RDMA buffers need: raise it with `ulimit -l unlimited` (or the container's "
            f"--ulimit memlock=-1)")


def _has_cap_ipc_lock() -> bool:
    for line in _read("/proc/self/status").splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 14))  # CAP_IPC_LOCK
    return False


def cpu_numa_node() -> int:
    """The NUMA node this process is pinned to (every CPU it may run on is there);
    -1 when it may run on several nodes, or when that is unknown."""
    try:
        cpus = os.sched_getaffinity(0)
        nodes = [n for n in os.listdir("/sys/devices/system/node") if n.startswith("node")]
    except OSError:
        return -1
    mine = {int(node[4:]) for node in nodes
            if cpus & set(parse_cpulist(_read(f"/sys/devices/system/node/{node}/cpulist")))}
    return mine.pop() if len(mine) == 1 else -1


def pick_device(spec, local_rank: int, cpu_node=None) -> str:
    """--device: None/'' -> the first device; 'a,b,...' -> one per local rank;
    'auto' -> one per local rank, NUMA-local: a rank pinned to a NUMA node (numactl,
    the launcher's binding) takes that node's devices in turn; an unpinned rank takes
    the devices in NUMA order, so local ranks 0..N-1 spread over all of them."""
    devs = devices()
    if not spec:
        return devs[0] if devs else ""
    if spec == "auto":
        node = cpu_numa_node() if cpu_node is None else cpu_node
        node_of = {d: numa_node(d) for d in devs}
        in_numa_order = sorted(devs, key=lambda d: (node_of[d], d))
        pool = [d for d in in_numa_order if node >= 0 and node_of[d] == node] or in_numa_order
        return pool[local_rank % len(pool)] if pool else ""
    names = [s.strip() for s in str(spec).split(",") if s.strip()]
    return names[local_rank % len(names)]
