"""`comm-bench sweep`: measure one transport over a range of sizes."""
from __future__ import annotations

import os
import sys

import click

from .. import ops as ops_mod
from .. import registry
from ..errors import CommBenchError, Interrupted, UsageError
from ..run.launch import detect
from ..run.limits import check_host
from ..validate.confirm import DEFAULT_ALTERNATIONS
from ..schedule import COST, DEFAULT_K
from ..sizes import size_range
from ..run.spawn import own_document, spawn_local
from ..run.sweep import SweepConfig, check_resumable, local_run, resolve, results_line, run_rank


def _env(name):
    return f"COMM_BENCH_{name.upper()}"


def _transport_options(func):
    """Add every transport's own options (--device, --qps, --streams, ...)."""
    for opt, users in reversed(registry.all_options()):
        kwargs = dict(default=opt.default, envvar=_env(opt.dest), show_default=opt.default is not None,
                      help=f"[{', '.join(users)}] {opt.help}")
        if opt.type is bool:
            kwargs.update(is_flag=True, default=bool(opt.default))
        else:
            kwargs["type"] = opt.type
        func = click.option(opt.flag, *opt.aliases, opt.dest, **kwargs)(func)
    return func


def _refuse_foreign_options(ctx, transport, mine):
    """An option of another transport given on the command line (`-t tcp --qps 4`) is a
    mistake to say, not a setting to ignore (defaults and environment values are fine)."""
    for opt, users in registry.all_options():
        if opt.dest not in mine and ctx.get_parameter_source(opt.dest) == click.core.ParameterSource.COMMANDLINE:
            raise UsageError(f"{opt.flag} is an option of {', '.join(users)}, not of -t {transport}")


@click.command(context_settings={"show_default": True})
@click.option("-t", "--transport", default="tcp", envvar=_env("transport"),
              help=f"One of: {', '.join(registry.transports())} (see `comm-bench list`). "
                   "Not nccl-tests' -t (threads per process).")
@click.option("--op", "op_names", default=None, envvar=_env("op"),
              help="Op(s), comma separated, or 'all'. Default: the transport's first op.")
@click.option("-b", "--minbytes", default="8", envvar=_env("minbytes"), help="Smallest size (K/M/G suffixes).")
@click.option("-e", "--maxbytes", default="16M", envvar=_env("maxbytes"), help="Largest size.")
@click.option("-f", "--stepfactor", default="2", envvar=_env("stepfactor"), help="Size multiplier.")
@click.option("-n", "--iters", default=20, type=int, envvar=_env("iters"), help="Timed iterations per size.")
@click.option("-w", "--warmup_iters", "warmup", default=5, type=int, envvar=_env("warmup_iters"),
              help="Untimed iterations per size.")
@click.option("-c", "--check", default="1", is_flag=False, flag_value="1", envvar=_env("check"),
              help="Check the data, on unless -c 0 (as nccl-tests): after the timed iterations one "
                   "more, untimed, on fresh data is compared with the expected values; wrong values are "
                   "counted in #wrong and fail the run (exit 1). -c 0: not checked (#wrong N/A). "
                   "nccl-tests' -c N is taken as on (one checked iteration). The timed figures are the "
                   "same either way; the check adds wall time (README: 'The data check').")
@click.option("-d", "--dtype", default="float32", envvar=_env("dtype"),
              help="Element type: float32 float64 float16 bfloat16 int32 int64 int8 uint8; nccl-tests' "
                   "float, half, double are accepted.")
@click.option("--redop", default=None, type=click.Choice(ops_mod.REDOPS), envvar=_env("redop"),
              help="Reduction of all_reduce, reduce, reduce_scatter (nccl-tests' -o).  [default: sum]")
@click.option("-r", "--root", default=0, type=int, envvar=_env("root"),
              help="Root rank of broadcast and reduce (nccl-tests' -r).")
@click.option("--mode", default="bw", type=click.Choice(["bw", "lat"]), envvar=_env("mode"),
              help="bw: streaming bandwidth; lat: ping-pong latency (point-to-point ops).")
@click.option("--pattern", default=None, envvar=_env("pattern"),
              help="collective | pair | " + " | ".join(f"{p} ({c})" for p, c in COST.items()) +
                   ". Default: collective where the op is one, else pair (2 ranks) or pairwise.")
@click.option("--matchings", default=DEFAULT_K, type=click.IntRange(1, 4096), envvar=_env("matchings"),
              help="matchings/topology patterns: k random perfect matchings (per switch distance).")
@click.option("--seed", default=0, type=int, envvar=_env("seed"), help="Seed of the random matchings.")
@click.option("--groups", default=None, type=click.Path(dir_okay=False), envvar=_env("groups"),
              help="File of 'HOST LEAF [POD]' lines (where each host is cabled): the topology pattern "
                   "pairs by it; with any pair pattern validate and heatmap place findings and cells "
                   "on switches (a bad switch uplink is named).")
@click.option("--nprocs", "-N", default=None, type=int, envvar=_env("nprocs"),
              help="Local ranks to spawn when no launcher (torchrun, mpirun, srun) started us "
                   "[default: 2; GPU transports: one per GPU]. Not nccl-tests' -N (run cycles).")
@click.option("-o", "--output", default="results.json", envvar=_env("output"),
              help="Results JSON file. A comm-bench document already there is kept (unless --force or --resume): "
                   "the run writes the next free numbered name (results.1.json, results.2.json, ...) and says "
                   "so; its last line names the file. nccl-tests' -o is the reduction op: -o sum|prod|max|min|avg "
                   "is taken as --redop (a file of that name: -o ./sum).")
@click.option("--force", is_flag=True, envvar=_env("force"),
              help="Replace -o, whatever it holds (an earlier run's document, or a file that is not one).")
@click.option("--timeout", default=60.0, type=float, envvar=_env("timeout"),
              help="Seconds before a silent peer counts as dead. At start-up the ranks wait "
                   "as long as others keep arriving: the meeting fails only after --timeout "
                   "seconds with no new rank (a thousand ranks may take minutes to start); a wait "
                   "for rank 0's word goes on while rank 0 still writes records.")
@click.option("--addr", default=None, envvar=_env("addr"),
              help="Address peers reach this rank on (default: route towards the store host).")
@click.option("--oversubscribe", is_flag=True, envvar=_env("oversubscribe"),
              help="Run even with more ranks, or larger buffers, than this host's cores and "
                   "memory hold.")
@click.option("--resume", is_flag=True, envvar=_env("resume"),
              help="Continue the -o document of an earlier, interrupted attempt of this same sweep "
                   "(a launcher's restart): what it holds is not measured again. Without one, start afresh.")
@click.option("--records", "records", default="inline", type=click.Choice(["inline", "jsonl"]),
              envvar=_env("records"),
              help="inline: records inside -o (replaced after each record, at most once a second past 8 MB); "
                   "jsonl: appended to OUTPUT.records.jsonl beside it, -o written at the start and end only "
                   "(for runs of 100,000s of records; every reader follows it).")
@click.option("--progress/--no-progress", default=True, help="Progress bar on a terminal.")
@click.option("--confirm", default=DEFAULT_ALTERNATIONS, type=click.IntRange(0, 64), envvar=_env("confirm"),
              help="Pair patterns: re-measure the first pass's suspects this many times, each next to "
                   "known-good pairs (docs/validate-rules.md); costs nothing without suspects. 0: off, and "
                   "validate then exits 3 when suspects are left unconfirmed.")
@click.option("--verdict/--no-verdict", default=True, envvar=_env("verdict"),
              help="After the run, print `comm-bench validate`'s verdict of the results file in one line "
                   "(rank 0; it reads the whole file: seconds at thousands of ranks).")
@_transport_options
def sweep(transport, op_names, minbytes, maxbytes, stepfactor, iters, warmup, check, dtype, redop, root,
          mode, pattern, matchings, seed, groups, nprocs, output, force, timeout, addr, oversubscribe, resume,
          records, progress, confirm, verdict, **transport_options):
    """Measure bandwidth and latency of one transport over a range of sizes.

    Prints a nccl-tests style table and appends every measured size to the
    results JSON (-o) as it finishes.
    """
    cls = registry.get(transport)
    output, redop = output_or_redop(output, redop)
    if not str(check).strip().isdigit():
        raise UsageError(f"-c/--check takes 0 (off) or 1 (on) (got '{check}')")
    if records == "jsonl" and resume:
        raise UsageError("--records jsonl does not take --resume (yet): resume an inline document")
    if groups:
        from ..run.groups import parse_groups
        parse_groups(groups)        # a bad file fails here, before any rank starts
    # no --op: the first op the pattern runs (sweep.resolve)
    ops = list(cls.ops) if op_names == "all" else (op_names.split(",") if op_names else [])
    mine = {o.dest for o in cls.options}
    _refuse_foreign_options(click.get_current_context(), transport, mine)
    cfg = SweepConfig(transport=transport, ops=[o.strip() for o in ops if o.strip()],
                      sizes=size_range(minbytes, maxbytes, stepfactor), iters=iters, warmup=warmup,
                      check=int(check) > 0, dtype=ops_mod.canonical_dtype(dtype), redop=redop, root=root,
                      mode=mode, pattern=pattern, timeout=timeout,
                      output=output, addr=addr, progress=progress, force=force, oversubscribe=oversubscribe,
                      resume=resume, confirm=confirm, verdict=verdict, rules=os.environ.get("COMM_BENCH_RULES"),
                      matchings=matchings, seed=seed, groups=groups, records=records,
                      options={k: v for k, v in transport_options.items() if k in mine})
    sys.exit(launch(cfg, nprocs))


def _ended(run, wrote, cfg, say_to=None) -> int:
    """run() (the ranks, then check's report), then, when this process wrote (rank 0) or
    spawned the run that wrote a document, results_line: the very last line, after an
    error's own line too (which the cli would otherwise print after it)."""
    error = None
    try:
        code = run()
    except (CommBenchError, Interrupted) as exc:
        error, code = exc, exc.exit_code
    if not wrote():
        if error is not None:
            raise error
        return code
    if error is not None:
        if os.environ.get("COMM_BENCH_DEBUG"):
            raise error
        print(f"comm-bench: {error}", file=sys.stderr, flush=True)    # as cli.main says it
    results_line(cfg.output, say_to)
    return code


def output_or_redop(output, redop):
    """nccl-tests' `-o sum` names the reduction: (results file, redop). A path (`-o ./sum`,
    `-o sum.json`) stays the results file."""
    if output not in ops_mod.REDOPS:
        return output, redop or "sum"
    if redop not in (None, output):
        raise UsageError(f"-o {output} (nccl-tests' reduction op) and --redop {redop} disagree: give one")
    if detect().rank == 0 and os.environ.get("COMM_BENCH_LAUNCHER") != "spawn":   # said once
        print(f"comm-bench: -o {output} is nccl-tests' reduction op: running --redop {output}, results in "
              f"results.json (a file named {output}: -o ./{output})", file=sys.stderr)
    return "results.json", output


def launch(cfg, nprocs, rank0_done=None, say_to=None):
    """Spawn --nprocs local ranks when no launcher started us (returns their exit code), or
    be one rank of the launcher's job (leaves the process; rank0_done(code) -> code runs on
    rank 0 after a completed run, e.g. check's report). The last line names the file
    written (results_line, on say_to: stdout unless given)."""
    cls = registry.get(cfg.transport)
    if cfg.confirm:
        from ..validate.rules import load_rules
        load_rules(cfg.rules)       # a bad rules file fails here, before any rank starts
    info = detect()
    if nprocs is None:
        nprocs = cls.default_ranks()
    if info.launcher == "single" and nprocs > 1:
        cls = resolve(cfg, nprocs)  # bad input fails here, once, before any rank starts
        check_host(cls, max(cfg.sizes), nprocs, nprocs, spawning=True, oversubscribe=cfg.oversubscribe)
        check_resumable(cfg, nprocs)
        with local_run(cfg):
            def spawned_run():
                code = spawn_local(nprocs, sys.argv[1:], use_mpirun=cfg.transport == "mpi",
                                   timeout=cfg.timeout, results_path=cfg.output)
                return rank0_done(code) if rank0_done is not None and code == 0 else code
            return _ended(spawned_run, lambda: own_document(cfg.output) is not None, cfg, say_to)
    if cfg.resume and info.rank == 0:
        from ..run.resume import earlier
        earlier(cfg.output)     # a launcher's rank 0: a hostile document fails before it meets the others
    spawned = os.environ.get("COMM_BENCH_LAUNCHER") == "spawn"   # our spawner reports instead

    def rank_run():
        code = run_rank(cfg, info)
        if rank0_done is not None and info.rank == 0 and code == 0 and not spawned:
            code = rank0_done(code)
        return code
    code = _ended(rank_run, lambda: info.rank == 0 and cfg.wrote and not spawned, cfg, say_to)
    # A finished rank leaves at once, its results written: the native libraries' finalisers
    # (NCCL, CUDA, torch) have crashed at interpreter exit (SIGSEGV while garbage-collecting,
    # after the last record of a 2-GPU NCCL sweep), which would turn a good run into a failed one.
    # mpirun counts a rank that leaves without MPI_Finalize as failed.
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
