"""`comm-bench validate`: flag bad links, ranks, devices and hosts in a results file."""
import os
import sys

import click

from .run_options import profile_option


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="Rules file (YAML or JSON) merged over the defaults (docs/validate-rules.md).")
@click.option("--junit", default=None, type=click.Path(dir_okay=False),
              help="Also write a JUnit XML report (a test case per check and per host).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--baseline", multiple=True, type=click.Path(dir_okay=False), envvar="COMM_BENCH_BASELINE",
              help="Results of an earlier run: a figure worse than there by more than --tolerance is a finding. "
                   "Give it several times for repeats of the earlier run: their spread is then the noise.")
@click.option("--tolerance", default=0.10, type=click.FloatRange(0, 10), show_default=True,
              help="Allowed relative regression against --baseline (0.10 = 10%).")
@click.option("--drain-list", default=None, type=click.Path(dir_okay=False),
              help="Write one line per bad node: its host name, a TAB, the reason (empty for a clean run).")
@click.option("--slurm-drain", is_flag=True,
              help="Drain each bad node: scontrol update NodeName=N State=DRAIN Reason=...")
@click.option("--dry-run", is_flag=True, help="With --slurm-drain: print the scontrol commands, run none.")
@click.option("--prometheus", "prom_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the verdict as an OpenMetrics textfile (run time, pass, per-host ok).")
@click.option("--node-problem", default=None, metavar="HOST",
              help="Only HOST's verdict, as a Node Problem Detector custom plugin: one line, exit 0 ok, "
                   "1 problem, 2 unknown (docs/kubernetes.md).")
@profile_option()
def validate(results, rules, junit, as_json, baseline, tolerance, drain_list, slurm_drain, dry_run, prom_out,
             node_problem, profile):
    """Check every link class against its expected minimum and its peers (and, with
    --baseline, every busbw and latency against an earlier run).

    Several documents (validate *.json): each checked on its own, one verdict over all,
    each finding naming its document; every output (--junit, --drain-list, --baseline,
    --slurm-drain, --prometheus, --node-problem) says that verdict.

    Exit status: 0 pass, 1 findings, 2 bad input or nothing to check, 3 no findings but
    suspects left unconfirmed (the sweep ran with --confirm 0). With --slurm-drain: 2
    without scontrol, 1 when scontrol fails.
    """
    from ..errors import UsageError
    from ..validate import drain
    from ..results.document import load_measured as load_results
    from ..validate.checks import check, read, report as make_report
    from ..validate.finding_kinds import NothingToCheck, exit_code
    from ..validate.output import format_text, to_json, write_outputs
    from ..validate.rules import load_rules
    if dry_run and not slurm_drain:
        raise UsageError("--dry-run shows what --slurm-drain would run: give --slurm-drain too")
    if slurm_drain and not dry_run:
        drain.require_scontrol()        # before the work: a clean run must not pass without it
    rules = load_rules(rules)
    from ..views.expected import chosen
    chosen(profile)     # an unknown name is bad input, said before any work
    if len(results) > 1:
        from .validate_many import several
        sys.exit(several(results, rules, as_json, dict(
            baseline=baseline, tolerance=tolerance, junit=junit, drain_list=drain_list, slurm_drain=slurm_drain,
            dry_run=dry_run, prometheus=prom_out, node_problem=node_problem, profile=profile)))
    (results,) = results
    # a baseline compares records one by one: both documents are then read whole
    doc, pairs = (load_results(results), None) if baseline else read(results)
    base = [load_results(b) for b in baseline] or None
    try:
        report = check(doc, rules, pairs)
    except NothingToCheck:
        if base is None:
            raise
        report = make_report(doc, rules, [], {})     # the baseline alone is still a check
    lines = []
    if base is not None:
        from ..validate.baseline import apply
        names = ", ".join(os.path.basename(b) for b in baseline)
        lines.append(apply(report, doc, base, names, tolerance, rules["min_size"]))
        if not report["checked"]["baseline"]["compared"]:
            raise UsageError(f"--baseline {names}: no op, mode and size in common with {results} "
                             f"(bandwidth sizes from {rules['min_size']} up)")
    rows = write_outputs(report, doc, junit, drain_list, prom_out)
    if node_problem is not None:    # NPD reads one line and the exit code, nothing else
        from ..validate.npd import verdict
        code, line = verdict(rows, report, node_problem)
        click.echo(line)
        sys.exit(code)
    from .validate_many import left_out, with_left_out
    from ..views.table import prose
    from ..views import expected
    report["left_out"] = left_out(doc, pairs, report, rules)       # said on screen, not only in JSON
    report["expected"] = expected.compare(doc, profile)   # a streamed document: its collectives
    click.echo(to_json(report) if as_json else prose("\n".join(
        lines + [with_left_out(format_text(report), report["left_out"])] + expected.lines(report["expected"], "", profile))))
    if slurm_drain:     # the commands of a dry run are its output; the drained nodes a note
        drain.slurm_drain(rows, dry_run, echo=lambda s: click.echo(s, err=as_json or not dry_run))
    sys.exit(exit_code(report))     # SystemExit passes through click and cli.main
