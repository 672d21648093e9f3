"""`comm-bench sweep`: measure one transport over a range of sizes."""
from __future__ import annotations

import os
import sys

import click

from .. import ops as ops_mod
from .. import registry
from ..errors import CommBenchError, Interrupted, UsageError
from ..run.launch import detect
from . import run_options
from .run_options import env
from ..run.limits import check_host
from ..schedule import COST, DEFAULT_K
from ..sizes import size_range
from ..run.spawn import own_document, spawn_local
from ..run.sweep import SweepConfig, check_resumable, local_run, resolve, results_line, run_rank


@click.command(context_settings={"show_default": True})
@click.option("-t", "--transport", default="tcp", envvar=env("transport"),
              help=f"One of: {', '.join(registry.transports())} (see `comm-bench list`). "
                   "Not nccl-tests' -t (threads per process).")
@click.option("--op", "op_names", default=None, envvar=env("op"),
              help="Op(s), comma separated, or 'all'. Default: the transport's first op.")
@run_options.sizes()
@run_options.data()
@click.option("--mode", default="bw", type=click.Choice(["bw", "lat"]), envvar=env("mode"),
              help="bw: streaming bandwidth; lat: ping-pong latency (point-to-point ops).")
@click.option("--pattern", default=None, envvar=env("pattern"),
              help="collective | pair | " + " | ".join(f"{p} ({c})" for p, c in COST.items()) +
                   ". Default: collective where the op is one, else pair (2 ranks) or pairwise.")
@click.option("--matchings", default=DEFAULT_K, type=click.IntRange(1, 4096), envvar=env("matchings"),
              help="matchings/topology patterns: k random perfect matchings (per switch distance).")
@click.option("--seed", default=0, type=int, envvar=env("seed"), help="Seed of the random matchings.")
@click.option("--groups", default=None, type=click.Path(dir_okay=False), envvar=env("groups"),
              help="File of 'HOST LEAF [POD]' lines (where each host is cabled): the topology pattern "
                   "pairs by it; with any pair pattern validate and heatmap place findings and cells "
                   "on switches (a bad switch uplink is named).")
@click.option("--resume", is_flag=True, envvar=env("resume"),
              help="Continue the -o document of an earlier, interrupted attempt of this same sweep "
                   "(a launcher's restart): what it holds is not measured again. Without one, start afresh.")
@click.option("--records", "records", default="inline", type=click.Choice(["inline", "jsonl"]),
              envvar=env("records"),
              help="inline: records inside -o (replaced after each record, at most once a second past 8 MB); "
                   "jsonl: appended to OUTPUT.records.jsonl beside it, -o written at the start and end only "
                   "(for runs of 100,000s of records; every reader follows it).")
@click.option("--verdict/--no-verdict", default=True, envvar=env("verdict"),
              help="After the run, print `comm-bench validate`'s verdict of the results file in one line "
                   "(rank 0; it reads the whole file: seconds at thousands of ranks).")
@run_options.launch()
@run_options.transport_options()
def sweep(transport, op_names, minbytes, maxbytes, stepfactor, iters, warmup, check, dtype, redop, root,
          mode, pattern, matchings, seed, groups, nprocs, output, force, timeout, addr, oversubscribe, resume,
          records, progress, wide, confirm, verdict, **transport_options):
    """Measure bandwidth and latency of one transport over a range of sizes.

    Prints a nccl-tests style table and appends every measured size to the
    results JSON (-o) as it finishes.
    """
    cls = registry.get(transport)
    output, redop = output_or_redop(output, redop)
    check = run_options.checked_data(check)
    if records == "jsonl" and resume:
        raise UsageError("--records jsonl does not take --resume (yet): resume an inline document")
    if groups:
        from ..run.groups import parse_groups
        parse_groups(groups)        # a bad file fails here, before any rank starts
    # no --op: the first op the pattern runs (sweep.resolve)
    ops = list(cls.ops) if op_names == "all" else (op_names.split(",") if op_names else [])
    cfg = SweepConfig(transport=transport, ops=[o.strip() for o in ops if o.strip()],
                      sizes=size_range(minbytes, maxbytes, stepfactor), iters=iters, warmup=warmup,
                      check=check, dtype=ops_mod.canonical_dtype(dtype), redop=redop, root=root,
                      mode=mode, pattern=pattern, timeout=timeout,
                      output=output, addr=addr, progress=progress, wide=wide, force=force, oversubscribe=oversubscribe,
                      resume=resume, confirm=confirm, verdict=verdict, rules=os.environ.get("COMM_BENCH_RULES"),
                      matchings=matchings, seed=seed, groups=groups, records=records,
                      options=run_options.own_options(transport, transport_options))
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


def output_or_redop(output, redop, default="results.json"):
    """nccl-tests' `-o sum` names the reduction: (results file, redop), the file then the
    command's default. A path (`-o ./sum`, `-o sum.json`) stays the results file."""
    if output not in ops_mod.REDOPS:
        return output, redop or "sum"
    if redop not in (None, output):
        raise UsageError(f"-o {output} (nccl-tests' reduction op) and --redop {redop} disagree: give one")
    if detect().rank == 0 and os.environ.get("COMM_BENCH_LAUNCHER") != "spawn":   # said once
        print(f"comm-bench: -o {output} is nccl-tests' reduction op: running --redop {output}, results in "
              f"{default} (a file named {output}: -o ./{output})", file=sys.stderr)
    return default, output


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
                code = spawn_local(nprocs, sys.argv[1:], use_mpirun=cls.spawn_with_mpirun,
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
