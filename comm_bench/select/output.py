"""Printing a selection: the ranked table, the recommendation, --explain, --show-model, --json."""
from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table

from ..views.table import prose
from .layouts import LAYOUTS
from .linkmodel import human_s

MAX_ROWS = 12
CANDIDATE_KEYS = ("layout", "kind", "framework", "feasible", "reason", "model_states_gb", "activations_gb", "memory_gb",
                  "comm_s", "exposed_comm_s", "step_s", "efficiency", "tokens_per_s", "samples_per_s", "tp", "cp", "pp",
                  "dp", "ep", "etp", "a2a_overlap", "reshard", "microbatches", "bubble", "compute_s", "buffers_gb", "comm_source", "overlap", "overlap_source",
                  "config", "micro_batch", "virtual_stages", "recompute", "distributed_optimizer", "sequence_parallel",
                  "global_batch", "collectives", "pp_split", "pp_split_how", "peak_rank")
LINK_KEYS = ("class", "scope", "op", "n", "alpha_us", "beta_gbs", "max_rel_err", "source", "transport", "sizes",
             "points", "from", "note")


def _console():
    """A terminal: its width (COLUMNS), the tables fit it. A file or a pipe: nothing is cut
    or wrapped (rich would assume 80 columns and shorten cells to "fra…")."""
    import os
    import sys
    if sys.stdout.isatty():     # no styles: stdout escapes terminal codes (printable.py)
        return Console(highlight=False, soft_wrap=False, color_system=None)
    columns = os.environ.get("COLUMNS", "")        # a width asked for (COLUMNS=100 comm-bench ... | less)
    return Console(highlight=False, soft_wrap=False, width=int(columns) if columns.isdigit() else 100_000,
                   force_terminal=False)


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def link_table(rows):
    t = Table(title="link model: t(S) = alpha + S/beta per link step\n(beta = bus bandwidth, 1 GB = 1e9 B)",
              box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    for col in ("class", "scope", "op", "n", "alpha(us)", "beta(GB/s)", "fit err", "source", "from"):
        t.add_column(col, justify="right" if col in ("n", "alpha(us)", "beta(GB/s)", "fit err") else "left")
    for r in rows:
        t.add_row(str(r["class"]), r["scope"], r["op"], str(r.get("n") or "-"), _f(r["alpha_us"], ".3g"),
                  _f(r["beta_gbs"], ".4g"), _f(r["max_rel_err"], ".1%"), r["source"],
                  r.get("from") or r.get("note") or "")
    return t


def _rate(c, w):
    v = c["tokens_per_s"] if w["kind"] == "transformer" else c["samples_per_s"]
    return "-" if v is None else f"{v:,.0f} {'tokens' if w['kind'] == 'transformer' else 'samples'}/s"


def candidate_table(res):
    """The candidates, the recommended one first and marked *, then by efficiency; all
    data-parallel layouts and the best model-parallel ones up to MAX_ROWS."""
    w, rec = res["workload"], res["recommendation"]["layout"]
    t = Table(title=f"candidates: {w['name']} ({w['params'] / 1e9:.3g} B params, {w['precision']}), "
                    f"{res['cluster']['nodes']} x {res['cluster']['gpus_per_node']} GPUs")
    # 80 columns: a column is one space from the next, no frame
    t.box, t.pad_edge, t.show_edge, t.collapse_padding = box.SIMPLE_HEAD, False, False, True
    per = "tokens/s" if w["kind"] == "transformer" else "samples/s"
    for col in ("", "layout", "framework", "GB/GPU", "step", "exposed", "eff.", per, "fits"):
        t.add_column(col, justify="left" if col in ("", "layout", "framework", "fits") else "right",
                     no_wrap=col != "framework", min_width=11 if col == "framework" else None)
    mp = [c for c in res["candidates"] if LAYOUTS[c["kind"]].model_parallel]      # sorted best first
    shown = [c for c in res["candidates"] if not LAYOUTS[c["kind"]].model_parallel or c["layout"] == rec]
    shown += [c for c in mp if c["layout"] != rec][: max(0, MAX_ROWS - len(shown))]
    shown.sort(key=lambda c: (c["layout"] != rec, not c["feasible"], -(c["efficiency"] or 0)))
    for c in shown:
        t.add_row("*" if c["layout"] == rec else "", c["layout"], c["framework"], _f(c["memory_gb"], ".1f"),
                  human_s(c["step_s"]), human_s(c["exposed_comm_s"]), _f(c["efficiency"], ".1%"),
                  _f(c["tokens_per_s"] if w["kind"] == "transformer" else c["samples_per_s"], ",.0f"),
                  "yes" if c["feasible"] else "no")
    return t, len(res["candidates"]) - len(shown), [f"{c['layout']} does not fit: {c['reason']}"
                                                    for c in shown if not c["feasible"]]


def print_text(res, explain=False):
    """The answer first (layout, flags, why, what it assumed), then the tables behind it."""
    con = _console()

    def say(text):      # prose: 80 columns on a terminal, whole lines into a file or a pipe
        con.print(prose(text), markup=False, soft_wrap=True)

    rec, w = res["recommendation"], res["workload"]
    best = next((c for c in res["candidates"] if c["layout"] == rec["layout"]), None)
    if best is not None:
        say(f"recommendation: {rec['layout']} with {rec['framework']}: {_rate(best, w)}, step "
            f"{human_s(best['step_s'])}, efficiency {best['efficiency']:.1%}, {best['memory_gb']:.1f} GB/GPU")
        for line in rec["config"]:
            say(f"  set: {line}")
        for line in rec["why"]:
            say(f"  why: {line}")
    else:
        con.print("recommendation: none")
        for line in rec["rationale"]:
            say(f"  why: {line}")
    if rec.get("assumed"):
        con.print("assumed (defaults this answer rests on; the flag that changes each):")
        for line in rec["assumed"]:
            say(f"  - {line}")
    if res["min_efficiency"] is not None:
        say(f"--min-efficiency {res['min_efficiency']:g}: "
            + ("met" if res["meets_min_efficiency"] else "no feasible layout meets it"))
    t, hidden, unfit = candidate_table(res)
    con.print(t)
    for line in unfit:
        say(f"  {line}")
    if hidden:
        con.print(f"({hidden} more tp x cp x pp x dp x ep layouts in --json)")
    if best is not None:
        con.print("details:")
        for line in rec["rationale"][len(rec["why"]) + len(rec["config"]):]:
            say(f"  - {line}")
    con.print(link_table(res["link_model"]))
    if explain:
        con.print("rules path:")
        for line in res["explain"]:
            say(f"  {line}")


def to_json(res):
    out = {"recommendation": res["recommendation"],
           "candidates": [{k: c.get(k) for k in CANDIDATE_KEYS} for c in res["candidates"]],
           "link_model": [{k: r.get(k) for k in LINK_KEYS} for r in res["link_model"]],
           "cluster": res["cluster"], "workload": res["workload"], "facts": res["facts"],
           "explain": res["explain"], "min_efficiency": res["min_efficiency"],
           "meets_min_efficiency": res["meets_min_efficiency"], "overlap": res["overlap"]}
    return json.dumps(out, indent=1, default=str)


def print_model(rows, cluster, as_json=False):
    if as_json:
        print(json.dumps({"link_model": [{k: r.get(k) for k in LINK_KEYS} for r in rows], "cluster": cluster},
                         indent=1, default=str))
        return
    _console().print(link_table(rows))
