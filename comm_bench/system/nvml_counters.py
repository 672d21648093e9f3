"""NVML readings for GPU runs (nvidia-ml-py): what each GPU is and how it is linked,
and PCIe/NVLink traffic counters sampled around a measurement.

Nothing here raises: without nvidia-ml-py, a driver or a GPU every function
returns an empty answer, and `available()` says why.
"""
from __future__ import annotations

import threading
from ..links import NVML_NVLINK_GENERATION, nvlink_gbs

_lock = threading.Lock()
_state = {"init": False, "why": None, "nvml": None}


def _nvml():
    """The initialised pynvml module, or None (the reason is in available())."""
    with _lock:
        if _state["init"]:
            return _state["nvml"]
        _state["init"] = True
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            _state["why"] = "nvidia-ml-py is not installed: pip install nvidia-ml-py"
            return None
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            _state["why"] = f"NVML did not start ({_one_line(exc)}): is the NVIDIA driver installed?"
            return None
        _state["nvml"] = pynvml
        return pynvml


def available() -> tuple:
    """(ok, reason)."""
    ok = _nvml() is not None
    return ok, "" if ok else (_state["why"] or "NVML unavailable")


def _one_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _try(fn, *args, default=None):
    try:
        value = fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends
        return default
    return value.decode() if isinstance(value, bytes) else value


def normalize_bus_id(bus_id: str) -> str:
    """'00000000:1B:00.0' / '0000:1b:00.0' -> '0000:1b:00.0' (sysfs spelling)."""
    b = (bus_id or "").strip().lower()
    if b.count(":") == 2:
        dom, rest = b.split(":", 1)
        b = f"{int(dom, 16):04x}:{rest}"
    return b


def _handle(nv, bus_id=None, index=None):
    if bus_id:
        want = normalize_bus_id(bus_id)
        for i in range(_try(nv.nvmlDeviceGetCount, default=0) or 0):
            h = _try(nv.nvmlDeviceGetHandleByIndex, i)
            pci = _try(nv.nvmlDeviceGetPciInfo, h) if h is not None else None
            got = pci.busId.decode() if pci is not None and isinstance(pci.busId, bytes) else getattr(pci, "busId", "")
            if normalize_bus_id(got) == want:
                return h
        return None
    if index is not None:
        return _try(nv.nvmlDeviceGetHandleByIndex, index)
    return None


# nvmlDeviceGetNvLinkVersion answers an enum: 6 is NVLink 4.0 (Hopper), not "NVLink 6"


def _nvlinks(nv, h) -> dict:
    links, up = [], 0
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _try(nv.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            if link == 0:
                return {"supported": False, "links_up": 0, "links": []}
            continue
        entry: dict = {"link": link, "up": bool(state)}
        if state:
            up += 1
            code = _try(nv.nvmlDeviceGetNvLinkVersion, h, link)
            entry["version"] = NVML_NVLINK_GENERATION.get(code, code)  # NVML's enum -> generation
            remote = _try(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            if remote is not None:
                rid = remote.busId.decode() if isinstance(remote.busId, bytes) else remote.busId
                entry["remote_bus_id"] = normalize_bus_id(rid)
        links.append(entry)
    out: dict = {"supported": True, "links_up": up, "links": [x for x in links if x["up"]]}
    versions = {x.get("version") for x in out["links"]}
    if len(versions) == 1:
        out["version"] = versions.pop()
        rate = nvlink_gbs(out["version"], up)  # the link model's theoretical rate
        if rate:
            out["theoretical_gbps_per_direction"] = rate
    speed = _field(nv, h, getattr(nv, "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON", None))
    if speed:
        out["speed_mbps_per_link"] = speed  # NVML's common link speed, MB/s per direction
    return out


def _field(nv, h, field_id, scope=None):
    if field_id is None:
        return None
    try:
        vals = nv.nvmlDeviceGetFieldValues(h, [(field_id, scope) if scope is not None else field_id])
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: no such field
        return None
    v = vals[0]
    if getattr(v, "nvmlReturn", 1) != 0:
        return None
    vt = getattr(v, "valueType", 4)
    u = v.value
    return {0: u.dVal, 1: u.uiVal, 2: u.ulVal, 3: u.ullVal, 4: u.sllVal}.get(vt, u.ullVal)


def device(bus_id: str | None = None, index: int | None = None) -> dict:
    """One GPU's identity and links: {} when NVML or the GPU is not there."""
    nv = _nvml()
    if nv is None:
        return {}
    h = _handle(nv, bus_id, index)
    if h is None:
        return {}
    pci = _try(nv.nvmlDeviceGetPciInfo, h)
    bid = ""
    if pci is not None:
        bid = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
    mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
    return {
        "name": _try(nv.nvmlDeviceGetName, h),
        "uuid": _try(nv.nvmlDeviceGetUUID, h),
        "bus_id": normalize_bus_id(bid),
        "memory_total": getattr(mem, "total", None),
        "pcie": {
            "gen_current": _try(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            "gen_max": _try(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
            "gen_gpu_max": _try(getattr(nv, "nvmlDeviceGetGpuMaxPcieLinkGeneration", None) or (lambda _h: None), h),
            "width_current": _try(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            "width_max": _try(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
        },
        "nvlink": _nvlinks(nv, h),
    }


def devices() -> list:
    nv = _nvml()
    if nv is None:
        return []
    n = _try(nv.nvmlDeviceGetCount, default=0) or 0
    return [dict(device(index=i), index=i) for i in range(n)]


def free_memory() -> list:
    """Free bytes of each GPU NVML sees ([] without NVML)."""
    nv = _nvml()
    if nv is None:
        return []
    n = _try(nv.nvmlDeviceGetCount, default=0) or 0
    mems = [_try(nv.nvmlDeviceGetMemoryInfo, _handle(nv, None, i)) for i in range(n)]
    return [m.free for m in mems if m is not None]


def system() -> dict:
    nv = _nvml()
    if nv is None:
        return {"available": False, "why": available()[1]}
    return {"available": True, "driver": _try(nv.nvmlSystemGetDriverVersion),
            "nvml": _try(nv.nvmlSystemGetNVMLVersion),
            "cuda_driver": _try(getattr(nv, "nvmlSystemGetCudaDriverVersion_v2", None)
                                or nv.nvmlSystemGetCudaDriverVersion)}


def counters(bus_id: str) -> dict:
    """Cumulative traffic counters of one GPU (bytes): pcie_tx/rx and nvlink_tx/rx, where supported."""
    nv = _nvml()
    if nv is None:
        return {}
    h = _handle(nv, bus_id)
    if h is None:
        return {}
    out: dict = {}
    tx = _field(nv, h, getattr(nv, "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", None))
    rx = _field(nv, h, getattr(nv, "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", None))
    if tx is not None and rx is not None:
        out["pcie_tx"], out["pcie_rx"] = int(tx), int(rx)
    ntx: int | None = None
    nrx: int | None = None
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        if not _try(nv.nvmlDeviceGetNvLinkState, h, link):
            continue
        t = _field(nv, h, getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None), link)
        r = _field(nv, h, getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None), link)
        if t is not None and r is not None:
            ntx, nrx = (ntx or 0) + int(t) * 1024, (nrx or 0) + int(r) * 1024  # KiB counters
    if ntx is not None:
        out["nvlink_tx"], out["nvlink_rx"] = ntx, nrx
    return out


def delta(before: dict, after: dict) -> dict:
    """after - before for the counters both readings have."""
    return {k: after[k] - before[k] for k in after if k in before}


class Sampler:
    """Counters of several GPUs read before and after a measurement:

        with Sampler([bus_id]) as s:
            ...measure...
        s.result  -> {bus_id: {"pcie_tx": bytes, ...}}
    """

    def __init__(self, bus_ids):
        self.bus_ids = [b for b in bus_ids if b]
        self.result: dict = {}

    def __enter__(self):
        self._before = {b: counters(b) for b in self.bus_ids}
        return self

    def __exit__(self, *exc):
        for b in self.bus_ids:
            d = delta(self._before.get(b, {}), counters(b))
            if d:
                self.result[b] = d
        return False
