"""NVML reader (nvidia-ml-py, imported lazily). Never raises: without the library, a
driver or a GPU it returns {"available": False, "reason": ..., "gpus": []}.

read_nvml(fixture=...) returns a recorded document instead (a dict, or a path to the
JSON that `comm-bench topo --record DIR` writes as DIR/nvml.json), which tests use.

Document: {available, reason, driver_version, cuda_driver_version, nvml_version,
 gpus: [{index, name, uuid, pci (0000:bb:dd.f, lower case), memory_total,
         pcie: {cur_gen, max_gen, cur_width, max_width}, numa_node, cpu_affinity,
         nvlinks: [{link, active, version, remote_pci, remote_type}]}]}
"""
import json
import time

from ..links import NVML_NVLINK_GENERATION

NVLINK_MAX_LINKS = 18


def norm_bdf(s):
    """NVML bus ids look like '00000000:18:00.0'; sysfs uses '0000:18:00.0'."""
    if not s:
        return None
    s = s.decode() if isinstance(s, bytes) else str(s)
    s = s.strip().lower()
    parts = s.split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    if len(parts) == 2:
        return f"0000:{parts[0]}:{parts[1]}"
    return s


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def read_nvml(fixture=None, max_links=NVLINK_MAX_LINKS):
    if fixture is not None:
        return _from_fixture(fixture)
    try:
        import pynvml
    except Exception as e:  # noqa: BLE001 - ImportError or a broken install
        return {"available": False, "reason": f"nvidia-ml-py not importable ({e}): "
                "pip install nvidia-ml-py", "gpus": []}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - no driver, no GPU: NVMLError subclasses
        return {"available": False, "reason": f"NVML init failed: {e} (no NVIDIA driver/GPU)",
                "gpus": []}
    t0 = time.monotonic()
    doc = {"available": True, "reason": None, "gpus": []}
    try:
        for key, fn in (("driver_version", "nvmlSystemGetDriverVersion"),
                        ("nvml_version", "nvmlSystemGetNVMLVersion"),
                        ("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")):
            doc[key] = _try(lambda: _s(getattr(pynvml, fn)()))
        n = _try(pynvml.nvmlDeviceGetCount) or 0
        for i in range(n):
            doc["gpus"].append(_read_gpu(pynvml, i, max_links))
    except Exception as e:  # noqa: BLE001 - keep what was read
        doc["reason"] = f"NVML query failed: {e}"
    finally:
        _try(pynvml.nvmlShutdown)
    doc["elapsed_s"] = round(time.monotonic() - t0, 4)
    return doc


def _try(fn, default=None):
    try:
        return fn()
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: the default
        return default


def _read_gpu(nv, i, max_links):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    pci = _try(lambda: nv.nvmlDeviceGetPciInfo(h))
    bus = None
    if pci is not None:
        bus = _s(getattr(pci, "busIdLegacy", None) or getattr(pci, "busId", None))
    mem = _try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
    g = {"index": i, "name": _try(lambda: _s(nv.nvmlDeviceGetName(h))),
         "uuid": _try(lambda: _s(nv.nvmlDeviceGetUUID(h))), "pci": norm_bdf(bus),
         "memory_total": getattr(mem, "total", None),
         "pcie": {"cur_gen": _try(lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                  "max_gen": _try(lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                  "cur_width": _try(lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
                  "max_width": _try(lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h))},
         "numa_node": None, "cpu_affinity": None, "nvlinks": []}
    numa = _try(lambda: nv.nvmlDeviceGetNumaNodeId(h))
    if isinstance(numa, int) and numa >= 0:
        g["numa_node"] = numa
    for link in range(max_links):
        state = _try(lambda: nv.nvmlDeviceGetNvLinkState(h, link), "err")
        if state == "err":
            if link == 0:
                g["nvlink_reason"] = "NVLink queries not supported"
            break
        entry = {"link": link, "active": bool(state), "version": None, "remote_pci": None,
                 "remote_type": None}
        if state:
            code = _try(lambda: nv.nvmlDeviceGetNvLinkVersion(h, link))
            entry["version"] = NVML_NVLINK_GENERATION.get(code, code)  # the generation
            rp = _try(lambda: nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link))
            if rp is not None:
                entry["remote_pci"] = norm_bdf(getattr(rp, "busIdLegacy", None) or rp.busId)
            rt = _try(lambda: nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link))
            entry["remote_type"] = {0: "GPU", 1: "IBMNPU", 2: "NVSWITCH"}.get(rt, rt)
        g["nvlinks"].append(entry)
    return g


def _from_fixture(fixture):
    try:
        if isinstance(fixture, dict):
            doc = json.loads(json.dumps(fixture))
        else:
            with open(fixture) as f:
                doc = json.load(f)
    except (OSError, ValueError) as e:
        return {"available": False, "reason": f"NVML fixture {fixture}: {e}", "gpus": []}
    doc.setdefault("available", bool(doc.get("gpus")))
    doc.setdefault("reason", None)
    doc.setdefault("gpus", [])
    for g in doc["gpus"]:
        g["pci"] = norm_bdf(g.get("pci"))
        g.setdefault("nvlinks", [])
        for link in g["nvlinks"]:
            link["remote_pci"] = norm_bdf(link.get("remote_pci"))
    return doc
