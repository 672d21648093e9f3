"""A rank's health block: its GPU (NVML) and its RDMA port (sysfs), read before and after
its sweep, as the results document records it under ranks[i].health:

    {"gpu": {"before": reading, "after": reading}, "nic": {"before": ..., "after": ...}}

What a rank reads follows from its transport's describe(): a GPU's PCI bus id or
"cuda:N", an RDMA "device:port". A rank with neither (tcp, gloo on host memory) has no block.
Never raises: health is context beside a measurement, never a reason to fail it.
"""
from __future__ import annotations

import os
import sys

# COMM_BENCH_HEALTH=0: no readings (to compare a run's figures with and without them)
HEALTH_ENV = "COMM_BENCH_HEALTH"


def _cuda_index_to_nvml(n: int):
    """(bus_id, index) for CUDA device n: the bus id where torch says it, else NVML's index
    through CUDA_VISIBLE_DEVICES (CUDA and NVML number GPUs alike only in PCI order)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            p = torch.cuda.get_device_properties(n)
            if getattr(p, "pci_bus_id", None) is not None:
                return f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0", None
        except Exception:  # noqa: BLE001 - an older torch, no CUDA: fall back to the index
            pass
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        if n < len(visible) and visible[n].isdigit():
            return None, int(visible[n])
        return None, None       # UUIDs or MIG names: no safe guess
    return None, n


def targets(described) -> dict:
    """{"gpu": (bus_id, index)} and/or {"nic": (device, port)} from a rank's describe()."""
    d: dict = described if isinstance(described, dict) else {}
    out: dict = {}
    gpu = d["gpu"] if isinstance(d.get("gpu"), dict) else {}
    bus = gpu.get("pci_bus_id") or (gpu.get("nvml") or {}).get("bus_id")
    dev = d["device"] if isinstance(d.get("device"), str) else ""
    if bus:
        out["gpu"] = (bus, None)
    elif dev.startswith("cuda:") and dev[5:].isdigit():
        bus, index = _cuda_index_to_nvml(int(dev[5:]))
        if bus or index is not None:
            out["gpu"] = (bus, index)
    if "link_layer" in d and ":" in dev and dev.rsplit(":", 1)[1].isdigit():
        name, port = dev.rsplit(":", 1)
        out["nic"] = (name, int(port))
    return out


class RankHealth:
    def __init__(self, described):
        self.targets = targets(described)

    def _read(self, phase):
        from . import gpu_health, rdma_health

        out = {}
        try:
            if "gpu" in self.targets:
                bus, index = self.targets["gpu"]
                out["gpu"] = gpu_health.reading(bus, index, watch=phase == "before", collect=phase == "after")
            if "nic" in self.targets:
                out["nic"] = rdma_health.reading(*self.targets["nic"])
        except Exception as exc:  # noqa: BLE001 - health is context: never fail the sweep for it
            out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return out or None

    def before(self):
        return self._read("before")

    def after(self):
        return self._read("after")


def block(before, after) -> dict | None:
    """The document's ranks[i].health from a rank's two readings (either may be None)."""
    out = {}
    for what in ("gpu", "nic"):
        b, a = (before or {}).get(what), (after or {}).get(what)
        if b is not None or a is not None:
            out[what] = {"before": b, "after": a}
    return out or None
