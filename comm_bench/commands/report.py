"""`comm-bench report RESULTS.json`: the results again, as a table, CSV, JSON or JSON Lines,
an HTML report or an OpenMetrics textfile."""
from __future__ import annotations

import csv
import json
import os
import sys

import click

from ..results import data_error, export
from ..views import table
from .run_options import profile_option, wide_option
from ..errors import UsageError
from ..results.records import buffer_label
from ..results.document import load_measured as load


@click.command()
@click.argument("results_file", required=False, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "jsonl"]), default="table",
              envvar="COMM_BENCH_REPORT_FORMAT", show_default=True,
              help="Output on stdout (csv: unrounded, snake_case columns; jsonl: one record a line).")
@click.option("--op", "ops", default=None, help="Only these ops (comma separated).")
@click.option("--size", "sizes", default=None, help="Only these sizes (comma separated, K/M/G).")
@click.option("--pair", "pairs", default=None, help="Only these pairs, SRC->DST (comma separated).")
@click.option("--html", "html_out", default=None, type=click.Path(dir_okay=False),
              help="Also write a self-contained HTML report (topology, curves, tables, heatmaps, findings).")
@click.option("--interactive", is_flag=True,
              help="The --html report with Plotly charts (embedded, works offline): hover, size selector.")
@click.option("--prometheus", "prom_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the records as an OpenMetrics textfile (node_exporter's textfile collector).")
@click.option("--reference", is_flag=True,
              help="What healthy 8-GPU H100/H200/B200/A100 nodes and 400G/200G InfiniBand links read at "
                   "large sizes, each figure with its public source (no results file needed).")
@profile_option()
@wide_option()
def report(results_file, fmt, ops, sizes, pairs, html_out, interactive, prom_out, wide, reference, profile):
    """Print the records of a results file (as written by `comm-bench sweep -o`), or with
    --reference what healthy hardware reads ("is this number normal?")."""
    if reference:
        from ..views import reference as ref
        click.echo(json.dumps(ref.load(), indent=1) if fmt == "json" else ref.text())
        if results_file is None:
            return
    if results_file is None:
        raise UsageError("give a results file (comm-bench report results.json), or --reference")
    doc = load(results_file)
    from ..views import expected
    against = expected.compare(doc, profile)      # before any output: an unknown --profile is bad input
    if interactive and not html_out:
        raise UsageError("--interactive shapes the --html report: give --html FILE too")
    records = export.select(doc["results"], ops, sizes, pairs)
    if not records and (ops or sizes or pairs):
        asked = " ".join(f"--{k} {v}" for k, v in (("op", ops), ("size", sizes), ("pair", pairs)) if v)
        raise UsageError(f"no records match {asked} in {os.path.basename(results_file)}")
    if fmt == "json":
        json.dump(records, sys.stdout, indent=1)
        print()
    elif fmt == "jsonl":
        for line in export.jsonl_lines(records):
            print(line)
    elif fmt == "csv":
        csv.writer(sys.stdout).writerows(export.csv_rows(records))
    else:
        print(table.fit(f"# {results_file}: {doc.get('transport')} on {doc.get('world_size')} rank(s), "
                        f"status {doc.get('status')}" + (f" ({doc['failure'].get('reason')})" if doc.get("failure")
                                                         else ""), "#   "))
        err = data_error.of_document(doc)
        if err:
            print(table.fit(f"# {data_error.describe(err)}", "#   "))
        noted = False
        for op, mode, buf in dict.fromkeys((r["op"], r.get("mode", "bw"), buffer_label(r)) for r in records):
            rows = [r for r in records if r["op"] == op and r.get("mode", "bw") == mode and buffer_label(r) == buf]
            print(f"# op {op}" + (f", mode {mode}" if mode != "bw" else "") +
                  (f", buffer {buf}" if buf != "host" else ""))
            iters = [r["iters"] for r in rows if isinstance(r.get("iters"), int)]
            layout = table.Layout(mode, min(iters) if iters else None, wide=wide,
                                  pairs=any(r.get("src") is not None for r in rows))
            note = None if noted else layout.note()
            noted = noted or bool(note)
            for line in (layout.about(op, rows[0].get("dtype"), rows[0].get("redop"), rows[0].get("root")),
                         note, *layout.header()):
                if line:
                    print(line)
            for r in rows:
                print(layout.row(r))
            print("\n".join(table.footer(rows, mode) + table.matrix(rows, doc.get("world_size") or 0, mode, wide)))
        for line in expected.lines(against, profile=profile):
            print(line)
    if prom_out:
        export.write_prometheus(doc, records, prom_out)
        print(f"# OpenMetrics textfile written to {prom_out}", file=sys.stderr)
    if html_out:
        try:
            from ..views.report_html import render
        except ImportError:
            raise UsageError("the HTML report is not available in this installation") from None
        render(doc, html_out, interactive=interactive)
        print(f"# HTML report written to {html_out}", file=sys.stderr)
