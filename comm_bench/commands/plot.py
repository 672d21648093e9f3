"""`comm-bench plot`: bandwidth and latency versus message size, as one PNG."""
import click


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, envvar="COMM_BENCH_PLOT_OUTPUT", help="FILE.png")
@click.option("--op", default=None, help="Only these ops (comma separated; default: all).")
def plot(results, out, op):
    """Draw busbw and latency against message size (log-x) for one or more results files:
    every run, transport and op overlaid, each link's theoretical rate as a dashed line."""
    from ..views.plot import make
    info = make(list(results), out, [o.strip() for o in op.split(",")] if op else None)
    rates = ", ".join(f"{c} {g:g} GB/s" for c, g in sorted(info["rates"].items())) or "none known"
    click.echo(f"wrote {info['out']}: {info['curves']} curve(s); link rates: {rates}")
