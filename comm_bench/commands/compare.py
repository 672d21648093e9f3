"""`comm-bench compare A.json B.json ...`: runs side by side, with the change from the first,
each row marked better / worse / within noise (a stated test at a stated confidence), a
summary and a verdict; exit 1 when a run is worse."""
import json
import os
import sys

import click

from ..errors import EXIT_FAILED, EXIT_OK
from ..validate.compare import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE
from .run_options import wide_option


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--html", "html_out", default=None, type=click.Path(dir_okay=False),
              help="Also write an interactive page (Plotly, embedded): curves overlaid and the table.")
@click.option("--tolerance", default=DEFAULT_TOLERANCE, type=click.FloatRange(0, 10), show_default=True,
              help="A row is better or worse than the first run beyond this relative change (busbw; "
                   "lat rows: median latency) when the test supports it; any worse row: exit 1.")
@click.option("--confidence", default=DEFAULT_CONFIDENCE, type=click.FloatRange(0.5, 0.9999), show_default=True,
              help="A change is better or worse only when Welch's t on the row and a signed-rank test over "
                   "the op's sizes both put it beyond --tolerance at this confidence; else within noise.")
@click.option("--min-size", default="1M", show_default=True,
              help="Bandwidth rows below this size are shown, not judged (they measure latency).")
@click.option("--repeats", default=1, type=click.IntRange(1, 1000), show_default=True,
              help="The files are runs of N repeats each, in order (compare --repeats 5 a*.json b*.json: "
                   "A = the first 5): the row test then uses the spread between repeats, which one run's "
                   "iterations cannot show (a whole run shifted by the scheduler).")
@click.option("--paired", is_flag=True,
              help="With --repeats: the runs were made in turns (A1 B1 A2 B2 ...), and the i-th of each side "
                   "are judged together (Student's t on their differences), which cancels what the machine "
                   "did to both runs of a turn.")
@click.option("--op", "ops", default=None, help="Only these ops (comma separated).")
@click.option("--size", "sizes", default=None, help="Only these sizes (comma separated, K/M/G).")
@wide_option()
def compare(results, as_json, html_out, tolerance, confidence, min_size, repeats, paired, ops, sizes, wide):
    """Per op, mode and size: busbw, median and p99 latency of every run (medians over
    pairs) and their change from the first run, marked better / worse beyond --tolerance
    where the data support it at --confidence, "noise" where they do not.
    Runs of other transports or patterns line up by op and size: gRPC vs NCCL vs RDMA,
    before vs after. Exit 0: no run worse than the first; 1: one is; 2: bad input."""
    from ..validate.compare import compare as run, format_text
    from ..errors import UsageError
    from ..results.export import select
    from ..results.document import load_measured as load
    from ..sizes import parse_size
    docs = [(os.path.basename(p), load(p)) for p in results]
    if ops or sizes:
        docs = [(name, dict(doc, results=select(doc["results"], ops, sizes))) for name, doc in docs]
        if not any(doc["results"] for _, doc in docs):
            asked = " ".join(f"--{k} {v}" for k, v in (("op", ops), ("size", sizes)) if v)
            raise UsageError(f"no records match {asked} in {', '.join(n for n, _ in docs)}")
    from ..results.records import nothing_in_common
    common = nothing_in_common(docs)
    if common:          # nothing judged is no PASS
        raise UsageError(common)
    if len(docs) % repeats:
        raise UsageError(f"--repeats {repeats}: {len(docs)} files do not make whole runs of {repeats}")
    if paired and repeats < 2:
        raise UsageError("--paired needs --repeats 2 or more (the turns to pair)")
    groups = [(_group_name([n for n, _ in docs[i:i + repeats]]), [d for _, d in docs[i:i + repeats]])
              for i in range(0, len(docs), repeats)]
    out = run(groups if repeats > 1 else docs, tolerance, parse_size(min_size, "--min-size"), confidence, paired)
    from ..views.compare_table import narrow
    click.echo(json.dumps(out, indent=1) if as_json else format_text(out) if wide else narrow(out))
    if html_out:
        from ..views.interactive import write_compare_page
        write_compare_page([(n, g[0]) for n, g in groups], out, html_out)   # curves: each run's first repeat
        click.echo(f"# interactive page written to {html_out}", err=True)
    sys.exit(EXIT_FAILED if out["status"] == "fail" else EXIT_OK)


def _group_name(names):
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"
