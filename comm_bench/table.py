"""The nccl-tests-style table (sweep output and `comm-bench report`)."""
from __future__ import annotations


def _fmt(value, spec: str) -> str:
    """A number formatted, or N/A for a field the record leaves out (the schema allows that)."""
    return "N/A" if value is None else format(value, spec)


COLUMNS = [  # (title, width, how to get it from a record)
    ("size", 12, lambda r: r["size"]),
    ("count", 12, lambda r: r.get("count", "N/A")),
    ("type", 8, lambda r: r.get("dtype", "N/A")),
    ("redop", 6, lambda r: r.get("redop") or "none"),
    ("root", 5, lambda r: -1 if r.get("root") is None else r["root"]),
    ("time(us)", 10, lambda r: _fmt(r.get("time_us"), ".2f")),
    ("algbw(GB/s)", 12, lambda r: _fmt(r.get("algbw"), ".3f")),
    ("busbw(GB/s)", 12, lambda r: _fmt(r.get("busbw"), ".3f")),
    ("p50(us)", 10, lambda r: _fmt((r.get("latency_us") or {}).get("median"), ".2f")),
    ("p99(us)", 10, lambda r: _fmt((r.get("latency_us") or {}).get("p99"), ".2f")),
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
    return [get(record) for _, _, get in COLUMNS] + [record["op"], record.get("transport"),
                                                      record.get("mode"), record.get("pattern")]


def title(op: str, transport: str, pattern: str, mode: str, n: int, hosts: int) -> str:
    return (f"# comm-bench: transport {transport}, op {op}, pattern {pattern}, mode {mode}, "
            f"{n} rank(s) on {hosts} host(s)")
