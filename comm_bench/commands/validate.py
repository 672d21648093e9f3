"""`comm-bench validate`: flag bad links, ranks, devices and hosts in a results file."""
import os
import sys

import click


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="Rules file (YAML or JSON) merged over the defaults (docs/validate-rules.md).")
@click.option("--junit", default=None, type=click.Path(dir_okay=False), help="Also write a JUnit XML report.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--baseline", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_BASELINE",
              help="Results of an earlier run: a figure worse than there by more than --tolerance is a finding.")
@click.option("--tolerance", default=0.10, type=click.FloatRange(0, 10), show_default=True,
              help="Allowed relative regression against --baseline (0.10 = 10%).")
def validate(results, rules, junit, as_json, baseline, tolerance):
    """Check every link class against its expected minimum and its peers (and, with
    --baseline, every busbw and latency against an earlier run).

    Exit status: 0 pass, 1 findings, 2 bad input or nothing to check, 3 no findings but
    suspects left unconfirmed (the sweep ran with --confirm 0).
    """
    from ..results.document import load_measured as load_results
    from ..validate.checks import check, read, report as make_report
    from ..validate.finding_kinds import NothingToCheck, exit_code
    from ..validate.output import format_text, to_json, write_junit
    from ..validate.rules import load_rules
    rules = load_rules(rules)
    # a baseline compares records one by one: both documents are then read whole
    doc, pairs = (load_results(results), None) if baseline else read(results)
    base = load_results(baseline) if baseline else None
    try:
        report = check(doc, rules, pairs)
    except NothingToCheck:
        if base is None:
            raise
        report = make_report(doc, rules, [], {})     # the baseline alone is still a check
    lines = []
    if base is not None:
        from ..validate.baseline import apply
        lines.append(apply(report, doc, base, os.path.basename(baseline), tolerance, rules["min_size"]))
        if not report["checked"]["baseline"]["compared"]:
            from ..errors import UsageError
            raise UsageError(f"--baseline {baseline}: no op, mode and size in common with {results} "
                             f"(bandwidth sizes from {rules['min_size']} up)")
    if junit:
        write_junit(report, junit)
    click.echo(to_json(report) if as_json else "\n".join(lines + [format_text(report)]))
    sys.exit(exit_code(report))     # SystemExit passes through click and cli.main
