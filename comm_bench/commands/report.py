"""`comm-bench report RESULTS.json`: the results again, as a table, CSV or JSON, or an HTML report."""
from __future__ import annotations

import csv
import json
import sys

import click

from .. import table
from ..errors import UsageError
from ..results import load


@click.command()
@click.argument("results_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              envvar="COMM_BENCH_REPORT_FORMAT", show_default=True, help="Output format on stdout.")
@click.option("--html", "html_out", default=None, type=click.Path(dir_okay=False),
              help="Also write a self-contained HTML report (topology, tables, heatmaps, findings).")
def report(results_file, fmt, html_out):
    """Print the records of a results file (as written by `comm-bench sweep -o`)."""
    doc = load(results_file)
    records = doc["results"]
    if fmt == "json":
        json.dump(records, sys.stdout, indent=1)
        print()
    elif fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(table.csv_header())
        w.writerows(table.csv_row(r) for r in records)
    else:
        print(f"# {results_file}: {doc.get('transport')} on {doc.get('world_size')} rank(s), "
              f"status {doc.get('status')}" + (f" ({doc['failure'].get('reason')})" if doc.get("failure") else ""))
        for op, mode in dict.fromkeys((r["op"], r.get("mode", "bw")) for r in records):
            rows = [r for r in records if r["op"] == op and r.get("mode", "bw") == mode]
            print(f"# op {op}" + (f", mode {mode}" if mode != "bw" else ""))
            iters = [r["iters"] for r in rows if isinstance(r.get("iters"), int)]
            note = table.tail_note(min(iters), mode) if iters else None
            if note:
                print(note)
            print(table.header(mode))
            for r in rows:
                print(table.row(r))
    if html_out:
        try:
            from ..report_html import render
        except ImportError:
            raise UsageError("the HTML report is not available in this installation") from None
        render(doc, html_out)
        print(f"# HTML report written to {html_out}", file=sys.stderr)
