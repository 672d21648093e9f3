"""The `comm-bench` command: a lazy click group; each command is a small module
in comm_bench/commands over the library API. Errors end as one line and an
exit code (0 ok, 1 run failed or problems found, 2 usage or bad input,
70 internal error)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import sys

import click

from . import __version__
from .errors import EXIT_OK, EXIT_SIGNAL, INTERNAL_ERROR, CommBenchError, Interrupted

COMMANDS = {  # name -> "module:attribute"; modules are imported only when used
    "sweep": "comm_bench.commands.sweep:sweep",
    "check": "comm_bench.commands.check:check",
    "report": "comm_bench.commands.report:report",
    "doctor": "comm_bench.commands.doctor:doctor",
    "list": "comm_bench.commands.list_cmd:list_transports",
    "topo": "comm_bench.commands.topo:topo",
    "heatmap": "comm_bench.commands.heatmap:heatmap",
    "validate": "comm_bench.commands.validate:validate",
    "select": "comm_bench.commands.select:select",
    "plot": "comm_bench.commands.plot:plot",
    "compare": "comm_bench.commands.compare:compare",
    "simulate": "comm_bench.commands.simulate:simulate",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(name for name, target in COMMANDS.items() if _importable(target))

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None or not _importable(target):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


def _importable(target: str) -> bool:
    module = target.split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="comm-bench")
@click.option("--debug", is_flag=True, envvar="COMM_BENCH_DEBUG",
              help="Show the Python traceback of an error.")
def cli(debug):
    """comm-bench: measure the links of GPU/HPC clusters (NVLink, PCIe, InfiniBand/RoCE,
    Ethernet) through NCCL, ibverbs, gRPC, MPI, Gloo and raw sockets.

    Typical use: `comm-bench sweep --transport rdma`, then `comm-bench heatmap`,
    then `comm-bench validate`.
    """
    if debug:
        os.environ["COMM_BENCH_DEBUG"] = "1"


def main(argv=None) -> None:
    debug = bool(os.environ.get("COMM_BENCH_DEBUG")) or "--debug" in (argv or sys.argv)
    from .printable import install
    install()       # names from documents are printed escaped: no terminal escapes, no lone surrogates
    try:
        # without standalone mode click returns a command's ctx.exit(code) instead of exiting
        code = cli.main(args=argv, prog_name="comm-bench", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        print("comm-bench: aborted", file=sys.stderr)
        sys.exit(EXIT_SIGNAL + signal.SIGINT)
    except click.ClickException as exc:  # usage errors: one line, exit 2
        ctx = getattr(exc, "ctx", None)
        where = f"comm-bench {ctx.info_name}" if ctx and ctx.parent else "comm-bench"
        print(f"{where}: error: {exc.format_message()} (see --help)", file=sys.stderr)
        sys.exit(exc.exit_code)
    except CommBenchError as exc:
        if debug:
            raise
        print(f"comm-bench: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("comm-bench: interrupted", file=sys.stderr)
        sys.exit(EXIT_SIGNAL + signal.SIGINT)
    except Interrupted as exc:
        print(f"comm-bench: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:
        if debug:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"comm-bench: internal error: {type(exc).__name__}: {first} (rerun with --debug "
              "for the traceback, and please report it)", file=sys.stderr)
        sys.exit(INTERNAL_ERROR)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


if __name__ == "__main__":
    main()
