"""Counters in the records become a utilisation-over-time panel (counter_series):
  - the deltas transports record around each timed loop: rdma extra.counters
    {port_xmit_data, port_rcv_data (4-byte words), port_xmit_bytes, ...} with extra.device
    "mlx5_0:1"; nccl/cuda extra.nvml_counters {bus_id: {pcie_tx, pcie_rx, nvlink_tx,
    nvlink_rx}} (bytes). One point per record: bytes / ((iters + warmup) x time_us), at
    the run's cumulative measuring time, over the NIC's / GPU link's theoretical rate;
  - time series: extra.counters {"device": "mlx5_0", "rate_gbs": 50.0 (optional),
    "t": [s, ...], "tx_bytes": [cumulative, ...]} (or a list of such dicts, or
    "samples": [{"t": s, "tx_bytes": n}, ...]).
"""
from __future__ import annotations

from ..results.records import number
from ..links import gpu_nvlink_gbs

NVML_MIN_WINDOW_S = 0.1

_BYTE_KEYS = {"port_xmit_data": 4, "port_rcv_data": 4}


def _series_from(c):
    """[(name, t list, {counter: cumulative bytes list})]"""
    if isinstance(c, list):
        return [x for item in c for x in _series_from(item)]
    if not isinstance(c, dict):
        return []
    if isinstance(c.get("samples"), list):
        samples = [s for s in c["samples"] if isinstance(s, dict) and number(s.get("t")) is not None]
        t = [s["t"] for s in samples]
        ctrs = {}
        for s in samples:
            for k, v in s.items():
                if k != "t" and (k.endswith("bytes") or k in _BYTE_KEYS):
                    ctrs.setdefault(k, []).append(v)
        ctrs = {k: v for k, v in ctrs.items() if len(v) == len(t)}
        return [(c.get("device") or "?", t, ctrs, number(c.get("rate_gbs")))]
    t = c.get("t")
    if isinstance(t, list):
        ctrs = {k: v for k, v in c.items() if isinstance(v, list) and len(v) == len(t)
                and (k.endswith("bytes") or k in _BYTE_KEYS)}
        return [(c.get("device") or "?", t, ctrs, number(c.get("rate_gbs")))]
    return []


_DELTA_BYTES = (("port_xmit_bytes", "tx", 1), ("port_rcv_bytes", "rx", 1),
                ("port_xmit_data", "tx", 4), ("port_rcv_data", "rx", 4))


def _delta_bytes(c):
    """{'tx': bytes, 'rx': bytes} from a counter-delta dict (rdma transport format)."""
    out = {}
    for key, name, scale in _DELTA_BYTES:
        v = number(c.get(key))
        if v is not None and name not in out:
            out[name] = v * scale
    return out


def counter_series(doc, lm=None):
    """[{label, t: [s], gbs: [GB/s], util: [fraction] | None, rate_gbs}] from records' counters.

    Two shapes are read: time series (extra.counters with "t" or "samples", see the module
    doc) and the deltas the transports record around each timed loop: extra.counters
    {port_xmit_data, port_rcv_data, ...} with extra.device "mlx5_0:1" (rdma), and
    extra.nvml_counters {bus_id: {pcie_tx, pcie_rx, nvlink_tx, nvlink_rx}} (nccl, cuda).
    Deltas become one point per record at the run's cumulative measuring time."""
    out = {}
    clock = 0.0

    def add(key, label, rate, t, gbs):
        s = out.setdefault(key, {"label": label, "t": [], "gbs": [], "rate_gbs": rate})
        s["t"].append(float(t))
        s["gbs"].append(gbs)

    for rec in doc.get("results") or []:
        if type(rec) is not dict:
            continue
        extra = rec.get("extra")
        if not extra or type(extra) is not dict:
            continue
        t_us, iters = number(rec.get("time_us")), number(rec.get("iters"))
        dur = t_us * (iters + (number(rec.get("warmup")) or 0)) / 1e6 if t_us and iters else None
        if dur:
            clock += dur
        dst_extra = extra.get("dst") if isinstance(extra.get("dst"), dict) else {}
        for side_extra, side in ((extra, "src"), (dst_extra, "dst")):
            rank = rec.get(side)
            host = lm.node(rank, rec, side) if lm is not None and isinstance(rank, int) else "?"
            topo = (lm.topo.get(lm.host(rank, rec, side)) or {}) if lm is not None and isinstance(rank, int) else {}
            c = side_extra.get("counters")
            if isinstance(c, dict) and "t" not in c and "samples" not in c and dur:
                dev = str(side_extra.get("device") or "?").split(":")[0]
                nic = next((n for n in topo.get("nics") or [] if n.get("name") == dev), None)
                rate = nic.get("rate_gbs") if nic else None
                for name, nbytes in _delta_bytes(c).items():
                    add((host, dev, name), f"{host}:{dev} {name}", rate, clock, nbytes / dur / 1e9)
            elif c:
                for dev, t, ctrs, rate in _series_from(c):
                    if len(t) < 2:
                        continue
                    if rate is None:
                        nic = next((n for n in topo.get("nics") or [] if n.get("name") == dev), None)
                        rate = nic.get("rate_gbs") if nic else None
                    for name, vals in ctrs.items():
                        scale = _BYTE_KEYS.get(name, 1)
                        for k in range(1, len(t)):
                            dt = (number(t[k]) or 0) - (number(t[k - 1]) or 0)
                            a, b = number(vals[k]), number(vals[k - 1])
                            if dt > 0 and a is not None and b is not None and a >= b:
                                add((host, dev, name), f"{host}:{dev} {name}", rate, t[k],
                                    (a - b) * scale / dt / 1e9)
            nv = side_extra.get("nvml_counters")
            # NVML refreshes its traffic counters only every few tens of ms, so a shorter
            # measurement's delta holds traffic of earlier ones: such points are not rates
            if isinstance(nv, dict) and dur and dur >= NVML_MIN_WINDOW_S:
                for bus, ctrs in nv.items():
                    if not isinstance(ctrs, dict):
                        continue
                    g = next((g for g in topo.get("gpus") or [] if g.get("pci") == str(bus).lower()
                              or str(bus).lower().endswith(str(g.get("pci"))[5:])), None)
                    dev = g.get("label") if g else str(bus)
                    for name, v in ctrs.items():
                        v = number(v)
                        if v is None:
                            continue
                        rate = None
                        if g and name.startswith("pcie"):
                            rate = (g.get("pcie") or {}).get("cur_gbs")
                        elif g and name.startswith("nvlink"):
                            rate = gpu_nvlink_gbs(g.get("nvlink"))
                        add((host, dev, name), f"{host}:{dev} {name}", rate, clock, v / dur / 1e9)
    series = []
    for s in out.values():
        order = sorted(range(len(s["t"])), key=s["t"].__getitem__)
        s["t"] = [s["t"][i] for i in order]
        s["gbs"] = [s["gbs"][i] for i in order]
        s["util"] = [g / s["rate_gbs"] for g in s["gbs"]] if s["rate_gbs"] else None
        series.append(s)
    return series
