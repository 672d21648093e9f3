"""`comm-bench check`: run the quick collective test; when it is below expectation,
localize with pairwise-concurrent rounds and a confirm phase on the same ranks, then
print validate's report (comm_bench/run/check.py)."""
from __future__ import annotations

import os
import sys

import click

from .. import ops as ops_mod
from .. import registry
from ..errors import UsageError
from ..sizes import size_range
from ..run.sweep import SweepConfig
from . import run_options
from .run_options import EXIT_STATUS, env
from .sweep import launch, output_or_redop


def _checkable(cls, op="all_reduce") -> bool:
    """A transport check can run: the collective and sendrecv (pair rounds)."""
    return "collective" in cls.patterns and "sendrecv" in cls.ops and op in cls.ops


def _available_here(transport, op):
    """TransportUnavailable naming the transports check could use here instead (`-t gloo` on
    a machine without GPUs), when -t's cannot run."""
    ok, why = registry.get(transport).probe()
    if ok:
        return
    from ..errors import TransportUnavailable
    others = [name for name, cls in registry.transports().items()
              if name != transport and _checkable(cls, op) and cls.probe()[0]]
    hint = f"; try -t {others[0]}" + (f" (available here: {', '.join(others)})" if len(others) > 1 else "") \
        if others else ""
    raise TransportUnavailable(f"transport '{transport}' is not available here: {why}{hint}")


@click.command(context_settings={"show_default": True},
               help="Collective first, then localize: which link, host or GPU holds it back.\n\n" + EXIT_STATUS)
@click.option("-t", "--transport", default="nccl", envvar=env("transport"),
              help="A transport with a collective and sendrecv: "
                   f"{', '.join(n for n, c in registry.transports().items() if _checkable(c))}.")
@click.option("--op", "op_name", default="all_reduce", envvar=env("check_op"), help="The collective.")
@run_options.sizes(minbytes="1M", maxbytes="4M", iters=10, warmup=2,
                   maxbytes_help="Largest collective size; the pairs run at this size.")
@run_options.data()
@click.option("--expect-busbw", type=float, default=None, envvar=env("expect_busbw"),
              help="The collective's expected busbw in GB/s [default: from the links' rates and the rules].")
@click.option("--localize", type=click.Choice(["auto", "always", "never"]), default="auto",
              envvar=env("localize"), help="auto: pair rounds only when the collective is below expectation.")
@click.option("--rules", default=None, type=click.Path(dir_okay=False), envvar="COMM_BENCH_RULES",
              help="validate rules (docs/validate-rules.md).")
@click.option("--json", "as_json", is_flag=True, help="Print validate's report as JSON.")
@run_options.launch(output="check.json", numbered="check.1.json, ...", resume=False)
@run_options.transport_options(accepts=_checkable)
def check(transport, op_name, minbytes, maxbytes, stepfactor, iters, warmup, check, dtype, redop, root,
          expect_busbw, localize, rules, as_json, nprocs, output, force, timeout, addr, oversubscribe,
          progress, wide, confirm, **transport_options):
    from ..run.check import CheckRun
    cls = registry.get(transport)
    output, redop = output_or_redop(output, redop, default="check.json")
    check = run_options.checked_data(check)
    if op_name == "sendrecv" or not ops_mod.get(op_name).collective:
        raise UsageError(f"--op {op_name} is not a collective: give one such as all_reduce or all_gather")
    if not _checkable(cls, op_name):
        raise UsageError(f"check needs a transport with the collective '{op_name}' and sendrecv: "
                         f"'{transport}' has {', '.join(cls.ops)} (try -t nccl, gloo or mpi)")
    if expect_busbw is not None and not 0 < expect_busbw < float("inf"):
        raise UsageError(f"--expect-busbw must be a number of GB/s above 0 (got {expect_busbw})")
    options = run_options.own_options(transport, transport_options)
    _available_here(transport, op_name)
    cfg = SweepConfig(transport=transport, ops=[op_name, "sendrecv"], sizes=size_range(minbytes, maxbytes, stepfactor),
                      iters=iters, warmup=warmup, check=check, dtype=ops_mod.canonical_dtype(dtype), redop=redop,
                      root=root, pattern="pairwise-concurrent", timeout=timeout, output=output,
                      addr=addr, progress=progress, wide=wide, force=force, oversubscribe=oversubscribe, confirm=confirm,
                      rules=rules, runner=CheckRun, expect_busbw=expect_busbw, localize=localize,
                      options=options)
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
        from ..views.table import prose
        click.echo(to_json(rep) if as_json else prose(format_text(rep)))
        return exit_code(rep) or code

    # launch runs report after the ranks (here or on a launcher's rank 0), then the results line:
    # on stderr with --json, so that stdout ends with the report
    sys.exit(launch(cfg, nprocs, rank0_done=report, say_to=sys.stderr if as_json else None))
