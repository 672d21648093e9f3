"""`comm-bench compare A.json B.json ...`: runs side by side, with the change from the first."""
import json
import os

import click


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compare(results, as_json):
    """Per op, mode and size: busbw, median and p99 latency of every run (medians over
    pairs) and their change from the first run. Runs of other transports or patterns line
    up by op and size: gRPC vs NCCL vs RDMA, before vs after."""
    from ..compare import compare as run, format_text
    from ..results import load
    out = run([(os.path.basename(p), load(p)) for p in results])
    click.echo(json.dumps(out, indent=1) if as_json else format_text(out))
