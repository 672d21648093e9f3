"""The nccl-tests-style table (sweep output and `comm-bench report`)."""
from __future__ import annotations

import statistics


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


def _lat(key):
    return lambda r: _fmt((r.get("latency_us") or {}).get(key), ".2f")


# --mode lat: the one-way latency statistics perftest users read, t_typical = median
LAT_COLUMNS = COLUMNS[:3] + [
    ("iters", 7, lambda r: r.get("iters", "N/A")),
    ("min(us)", 10, _lat("min")),
    ("median(us)", 11, _lat("median")),
    ("avg(us)", 10, _lat("avg")),
    ("p99(us)", 10, _lat("p99")),
    ("p99.9(us)", 10, _lat("p999")),
    ("max(us)", 10, _lat("max")),
    ("stdev(us)", 10, _lat("stdev")),
] + COLUMNS[-2:]


def _columns(mode):
    return LAT_COLUMNS if mode == "lat" else COLUMNS


def header(mode: str = "bw") -> str:
    return "#" + " ".join(f"{t:>{w}}" for t, w, _ in _columns(mode))


def row(record: dict) -> str:
    return " " + " ".join(f"{str(get(record)):>{w}}" for _, w, get in _columns(record.get("mode")))


def tail_note(iters, mode: str = "bw"):
    """Percentiles are interpolated between the closest samples: with fewer than 100
    samples p99 lies between the two largest, i.e. it is (nearly) the maximum."""
    if not isinstance(iters, int) or iters >= (1000 if mode == "lat" else 100):
        return None
    what = ("p99 and p99.9 are" if mode == "lat" else "p99 is") if iters < 100 else "p99.9 is"
    need = 100 if iters < 100 else 1000
    return (f"# {what} from {iters} samples per size: effectively the maximum sample, not a tail "
            f"percentile (use -n {need} or more)")


def title(op: str, transport: str, pattern: str, mode: str, n: int, hosts: int) -> str:
    return (f"# comm-bench: transport {transport}, op {op}, pattern {pattern}, mode {mode}, "
            f"{n} rank(s) on {hosts} host(s)")


def footer(records, mode: str = "bw") -> list:
    """nccl-tests' closing lines: the wrong values the check found (N/A when nothing was
    checked: a record's wrong is null then), and the average busbw."""
    counts = [r["wrong"] for r in records if isinstance(r.get("wrong"), int) and not isinstance(r["wrong"], bool)]
    wrong = sum(counts)
    lines = [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}" if counts
             else "# Out of bounds values : N/A (data not checked: -c 0)"]
    bw = [r["busbw"] for r in records if isinstance(r.get("busbw"), (int, float))]
    if mode != "lat" and bw:
        lines.append(f"# Avg bus bandwidth    : {sum(bw) / len(bw):.6g}")
    return lines


MATRIX_MAX_RANKS = 32   # wider than a terminal beyond this: `comm-bench heatmap` shows it


def _median_us(r):
    v = (r.get("latency_us") or {}).get("median") if isinstance(r.get("latency_us"), dict) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def matrix(records, n: int, mode: str = "bw") -> list:
    """nvbandwidth's picture of a pairwise run, src (rows) -> dst (columns), N/A where no
    pair was measured (median over repeats): busbw (GB/s) at the largest size, or with
    --mode lat the median one-way latency (us) at the smallest size."""
    lat = mode == "lat"
    value = _median_us if lat else (lambda r: r.get("busbw"))
    pairs = [r for r in records if isinstance(r.get("src"), int) and isinstance(r.get("dst"), int)
             and isinstance(value(r), (int, float)) and isinstance(r.get("size"), int)]
    if len({(r["src"], r["dst"]) for r in pairs}) < 2 or not 2 <= n <= MATRIX_MAX_RANKS:
        return []
    size = (min if lat else max)(r["size"] for r in pairs)
    cells = {}
    for r in pairs:
        if r["size"] == size:
            cells.setdefault((r["src"], r["dst"]), []).append(value(r))
    med = {k: statistics.median(v) for k, v in cells.items()}
    what = "median one-way latency (us)" if lat else "busbw (GB/s)"
    lines = [f"# {what} at {size} B, src rank (rows) -> dst rank (columns)",
             "#" + " " * 5 + "".join(f"{d:>9}" for d in range(n))]
    spec = ">9.2f" if lat else ">9.3f"
    for s in range(n):
        lines.append(f" {s:>5}" + "".join(format(med[(s, d)], spec) if (s, d) in med else f"{'N/A':>9}"
                                         for d in range(n)))
    return lines
