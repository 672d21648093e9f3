"""The GPUs' and NICs' own health beside the figures (ranks[i].health, read by each rank
before and after its sweep: comm_bench/system/rank_health.py).

Two things are done with it (rules: docs/validate-rules.md, "Health readings"):
  - a finding about a rank, a device, a host, a pair or a collective gets the health
    problems of the ranks it names as its cause ("...; cause: GPU5 at x8 of x16 PCIe");
  - a health problem is a finding of its own (gpu-throttled, gpu-pcie-degraded,
    gpu-nvlink-down, gpu-memory-errors, gpu-xid, nic-port-down, nic-port-errors), also
    when every figure passes.
A block that shows no problem adds nothing: no cause is invented for a healthy GPU or port.
The blocks were checked on reading (results/health_checks.py): fields have their types.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# clocks-event reasons that hold a GPU below the clocks it asked for, and what to call them
THROTTLES = {"sw_power_cap": "power cap", "hw_slowdown": "hardware slowdown",
             "sw_thermal_slowdown": "thermal (software slowdown)",
             "hw_thermal_slowdown": "thermal (hardware slowdown)",
             "hw_power_brake_slowdown": "power brake"}
VIOLATIONS = {"power": "power cap", "thermal": "thermal", "board_limit": "board limit",
              "reliability": "reliability limit"}
MIN_THROTTLED_S = 0.1       # cumulative time held down (NVML violation counters) that counts
MIN_REPLAYS = 10            # PCIe replays during the run that make a finding (fewer: a cause only)
NIC_ERRORS = {"symbol_error": "symbol errors", "link_downed": "link-down events",
              "link_error_recovery": "link error recoveries", "port_rcv_errors": "receive errors",
              "port_rcv_remote_physical_errors": "remote physical errors",
              "local_link_integrity_errors": "local link integrity errors",
              "excessive_buffer_overrun_errors": "buffer overruns", "port_xmit_discards": "transmit discards",
              "port_rcv_switch_relay_errors": "switch relay errors",
              "port_xmit_constraint_errors": "transmit constraint errors",
              "port_rcv_constraint_errors": "receive constraint errors", "VL15_dropped": "VL15 drops"}
# a few XIDs by name (NVIDIA's XID catalogue); others are shown by number
XID_NAMES = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
             45: "preemptive cleanup", 48: "double-bit ECC error", 61: "internal micro-controller breakpoint",
             62: "internal micro-controller halt", 63: "ECC page retirement or row remap recorded",
             64: "ECC page retirement or row remap failed", 74: "NVLink error", 79: "GPU fell off the bus",
             92: "high single-bit ECC error rate", 94: "contained ECC error", 95: "uncontained ECC error",
             119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error"}
HEALTH_KINDS = ("gpu-throttled", "gpu-pcie-degraded", "gpu-nvlink-down", "gpu-memory-errors", "gpu-xid",
                "nic-port-down", "nic-port-errors")
NO_CAUSE_KINDS = HEALTH_KINDS + ("run-failed", "wrong-data", "superseded-method", "link-degraded", "regression")


@dataclass
class Problem:
    kind: str
    rank: int
    host: str
    device: str
    text: str               # the cause, as a finding quotes it: "GPU5 at x8 of x16 PCIe"
    advice: str = ""
    finding: bool = True    # False: named as a cause only (too small to be a finding alone)
    fields: dict[str, Any] = field(default_factory=dict)


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _ok(r: Any) -> bool:
    return isinstance(r, dict) and r.get("available") is not False


def _gpu_name(readings: list[dict[str, Any]], rank: int) -> str:
    for r in readings:
        g = _d(r.get("gpu"))
        if g.get("index") is not None:
            return f"GPU{g['index']}"
        if g.get("bus_id"):
            return f"GPU {g['bus_id']}"
    return f"the GPU of rank {rank}"


def _run_s(doc: dict[str, Any]) -> float | None:
    import datetime as dt
    try:
        a, b = (dt.datetime.fromisoformat(doc[k]) for k in ("started", "finished"))
        return max(0.0, (b - a).total_seconds())
    except (KeyError, TypeError, ValueError):
        return None


def _gpu_problems(rank: int, host: str, before: Any, after: Any, peers_up: dict[Any, set[int]],
                  run_s: float | None) -> list[Problem]:
    reads = [r for r in (after, before) if _ok(r)]     # the after-reading first: the state the run ended in
    if not reads:
        return []
    gpu = _gpu_name(reads, rank)
    out: list[Problem] = []
    mk: Callable[..., None] = lambda kind, text, advice="", finding=True, **kw: out.append(  # noqa: E731 - a one-line finding maker
        Problem(kind, rank, host, gpu, text, advice, finding, kw))
    # PCIe: a width below the link's maximum is never power saving; a lower generation is,
    # when the GPU is idle, so it counts only in a reading taken while the GPU was busy
    for r in reads:
        p = _d(r.get("pcie"))
        if p.get("width") and p.get("width_max") and p["width"] < p["width_max"]:
            mk("gpu-pcie-degraded", f"{gpu} at x{p['width']} of x{p['width_max']} PCIe",
               "reseat the GPU or check its slot and riser", measured=f"x{p['width']}", expected=f"x{p['width_max']}")
            break
    for r in reads:
        p, ev = _d(r.get("pcie")), _d(r.get("clock_events")).get("active")
        if p.get("gen") and p.get("gen_max") and p["gen"] < p["gen_max"] and isinstance(ev, list) \
                and "gpu_idle" not in ev:
            mk("gpu-pcie-degraded", f"{gpu} at PCIe Gen{p['gen']} of Gen{p['gen_max']} while busy",
               "check the slot, riser and BIOS PCIe speed setting", measured=f"Gen{p['gen']}",
               expected=f"Gen{p['gen_max']}")
            break
    b_rep, a_rep = _d(_d(before).get("pcie")).get("replays"), _d(_d(after).get("pcie")).get("replays")
    if isinstance(b_rep, int) and isinstance(a_rep, int) and a_rep > b_rep:
        n = a_rep - b_rep
        mk("gpu-pcie-degraded", f"{gpu}: {n:,} PCIe replays during the run", "check the slot and riser",
           finding=n >= MIN_REPLAYS, replays=n)
    # throttling: a reason active when read, time held down during the run, or at its slowdown temperature
    whys: list[str] = []
    for r in reads:
        for reason in _d(r.get("clock_events")).get("active") or []:
            if reason in THROTTLES and THROTTLES[reason] not in whys:
                whys.append(THROTTLES[reason])
    b_v, a_v = _d(_d(before).get("throttle_ns")), _d(_d(after).get("throttle_ns"))
    held: dict[str, float | str] = {}
    for k, name in VIOLATIONS.items():
        if isinstance(a_v.get(k), (int, float)) and isinstance(b_v.get(k), (int, float)) and a_v[k] > b_v[k]:
            s = (a_v[k] - b_v[k]) / 1e9
            if s >= max(MIN_THROTTLED_S, 0.01 * (run_s or 0)):
                held[name] = s
                if name not in whys and not (name == "thermal" and any(w.startswith("thermal") for w in whys)):
                    whys.append(name)
    for r in reads:
        t = _d(r.get("temperature"))
        if isinstance(t.get("gpu_c"), (int, float)) and isinstance(t.get("slowdown_c"), (int, float)) \
                and t["slowdown_c"] > 0 and t["gpu_c"] >= t["slowdown_c"]:
            if not any(w.startswith("thermal") for w in whys):
                whys.append("thermal")
            held.setdefault("temperature", f"{t['gpu_c']:g} C at or over its {t['slowdown_c']:g} C slowdown point")
            break
    if whys:
        detail = [f"{k} {v:.3g} s of the run" if isinstance(v, float) else v for k, v in held.items()]
        pw = _d(reads[0].get("power"))
        if "power cap" in whys and pw.get("limit_w") and pw.get("default_limit_w") \
                and pw["limit_w"] < pw["default_limit_w"]:
            detail.append(f"power limit {pw['limit_w']:g} W of its default {pw['default_limit_w']:g} W")
        clk = _d(reads[0].get("clocks_mhz"))
        if clk.get("sm") and clk.get("sm_max"):
            detail.append(f"SM clock {clk['sm']:g} of {clk['sm_max']:g} MHz when read")
        mk("gpu-throttled", f"{gpu} throttled: {', '.join(whys)}" + (f" ({'; '.join(detail)})" if detail else ""),
           "check cooling and the power limit (nvidia-smi -q -d PERFORMANCE,POWER)", reasons=whys)
    # NVLink: a link down where this GPU has others up, the same link was up before, or a
    # GPU of the same model has it up (a card with no NVLink bridge has none up anywhere)
    down: set[int] = set()
    b_up = {x["link"] for x in _d(_d(before).get("nvlink")).get("links") or [] if x.get("up")}
    for r in reads:
        links = _d(r.get("nvlink")).get("links") or []
        up = {x["link"] for x in links if x.get("up") and x.get("link") is not None}
        model = _d(r.get("gpu")).get("name")
        for x in links:
            i = x.get("link")
            if i is None or x.get("up"):
                continue
            if up or i in b_up or i in peers_up.get(model, set()):
                down.add(i)
    if down:
        total = max((len(_d(r.get("nvlink")).get("links") or []) for r in reads), default=0)
        mk("gpu-nvlink-down", f"{gpu} NVLink {', '.join(map(str, sorted(down)))} down "
           f"({total - len(down)} of {total} up)", "check the NVLink/NVSwitch connection and the fabric manager",
           links_down=sorted(down))
    # memory: remapped rows and retired pages pending or failed, uncorrected ECC errors
    mem: list[str] = []
    for r in reads:
        rr, rp, ecc = _d(r.get("row_remap")), _d(r.get("retired_pages")), _d(r.get("ecc"))
        if rr.get("failed"):
            mem.append("row remapping failed (no spare rows left)")
        if rr.get("pending"):
            mem.append(f"row remap pending ({rr.get('uncorrectable') or 0} uncorrectable, "
                       f"{rr.get('correctable') or 0} correctable rows remapped; reset the GPU to apply it)")
        if rp.get("pending"):
            mem.append("page retirement pending (reset the GPU to apply it)")
        if ecc.get("volatile_uncorrected"):
            mem.append(f"{ecc['volatile_uncorrected']:,} uncorrected ECC errors since the driver loaded")
        if mem:
            break
    if mem:
        mk("gpu-memory-errors", f"{gpu} memory: {'; '.join(mem)}", "drain the node; reset or service the GPU")
    # XIDs the driver reported between the two readings
    events = [e.get("xid") for e in _d(_d(after).get("xid")).get("events") or [] if isinstance(e, dict)]
    xids = [x for x in events if isinstance(x, int)]
    if xids:
        counts: dict[int, int] = {}
        for x in xids:
            counts[x] = counts.get(x, 0) + 1
        named = ", ".join(f"XID {x}" + (f" ({XID_NAMES[x]})" if x in XID_NAMES else "") + (f" x{n}" if n > 1 else "")
                          for x, n in sorted(counts.items()))
        mk("gpu-xid", f"{gpu}: {named} during the run", "see the kernel log (dmesg) and NVIDIA's XID catalogue",
           xids=sorted(counts))
    return out


def _nic_problems(rank: int, host: str, before: Any, after: Any, peer_rate: dict[Any, float]) -> list[Problem]:
    reads = [r for r in (after, before) if _ok(r)]
    if not reads:
        return []
    r0 = reads[0]
    nic = f"NIC {r0.get('device') or '?'}" + (f" port {r0['port']}" if r0.get("port") not in (None, 1) else "")
    out: list[Problem] = []
    mk: Callable[..., None] = lambda kind, text, advice="", finding=True, **kw: out.append(  # noqa: E731 - a one-line finding maker
        Problem(kind, rank, host, nic, text, advice, finding, kw))
    for r in reads:
        state = r.get("state")
        if state and state.upper() != "ACTIVE":
            mk("nic-port-down", f"{nic} is {state}" + (f" ({r['phys_state']})" if r.get("phys_state") else ""),
               "check the cable, the switch port and the subnet manager")
            break
    if _ok(before) and _ok(after):
        rose = errors_between(before, after)
        if rose:
            named = sorted(rose.items(), key=lambda kv: (kv[0] not in NIC_ERRORS, -kv[1]))
            text = ", ".join(f"{n:,} {NIC_ERRORS.get(k, k)}" for k, n in named[:4]) + \
                (f" and {len(named) - 4} more counters" if len(named) > 4 else "")
            # the port's own (PMA) error counters are faults; the driver's transport retries and
            # timeouts (hw_counters) also follow a slow or congested peer: a cause, not a finding
            # (seen: rxe counts completer retries over clean traffic under emulation)
            link = any(k in _d(after.get("counters")) for k in rose)
            mk("nic-port-errors", f"{nic}: {text} during the run",
               "check the cable and transceiver (symbol errors), the switch port, then the fabric",
               finding=link, counters=dict(rose))
    rate = r0.get("rate_gbps")
    peer = peer_rate.get(r0.get("link_layer"))
    if isinstance(rate, (int, float)) and peer and rate < peer:
        mk("nic-port-down", f"{nic} at {rate:g} Gb/s where its peers run {peer:g} Gb/s", finding=False)
    return out


def readings(doc: dict[str, Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(rank, host, block) of every rank with a health block."""
    for i, r in enumerate(doc.get("ranks") or []):
        if isinstance(r, dict) and isinstance(r.get("health"), dict):
            rank = r["rank"] if isinstance(r.get("rank"), int) else i
            yield rank, str(r.get("host") or "?"), r["health"]


def problems(doc: dict[str, Any]) -> list[Problem]:
    """Every health problem the blocks show, per rank."""
    blocks = list(readings(doc))
    run_s = _run_s(doc)
    peers_up: dict[Any, set[int]] = {}
    rates: dict[Any, list[float]] = {}
    for _, _, h in blocks:
        for side in ("before", "after"):
            g = _d(_d(h.get("gpu")).get(side))
            up = {x["link"] for x in _d(g.get("nvlink")).get("links") or [] if x.get("up")}
            peers_up.setdefault(_d(g.get("gpu")).get("name"), set()).update(up)
        n = _d(_d(h.get("nic")).get("after")) or _d(_d(h.get("nic")).get("before"))
        if isinstance(n.get("rate_gbps"), (int, float)):
            rates.setdefault(n.get("link_layer"), []).append(n["rate_gbps"])
    # a port's peers run at the rate most ports of its link layer run
    peer_rate = {k: max(set(v), key=v.count) for k, v in rates.items() if len(v) >= 3}
    out = []
    for rank, host, h in blocks:
        g, n = _d(h.get("gpu")), _d(h.get("nic"))
        out += _gpu_problems(rank, host, g.get("before"), g.get("after"), peers_up, run_s)
        out += _nic_problems(rank, host, n.get("before"), n.get("after"), peer_rate)
    return out


def _ranks_of(f: dict[str, Any], doc: dict[str, Any]) -> set[int]:
    if isinstance(f.get("ranks"), list):
        return {r for r in f["ranks"] if isinstance(r, int)}
    if isinstance(f.get("rank"), int):
        return {f["rank"]}
    if isinstance(f.get("src"), int) or isinstance(f.get("dst"), int):
        return {r for r in (f.get("src"), f.get("dst")) if isinstance(r, int)}
    if f.get("host") is not None:
        return {rank for rank, host, _ in readings(doc) if host == f["host"]}
    if f.get("kind") in ("collective-below-expected", "class-below-expected"):
        return {rank for rank, _, _ in readings(doc)}   # every rank's links carry a collective
    return set()


def apply(doc: dict[str, Any], findings: list[dict[str, Any]],
          make: Callable[..., dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(findings with causes, health findings added, checked summary). make: finding_kinds.finding."""
    probs = problems(doc)
    if not any(True for _ in readings(doc)):
        return findings, None
    by_rank: dict[int, list[Problem]] = {}
    for p in probs:
        by_rank.setdefault(p.rank, []).append(p)
    for f in findings:
        if f.get("kind") in NO_CAUSE_KINDS:
            continue
        causes: list[str] = []
        for r in sorted(_ranks_of(f, doc)):
            for p in by_rank.get(r, []):
                if p.text not in causes:
                    causes.append(p.text)
        if causes:
            f["causes"] = causes
            f["message"] = f"{f['message']}; cause: {'; '.join(causes)}"
    # a PCIe link the topology snapshot already named (trained_links: link-degraded) is not named twice
    named = {(f.get("host"), f.get("device")) for f in findings
             if f.get("kind") == "link-degraded" and f.get("link") == "pcie"}
    seen: set[tuple[str, str, str]] = set()
    for p in probs:
        key = (p.host, p.device, p.kind)
        if not p.finding or key in seen or (p.kind == "gpu-pcie-degraded" and (p.host, p.device) in named
                                            and "replays" not in p.fields):
            continue
        seen.add(key)
        ranks = sorted({q.rank for q in probs if (q.host, q.device, q.kind) == key})
        who = f"host {p.host} (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})"
        findings.append(make(p.kind, f"{who}: {p.text}" + (f": {p.advice}" if p.advice else ""),
                             host=p.host, ranks=ranks, rank=ranks[0] if len(ranks) == 1 else None,
                             device=p.device, cause=p.text, confidence=1.0, **p.fields))
    blocks = list(readings(doc))
    checked = {"ranks": len(blocks),
               "gpus": sum(1 for _, _, h in blocks if h.get("gpu")),
               "nics": sum(1 for _, _, h in blocks if h.get("nic")),
               "problems": sorted({p.text for p in probs})}
    return findings, checked


def present(doc: dict[str, Any]) -> bool:
    return any(True for _ in readings(doc))


def text_line(checked: dict[str, Any] | None) -> list[str]:
    """validate's line on the health readings (checked['health'])."""
    if not checked:
        return []
    what = ", ".join(x for x in (f"{checked['gpus']} GPU(s)" if checked["gpus"] else "",
                                 f"{checked['nics']} NIC port(s)" if checked["nics"] else "") if x) or "no device"
    probs = checked.get("problems") or []
    return [f"  health       {what} of {checked['ranks']} rank(s) read before and after the sweep: "
            + (f"{len(probs)} problem(s)" if probs else "no problems")]


def errors_between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """{counter: increase} of the error counters that rose between two readings."""
    out: dict[str, int] = {}
    for sub in ("counters", "hw_counters"):
        b, a = before.get(sub) or {}, after.get(sub) or {}
        for k, v in a.items():
            if k in b and isinstance(v, int) and isinstance(b[k], int) and v > b[k]:
                out[k] = v - b[k]
    return out
