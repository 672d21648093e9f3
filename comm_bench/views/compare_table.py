"""`comm-bench compare`'s table in 80 columns: per later run X, one block of rows with the
judged figure (busbw for bandwidth rows, median latency for lat rows) of A and X, the
change and the verdict. `compare --wide` prints validate.compare.format_text's full form
(busbw, p50 and p99 of every run side by side)."""
from __future__ import annotations

from ..sizes import human_size
from ..validate.compare import judged_figure, summary_lines
from .table import fit

_UNIT = {"busbw": ("GB/s", ".3f"), "p50_us": ("us", ".2f")}
_WIDTHS = (14, 4, 6, 12, 12, 8, 5, 7)


def _cell(fig, key):
    unit, spec = _UNIT[key]
    v = (fig or {}).get(key)
    return "-" if v is None else f"{format(v, spec)} {unit}"


def narrow(result) -> str:
    runs = result["runs"]
    letters = [chr(ord("A") + i) if i < 26 else f"R{i}" for i in range(len(runs))]
    line = lambda cells: " ".join(str(c).rjust(w) for c, w in zip(cells, _WIDTHS))  # noqa: E731 - a one-line row formatter
    out = [f"# {x} = {r['name']} ({r['transport']}, {r['world_size']} ranks"
           + (f", {r['repeats']} repeats: geometric means)" if r.get("repeats", 1) > 1 else ")")
           for x, r in zip(letters, runs)]
    if len(runs) > 1:
        out.append("# change = (X - A) / A: busbw, lat rows median latency (--wide: p50, p99 too)")
    for i, x in enumerate(letters[1:] or letters[:1], 1):
        later = len(runs) > 1
        out.append("#" + line(["op", "mode", "size", "A", x if later else "", "change" if later else "",
                               "conf" if later else "", f"{x} vs A" if later else ""]).rstrip())
        for row in result["rows"]:
            key = judged_figure(row["mode"])
            buffer = row.get("buffer", "host")
            cells = [str(row["op"]) + ("" if buffer == "host" else f" [{buffer}]"), row["mode"],
                     human_size(row["size"]), _cell(row["runs"][0], key)]
            if later:
                c = row["change"][i - 1] or {}
                pct = c.get(key)
                cells += [_cell(row["runs"][i], key), "-" if pct is None else f"{pct * 100:+.1f}%",
                          "-" if c.get("confidence") is None else f"{c['confidence']:.2f}", c.get("verdict") or "-"]
            out.append(" " + line(cells).rstrip())
    out += [fit(ln, indent="#   ") for ln in summary_lines(result, letters)]
    return "\n".join(out)
