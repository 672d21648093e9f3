"""`comm-bench report --reference`: "is this number normal?" What healthy 8-GPU nodes and
InfiniBand links read at large sizes, each figure with its public source
(comm_bench/data/reference.yaml, the one place they are kept; docs/reference-figures.md)."""
from __future__ import annotations

import os

from .table import WIDTH, fit

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "reference.yaml")


def load() -> list:
    import yaml
    with open(PATH) as f:
        return yaml.safe_load(f)


def text(rows=None) -> str:
    rows = load() if rows is None else rows
    out = [fit("# What healthy hardware reads at large sizes (busbw of collectives of GBs; a link's "
               "one-way RDMA write bandwidth; a GPU's host copies), from public sources: a figure well "
               "below its row is "
               "worth a look. maintainer: NCCL's developers; vendor: a cloud's health-check figure; "
               "user: one measurement posted in a public issue.", "# "),
           f"#{'hardware':<34} {'op':<14} {'figure':<7} {'GB/s':>6} {'kind':>10}"]
    for r in rows:
        fig = {"busbw": "busbw", "bandwidth average": "bw avg"}.get(r["figure"], "copy bw")
        ops = r["op"] if len(r["op"]) <= 14 else r["op"].split(",")[0] + ",..."
        out.append(f" {r['hardware']:<34} {ops:<14} {fig:<7} {r['gbs']:>6g} {r['kind']:>10}")
        out.append(fit(f"     profile {r['profile']}; {r['op'] + ': ' if ops != r['op'] else ''}{r['note']}", 5))
        # a link longer than a line is left to --format json and docs/reference-figures.md
        url = r["url"] if len(r["url"]) <= WIDTH - 5 else "its link: --format json"
        out.append(fit(f"     source: {r['source']}, {url}", 5))
    return "\n".join(out)
