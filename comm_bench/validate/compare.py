"""Runs side by side: per op, mode and size, each run's figures and the change from the
first run (`comm-bench compare A.json B.json ...`; `validate --baseline` uses summarise()).

A run's figure at one size is the median over its records there (pairs of a pairwise
run), so runs of different patterns or transports line up by op, mode and size.

A row is judged by one figure: busbw in bw mode (from min_size up: smaller sizes measure
latency), the median one-way latency in lat mode. Beyond the tolerance it is better or
worse than the first run; `compare` exits 1 when any run is worse somewhere (a gate).
"""
from __future__ import annotations

import statistics

from ..results.records import buffer_label, measured_gbs
from ..sizes import human_size

FIGURES = ("busbw", "p50_us", "p99_us")
HIGHER_IS_BETTER = {"busbw": True, "p50_us": False, "p99_us": False}
DEFAULT_TOLERANCE = 0.10
DEFAULT_MIN_SIZE = 1 << 20    # validate's rules min_size: bandwidth rows below it are not judged


def judged_figure(mode):
    return "busbw" if mode == "bw" else "p50_us"


def verdict(new, old, mode, size, tolerance=DEFAULT_TOLERANCE, min_size=DEFAULT_MIN_SIZE):
    """(better | worse | same, relative change of the judging figure), or (None, None)
    where the row is not judged (a small bandwidth size, a figure missing)."""
    figure = judged_figure(mode)
    c = change((new or {}).get(figure), (old or {}).get(figure))
    if c is None or (mode == "bw" and size < min_size):
        return None, None
    gain = c if HIGHER_IS_BETTER[figure] else -c
    return ("better" if gain > tolerance else "worse" if gain < -tolerance else "same"), c


def _lat(rec, key):
    lat = rec.get("latency_us")
    v = lat.get(key) if isinstance(lat, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def summarise(doc):
    """{(op, mode, size, buffer): {"busbw": GB/s or None (bw mode), "p50_us", "p99_us", "records"}}:
    host and GPU-buffer records (records.buffer_label) never share a row."""
    groups = {}
    for rec in doc.get("results") or []:
        if isinstance(rec, dict) and isinstance(rec.get("size"), int):
            groups.setdefault((rec.get("op"), rec.get("mode", "bw"), rec["size"], buffer_label(rec)),
                              []).append(rec)
    out = {}
    for key, recs in groups.items():
        def med(values):
            values = [v for v in values if v is not None]
            return statistics.median(values) if values else None
        out[key] = {"busbw": med(measured_gbs(r) for r in recs) if key[1] == "bw" else None,
                    "p50_us": med(_lat(r, "median") for r in recs),
                    "p99_us": med(_lat(r, "p99") for r in recs), "records": len(recs)}
    return out


def change(new, old):
    """Relative change (new - old) / old, or None."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) / old


def compare(named_docs, tolerance=DEFAULT_TOLERANCE, min_size=DEFAULT_MIN_SIZE):
    """[(name, doc)] -> {"runs": [{name, transport, world_size}], "rows": [{op, mode, size,
    runs: [figures or None], change: [{figure: relative change vs the first run, "verdict"}]}],
    "summary": [per later run: {better, worse, same, worst}], "status": pass | fail}"""
    sums = [summarise(doc) for _, doc in named_docs]
    keys = sorted({k for s in sums for k in s}, key=lambda k: (str(k[0]), k[1], k[2], k[3]))
    rows = []
    for key in keys:
        figs = [s.get(key) for s in sums]
        base = figs[0]
        rows.append({"op": key[0], "mode": key[1], "size": key[2], "buffer": key[3], "runs": figs,
                     "change": [None if f is None or base is None else
                                dict({k: change(f[k], base[k]) for k in FIGURES},
                                     verdict=verdict(f, base, key[1], key[2], tolerance, min_size)[0])
                                for f in figs[1:]]})
    runs = [{"name": name, "transport": doc.get("transport"), "world_size": doc.get("world_size")}
            for name, doc in named_docs]
    summary = [_summary(rows, i) for i in range(len(named_docs) - 1)]
    return {"runs": runs, "rows": rows, "tolerance": tolerance, "min_size": min_size, "summary": summary,
            "status": "fail" if any(s["worse"] for s in summary) else "pass"}


def _summary(rows, i):
    """Later run i's verdicts counted, and its worst judged row."""
    out = {"better": 0, "worse": 0, "same": 0, "worst": None}
    worst = None
    for row in rows:
        ch = row["change"][i]
        v = ch and ch["verdict"]
        if v is None:
            continue
        out[v] += 1
        figure = judged_figure(row["mode"])
        c = ch[figure]
        gain = c if HIGHER_IS_BETTER[figure] else -c
        if worst is None or gain < worst[0]:
            worst = (gain, row, c)
    if worst is not None:
        _, row, c = worst
        out["worst"] = {"op": row["op"], "mode": row["mode"], "size": row["size"],
                        "figure": judged_figure(row["mode"]), "change": c}
    return out


def _num(v, spec):
    return "-" if v is None else format(v, spec)


def _pct(v):
    return "-" if v is None else f"{v * 100:+.1f}%"


def header_cells(names):
    out = ["op", "mode", "size"]
    for i, x in enumerate(names):
        out += [f"{x} busbw", f"{x} p50(us)", f"{x} p99(us)"] + ([f"{x} busbw%", f"{x} p99%", f"{x} vs A"]
                                                                if i else [])
    return out


def row_cells(row, specs=(".3f", ".2f", ".2f")):
    """One row as text cells, in header_cells' order (specs: busbw, p50, p99)."""
    buffer = row.get("buffer", "host")
    out = [str(row["op"]) + ("" if buffer == "host" else f" [{buffer}]"), row["mode"], human_size(row["size"])]
    for i, f in enumerate(row["runs"]):
        out += [_num((f or {}).get(k), spec) for k, spec in zip(FIGURES, specs)]
        if i:
            c = row["change"][i - 1] or {}
            out += [_pct(c.get("busbw")), _pct(c.get("p99_us")), c.get("verdict") or "-"]
    return out


def format_text(result):
    runs = result["runs"]
    letters = [chr(ord("A") + i) if i < 26 else f"R{i}" for i in range(len(runs))]
    lines = ["# compare: " + ", ".join(f"{x} = {r['name']} ({r['transport']}, {r['world_size']} ranks)"
                                       for x, r in zip(letters, runs))
             + ("; change = (X - A) / A" if len(runs) > 1 else "")]
    widths = [14, 4, 7] + [w for i in range(len(runs)) for w in ([10, 10, 10] + ([9, 9, 7] if i else []))]
    line = lambda cells: " ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    lines.append("#" + line(header_cells(letters)))
    lines += [" " + line(row_cells(row)) for row in result["rows"]]
    return "\n".join(lines + summary_lines(result, letters))


def summary_lines(result, letters):
    """One line per later run (counts of better / worse / same, its worst row) and the verdict."""
    if len(result["runs"]) < 2:
        return []
    tol, floor = result["tolerance"] * 100, human_size(result["min_size"])
    out = []
    for x, s in zip(letters[1:], result["summary"]):
        w = s["worst"]
        worst = (f"; worst {w['op']} {w['mode']} {human_size(w['size'])}: "
                 f"{'busbw' if w['figure'] == 'busbw' else 'median latency'} {w['change'] * 100:+.1f}%") if w else ""
        out.append(f"# {x} vs {letters[0]}: {s['worse']} worse, {s['better']} better, {s['same']} within {tol:g}% "
                   f"(busbw from {floor}, median latency of lat rows){worst}")
    worse = [x for x, s in zip(letters[1:], result["summary"]) if s["worse"]]
    out.append(f"# verdict: FAIL: {', '.join(worse)} worse than {letters[0]} beyond {tol:g}%" if worse else
               f"# verdict: PASS: no run worse than {letters[0]} beyond {tol:g}%")
    return out
