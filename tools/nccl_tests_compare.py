"""Compare comm-bench's nccl sweeps with nccl-tests' own output (tools/nccl_tests_parity.sh).

    python3 tools/nccl_tests_compare.py OUTDIR      # writes OUTDIR/compare.{json,csv}, prints markdown

OUTDIR holds cb_G{g}_r{r}.json (comm-bench results documents) and ref_{op}_G{g}_r{r}.txt
(nccl-tests stdout). Per op, -G value and size: the median over rounds of each tool, their
ratio (comm-bench / nccl-tests) and the reference's round-to-round spread (max / min).
A size's ratio is "inside the reference's spread" when |ratio - 1| <= spread - 1.
nccl-tests' out-of-place column is compared (comm-bench's default is out of place).
"""
from __future__ import annotations

import csv
import glob
import json
import os
import re
import statistics
import sys

BAND = (0.97, 1.03)
ALLTOALL_FROM = 32 << 20


def ref_rows(path):
    """[(printed size, out-of-place time us)] in order, one per requested size."""
    rows = []
    with open(path) as f:
        for line in f:
            tok = line.split()
            if len(tok) >= 13 and tok[0].isdigit() and tok[1].isdigit():
                rows.append((int(tok[0]), float(tok[5])))
    return rows


def load(out):
    cb, ref = {}, {}   # (op, g, requested size) -> [times per round]
    printed = {}       # (op, requested size) -> the size nccl-tests printed (0: it moved nothing)
    api = {}
    for path in sorted(glob.glob(os.path.join(out, "cb_G*_r*.json"))):
        g = int(re.search(r"cb_G(\d+)_r", path).group(1))
        with open(path) as f:
            doc = json.load(f)
        for rec in doc["results"]:
            for size in rec.get("requested_sizes") or [rec["size"]]:
                cb.setdefault((rec["op"], g, size), []).append(rec["time_us"])
            api[rec["op"]] = rec.get("extra", {}).get("nccl_api")
    for path in sorted(glob.glob(os.path.join(out, "ref_*_G*_r*.txt"))):
        m = re.search(r"ref_(\w+?)_G(\d+)_r", os.path.basename(path))
        op, g = m.group(1), int(m.group(2))
        for i, (size, t) in enumerate(ref_rows(path)):
            asked = 8 << i
            ref.setdefault((op, g, asked), []).append(t)
            printed[(op, asked)] = size
    return cb, ref, printed, api


def compare(out):
    cb, ref, printed, api = load(out)
    rows = []
    for key in sorted(set(cb) & set(ref), key=lambda k: (k[1], k[0], k[2])):
        op, g, size = key
        c, r = statistics.median(cb[key]), statistics.median(ref[key])
        row = {"op": op, "graph": g, "size": size, "ref_printed_size": printed[(op, size)],
               "cb_us": cb[key], "ref_us": ref[key], "cb_median_us": c, "ref_median_us": r,
               "ratio": c / r if r else None, "ref_spread": max(ref[key]) / min(ref[key]) if min(ref[key]) else None,
               "cb_spread": max(cb[key]) / min(cb[key]) if min(cb[key]) else None}
        # nccl-tests rounds each rank's count down to 16 B: an 8 B gather-type op moves nothing there
        row["comparable"] = row["ref_printed_size"] > 0 and row["ratio"] is not None
        if row["comparable"]:
            row["in_band"] = BAND[0] <= row["ratio"] <= BAND[1]
            row["in_ref_spread"] = abs(row["ratio"] - 1) <= row["ref_spread"] - 1
        rows.append(row)
    return rows, api


def verdicts(rows):
    out = {}
    for g in sorted({r["graph"] for r in rows}):
        for op in sorted({r["op"] for r in rows}):
            mine = [r for r in rows if r["graph"] == g and r["op"] == op and r["comparable"]]
            if not mine:
                continue
            ratios = [r["ratio"] for r in mine]
            v = {"sizes": len(mine), "median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
                 "max_ratio": max(ratios), "outside_band": [r["size"] for r in mine if not r["in_band"]],
                 "outside_ref_spread": [r["size"] for r in mine if not r["in_ref_spread"]],
                 "excluded_sizes": [r["size"] for r in rows if r["graph"] == g and r["op"] == op
                                    and not r["comparable"]]}
            if g > 0:
                v["holds"] = not v["outside_band"]
            else:
                v["holds"] = BAND[0] <= v["median_ratio"] <= BAND[1] and not v["outside_ref_spread"]
            if op == "alltoall":
                big = [r for r in mine if r["size"] >= ALLTOALL_FROM]
                v["alltoall_32M_up_in_band"] = all(r["in_band"] for r in big) and bool(big)
            out[f"G{g}/{op}"] = v
    return out


def human(n):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n // k} {unit}"
    return f"{n} B"


def markdown(rows, summary, api):
    lines = []
    for g in sorted({r["graph"] for r in rows}):
        ops = [op for op in dict.fromkeys(r["op"] for r in rows if r["graph"] == g)]
        lines += [f"### -G {g}: comm-bench / nccl-tests time (median of rounds), [reference max/min over rounds]",
                  "", "| size | " + " | ".join(ops) + " |", "|---" * (len(ops) + 1) + "|"]
        for size in sorted({r["size"] for r in rows if r["graph"] == g}):
            cells = []
            for op in ops:
                r = next((x for x in rows if x["graph"] == g and x["op"] == op and x["size"] == size), None)
                if r is None:
                    cells.append("-")
                elif not r["comparable"]:
                    cells.append("n/a (nccl-tests: 0 B)")
                else:
                    flag = "" if (r["in_band"] if g else r["in_ref_spread"]) else " **x**"
                    cells.append(f"{r['ratio']:.3f} [{r['ref_spread']:.3f}]{flag}")
            lines.append(f"| {human(size)} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["### Verdicts", "", "| -G / op | sizes | median ratio | min-max | outside 0.97-1.03 | "
              "outside ref spread | holds |", "|---|---|---|---|---|---|---|"]
    for k, v in summary.items():
        lines.append(f"| {k} | {v['sizes']} | {v['median_ratio']:.3f} | {v['min_ratio']:.3f}-{v['max_ratio']:.3f} | "
                     f"{', '.join(human(s) for s in v['outside_band']) or '-'} | "
                     f"{', '.join(human(s) for s in v['outside_ref_spread']) or '-'} | {v['holds']} |")
    lines += ["", "NCCL call per op (comm-bench records' extra.nccl_api): " +
              ", ".join(f"{op}: {a}" for op, a in api.items())]
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: nccl_tests_compare.py OUTDIR", file=sys.stderr)
        return 2
    rows, api = compare(argv[1])
    if not rows:
        print(f"nothing to compare in {argv[1]}", file=sys.stderr)
        return 1
    summary = verdicts(rows)
    with open(os.path.join(argv[1], "compare.json"), "w") as f:
        json.dump({"rows": rows, "verdicts": summary, "nccl_api": api}, f, indent=1)
    with open(os.path.join(argv[1], "compare.csv"), "w", newline="") as f:  # every round's time, both tools
        w = csv.writer(f)
        w.writerow(["op", "graph", "size", "nccl_tests_size", "ratio", "ref_spread", "comm_bench_us", "nccl_tests_us"])
        for r in rows:
            w.writerow([r["op"], r["graph"], r["size"], r["ref_printed_size"],
                        "" if r["ratio"] is None else f"{r['ratio']:.4f}",
                        "" if r["ref_spread"] is None else f"{r['ref_spread']:.4f}",
                        " ".join(f"{x:g}" for x in r["cb_us"]), " ".join(f"{x:g}" for x in r["ref_us"])])
    print(markdown(rows, summary, api))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
