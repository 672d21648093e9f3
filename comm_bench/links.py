"""Link model: the theoretical one-direction data rate of each link class, in GB/s
(1 GB = 1e9 B), the unit of algbw/busbw.

Classes (what a pair of endpoints crosses), from closest to farthest:
  same-device   both ends on one device (a copy inside one GPU's memory)
  nvlink        GPUs joined by NVLink (directly or through NVSwitch): links x per-link rate
  pcie          same host, over PCIe (GPU<->GPU P2P, host<->GPU): gen x width
  loopback      same host, CPU transports (TCP over lo, shared memory): no wire, no rate
  ib / roce     across hosts over an RDMA NIC: the port rate
  ethernet      across hosts over an Ethernet NIC: the link speed
  virtual       across hosts over a virtual interface (veth, bridge): rate unknown
A rate of None means "no theoretical figure": consumers compare against peers only.
"""

# per link, per direction (NVLink 1: P100 20 GB/s; 2 (V100) and 3 (A100) and 4 (H100):
# 25 GB/s; 5 (Blackwell): 50 GB/s)
NVLINK_GBS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# nvmlDeviceGetNvLinkVersion answers an enum, not the generation: 1 = 1.0, 2 = 2.0,
# 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0 (Hopper), 7 = 5.0 (Blackwell)
NVML_NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}
# per lane, per direction, after line encoding (8b/10b to gen2, 128b/130b gen3-5,
# FLIT gen6+)
PCIE_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563, 7: 15.125}

# What a transport's data crosses between hosts (each Transport's link_kind, recorded in the
# document), which decides a pair's link (topology/linkmap.py):
#   "cpu":  host memory through the kernel's network stack (the NIC holding the rank's address)
#   "rdma": host memory through an RDMA NIC (a cross-host pair with no NIC known is "ib")
#   "gpu":  GPU memory; across hosts through the NIC nearest the GPU (what NCCL picks)
LINK_KINDS = ("cpu", "rdma", "gpu")

LINK_CLASSES = ("same-device", "nvlink", "pcie", "loopback", "ib", "roce", "ethernet",
                "virtual", "network", "unknown")


def nvlink_gbs(version, links):
    per = NVLINK_GBS_PER_LINK.get(version or 0)
    if not per or not links:
        return None
    return round(per * links, 3)


def stored_generation(version):
    """The NVLink generation a results document's `version` means. Snapshots store the
    generation since the NVML enum fix; documents written before it hold NVML's enum,
    whose codes 6 and 7 (NVLink 4.0, 5.0) are no generation yet: read those through
    NVML_NVLINK_GENERATION. Codes 1-5 read as the generation they are now."""
    if version in NVLINK_GBS_PER_LINK:
        return version
    return NVML_NVLINK_GENERATION.get(version) if version in (6, 7) else None


def gpu_nvlink_gbs(nvlink, links=None):
    """A topology GPU entry's `nvlink` dict -> its theoretical GB/s per direction over
    `links` links (default: all its active links). Derived from links x generation when
    the document left `gbs` null (the H200 documents recorded before the enum fix)."""
    nvlink = nvlink if isinstance(nvlink, dict) else {}
    if links is None:
        if nvlink.get("gbs"):
            return float(nvlink["gbs"])
        links = nvlink.get("links")
    return nvlink_gbs(stored_generation(nvlink.get("version")), links)


def pcie_gbs(gen, width):
    per = PCIE_GBS_PER_LANE.get(gen or 0)
    if not per or not width:
        return None
    return round(per * width, 3)


def ib_gbs(rate_gbps):
    """IB/RoCE port rate in Gb/s (sysfs 'rate': data rate already) -> GB/s."""
    return round(rate_gbps / 8.0, 3) if rate_gbps else None


def eth_gbs(speed_mbps):
    return round(speed_mbps / 8000.0, 3) if speed_mbps and speed_mbps > 0 else None


def nic_class(nic):
    """'ib' | 'roce' | 'ethernet' | 'virtual' for a snapshot NIC entry."""
    if nic.get("kind") in ("ib", "roce"):
        return nic["kind"]
    if nic.get("virtual"):
        return "virtual"
    return "ethernet"


def min_rate(*rates):
    rs = [r for r in rates if r]
    return min(rs) if rs else None
