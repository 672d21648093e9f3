"""`comm-bench list`: the transports, their ops and patterns, and whether each runs here."""
from __future__ import annotations

import json

import click

from .. import registry


def transport_table() -> list:
    rows = []
    for name, cls in registry.transports().items():
        ok, why = cls.probe()
        rows.append({"transport": name, "available": ok, "why": why, "description": cls.description,
                     "ops": list(cls.ops), "patterns": list(cls.patterns), "modes": list(cls.modes),
                     "options": [o.flag for o in cls.options]})
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
