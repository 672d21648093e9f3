"""The nccl-tests-style table (sweep output and `comm-bench report`)."""
from __future__ import annotations

import statistics


def _fmt(value, spec: str) -> str:
    """A number formatted, or N/A for a field the record leaves out (the schema allows that)."""
    return "N/A" if value is None else format(value, spec)


WIDTH = 80   # a terminal's columns: every default table fits; --wide gives nccl-tests' full form


def fit(text: str, indent=2, width: int = WIDTH) -> str:
    """A long line of prose wrapped to `width`, its continuation lines indented (`indent`
    spaces, or that text: "#   " keeps a comment a comment); words (paths, commands) are
    never split."""
    import textwrap
    lead = indent if isinstance(indent, str) else " " * indent
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=lead, break_long_words=False,
                                    break_on_hyphens=False)) or text


def fit_lines(text: str, width: int = WIDTH) -> str:
    """Every line of `text` longer than `width` wrapped (fit), its continuation lines
    indented under it: a comment stays a comment ("#   "), other lines go 4 spaces in
    past their own indent. For prose (validate's findings, verdicts), never for tables."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(" "))
        out.append(fit(line, "#   " if line.startswith("#") else " " * min(lead + 4, 16), width))
    return "\n".join(out)


def prose(text: str) -> str:
    """Lines of prose for stdout: on a terminal wrapped at WIDTH (fit_lines); into a file
    or a pipe each stays one line, whole, for grep and for scripts (as the issue has it:
    not a terminal, nothing cut or folded). A spawned rank asks its spawner's stdout."""
    from ..printable import user_terminal
    return fit_lines(text) if user_terminal() else text


def _lat(key):
    return lambda r: _fmt((r.get("latency_us") or {}).get(key), ".2f")


def _pair(r):
    return f"{r['src']}->{r['dst']}" if r.get("src") is not None else ""


def _wrong(r):
    return r["wrong"] if r.get("wrong") is not None else "N/A"


# (title, unit, {"narrow" | "wide": width}, how to get it from a record); width None: not in that form
_SIZE = ("size", "(B)", {"narrow": 10, "wide": 12}, lambda r: r["size"])
_COUNT = ("count", "(elements)", {"narrow": 10, "wide": 12}, lambda r: r.get("count", "N/A"))
_TYPE = ("type", "", {"wide": 8}, lambda r: r.get("dtype", "N/A"))
_REDOP = ("redop", "", {"wide": 6}, lambda r: r.get("redop") or "none")
_ROOT = ("root", "", {"wide": 5}, lambda r: -1 if r.get("root") is None else r["root"])
_WRONG = ("#wrong", "", {"narrow": 6, "wide": 7}, _wrong)
_PAIR = ("pair", "", {"narrow": 6, "wide": 9}, _pair)

BW_COLUMNS = [_SIZE, _COUNT, _TYPE, _REDOP, _ROOT,
              ("time", "(us)", {"narrow": 9, "wide": 10}, lambda r: _fmt(r.get("time_us"), ".2f")),
              ("algbw", "(GB/s)", {"narrow": 7, "wide": 12}, lambda r: _fmt(r.get("algbw"), ".3f")),
              ("busbw", "(GB/s)", {"narrow": 7, "wide": 12}, lambda r: _fmt(r.get("busbw"), ".3f")),
              ("p50", "(us)", {"narrow": 8, "wide": 10}, _lat("median")),
              ("p99", "(us)", {"narrow": 8, "wide": 10}, _lat("p99")),
              _WRONG, _PAIR]

# --mode lat: the one-way latency statistics perftest users read, t_typical = median
_L = {"narrow": 7, "wide": 10}
LAT_COLUMNS = [("size", "(B)", {"narrow": 8, "wide": 12}, lambda r: r["size"]), _COUNT, _TYPE,
               ("iters", "", {"wide": 7}, lambda r: r.get("iters", "N/A")),
               ("min", "(us)", _L, _lat("min")), ("median", "(us)", {"narrow": 7, "wide": 11}, _lat("median")),
               ("avg", "(us)", _L, _lat("avg")), ("p99", "(us)", _L, _lat("p99")),
               ("p99.9", "(us)", _L, _lat("p999")), ("max", "(us)", _L, _lat("max")),
               ("stdev", "(us)", _L, _lat("stdev")), _WRONG, _PAIR]
_LAT_NARROW_DROPS = {"count"}

# A percentile needs this many samples per size to be one: below, it is (nearly) the largest
# sample (percentiles interpolate between the closest samples).
TAIL_SAMPLES = {"p99": 100, "p99.9": 1000}


def _narrower(cell: str, width: int) -> str:
    """A figure wider than its column with fewer decimals (152175.67 us -> 152175.7, then
    152176), so a slow link's times keep the table in its columns; text is left as it is."""
    if len(cell) <= width or "." not in cell:
        return cell
    try:
        v = float(cell)
    except ValueError:
        return cell
    for spec in (".1f", ".0f"):
        if len(format(v, spec)) <= width:
            return format(v, spec)
    return format(v, ".0f")


class Layout:
    """The columns of one table: bandwidth or latency, narrow (fits WIDTH) or wide, the pair
    column only where records have pairs, and a percentile only where the samples make one
    (with fewer, bandwidth tables show the maximum under its own name; latency tables,
    which show the maximum anyway, leave the percentile out and say so once: note())."""

    def __init__(self, mode="bw", iters=None, pairs=True, wide=False):
        self.mode, self.iters, self.form = mode, iters, "wide" if wide else "narrow"
        few = {k for k, need in TAIL_SAMPLES.items() if isinstance(iters, int) and iters < need}
        cols = []
        for col in (LAT_COLUMNS if mode == "lat" else BW_COLUMNS):
            name, unit, widths, get = col
            if widths.get(self.form) is None or (name == "pair" and not pairs):
                continue
            if mode == "lat" and (name in few or (self.form == "narrow" and name in _LAT_NARROW_DROPS)):
                continue
            if mode != "lat" and name == "p99" and "p99" in few:
                name, get = "max", _lat("max")
            cols.append((name, unit, widths[self.form], get))
        self.columns = cols
        self.left_out = [k for k in TAIL_SAMPLES if k in few] if mode == "lat" else []

    def header(self) -> list:
        """nccl-tests' two header lines: the names, then the units."""
        return ["#" + " ".join(f"{t:>{w}}" for t, _, w, _ in self.columns),
                ("#" + " ".join(f"{u:>{w}}" for _, u, w, _ in self.columns)).rstrip()]

    def row(self, record: dict) -> str:
        return " " + " ".join(f"{_narrower(str(get(record)), w):>{w}}" for _, _, w, get in self.columns)

    def note(self):
        """Said once per run or report: the percentiles left out for lack of samples."""
        if not self.left_out:
            return None
        need = ", ".join(f"-n {TAIL_SAMPLES[k]}" for k in self.left_out)
        return f"# {', '.join(self.left_out)} left out: with -n {self.iters} each is the max (need {need})"

    def about(self, op: str, dtype, redop=None, root=None):
        """The narrow form's line for what its columns leave out: type, and redop and root
        where the op has them."""
        if self.form == "wide":
            return None
        from ..ops import OPS
        kind = OPS.get(op)
        parts = [f"type {dtype}"]
        if kind is not None and kind.reduces and redop:
            parts.append(f"redop {redop}")
        if kind is not None and kind.rooted and root is not None:
            parts.append(f"root {root}")
        return "# " + ", ".join(parts)


def title(op: str, transport: str, pattern: str, mode: str, n: int, hosts: int) -> str:
    return (f"# comm-bench: {transport} {op}, {pattern}, --mode {mode}, {n} rank{'s' * (n != 1)} on "
            f"{hosts} host{'s' * (hosts != 1)}")


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


MATRIX_MAX_RANKS = 32   # --wide up to this many ranks; `comm-bench heatmap` shows any number
_CELL = {"narrow": (7, ".2f"), "wide": (9, ".3f")}


def _median_us(r):
    v = (r.get("latency_us") or {}).get("median") if isinstance(r.get("latency_us"), dict) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def matrix(records, n: int, mode: str = "bw", wide: bool = False) -> list:
    """nvbandwidth's picture of a pairwise run, src (rows) -> dst (columns), N/A where no
    pair was measured (median over repeats): busbw (GB/s) at the largest size, or with
    --mode lat the median one-way latency (us) at the smallest size."""
    lat = mode == "lat"
    value = _median_us if lat else (lambda r: r.get("busbw"))
    pairs = [r for r in records if isinstance(r.get("src"), int) and isinstance(r.get("dst"), int)
             and isinstance(value(r), (int, float)) and isinstance(r.get("size"), int)]
    if len({(r["src"], r["dst"]) for r in pairs}) < 2 or not 2 <= n <= MATRIX_MAX_RANKS:
        return []
    width, spec = _CELL["wide" if wide else "narrow"]
    what = "median one-way latency (us)" if lat else "busbw (GB/s)"
    if 6 + width * n > WIDTH and not wide:
        return [f"# the {what} matrix of {n} ranks is wider than {WIDTH} columns: --wide prints it"]
    size = (min if lat else max)(r["size"] for r in pairs)
    cells: dict = {}
    for r in pairs:
        if r["size"] == size:
            cells.setdefault((r["src"], r["dst"]), []).append(value(r))
    med = {k: statistics.median(v) for k, v in cells.items()}
    if lat:
        spec = ".2f"
    lines = [f"# {what} at {size} B, src rank (rows) -> dst rank (columns)",
             "#" + " " * 5 + "".join(f"{d:>{width}}" for d in range(n))]
    for s in range(n):
        lines.append(f" {s:>5}" + "".join(format(med[(s, d)], f">{width}{spec}") if (s, d) in med
                                         else f"{'N/A':>{width}}" for d in range(n)))
    return lines
