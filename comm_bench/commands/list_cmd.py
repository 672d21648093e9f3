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


def sweep_patterns(cls) -> list:
    """Every --pattern sweep accepts for the transport (the large-cluster schedules run as
    the pairwise-concurrent rounds they are made of)."""
    from ..schedule import PATTERNS, runs_as
    return [p for p in PATTERNS if runs_as(p) in cls.patterns]


def transport_table() -> list:
    rows = []
    for name, cls in registry.transports().items():
        ok, why = cls.probe()
        rows.append({"transport": name, "available": ok, "why": why, "description": cls.description,
                     "ops": list(cls.ops), "patterns": sweep_patterns(cls), "modes": list(cls.modes),
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
    reasons: dict = {}      # each reason once, with the transports it stops
    for r in rows:
        if not r["available"]:
            reasons.setdefault(r["why"], []).append(r["transport"])
    numbers = {why: i for i, why in enumerate(reasons, 1)}
    missing: dict = {}      # --buffer kinds not here: why -> (kind, transports)
    for r in rows:
        state = "available" if r["available"] else f"not available: [{numbers[r['why']]}] below"
        lines = [f"{r['transport']:<11} {state}", r["description"], f"ops: {', '.join(r['ops'])}",
                 f"patterns: {', '.join(r['patterns'])}; modes: {', '.join(r['modes'])}"]
        if r["options"]:
            lines.append(f"options: {' '.join(r['options'])}")
        lines += runs_lines(r)
        if r["buffers"]:
            here = [b["buffer"] for b in r["buffers"] if b["available"]]
            gone = [b for b in r["buffers"] if not b["available"]]
            for b in gone:
                missing.setdefault((b["buffer"], b["why"]), []).append(r["transport"])
            lines.append(f"--buffer: {', '.join(here)}" + (" (other kinds: below)" if gone else ""))
        click.echo(_fit(lines[0]))
        for line in lines[1:]:
            click.echo(_fit(f"{'':<11} {line}"))
    if reasons:
        click.echo("not available here:")
        for why, names in reasons.items():
            click.echo(_fit(f"[{numbers[why]}] {', '.join(names)}: {why}", 4))
    if missing:
        click.echo("--buffer kinds not available here:")
        for (kind, why), names in missing.items():
            click.echo(_fit(f"  {kind} ({', '.join(names)}): {why}", 4))


def _fit(line, indent=12):
    from ..views.table import fit
    return fit(line, indent)


def runs_lines(r) -> list:
    """Where not every op runs with every pattern and mode: which ops each runs, grouped."""
    from ..schedule import runs_as
    if not r["not_run"]:
        return []
    skipped = {(n["pattern"], n["mode"], n["op"]) for n in r["not_run"]}
    groups: dict = {}
    for pattern in r["patterns"]:
        by_mode = {mode: tuple(op for op in r["ops"] if (runs_as(pattern), mode, op) not in skipped)
                   for mode in r["modes"]}
        if len(set(by_mode.values())) == 1:     # the same in every mode: the pattern alone
            groups.setdefault(next(iter(by_mode.values())), []).append(pattern)
            continue
        for mode, ops in by_mode.items():
            groups.setdefault(ops, []).append(f"{pattern} {mode}")
    return [f"{', '.join(where)}: runs {', '.join(ops) or 'nothing'}" for ops, where in groups.items()]
