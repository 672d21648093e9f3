"""Records out of comm-bench for other tools: CSV (unrounded, snake_case, one column per
field), JSON Lines (pandas.read_json(lines=True)), an OpenMetrics textfile (node_exporter's
textfile collector -> Prometheus -> Grafana) of the records or of validate's verdict, and
`report`'s record filters."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import UsageError
from ..sizes import parse_size

LATENCY = ("min", "median", "avg", "p99", "p999", "max", "stdev")
FIELDS = (["transport", "op", "mode", "pattern", "size", "count", "dtype", "redop", "root", "iters",
           "warmup", "time_us", "algbw_gbs", "busbw_gbs", "bw_peak_gbs", "msg_rate_mpps"]
          + [f"lat_{k}_us" for k in LATENCY]
          + ["wrong", "src", "dst", "src_host", "dst_host", "src_device", "dst_device", "round"])
RENAMED = {"algbw": "algbw_gbs", "busbw": "busbw_gbs", "bw_peak": "bw_peak_gbs"}


def flat(rec: dict[str, Any]) -> dict[str, Any]:
    """One record as FIELDS (values as measured, not rounded; missing ones None)."""
    out = {RENAMED.get(k, k): v for k, v in rec.items() if RENAMED.get(k, k) in FIELDS}
    lat = rec["latency_us"] if isinstance(rec.get("latency_us"), dict) else {}
    out.update({f"lat_{k}_us": lat.get(k) for k in LATENCY})
    return {f: out.get(f) for f in FIELDS}


def csv_rows(records: Iterable[dict[str, Any]]) -> Iterator[list[Any]]:
    yield list(FIELDS)
    for rec in records:
        yield ["" if v is None else v for v in flat(rec).values()]


def jsonl_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for rec in records:
        yield json.dumps(rec, separators=(",", ":"))


# ----------------------------------------------------------------------------- filters
def _pair(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:->|-|,|:)\s*(\d+)\s*", text)
    if not m:
        raise UsageError(f"--pair '{text}' is not a pair: use SRC->DST, e.g. 0->3 (comma separated)")
    return int(m.group(1)), int(m.group(2))


def select(records: Iterable[dict[str, Any]], ops: str | None = None, sizes: str | None = None,
           pairs: str | None = None) -> list[dict[str, Any]]:
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
def openmetrics(doc: dict[str, Any], records: Iterable[dict[str, Any]]) -> bytes:
    """The records as OpenMetrics gauges in base units (bytes/s, seconds), one series per
    record, labelled with what identifies it."""
    Gauge, generate_latest, reg = _prometheus()
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
    _run_timestamp(Gauge, reg, doc, "report")
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
    return bytes(generate_latest(reg))


def _prometheus() -> tuple[Any, Any, Any]:
    """(Gauge, generate_latest, a fresh registry), or the one line saying what to install."""
    try:
        from prometheus_client import CollectorRegistry, Gauge
        from prometheus_client.openmetrics.exposition import generate_latest
    except ImportError:
        raise UsageError("--prometheus needs prometheus_client: pip install prometheus_client "
                         "(or pip install 'comm-bench[metrics]')") from None
    return Gauge, generate_latest, CollectorRegistry()


def run_time(doc: dict[str, Any]) -> float | None:
    """The run's end time in Unix seconds: `finished`, else `started` (a run still going or
    killed); None when neither is an ISO 8601 time. A time without a zone is UTC (now_iso)."""
    import datetime as dt

    for key in ("finished", "started"):
        try:
            t = dt.datetime.fromisoformat(str(doc.get(key)))
        except ValueError:
            continue
        return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).timestamp()
    return None


def _run_timestamp(Gauge: Any, reg: Any, doc: dict[str, Any], command: str) -> None:
    """comm_bench_run_timestamp_seconds: an alert on time() minus it finds stale results. The
    command label keeps report's and validate's files apart in one textfile folder (node_exporter
    refuses one series read from two files)."""
    t = run_time(doc)
    if t is not None:
        Gauge("comm_bench_run_timestamp_seconds", "End of the run (its start when it never finished), Unix time",
              ["command", "transport", "world_size"], registry=reg) \
            .labels(command, str(doc.get("transport")), str(doc.get("world_size"))).set(t)


def verdict_openmetrics(doc: dict[str, Any], status: str, findings: int,
                        hosts: Iterable[tuple[str, list[Any]]]) -> bytes:
    """validate's verdict as OpenMetrics gauges: the run's end time, pass or not, its findings,
    and per node (hosts: [(node, findings of it)]) 1 if no finding names it, and how many do."""
    Gauge, generate_latest, reg = _prometheus()
    _run_timestamp(Gauge, reg, doc, "validate")
    ident = [str(doc.get("transport")), str(doc.get("world_size"))]
    run = ["transport", "world_size"]
    Gauge("comm_bench_validate_ok", "1 if validate passed (exit 0): no findings, nothing left unconfirmed", run,
          registry=reg).labels(*ident).set(1 if status == "pass" else 0)
    Gauge("comm_bench_validate_unconfirmed", "1 if validate left suspects or would-be findings unconfirmed (exit 3)",
          run, registry=reg).labels(*ident).set(1 if status == "unconfirmed" else 0)
    Gauge("comm_bench_validate_findings", "Findings of validate (every kind)", run,
          registry=reg).labels(*ident).set(findings)
    ok = Gauge("comm_bench_host_ok", "1 if no validate finding names the node, 0 if one does (drain it)",
               ["host"] + run, registry=reg)
    count = Gauge("comm_bench_host_findings", "Validate findings that name the node", ["host"] + run, registry=reg)
    for node, fs in hosts:
        ok.labels(node, *ident).set(0 if fs else 1)
        count.labels(node, *ident).set(len(fs))
    return bytes(generate_latest(reg))


def write_prometheus(doc: dict[str, Any], records: Iterable[dict[str, Any]], path: str) -> None:
    """Written whole, then renamed (safefile): the textfile collector never reads half a file."""
    from .safefile import write_file
    write_file(path, openmetrics(doc, records), "--prometheus")


def write_verdict_prometheus(doc: dict[str, Any], status: str, findings: int,
                             hosts: Iterable[tuple[str, list[Any]]], path: str) -> None:
    from .safefile import write_file
    write_file(path, verdict_openmetrics(doc, status, findings, hosts), "--prometheus")
