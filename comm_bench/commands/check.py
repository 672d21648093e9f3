"""`comm-bench check`: run the quick collective test; when it is below expectation,
localize with pairwise-concurrent rounds and a confirm phase on the same ranks, then
print validate's report (comm_bench/run/check.py)."""
from __future__ import annotations

import os
import sys

import click

from .. import registry
from ..errors import UsageError
from ..validate.confirm import DEFAULT_ALTERNATIONS
from ..sizes import size_range
from ..run.sweep import SweepConfig
from .sweep import _env, _transport_options, launch


@click.command(context_settings={"show_default": True})
@click.option("-t", "--transport", default="nccl", envvar=_env("transport"),
              help="A transport with a collective and sendrecv (nccl, torch-nccl, gloo, mpi).")
@click.option("--op", "op_name", default="all_reduce", envvar=_env("check_op"), help="The collective.")
@click.option("-b", "--minbytes", default="1M", envvar=_env("minbytes"), help="Smallest collective size.")
@click.option("-e", "--maxbytes", default="4M", envvar=_env("maxbytes"),
              help="Largest collective size; the pairs run at this size.")
@click.option("-f", "--stepfactor", default="2", envvar=_env("stepfactor"), help="Size multiplier.")
@click.option("-n", "--iters", default=10, type=int, envvar=_env("iters"), help="Timed iterations per size.")
@click.option("-w", "--warmup_iters", "warmup", default=2, type=int, envvar=_env("warmup_iters"),
              help="Untimed iterations per size.")
@click.option("--expect-busbw", type=float, default=None, envvar=_env("expect_busbw"),
              help="The collective's expected busbw in GB/s [default: from the links' rates and the rules].")
@click.option("--localize", type=click.Choice(["auto", "always", "never"]), default="auto",
              envvar=_env("localize"), help="auto: pair rounds only when the collective is below expectation.")
@click.option("--confirm", default=DEFAULT_ALTERNATIONS, type=click.IntRange(0, 64), envvar=_env("confirm"),
              help="Re-measure each suspect this many times next to known-good pairs (0: off).")
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="validate rules (docs/validate-rules.md).")
@click.option("--nprocs", "-N", default=None, type=int, envvar=_env("nprocs"),
              help="Local ranks to spawn when no launcher (torchrun, mpirun, srun) started us.")
@click.option("-o", "--output", default="check.json", envvar=_env("output"),
              help="Results JSON file. A comm-bench document already there is kept (unless --force): the run "
                   "writes the next free numbered name (check.1.json, ...) and says so; its last line names the file.")
@click.option("--force", is_flag=True, envvar=_env("force"),
              help="Replace -o, whatever it holds (an earlier run's document, or a file that is not one).")
@click.option("--timeout", default=60.0, type=float, envvar=_env("timeout"),
              help="Seconds before a silent peer counts as dead.")
@click.option("--addr", default=None, envvar=_env("addr"), help="Address peers reach this rank on.")
@click.option("--oversubscribe", is_flag=True, envvar=_env("oversubscribe"),
              help="Run even with more ranks than this host's cores hold.")
@click.option("--json", "as_json", is_flag=True, help="Print validate's report as JSON.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
@_transport_options
def check(transport, op_name, minbytes, maxbytes, stepfactor, iters, warmup, expect_busbw, localize, confirm,
          rules, nprocs, output, force, timeout, addr, oversubscribe, as_json, progress, **transport_options):
    """Collective first, then localize: which link, host or GPU holds it back.

    Exit status: 0 no findings, 1 findings or a failed run, 2 bad input.
    """
    from ..run.check import CheckRun
    cls = registry.get(transport)
    from ..ops import get as get_op
    if op_name == "sendrecv" or not get_op(op_name).collective:
        raise UsageError(f"--op {op_name} is not a collective: give one such as all_reduce or all_gather")
    if "collective" not in cls.patterns or "sendrecv" not in cls.ops or op_name not in cls.ops:
        raise UsageError(f"check needs a transport with the collective '{op_name}' and sendrecv: "
                         f"'{transport}' has {', '.join(cls.ops)} (try -t nccl, gloo or mpi)")
    if expect_busbw is not None and not 0 < expect_busbw < float("inf"):
        raise UsageError(f"--expect-busbw must be a number of GB/s above 0 (got {expect_busbw})")
    mine = {o.dest for o in cls.options}
    cfg = SweepConfig(transport=transport, ops=[op_name, "sendrecv"], sizes=size_range(minbytes, maxbytes, stepfactor),
                      iters=iters, warmup=warmup, pattern="pairwise-concurrent", timeout=timeout, output=output,
                      addr=addr, progress=progress, force=force, oversubscribe=oversubscribe, confirm=confirm,
                      rules=rules, runner=CheckRun, expect_busbw=expect_busbw, localize=localize,
                      options={k: v for k, v in transport_options.items() if k in mine})
    if rules:
        os.environ["COMM_BENCH_RULES"] = rules      # the spawned ranks read the same rules

    def report(code):
        from ..validate.checks import run
        from ..validate.finding_kinds import NothingToCheck, exit_code
        from ..validate.output import format_text, to_json
        try:
            rep = run(cfg.output, rules)     # the file written: -o or the numbered name taken
        except NothingToCheck:
            if expect_busbw is None:
                raise
            # the collective was held against --expect-busbw above; the rules know no minimum for it
            click.echo("no findings (the collective met --expect-busbw; nothing else was measured)")
            return code
        click.echo(to_json(rep) if as_json else format_text(rep))
        return exit_code(rep) or code

    # launch runs report after the ranks (here or on a launcher's rank 0), then the results line:
    # on stderr with --json, so that stdout ends with the report
    sys.exit(launch(cfg, nprocs, rank0_done=report, say_to=sys.stderr if as_json else None))
