"""`comm-bench heatmap`: pair utilisation heatmaps (PNG or one self-contained HTML)."""
import click

from ..views.heatmap import BY_CHOICES


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out", required=True, envvar="COMM_BENCH_HEATMAP_OUTPUT",
              help="FILE.png or FILE.html (one self-contained file).")
@click.option("--by", default="rank", type=click.Choice(BY_CHOICES + ("switch",)), envvar="COMM_BENCH_HEATMAP_BY",
              show_default=True, help="What the axes are: ranks, GPUs, NICs or hosts; switch: the aggregated "
              "view (node x node blocks, switch x switch, worst pairs), which runs of more than 2,048 ranks, or 512 measured sparsely (matchings), get anyway.")
@click.option("--op", default=None, envvar="COMM_BENCH_HEATMAP_OP",
              help="The op to show (default: the one with the most pair records).")
@click.option("--interactive", is_flag=True,
              help="HTML with Plotly (embedded, works offline): hover, size selector, rank search.")
@click.option("--size", "sizes", multiple=True, envvar="COMM_BENCH_HEATMAP_SIZE",
              help="A panel at this size (K/M/G; repeat for more: --size 1M --size 64M) [default: up to 4 "
                   "sizes, the smallest, the largest and log-spaced between].")
def heatmap(results, out, by, op, interactive, sizes):
    """Colour every measured pair by utilisation = measured / theoretical rate of its link.

    One panel per size class; N/A where nothing was measured; axes labelled host:device.
    """
    from ..sizes import parse_size
    from ..views.heatmap_output import make
    sizes = [parse_size(s, "--size") for s in sizes] or None
    info = make(results, out, by=by, op=op, interactive=interactive, sizes=sizes)
    if "aggregated" in info:
        a = info["aggregated"]
        from ..views.table import prose
        click.echo(f"wrote {info['out']}: {a['nodes']} nodes aggregated ({a['block']} x {a['block']} per cell), "
                   f"{a['switches']} switches, {info['measured_pairs']} measured pairs "
                   f"({info['seconds']:.2f} s)")
        click.echo(prose("\n".join(info["worst"])))
        return
    click.echo(f"wrote {info['out']}: {info['cells']} x {info['cells']} {by}s, "
               f"{info['panels']} panel(s), {info['measured_pairs']} measured cells "
               f"({info['seconds']:.2f} s)")
