"""The nccl-tests-style table (sweep output and `comm-bench report`)."""
from __future__ import annotations

COLUMNS = [  # (title, width, how to get it from a record)
    ("size", 12, lambda r: r["size"]),
    ("count", 12, lambda r: r["count"]),
    ("type", 8, lambda r: r["dtype"]),
    ("redop", 6, lambda r: r.get("redop") or "none"),
    ("root", 5, lambda r: -1 if r.get("root") is None else r["root"]),
    ("time(us)", 10, lambda r: f"{r['time_us']:.2f}"),
    ("algbw(GB/s)", 12, lambda r: f"{r['algbw']:.3f}"),
    ("busbw(GB/s)", 12, lambda r: f"{r['busbw']:.3f}"),
    ("p50(us)", 10, lambda r: f"{r['latency_us']['median']:.2f}"),
    ("p99(us)", 10, lambda r: f"{r['latency_us']['p99']:.2f}"),
    ("#wrong", 7, lambda r: r["wrong"] if r.get("wrong") is not None else "N/A"),
    ("pair", 9, lambda r: f"{r['src']}->{r['dst']}" if r.get("src") is not None else ""),
]


def header() -> str:
    return "#" + " ".join(f"{t:>{w}}" for t, w, _ in COLUMNS)


def row(record: dict) -> str:
    return " " + " ".join(f"{str(get(record)):>{w}}" for _, w, get in COLUMNS)


def csv_header() -> list:
    return [t for t, _, _ in COLUMNS] + ["op", "transport", "mode", "pattern"]


def csv_row(record: dict) -> list:
    return [get(record) for _, _, get in COLUMNS] + [record["op"], record["transport"],
                                                      record.get("mode"), record.get("pattern")]


def title(op: str, transport: str, pattern: str, mode: str, n: int, hosts: int) -> str:
    return (f"# comm-bench: transport {transport}, op {op}, pattern {pattern}, mode {mode}, "
            f"{n} rank(s) on {hosts} host(s)")
