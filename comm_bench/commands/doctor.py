"""`comm-bench doctor`: what was built and what is present here, each absence with what to do."""
from __future__ import annotations

import json
import sys

import click

from ..doctor import all_checks
from ..errors import EXIT_FAILED, EXIT_OK
from ..views.table import fit


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(as_json):
    """Say which native parts were built and which libraries, devices and transports are present."""
    checks = all_checks()
    if as_json:
        click.echo(json.dumps(checks, indent=1))
    else:
        group = None
        for c in checks:
            if c["group"] != group:
                group = c["group"]
                click.echo(f"[{group}]")
            click.echo(fit(f"  {'ok ' if c['ok'] else 'no '} {c['name']}: {c['detail']}", indent=6))
    core_ok = next(c["ok"] for c in checks if c["name"].startswith("native _C"))
    sys.exit(EXIT_OK if core_ok else EXIT_FAILED)
