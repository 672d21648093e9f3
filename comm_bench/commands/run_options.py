"""The options `sweep` and `check` share, declared once: what a flag means, its help and its
environment variable are the same in both; only a default may differ (check's sizes)."""
from __future__ import annotations

import click

from .. import registry
from ..errors import EXIT_FAILED, EXIT_OK, EXIT_UNCONFIRMED, EXIT_USAGE, UsageError
from ..validate.confirm import DEFAULT_ALTERNATIONS
from .. import ops as ops_mod

# One text for help and README (README: "Exit codes").
EXIT_STATUS = (f"Exit status: {EXIT_OK} pass, {EXIT_FAILED} findings or a failed run, {EXIT_USAGE} bad input, "
               f"{EXIT_UNCONFIRMED} suspects left unconfirmed.")


def env(name):
    return f"COMM_BENCH_{name.upper()}"


def _apply(func, options):
    for option in reversed(options):
        func = option(func)
    return func


def sizes(minbytes="8", maxbytes="16M", iters=20, warmup=5, maxbytes_help="Largest size."):
    """-b -e -f -n -w -c (nccl-tests' letters), the data check on unless -c 0."""
    return lambda func: _apply(func, [
        click.option("-b", "--minbytes", default=minbytes, envvar=env("minbytes"),
                     help="Smallest size (K/M/G suffixes)."),
        click.option("-e", "--maxbytes", default=maxbytes, envvar=env("maxbytes"), help=maxbytes_help),
        click.option("-f", "--stepfactor", default="2", envvar=env("stepfactor"), help="Size multiplier."),
        click.option("-n", "--iters", default=iters, type=int, envvar=env("iters"),
                     help="Timed iterations per size."),
        click.option("-w", "--warmup_iters", "warmup", default=warmup, type=int, envvar=env("warmup_iters"),
                     help="Untimed iterations per size."),
        click.option("-c", "--check", default="1", is_flag=False, flag_value="1", envvar=env("check"),
                     help="Check the data, on unless -c 0 (as nccl-tests): after the timed iterations one "
                          "more, untimed, on fresh data is compared with the expected values; wrong values are "
                          "counted in #wrong and fail the run (exit 1). -c 0: not checked (#wrong N/A). "
                          "nccl-tests' -c N is taken as on (one checked iteration). The timed figures are the "
                          "same either way; the check adds wall time (README: 'The data check')."),
    ])


def data():
    """-d --redop -r: the element type, reduction and root."""
    return lambda func: _apply(func, [
        click.option("-d", "--dtype", default="float32", envvar=env("dtype"),
                     help="Element type: float32 float64 float16 bfloat16 int32 int64 int8 uint8; nccl-tests' "
                          "float, half, double are accepted."),
        click.option("--redop", default=None, type=click.Choice(ops_mod.REDOPS), envvar=env("redop"),
                     help="Reduction of all_reduce, reduce, reduce_scatter (nccl-tests' -o).  [default: sum]"),
        click.option("-r", "--root", default=0, type=int, envvar=env("root"),
                     help="Root rank of broadcast and reduce (nccl-tests' -r)."),
    ])


def checked_data(check) -> bool:
    """-c's value: 0 off, any other count on (nccl-tests' -c N)."""
    if not str(check).strip().isdigit():
        raise UsageError(f"-c/--check takes 0 (off) or 1 (on) (got '{check}')")
    return int(check) > 0


def launch(output="results.json", numbered="results.1.json, results.2.json, ...", resume=True):
    """Ranks, the results file and the run's life: --nprocs -o --force --timeout --addr ..."""
    return lambda func: _apply(func, [
        click.option("--nprocs", "-N", default=None, type=int, envvar=env("nprocs"),
                     help="Local ranks to spawn when no launcher (torchrun, mpirun, srun) started us "
                          "[default: 2; GPU transports: one per GPU]. Not nccl-tests' -N (run cycles)."),
        click.option("-o", "--output", default=output, envvar=env("output"),
                     help=f"Results JSON file. A comm-bench document already there is kept (unless --force"
                          f"{' or --resume' if resume else ''}): the run writes the next free numbered name ({numbered}) and says "
                          "so; its last line names the file. nccl-tests' -o is the reduction op: -o "
                          "sum|prod|max|min|avg is taken as --redop (a file of that name: -o ./sum)."),
        click.option("--force", is_flag=True, envvar=env("force"),
                     help="Replace -o, whatever it holds (an earlier run's document, or a file that is not one)."),
        click.option("--timeout", default=60.0, type=float, envvar=env("timeout"),
                     help="Seconds before a silent peer counts as dead. At start-up the ranks wait "
                          "as long as others keep arriving: the meeting fails only after --timeout "
                          "seconds with no new rank (a thousand ranks may take minutes to start); a wait "
                          "for rank 0's word goes on while rank 0 still writes records."),
        click.option("--addr", default=None, envvar=env("addr"),
                     help="Address peers reach this rank on (default: route towards the store host)."),
        click.option("--oversubscribe", is_flag=True, envvar=env("oversubscribe"),
                     help="Run even with more ranks, or larger buffers, than this host's cores and "
                          "memory hold."),
        click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal."),
        wide_option(),
        click.option("--confirm", default=DEFAULT_ALTERNATIONS, type=click.IntRange(0, 64), envvar=env("confirm"),
                     help="Pair patterns: re-measure the first pass's suspects this many times, each next to "
                          "known-good pairs (docs/validate-rules.md); costs nothing without suspects. 0: off, and "
                          "validate then exits 3 when suspects are left unconfirmed."),
    ])


def wide_option():
    """--wide: every table of a command in its full form (nccl-tests' columns, no 80-column fit)."""
    return click.option("--wide", is_flag=True, envvar=env("wide"),
                        help="Tables in their full form (nccl-tests' columns type, redop, root; the "
                             "busbw matrix up to 32 ranks), wider than 80 columns.")


def profile_option():
    """--profile NAME: the hardware profile (comm_bench/data/reference.yaml) report and
    validate hold the figures against ("% of expected for this hardware")."""
    return click.option("--profile", default=None, metavar="NAME", envvar=env("profile"),
                        help="Show the large-size figures as % of this hardware profile's (report "
                             "--reference lists them); default: the profile the topology matches, if any.")


def transport_options(accepts=lambda cls: True):
    """Every option of the transports this command accepts (--device, --qps, --streams, ...)."""
    def decorate(func):
        for opt, users in reversed(_options(accepts)):
            kwargs = dict(default=opt.default, envvar=env(opt.dest), show_default=opt.default is not None,
                          help=f"[{', '.join(users)}] {opt.help}")
            if opt.type is bool:
                kwargs.update(is_flag=True, default=bool(opt.default))
            else:
                kwargs["type"] = opt.type
            func = click.option(opt.flag, *opt.aliases, opt.dest, **kwargs)(func)
        return func
    return decorate


def _options(accepts):
    table = registry.transports()
    kept = [(opt, [u for u in users if accepts(table[u])]) for opt, users in registry.all_options()]
    return [(opt, users) for opt, users in kept if users]


def own_options(transport, given: dict) -> dict:
    """The options of -t's transport; one of another transport given on the command line
    (`-t tcp --qps 4`) is a mistake to say, not a setting to ignore (defaults and
    environment values are fine)."""
    ctx = click.get_current_context()
    mine = {o.dest for o in registry.get(transport).options}
    for opt, users in registry.all_options():
        if (opt.dest not in mine and opt.dest in given
                and ctx.get_parameter_source(opt.dest) == click.core.ParameterSource.COMMANDLINE):
            raise UsageError(f"{opt.flag} is an option of {', '.join(users)}, not of -t {transport}")
    return {k: v for k, v in given.items() if k in mine}
