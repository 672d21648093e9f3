"""`comm-bench list`: the transports, their ops and patterns, and whether each runs here."""
from __future__ import annotations

import json

import click

from .. import registry


def not_run(cls) -> list:
    """Each (op, pattern, mode) the transport declares but does not run, with why
    (Transport.supports: the same answer the sweep gives when it waives one)."""
    out = []
    for pattern in cls.patterns:
        for mode in cls.modes:
            for op in cls.ops:
                why = cls.supports(op, pattern, mode)
                if why:
                    out.append({"op": op, "pattern": pattern, "mode": mode, "why": why})
    return out


def buffer_kinds(cls) -> list:
    """The --buffer kinds a transport takes, each with whether it works here and why not."""
    if not any(o.flag == "--buffer" for o in cls.options):
        return []
    from ..transports._gpu_buffers import buffer_kinds as kinds

    return [{"buffer": k, "available": ok, "why": why} for k, ok, why in kinds()]


def transport_table() -> list:
    rows = []
    for name, cls in registry.transports().items():
        ok, why = cls.probe()
        rows.append({"transport": name, "available": ok, "why": why, "description": cls.description,
                     "ops": list(cls.ops), "patterns": list(cls.patterns), "modes": list(cls.modes),
                     "options": [o.flag for o in cls.options], "not_run": not_run(cls),
                     "buffers": buffer_kinds(cls)})
    return rows


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_transports(as_json):
    """List transports with their ops, patterns and modes, available here or not (and why)."""
    rows = transport_table()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        state = "available" if r["available"] else f"not available: {r['why']}"
        click.echo(f"{r['transport']:<11} {state}")
        click.echo(f"{'':<11} {r['description']}")
        click.echo(f"{'':<11} ops: {', '.join(r['ops'])}")
        click.echo(f"{'':<11} patterns: {', '.join(r['patterns'])}; modes: {', '.join(r['modes'])}")
        if r["options"]:
            click.echo(f"{'':<11} options: {' '.join(r['options'])}")
        for line in runs_lines(r):
            click.echo(f"{'':<11} {line}")
        if r["buffers"]:
            here = [b["buffer"] for b in r["buffers"] if b["available"]]
            click.echo(f"{'':<11} --buffer: {', '.join(here)}" + "".join(
                f"; not {b['buffer']}: {b['why']}" for b in r["buffers"] if not b["available"]))


def runs_lines(r) -> list:
    """Where not every op runs with every pattern and mode: which ops each runs, grouped."""
    if not r["not_run"]:
        return []
    skipped = {(n["pattern"], n["mode"], n["op"]) for n in r["not_run"]}
    groups: dict = {}
    for pattern in r["patterns"]:
        for mode in r["modes"]:
            ops = tuple(op for op in r["ops"] if (pattern, mode, op) not in skipped)
            groups.setdefault(ops, []).append(f"{pattern} {mode}" if len(r["modes"]) > 1 else pattern)
    return [f"{', '.join(where)}: runs {', '.join(ops) or 'nothing'}" for ops, where in groups.items()]
