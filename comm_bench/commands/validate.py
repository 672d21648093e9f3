"""`comm-bench validate`: flag bad links, ranks, devices and hosts in a results file."""
import json
import sys

import click


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="Rules file (YAML or JSON) merged over the defaults (docs/validate-rules.md).")
@click.option("--junit", default=None, type=click.Path(dir_okay=False), help="Also write a JUnit XML report.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def validate(results, rules, junit, as_json):
    """Check every link class against its expected minimum and its peers.

    Exit status: 0 pass, 1 findings, 2 bad input.
    """
    from ..validate import format_text, run, write_junit
    report = run(results, rules)
    if junit:
        write_junit(report, junit)
    click.echo(json.dumps(report, indent=1) if as_json else format_text(report))
    if report["findings"]:
        sys.exit(1)     # findings: exit 1 (SystemExit passes through click and cli.main)
