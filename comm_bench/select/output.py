"""Printing a selection: the ranked table, the recommendation, --explain, --show-model, --json."""
from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

MAX_ROWS = 12
CANDIDATE_KEYS = ("layout", "kind", "framework", "feasible", "reason", "model_states_gb", "activations_gb", "memory_gb",
                  "comm_s", "exposed_comm_s", "step_s", "efficiency", "tokens_per_s", "samples_per_s", "tp", "pp",
                  "dp", "microbatches", "bubble", "compute_s", "buffers_gb", "comm_source", "overlap", "overlap_source", "collectives")
LINK_KEYS = ("class", "scope", "op", "n", "alpha_us", "beta_gbs", "max_rel_err", "source", "transport", "sizes",
             "points", "from", "note")


def _console():
    return Console(width=160, highlight=False, soft_wrap=False)


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def link_table(rows):
    t = Table(title="link model: t(S) = alpha + S/beta per link step (beta = bus bandwidth, 1 GB = 1e9 B)")
    for col in ("class", "scope", "op", "n", "alpha (us)", "beta (GB/s)", "max rel err", "source", "from"):
        t.add_column(col, justify="right" if col in ("n", "alpha (us)", "beta (GB/s)", "max rel err") else "left")
    for r in rows:
        t.add_row(str(r["class"]), r["scope"], r["op"], str(r.get("n") or "-"), _f(r["alpha_us"], ".3g"),
                  _f(r["beta_gbs"], ".4g"), _f(r["max_rel_err"], ".1%"), r["source"],
                  r.get("from") or r.get("note") or "")
    return t


def candidate_table(res):
    w = res["workload"]
    per = "tokens/s" if w["kind"] == "transformer" else "samples/s"
    t = Table(title=f"candidates: {w['name']} ({w['params'] / 1e9:.3g} B params, {w['precision']}), "
                    f"{res['cluster']['nodes']} x {res['cluster']['gpus_per_node']} GPUs, "
                    f"global batch {res['candidates'][0].get('global_batch') or '-'}")
    for col in ("layout", "framework", "mem/GPU GB", "comm/step s", "exposed s", "step s", "efficiency", per,
                "feasible", "comm from"):
        t.add_column(col, justify="left" if col in ("layout", "framework", "feasible", "comm from") else "right")
    shown = [c for c in res["candidates"] if c["kind"] != "megatron"]
    shown += [c for c in res["candidates"] if c["kind"] == "megatron"][: max(0, MAX_ROWS - len(shown))]
    shown.sort(key=lambda c: (not c["feasible"], -(c["efficiency"] or 0)))
    for c in shown:
        rate = c["tokens_per_s"] if w["kind"] == "transformer" else c["samples_per_s"]
        t.add_row(c["layout"], c["framework"], _f(c["memory_gb"], ".1f"), _f(c["comm_s"], ".4g"),
                  _f(c["exposed_comm_s"], ".4g"), _f(c["step_s"], ".4g"), _f(c["efficiency"], ".1%"),
                  _f(rate, ",.0f"), "yes" if c["feasible"] else f"no: {c['reason']}", c["comm_source"] or "-")
    hidden = len(res["candidates"]) - len(shown)
    return t, hidden


def print_text(res, explain=False):
    con = _console()
    con.print(link_table(res["link_model"]))
    t, hidden = candidate_table(res)
    con.print(t)
    if hidden:
        con.print(f"({hidden} more tp x pp x dp layouts in --json)")
    rec = res["recommendation"]
    if rec["layout"]:
        con.print(f"recommendation: {rec['layout']} with {rec['framework']}")
    else:
        con.print("recommendation: none")
    for line in rec["rationale"]:
        con.print(f"  - {line}", markup=False, soft_wrap=True)
    if res["min_efficiency"] is not None:
        con.print(f"--min-efficiency {res['min_efficiency']:g}: "
                  + ("met" if res["meets_min_efficiency"] else "no feasible layout meets it"))
    if explain:
        con.print("rules path:")
        for line in res["explain"]:
            con.print(f"  {line}", markup=False)


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
