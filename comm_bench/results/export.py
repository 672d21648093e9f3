"""Records out of comm-bench for other tools: CSV (unrounded, snake_case, one column per
field), JSON Lines (pandas.read_json(lines=True)), an OpenMetrics textfile (node_exporter's
textfile collector -> Prometheus -> Grafana), and `report`'s record filters."""
from __future__ import annotations

import json
import re

from ..errors import UsageError
from ..sizes import parse_size

LATENCY = ("min", "median", "avg", "p99", "p999", "max", "stdev")
FIELDS = (["transport", "op", "mode", "pattern", "size", "count", "dtype", "redop", "root", "iters",
           "warmup", "time_us", "algbw_gbs", "busbw_gbs", "bw_peak_gbs", "msg_rate_mpps"]
          + [f"lat_{k}_us" for k in LATENCY]
          + ["wrong", "src", "dst", "src_host", "dst_host", "src_device", "dst_device", "round"])
RENAMED = {"algbw": "algbw_gbs", "busbw": "busbw_gbs", "bw_peak": "bw_peak_gbs"}


def flat(rec: dict) -> dict:
    """One record as FIELDS (values as measured, not rounded; missing ones None)."""
    out = {RENAMED.get(k, k): v for k, v in rec.items() if RENAMED.get(k, k) in FIELDS}
    lat = rec.get("latency_us") if isinstance(rec.get("latency_us"), dict) else {}
    out.update({f"lat_{k}_us": lat.get(k) for k in LATENCY})
    return {f: out.get(f) for f in FIELDS}


def csv_rows(records):
    yield list(FIELDS)
    for rec in records:
        yield ["" if v is None else v for v in flat(rec).values()]


def jsonl_lines(records):
    for rec in records:
        yield json.dumps(rec, separators=(",", ":"))


# ----------------------------------------------------------------------------- filters
def _pair(text):
    m = re.fullmatch(r"\s*(\d+)\s*(?:->|-|,|:)\s*(\d+)\s*", text)
    if not m:
        raise UsageError(f"--pair '{text}' is not a pair: use SRC->DST, e.g. 0->3 (comma separated)")
    return int(m.group(1)), int(m.group(2))


def select(records, ops=None, sizes=None, pairs=None):
    """The records of the given ops, sizes (K/M/G) and src->dst pairs (comma separated
    strings, each None for all)."""
    want_ops = {o.strip() for o in ops.split(",") if o.strip()} if ops else None
    want_sizes = {parse_size(s, "--size") for s in sizes.split(",") if s.strip()} if sizes else None
    want_pairs = {_pair(p) for p in pairs.split(",") if p.strip()} if pairs else None
    return [r for r in records
            if (want_ops is None or r.get("op") in want_ops)
            and (want_sizes is None or r.get("size") in want_sizes)
            and (want_pairs is None or (r.get("src"), r.get("dst")) in want_pairs)]


# ----------------------------------------------------------------------------- OpenMetrics
def openmetrics(doc, records) -> bytes:
    """The records as OpenMetrics gauges in base units (bytes/s, seconds), one series per
    record, labelled with what identifies it."""
    try:
        from prometheus_client import CollectorRegistry, Gauge
        from prometheus_client.openmetrics.exposition import generate_latest
    except ImportError:
        raise UsageError("--prometheus needs prometheus_client: pip install prometheus_client "
                         "(or pip install 'comm-bench[metrics]')") from None
    reg = CollectorRegistry()
    ident = ["transport", "op", "mode", "pattern", "size", "dtype", "src", "dst", "src_host", "dst_host"]
    gauges = {
        "busbw": Gauge("comm_bench_busbw_bytes_per_second", "Bus bandwidth (nccl-tests busbw)", ident, registry=reg),
        "algbw": Gauge("comm_bench_algbw_bytes_per_second", "Algorithm bandwidth S/t", ident, registry=reg),
        "time_us": Gauge("comm_bench_time_seconds", "Mean time per iteration", ident, registry=reg),
        "wrong": Gauge("comm_bench_wrong_elements", "Elements that failed the data check", ident, registry=reg),
    }
    lat = Gauge("comm_bench_latency_seconds", "Per-iteration time statistics (one-way in --mode lat)",
                ident + ["stat"], registry=reg)
    run = Gauge("comm_bench_run_ok", "1 if the run finished with status ok", ["transport", "world_size"],
                registry=reg)
    run.labels(str(doc.get("transport")), str(doc.get("world_size"))).set(1 if doc.get("status") == "ok" else 0)
    scale = {"busbw": 1e9, "algbw": 1e9, "time_us": 1e-6, "wrong": 1}
    for rec in records:
        labels = ["" if rec.get(k) is None else str(rec.get(k)) for k in ident]
        for key, g in gauges.items():
            v = rec.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                g.labels(*labels).set(v * scale[key])
        for stat, v in (rec.get("latency_us") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                lat.labels(*labels, stat).set(v * 1e-6)
    return generate_latest(reg)


def write_prometheus(doc, records, path):
    """Written whole, then renamed (safefile): the textfile collector never reads half a file."""
    from .safefile import write_file
    write_file(path, openmetrics(doc, records), "--prometheus")
