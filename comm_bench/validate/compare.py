"""Runs side by side: per op, mode and size, each run's figures and the change from the
first run (`comm-bench compare A.json B.json ...`; `validate --baseline` uses judge()).

A run's figure at one size is the median over its records there (pairs of a pairwise
run), so runs of different patterns or transports line up by op, mode and size.

A row is judged by one figure: busbw in bw mode (from min_size up: smaller sizes measure
latency), the median one-way latency in lat mode. It is worse (better) than the first
run only when two one-sided tests both reject "the change is within the tolerance" at
the confidence asked (an intersection-union test: its error rate is at most 1 - confidence):
- the row's own test: Welch's t on the log figures, each with the standard error of its
  records' per-iteration times (stdev/avg/sqrt(iters)); a Wilcoxon rank-sum test over
  the records' figures where both runs have 3 or more (pairwise runs: one per pair);
- the series' test: a Wilcoxon signed-rank test over the log ratios of every judged size
  of the same op, mode and buffer. Identical runs measured here differ more between runs
  (a whole run shifted by the scheduler: 15-27% sd of busbw) than one run's iterations
  suggest (5-11% standard error), so the row test alone calls them different; such
  shifts hit sizes unevenly, while a slower link is slower at every bandwidth-bound size.
With repeats (`compare --repeats N`, several `validate --baseline` files) a run is a
group of documents: its figure is the geometric mean of theirs, and the row test is
Welch's t over the repeats' log figures (one side a single run: a t-test with the
repeated side's spread for both), which sees the between-run noise that one run's
iterations cannot; the series' test is then the same t-test on the repeats' levels (each
repeat's mean log figure over the op's judged sizes) in place of the signed-rank test, so
a slower link need not be beyond the tolerance at every size, only on the whole.
Repeats made in turns (`compare --repeats N --paired`: A1 B1 A2 B2 ...) are judged by the
i-th run of each side together: Student's t on their differences (N - 1 df), which cancels
what the machine did to both runs of a turn; on a CPU-bound link whose rate moves 1-3
GB/s from run to run, that spread is most of the noise. (The test stays valid for runs not
made in turns, with fewer degrees of freedom than Welch's.)
A change beyond the tolerance that the tests do not support is "noise" (within noise):
shown, never a failure. `compare` exits 1 when any later run is worse somewhere (a gate).
docs/benchmarks/compare-noise.md has the measurements behind this.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..results.records import buffer_label, measured_gbs
from ..sizes import human_size
from .stats import gmean, rank_sum_p, signed_rank_p, t_cdf, welch_below_p

FIGURES = ("busbw", "p50_us", "p99_us")
HIGHER_IS_BETTER = {"busbw": True, "p50_us": False, "p99_us": False}
DEFAULT_TOLERANCE = 0.10
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN_SIZE = 1 << 20    # validate's rules min_size: bandwidth rows below it are not judged
RANK_SUM_MIN = 3              # records per run for the rank-sum row test: 3 + 3 can reach p = 0.05
TEST = {"row": "one-sided Welch t-test on log figures (standard error: per-iteration stdev/avg/sqrt(iters)); "
               f"Wilcoxon rank-sum over the records' figures where both runs have {RANK_SUM_MIN}+ records; "
               "with repeats, Welch's t over the repeats' log figures (one side a single run: Student's t "
               "with the repeated side's spread); --paired: Student's t on the turns' differences",
        "series": "one-sided Wilcoxon signed-rank test over the log ratios of every judged size of the "
                  "row's op, mode and buffer; with repeats, Welch's t over the repeats' levels (their mean log "
                  "figure over those sizes); --paired: Student's t on the turns' differences of levels",
        "rule": "worse (better) = both tests reject 'the change is within the tolerance' (one-sided, in "
                "that direction) at the confidence; a change beyond the tolerance otherwise = within noise",
        "assumptions": "iterations of one record independent; sizes of one run independent given a "
                       "link change, which moves every judged size the same way"}


def judged_figure(mode: str) -> str:
    return "busbw" if mode == "bw" else "p50_us"


def _num(rec: Any, *path: str) -> float | None:
    v = rec
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _record_figure(rec: dict[str, Any], mode: str) -> float | None:
    return measured_gbs(rec) if mode == "bw" else _num(rec, "latency_us", "median")


def _spread(recs: list[dict[str, Any]]) -> tuple[float, int] | tuple[None, None]:
    """(standard error of the row's log figure, its degrees of freedom), or (None, None)
    where a record has no per-iteration spread. Each record's mean time has relative
    standard error cv/sqrt(iters) (delta method: the standard error of its log); the row's
    figure averages its records."""
    terms: list[float] = []
    iters = 0
    for r in recs:
        sd, avg, n = _num(r, "latency_us", "stdev"), _num(r, "latency_us", "avg"), _num(r, "iters")
        if sd is None or not avg or avg <= 0 or not n or n < 2:
            return None, None
        terms.append((sd / avg) ** 2 / n)
        iters += int(n)
    return math.sqrt(statistics.fmean(terms) / len(terms)), iters - len(terms)


def summarise(doc: dict[str, Any], samples: bool = False) -> dict[tuple[Any, ...], dict[str, Any]]:
    """{(op, mode, size, buffer): {"busbw": GB/s or None (bw mode), "p50_us", "p99_us", "records",
    "se_log", "df"}}: host and GPU-buffer records (records.buffer_label) never share a row.
    se_log, df: the judged figure's log standard error and degrees of freedom (None: no
    per-iteration spread recorded). samples: also "values", the judged figure per record."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in doc.get("results") or []:
        if isinstance(rec, dict) and isinstance(rec.get("size"), int):
            groups.setdefault((rec.get("op"), rec.get("mode", "bw"), rec["size"], buffer_label(rec)),
                              []).append(rec)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, recs in groups.items():
        def med(values: Iterable[float | None]) -> float | None:
            vals = [v for v in values if v is not None]
            return statistics.median(vals) if vals else None
        se, df = _spread(recs)
        out[key] = {"busbw": med(measured_gbs(r) for r in recs) if key[1] == "bw" else None,
                    "p50_us": med(_num(r, "latency_us", "median") for r in recs),
                    "p99_us": med(_num(r, "latency_us", "p99") for r in recs), "records": len(recs),
                    "se_log": se, "df": df}
        if samples:
            out[key]["values"] = [v for v in (_record_figure(r, key[1]) for r in recs) if v and v > 0]
    return out


def summarise_group(docs: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """summarise() of one run given as repeats (a list of documents): per row present in
    every repeat, each figure the geometric mean of the repeats' figures, "repeat_logs"
    the judged figure's log per repeat, "repeats" their number. A single document:
    summarise(doc, samples=True)."""
    if len(docs) == 1:
        return summarise(docs[0], samples=True)
    sums = [summarise(d, samples=True) for d in docs]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key in set(sums[0]).intersection(*sums[1:]):
        rows = [s[key] for s in sums]

        def mean_of(fig: str) -> float | None:       # a figure only where every repeat has it
            vals = [r[fig] for r in rows]
            return gmean(vals) if all(v and v > 0 for v in vals) else None
        fig = judged_figure(key[1])
        out[key] = {"busbw": mean_of("busbw"), "p50_us": mean_of("p50_us"), "p99_us": mean_of("p99_us"),
                    "records": sum(r["records"] for r in rows), "se_log": None, "df": None,
                    "repeats": len(rows),
                    "repeat_logs": [math.log(r[fig]) for r in rows if r[fig] and r[fig] > 0]}
    return out


def repeats_below_p(a_logs: Sequence[float], b_logs: Sequence[float], margin: float) -> float | None:
    """One-sided p that b's mean log figure less margin lies below a's, from repeats:
    Welch's t where both sides have 2+, Student's t with the repeated side's spread for
    both (n - 1 df) where one side is a single run; None where neither has 2."""
    na, nb = len(a_logs), len(b_logs)
    if max(na, nb) < 2 or min(na, nb) < 1:
        return None
    ma, mb = statistics.fmean(a_logs), statistics.fmean(b_logs) - margin
    sda = statistics.stdev(a_logs) if na >= 2 else None
    sdb = statistics.stdev(b_logs) if nb >= 2 else None
    floor = 1e-6                 # identical repeats: a spread of 0 would make any change certain
    if sda is not None and sdb is not None:
        return welch_below_p(ma, max(sda, floor) / math.sqrt(na), na - 1, mb, max(sdb, floor) / math.sqrt(nb), nb - 1)
    sd, n = (sda, na) if sda is not None else (sdb, nb)
    se = max(sd or 0.0, floor) * math.sqrt(1 / na + 1 / nb)
    return t_cdf((mb - ma) / se, n - 1)


def paired_below_p(a_logs: Sequence[float], b_logs: Sequence[float], margin: float) -> float:
    """One-sided p that b's log figure less margin lies below a's, from runs made in turns
    (a_logs[i] next to b_logs[i]): Student's t on the differences, n - 1 df."""
    d = [b - margin - a for a, b in zip(a_logs, b_logs, strict=True)]
    sd = max(statistics.stdev(d), 1e-6)     # identical turns: a spread of 0 would make any change certain
    return t_cdf(statistics.fmean(d) / (sd / math.sqrt(len(d))), len(d) - 1)


def _below_p(a_logs: Sequence[float], b_logs: Sequence[float], margin: float, paired: bool) -> float | None:
    if paired and len(a_logs) == len(b_logs) >= 2:
        return paired_below_p(a_logs, b_logs, margin)
    return repeats_below_p(a_logs, b_logs, margin)


def change(new: float | None, old: float | None) -> float | None:
    """Relative change (new - old) / old, or None."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) / old


def _margins(tolerance: float, higher_is_better: bool) -> tuple[float | None, float | None]:
    """The tolerance as log gains: (worse below, better above); None where no change can
    pass it (a drop of 100% or more)."""
    lo, hi = (math.log1p(-tolerance) if tolerance < 1 else None), math.log1p(tolerance)
    return (lo, hi) if higher_is_better else (-hi, -lo if lo is not None else None)


def _row_p(old: dict[str, Any], new: dict[str, Any], sign: int, margin: float,
           paired: bool = False) -> tuple[str | None, float | None]:
    """The row's own test: (name, p) for "new's log gain over old is below margin"
    (sign: +1 when a higher figure is better; paired: repeats made in turns)."""
    fig = "busbw" if sign > 0 else "p50_us"
    ro, rn = old.get("repeat_logs") or [], new.get("repeat_logs") or []
    if max(len(ro), len(rn)) >= 2:      # repeats: their spread is the between-run noise
        ro = [sign * x for x in ro] or [sign * math.log(old[fig])]
        rn = [sign * x for x in rn] or [sign * math.log(new[fig])]
        if paired and len(ro) == len(rn):
            return "repeats-paired-log", paired_below_p(ro, rn, margin)
        return "repeats-welch-log", repeats_below_p(ro, rn, margin)
    vo, vn = old.get("values") or [], new.get("values") or []
    if len(vo) >= RANK_SUM_MIN and len(vn) >= RANK_SUM_MIN:
        return "rank-sum", rank_sum_p([sign * math.log(v) for v in vo], [sign * math.log(v) - margin for v in vn])
    if old["se_log"] is None or new["se_log"] is None:
        return None, None           # no spread recorded: the series test alone decides
    return "welch-log", welch_below_p(sign * math.log(old[fig]), old["se_log"], old["df"],
                                      sign * math.log(new[fig]) - margin, new["se_log"], new["df"])


def needed_sizes(confidence: float) -> int:
    """Judged sizes a series needs before its signed-rank test can reach the confidence:
    all n in one direction has p = 2^-n."""
    return max(1, math.ceil(math.log2(1 / (1 - confidence)) - 1e-9))


def judge(old: dict[tuple[Any, ...], dict[str, Any]], new: dict[tuple[Any, ...], dict[str, Any]],
          tolerance: float = DEFAULT_TOLERANCE, min_size: int = DEFAULT_MIN_SIZE,
          confidence: float = DEFAULT_CONFIDENCE,
          paired: bool = False) -> tuple[dict[tuple[Any, ...], dict[str, Any]], list[str]]:
    """The one judgement of a later run against a base (compare and validate --baseline):
    old, new from summarise(doc, samples=True). Returns ({key: {"verdict": better | worse |
    same | noise, "change", "confidence", "p_row", "p_series", "row_test"}} for the judged
    rows, [notes]): a row is judged where both have its figure (bw rows from min_size up).

    Both tests take "the change is within the tolerance" as the null hypothesis: worse
    (better) = the data support a change beyond the tolerance in that direction at the
    confidence. Testing against 0 instead let a run shifted 15% by the scheduler FAIL."""
    alpha = 1 - confidence + 1e-12
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    series: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key in set(old) & set(new):
        op, mode, size, buffer = key
        fig = judged_figure(mode)
        a, b = old[key].get(fig), new[key].get(fig)
        if not a or not b or a <= 0 or b <= 0 or (mode == "bw" and size < min_size):
            continue
        sign = 1 if HIGHER_IS_BETTER[fig] else -1
        gain, (lo, hi) = sign * math.log(b / a), _margins(tolerance, HIGHER_IS_BETTER[fig])
        up = gain > 0           # the direction of the change: the one tested
        name: str | None
        p_row: float | None
        if (hi if up else lo) is None:
            name, p_row = None, 1.0
        elif up:                # better: the mirror of worse (old's gain over new below -hi)
            name, p_row = _row_p(new[key], old[key], sign, -hi, paired)  # type: ignore[operator]  # not None: tested above
        else:
            name, p_row = _row_p(old[key], new[key], sign, lo, paired)  # type: ignore[arg-type]  # not None: tested above
        rows[key] = {"change": (b - a) / a, "row_test": name, "up": up, "p_row": p_row}
        ser = series.setdefault((op, mode, buffer), {"gains": [], "keys": [], "sign": sign, "lo": lo, "hi": hi})
        ser["gains"].append(gain)
        ser["keys"].append(key)
    p_series = {k: _series_p(old, new, s, paired) for k, s in series.items()}
    for key, r in rows.items():
        (p_worse, p_better), series_test = p_series[(key[0], key[1], key[3])]
        p_row, p_ser = r["p_row"], p_better if r.pop("up") else p_worse
        p = max(p_row if p_row is not None else 0.0, p_ser)
        rel = r["change"] * (1 if HIGHER_IS_BETTER[judged_figure(key[1])] else -1)
        beyond = "better" if rel > tolerance else "worse" if rel < -tolerance else None
        r.update(verdict="same" if beyond is None else beyond if p <= alpha else "noise",
                 confidence=confidence_of(p), p_row=_round(p_row), p_series=_round(p_ser), series_test=series_test)
    need = needed_sizes(confidence)
    notes = [f"{op} {mode}{'' if buffer == 'host' else f' [{buffer}]'}: {len(s['gains'])} judged size(s); the "
             f"signed-rank test needs {need} to reach confidence {confidence:g}, so no change there can be "
             f"better or worse (sweep more sizes from the smallest judged one up, give repeats, or lower "
             f"--confidence)"
             for (op, mode, buffer), s in sorted(series.items(), key=str)
             if len(s["gains"]) < need and p_series[(op, mode, buffer)][1] == "signed-rank"]
    return rows, notes


def _levels(side: dict[tuple[Any, ...], dict[str, Any]], keys: list[tuple[Any, ...]], sign: int) -> list[float]:
    """A run's level over a series: per repeat, the mean of its signed log figures over the
    series' sizes (one value for a single run)."""
    logs = [side[k].get("repeat_logs") for k in keys]
    if all(logs) and len({len(x) for x in logs}) == 1:  # type: ignore[arg-type]
        return [sign * statistics.fmean(col) for col in zip(*logs)]
    fig = judged_figure(keys[0][1])
    return [sign * statistics.fmean(math.log(side[k][fig]) for k in keys)]


def _series_p(old: dict[tuple[Any, ...], dict[str, Any]], new: dict[tuple[Any, ...], dict[str, Any]],
              s: dict[str, Any], paired: bool = False) -> tuple[tuple[float, float], str]:
    """((p worse, p better), the test's name) for one op's judged sizes. Single runs: the
    signed-rank test over the sizes' log ratios less the tolerance. Repeats: Welch's t on the
    repeats' levels (the mean over the sizes), which sees the between-run noise itself, so
    a slower link need not be beyond the tolerance at every single size."""
    lo, hi = s["lo"], s["hi"]
    vo, vn = _levels(old, s["keys"], s["sign"]), _levels(new, s["keys"], s["sign"])
    if max(len(vo), len(vn)) >= 2:
        worse = 1.0 if lo is None else _below_p(vo, vn, lo, paired)
        better = _below_p(vn, vo, -hi, paired) if hi is not None else 1.0
        name = "repeats-paired-levels" if paired and len(vo) == len(vn) else "repeats-welch-levels"
        return (worse, better), name  # type: ignore[return-value]  # both sides have 1+: not None
    return ((1.0 if lo is None else signed_rank_p([g - lo for g in s["gains"]]),
             1.0 if hi is None else signed_rank_p([hi - g for g in s["gains"]])), "signed-rank")


def confidence_of(p: float) -> float:
    return round(max(0.0, min(1.0, 1.0 - p)), 4)


def _round(p: float | None) -> float | None:
    return None if p is None else round(p, 6)


def compare(named_docs: list[tuple[str, Any]], tolerance: float = DEFAULT_TOLERANCE, min_size: int = DEFAULT_MIN_SIZE,
            confidence: float = DEFAULT_CONFIDENCE, paired: bool = False) -> dict[str, Any]:
    """[(name, doc or [repeats' docs])] -> {"runs": [{name, transport, world_size, repeats}], "rows": [{op, mode, size,
    runs: [figures or None], change: [{figure: relative change vs the first run, "verdict",
    "confidence", "p_row", "p_series", "row_test"}]}], "summary": [per later run: {better,
    worse, same, noise, worst, notes}], "confidence", "test", "status": pass | fail}"""
    groups = [doc if isinstance(doc, list) else [doc] for _, doc in named_docs]
    sums = [summarise_group(g) for g in groups]
    judged = [judge(sums[0], s, tolerance, min_size, confidence, paired) for s in sums[1:]]
    keys = sorted({k for s in sums for k in s}, key=lambda k: (str(k[0]), k[1], k[2], k[3]))
    rows: list[dict[str, Any]] = []
    for key in keys:
        figs = [s.get(key) and {k: v for k, v in s[key].items() if k != "values"} for s in sums]
        base = figs[0]
        rows.append({"op": key[0], "mode": key[1], "size": key[2], "buffer": key[3], "runs": figs,
                     "change": [None if f is None or base is None else
                                dict({k: change(f[k], base[k]) for k in FIGURES},
                                     **{k: v for k, v in j[0].get(key, {"verdict": None}).items() if k != "change"})
                                for f, j in zip(figs[1:], judged)]})
    runs = [{"name": name, "transport": g[0].get("transport"), "world_size": g[0].get("world_size"),
             "repeats": len(g)} for (name, _), g in zip(named_docs, groups)]
    summary = [dict(_summary(rows, i), notes=j[1]) for i, j in enumerate(judged)]
    return {"runs": runs, "rows": rows, "tolerance": tolerance, "min_size": min_size, "confidence": confidence,
            "paired": paired, "test": TEST, "summary": summary, "status": "fail" if any(s["worse"] for s in summary) else "pass"}


def _summary(rows: list[dict[str, Any]], i: int) -> dict[str, Any]:
    """Later run i's verdicts counted, and its worst judged row."""
    out: dict[str, Any] = {"better": 0, "worse": 0, "same": 0, "noise": 0, "worst": None}
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
            worst = (gain, row, ch)
    if worst is not None:
        _, row, ch = worst
        figure = judged_figure(row["mode"])
        out["worst"] = {"op": row["op"], "mode": row["mode"], "size": row["size"], "figure": figure,
                        "change": ch[figure], "verdict": ch["verdict"], "confidence": ch["confidence"]}
    return out


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def header_cells(names: list[str]) -> list[str]:
    out = ["op", "mode", "size"]
    for i, x in enumerate(names):
        out += [f"{x} busbw", f"{x} p50(us)", f"{x} p99(us)"] + ([f"{x} busbw%", f"{x} p99%", f"{x} conf",
                                                                 f"{x} vs A"] if i else [])
    return out


def row_cells(row: dict[str, Any], specs: tuple[str, ...] = (".3f", ".2f", ".2f")) -> list[str]:
    """One row as text cells, in header_cells' order (specs: busbw, p50, p99); the
    verdict "noise" = beyond the tolerance, not supported at the confidence."""
    buffer = row.get("buffer", "host")
    out = [str(row["op"]) + ("" if buffer == "host" else f" [{buffer}]"), row["mode"], human_size(row["size"])]
    for i, f in enumerate(row["runs"]):
        out += [_fmt((f or {}).get(k), spec) for k, spec in zip(FIGURES, specs)]
        if i:
            c = row["change"][i - 1] or {}
            out += [_pct(c.get("busbw")), _pct(c.get("p99_us")), _fmt(c.get("confidence"), ".2f"),
                    c.get("verdict") or "-"]
    return out


def format_text(result: dict[str, Any]) -> str:
    runs = result["runs"]
    letters = [chr(ord("A") + i) if i < 26 else f"R{i}" for i in range(len(runs))]
    lines = ["# compare: " + ", ".join(f"{x} = {r['name']} ({r['transport']}, {r['world_size']} ranks"
                                       + (f", {r['repeats']} repeats: geometric means)" if r.get("repeats", 1) > 1 else ")")
                                       for x, r in zip(letters, runs))
             + ("; change = (X - A) / A" if len(runs) > 1 else "")]
    widths = [14, 4, 7] + [w for i in range(len(runs)) for w in ([10, 10, 10] + ([9, 9, 6, 7] if i else []))]
    line: Callable[[list[str]], str] = lambda cells: " ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731 - a one-line row formatter
    lines.append("#" + line(header_cells(letters)))
    lines += [" " + line(row_cells(row)) for row in result["rows"]]
    return "\n".join(lines + summary_lines(result, letters))


def summary_lines(result: dict[str, Any], letters: list[str]) -> list[str]:
    """Per later run: counts (worse, better, same, within noise), its worst row and notes;
    then the test and the verdict."""
    if len(result["runs"]) < 2:
        return []
    tol, floor, conf = result["tolerance"] * 100, human_size(result["min_size"]), result["confidence"]
    out = []
    for x, s in zip(letters[1:], result["summary"]):
        w = s["worst"]
        worst = (f"; worst {w['op']} {w['mode']} {human_size(w['size'])}: "
                 f"{'busbw' if w['figure'] == 'busbw' else 'median latency'} {w['change'] * 100:+.1f}% "
                 f"({w['verdict']}, confidence {w['confidence']:.2f})") if w else ""
        out.append(f"# {x} vs {letters[0]}: {s['worse']} worse, {s['better']} better, {s['same']} within {tol:g}%, "
                   f"{s['noise']} within noise (busbw from {floor}, median latency of lat rows){worst}")
        out += [f"# {x} vs {letters[0]}: note: {n}" for n in s["notes"]]
    repeats = any(r.get("repeats", 1) > 1 for r in result["runs"])
    row = ("Student's t on the differences of the runs made in turns" if repeats and result.get("paired") else
           "Welch's t over the repeats' log figures, the between-run spread" if repeats else
           f"Welch's t on log figures with each run's per-iteration spread; rank-sum over the records where each "
           f"run has {RANK_SUM_MIN}+")
    series = ("the same t-test on the repeats' mean over the op's judged sizes" if repeats else
              "a signed-rank test over the op's judged sizes")
    out.append(f"# test: worse or better = beyond {tol:g}% at confidence {conf:g} by both the row's test ({row}) "
               f"and {series}; beyond {tol:g}% without that support = within noise")
    worse = [x for x, s in zip(letters[1:], result["summary"]) if s["worse"]]
    out.append(f"# verdict: FAIL: {', '.join(worse)} worse than {letters[0]} beyond {tol:g}% at confidence {conf:g}"
               if worse else
               f"# verdict: PASS: no run worse than {letters[0]} beyond {tol:g}% at confidence {conf:g}")
    return out
