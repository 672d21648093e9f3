"""`comm-bench compare A.json B.json ...`: runs side by side, with the change from the first."""
import json
import os

import click


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--html", "html_out", default=None, type=click.Path(dir_okay=False),
              help="Also write an interactive page (Plotly, embedded): curves overlaid and the table.")
def compare(results, as_json, html_out):
    """Per op, mode and size: busbw, median and p99 latency of every run (medians over
    pairs) and their change from the first run. Runs of other transports or patterns line
    up by op and size: gRPC vs NCCL vs RDMA, before vs after."""
    from ..compare import compare as run, format_text
    from ..results import load
    docs = [(os.path.basename(p), load(p)) for p in results]
    out = run(docs)
    click.echo(json.dumps(out, indent=1) if as_json else format_text(out))
    if html_out:
        from ..interactive import write_compare_page
        write_compare_page(docs, out, html_out)
        click.echo(f"# interactive page written to {html_out}", err=True)
