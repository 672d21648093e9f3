"""One RDMA port's health from sysfs (/sys/class/infiniband/DEV/ports/P): state, physical
state, rate and its error counters, read before and after a measurement.

Reads files only (never writes a counter or a setting); a missing file leaves its field out.
"""
from __future__ import annotations

import re

from . import rdma_sysfs

# counters/ (the port's PMA, IB spec names) that only ever count faults
PMA_ERRORS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
              "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
              "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
              "excessive_buffer_overrun_errors", "VL15_dropped")
# hw_counters/ (driver-specific: mlx5, rxe, ...): names with a word that says error, retry,
# timeout or drop, matched word by word ("err" inside rxe's "ack_deferred" is no error)
_HW_ERROR = re.compile(r"(?:^|_)(err|error|errors|discard|discards|drop|drops|dropped|retry|timeout|nak|"
                       r"out_of_seq|out_of_sequence|link_downed)(?:_|$)", re.I)
_HW_SETTINGS = {"lifespan"}


def _read(path: str) -> str:
    return rdma_sysfs._read(path)


def rate_gbps(text: str):
    """'400 Gb/sec (4X NDR)' -> 400.0; None when it does not say."""
    m = re.match(r"\s*([0-9.]+)\s*Gb/sec", text or "")
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def _counters(dev: str, port: int, sub: str, keep) -> dict:
    import os

    folder = f"{rdma_sysfs.ROOT}/{dev}/ports/{port}/{sub}"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    out = {}
    for name in names:
        if name in _HW_SETTINGS or not keep(name):
            continue
        text = _read(f"{folder}/{name}")
        if text.isdigit():
            out[name] = int(text)
    return out


def reading(dev: str, port: int) -> dict:
    """{device, port, state, phys_state, link_layer, rate, rate_gbps, counters, hw_counters}."""
    base = f"{rdma_sysfs.ROOT}/{dev}/ports/{port}"
    state = _read(f"{base}/state")
    if not state:
        return {"available": False, "device": dev, "port": port, "why": f"no port {port} of {dev} in sysfs"}
    rate = _read(f"{base}/rate")
    return {"available": True, "source": "sysfs", "device": dev, "port": port,
            "state": state.split(":")[-1].strip(), "phys_state": _read(f"{base}/phys_state").split(":")[-1].strip(),
            "link_layer": _read(f"{base}/link_layer"), "rate": rate, "rate_gbps": rate_gbps(rate),
            "counters": _counters(dev, port, "counters", lambda n: n in PMA_ERRORS),
            "hw_counters": _counters(dev, port, "hw_counters", lambda n: bool(_HW_ERROR.search(n)))}


def readings() -> list:
    """Every port of every RDMA device of this host (doctor)."""
    return [reading(d, p) for d in rdma_sysfs.devices() for p in rdma_sysfs.ports(d)]


def summary(r: dict) -> str:
    if not r.get("available"):
        return r.get("why") or "not readable"
    errs = {k: v for sub in ("counters", "hw_counters") for k, v in (r.get(sub) or {}).items() if v}
    shown = ", ".join(f"{k} {v:,}" for k, v in sorted(errs.items())[:6]) + (" ..." if len(errs) > 6 else "")
    return (f"{r.get('state')} ({r.get('phys_state') or '?'}), {r.get('rate') or '?'}, "
            f"error counters: {shown or 'all 0'}")
