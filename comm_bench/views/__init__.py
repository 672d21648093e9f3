"""What people look at: pictures, pages and tables made from results documents.

    heatmap.py, heatmap_counters.py   link-level utilisation matrices from the records
    heatmap_cells.py                  the cells as columns (a streamed document's too)
    heatmap_large.py                  heatmaps of large runs, aggregated
    heatmap_png.py, heatmap_output.py the heatmap file (PNG, HTML, aggregated or not)
    plot.py                           bandwidth and latency against message size
    report_html.py, html_base.py      self-contained HTML reports (no CDN)
    interactive.py                    interactive pages (Plotly)
    table.py                          the nccl-tests-style table a sweep prints

May import results/, validate/ (findings to mark) and the vocabulary; never run/ or control/.
"""
