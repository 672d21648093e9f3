"""One GPU's health, read through NVML (nvidia-ml-py): clocks against their maximum, the
clock-event (throttle) reasons, temperature, power against the enforced limit, the PCIe
link against its maximum, NVLink state per link, ECC, retired pages and remapped rows,
and the XID errors NVML reported between two readings.

Reads only: nothing here changes a device setting (no clocks, limits, modes or resets).
Nothing raises either: a query the GPU or driver does not support leaves its field out
(or None), and without NVML a reading is {"available": False, "why": ...}.
"""
from __future__ import annotations

import threading

from . import nvml_counters
from .nvml_counters import _try, normalize_bus_id

# NVML's clocks-event (formerly "throttle") reason bits, nvml.h nvmlClocksEventReason*
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# cumulative time held below the requested clocks, per cause (nvmlDeviceGetViolationStatus)
VIOLATION_POLICIES = {"power": 0, "thermal": 1, "sync_boost": 2, "board_limit": 3, "reliability": 5}
XID_CRITICAL = 0x8          # nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT = 10
MAX_XIDS = 64               # kept per reading: a storm of one XID says no more than its first 64

_watch_lock = threading.Lock()
_watches: dict = {}         # bus id -> NVML event set registered at before()


def decode_reasons(mask) -> list:
    """['sw_power_cap', ...] for an NVML clocks-event bit mask (unknown bits as 'bit_0x...')."""
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        return []
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS)
    names += [f"bit_0x{1 << i:x}" for i in range(64) if rest & (1 << i)]
    return names


def _handle(nv, bus_id=None, index=None):
    return nvml_counters._handle(nv, bus_id, index)


def _index_of(nv, h):
    return _try(nv.nvmlDeviceGetIndex, h)


def _clocks(nv, h) -> dict:
    sm, mem = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
    return {"sm": _try(nv.nvmlDeviceGetClockInfo, h, sm), "sm_max": _try(nv.nvmlDeviceGetMaxClockInfo, h, sm),
            "mem": _try(nv.nvmlDeviceGetClockInfo, h, mem), "mem_max": _try(nv.nvmlDeviceGetMaxClockInfo, h, mem)}


def _clock_events(nv, h) -> dict:
    get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    mask = _try(get, h) if get else None
    if mask is None:
        return {}
    return {"mask": int(mask), "active": decode_reasons(int(mask))}


def _violations(nv, h) -> dict:
    out = {}
    for name, policy in VIOLATION_POLICIES.items():
        v = _try(nv.nvmlDeviceGetViolationStatus, h, policy)
        if v is not None and hasattr(v, "violationTime"):
            out[name] = int(v.violationTime)
    return out


def _power(nv, h) -> dict:
    mw = lambda fn: (lambda v: None if v is None else round(v / 1000, 1))(_try(fn, h) if fn else None)  # noqa: E731 - a one-line NVML reader of this handle
    return {"draw_w": mw(nv.nvmlDeviceGetPowerUsage),
            "limit_w": mw(getattr(nv, "nvmlDeviceGetEnforcedPowerLimit", None)),
            "default_limit_w": mw(getattr(nv, "nvmlDeviceGetPowerManagementDefaultLimit", None))}


def _temperature(nv, h) -> dict:
    gpu = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
    th = lambda k: _try(nv.nvmlDeviceGetTemperatureThreshold, h, k)  # noqa: E731 - a one-line NVML reader of this handle
    return {"gpu_c": _try(nv.nvmlDeviceGetTemperature, h, gpu),
            "slowdown_c": th(getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)),
            "shutdown_c": th(getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0))}


def _pcie(nv, h) -> dict:
    return {"gen": _try(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            "gen_max": _try(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
            "width": _try(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            "width_max": _try(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
            "replays": _try(getattr(nv, "nvmlDeviceGetPcieReplayCounter", None) or (lambda _h: None), h)}


def _nvlink(nv, h) -> dict:
    """Every link NVML knows, up or not: a link that is down is what this is for."""
    links = []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _try(nv.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            continue
        links.append({"link": link, "up": bool(state)})
    return {"supported": bool(links), "links": links}


def _ecc(nv, h) -> dict:
    unc = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    cor = getattr(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    vol, agg = getattr(nv, "NVML_VOLATILE_ECC", 0), getattr(nv, "NVML_AGGREGATE_ECC", 1)
    mode = _try(nv.nvmlDeviceGetEccMode, h)
    total = lambda kind, where: _try(nv.nvmlDeviceGetTotalEccErrors, h, kind, where)  # noqa: E731 - a one-line NVML reader of this handle
    return {"enabled": bool(mode[0]) if isinstance(mode, (list, tuple)) and mode else None,
            "volatile_uncorrected": total(unc, vol), "aggregate_uncorrected": total(unc, agg),
            "volatile_corrected": total(cor, vol)}


def _retired_pages(nv, h) -> dict:
    sbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    dbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    count = lambda cause: (lambda v: None if v is None else len(v))(_try(nv.nvmlDeviceGetRetiredPages, h, cause))  # noqa: E731 - a one-line NVML reader of this handle
    pending = _try(nv.nvmlDeviceGetRetiredPagesPendingStatus, h)
    return {"single_bit": count(sbe), "double_bit": count(dbe),
            "pending": None if pending is None else bool(pending)}


def _row_remap(nv, h) -> dict:
    got = _try(getattr(nv, "nvmlDeviceGetRemappedRows", None) or (lambda _h: None), h)
    if not isinstance(got, (list, tuple)) or len(got) < 4:
        return {}
    corr, unc, pending, failed = got[:4]
    return {"correctable": int(corr), "uncorrectable": int(unc), "pending": bool(pending), "failed": bool(failed)}


def _watch_xids(nv, h, key) -> bool:
    """Register for XID critical-error events from now on (read back, non-blocking, by
    _collect_xids). Registration only subscribes: it changes nothing on the GPU."""
    with _watch_lock:
        old = _watches.pop(key, None)
        if old is not None:
            _try(nv.nvmlEventSetFree, old)
        es = _try(nv.nvmlEventSetCreate)
        if es is None:
            return False
        try:
            nv.nvmlDeviceRegisterEvents(h, XID_CRITICAL, es)
        except Exception:  # noqa: BLE001 - NotSupported (some vGPU/containers): no XID watch
            _try(nv.nvmlEventSetFree, es)
            return False
        _watches[key] = es
        return True


def _collect_xids(nv, key):
    """XIDs seen since _watch_xids, without waiting (timeout 0 ms); None when not watched."""
    with _watch_lock:
        es = _watches.pop(key, None)
    if es is None:
        return None
    events = []
    try:
        for _ in range(10 * MAX_XIDS):
            try:
                data = nv.nvmlEventSetWait(es, 0)
            except Exception:  # noqa: BLE001 - NVML_ERROR_TIMEOUT: nothing (more) pending
                break
            if int(getattr(data, "eventType", 0)) & XID_CRITICAL and len(events) < MAX_XIDS:
                events.append({"xid": int(data.eventData)})
    finally:
        _try(nv.nvmlEventSetFree, es)
    return events


def reading(bus_id: str | None = None, index: int | None = None, *, watch: bool = False,
            collect: bool = False) -> dict:
    """One GPU's health now. watch: also start collecting XID events (the before-reading);
    collect: also hand back the XID events seen since (the after-reading)."""
    nv = nvml_counters._nvml()
    if nv is None:
        return {"available": False, "why": nvml_counters.available()[1]}
    h = _handle(nv, bus_id, index)
    if h is None:
        return {"available": False, "why": f"NVML has no GPU {bus_id or index}"}
    pci = _try(nv.nvmlDeviceGetPciInfo, h)
    bid = getattr(pci, "busId", "") if pci is not None else ""
    bid = normalize_bus_id(bid.decode() if isinstance(bid, bytes) else bid)
    out = {"available": True, "source": "nvml",
           "gpu": {"index": _index_of(nv, h), "name": _try(nv.nvmlDeviceGetName, h),
                   "uuid": _try(nv.nvmlDeviceGetUUID, h), "bus_id": bid},
           "clocks_mhz": _clocks(nv, h), "clock_events": _clock_events(nv, h),
           "throttle_ns": _violations(nv, h), "temperature": _temperature(nv, h), "power": _power(nv, h),
           "pcie": _pcie(nv, h), "nvlink": _nvlink(nv, h), "ecc": _ecc(nv, h),
           "retired_pages": _retired_pages(nv, h), "row_remap": _row_remap(nv, h)}
    if collect:
        xids = _collect_xids(nv, bid)
        out["xid"] = {"watched": xids is not None, "events": xids or []}
    if watch:
        out["xid_watch"] = _watch_xids(nv, h, bid)
    return out


def readings() -> list:
    """Every GPU NVML sees (doctor): [reading, ...]; [] without NVML."""
    nv = nvml_counters._nvml()
    if nv is None:
        return []
    return [reading(index=i) for i in range(_try(nv.nvmlDeviceGetCount, default=0) or 0)]


def summary(r: dict) -> str:
    """One line of a reading, for doctor: 'SM 1980/1980 MHz, mem 2619/2619 MHz, 34 C, ...'."""
    if not r.get("available"):
        return r.get("why") or "not readable"
    c, t, p, e = r.get("clocks_mhz") or {}, r.get("temperature") or {}, r.get("power") or {}, r.get("pcie") or {}
    q = lambda v: "?" if v is None else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731 - a one-line formatter
    parts = [f"SM {q(c.get('sm'))}/{q(c.get('sm_max'))} MHz", f"mem {q(c.get('mem'))}/{q(c.get('mem_max'))} MHz",
             f"{q(t.get('gpu_c'))} C (slowdown {q(t.get('slowdown_c'))} C)",
             f"{q(p.get('draw_w'))}/{q(p.get('limit_w'))} W",
             f"PCIe Gen{q(e.get('gen'))}/{q(e.get('gen_max'))} x{q(e.get('width'))}/x{q(e.get('width_max'))}"]
    ev = (r.get("clock_events") or {}).get("active")
    parts.append("clock events: " + (", ".join(ev) if ev else "none") if ev is not None else "clock events: ?")
    nl = r.get("nvlink") or {}
    if nl.get("supported"):
        links = nl.get("links") or []
        parts.append(f"NVLink {sum(1 for x in links if x.get('up'))}/{len(links)} up")
    else:
        parts.append("NVLink: not supported")
    ecc = r.get("ecc") or {}
    parts.append(f"ECC {'on' if ecc.get('enabled') else 'off' if ecc.get('enabled') is False else '?'}, "
                 f"uncorrected volatile {q(ecc.get('volatile_uncorrected'))} aggregate "
                 f"{q(ecc.get('aggregate_uncorrected'))}")
    rr = r.get("row_remap") or {}
    if rr:
        parts.append(f"remapped rows {rr.get('correctable')}+{rr.get('uncorrectable')}"
                     f"{', pending' if rr.get('pending') else ''}{', FAILED' if rr.get('failed') else ''}")
    rp = r.get("retired_pages") or {}
    if rp.get("single_bit") is not None or rp.get("double_bit") is not None:
        parts.append(f"retired pages {q(rp.get('single_bit'))}+{q(rp.get('double_bit'))}"
                     f"{', pending' if rp.get('pending') else ''}")
    return "; ".join(parts)
