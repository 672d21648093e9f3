"""`comm-bench validate A.json B.json ...`: every document checked on its own rules, one
verdict over all of them (fail if any has findings, else unconfirmed if any has suspects
left, else pass), each finding naming its document; and, for any document, the sizes the
bandwidth checks left out and why (validate's rules.min_size)."""
from __future__ import annotations

import json
import os

import click

from ..errors import UsageError
from ..sizes import human_size, parse_size

def left_out(doc, pairs, report, rules):
    """{"sizes", "why"} of the bandwidth pair sizes measured but not checked (below
    rules.min_size: small transfers measure latency, not a link's bandwidth), or None."""
    if pairs is not None:
        measured = {size for _, size in pairs.cols}
    else:
        measured = {r.get("size") for r in doc.get("results") or []
                    if r.get("src") is not None and r.get("mode", "bw") == "bw" and not r.get("confirm")}
    checked = set((report.get("checked") or {}).get("sizes") or [])
    sizes = sorted(s for s in measured - checked if isinstance(s, int))
    if not checked or not sizes:
        return None
    return {"sizes": sizes, "why": f"below the rules' min_size {rules['min_size']} "
                                   f"({parse_size(rules['min_size'])} B): small transfers measure latency, "
                                   "not a link's bandwidth (--rules to change min_size)"}


def with_left_out(text, left):
    """validate's text report with the left-out sizes said under its first line (the verdict)."""
    if not left:
        return text
    from ..views.table import fit
    head, _, rest = text.partition("\n")
    said = fit(f"  left out: {', '.join(human_size(s) for s in left['sizes'])}, {left['why']}", 4)
    return "\n".join([head, said] + ([rest] if rest else []))


def several(paths, rules, as_json, given):
    """Exit code of one verdict over the documents at paths; every output flag (given:
    baseline, tolerance, junit, drain_list, slurm_drain, dry_run, prometheus, node_problem)
    writes that verdict over all (validate_merge)."""
    from ..results.document import load_measured
    from ..validate.checks import check, read, report as make_report
    from ..validate.finding_kinds import NothingToCheck, exit_code
    from ..validate.output import format_text, to_json, write_outputs
    from ..views import expected
    from ..views.table import fit, prose
    bases = {}
    for b in given.get("baseline") or ():
        bd = load_measured(b)
        bases.setdefault(str(bd.get("transport")), []).append((os.path.basename(b), bd))
    unique = len({os.path.basename(p) for p in paths}) == len(paths)
    done, compared = [], 0
    for path in paths:
        name = os.path.basename(path) if unique else path
        doc, pairs = (load_measured(path), None) if bases else read(path)
        base = bases.get(str(doc.get("transport")))
        try:
            rep = check(doc, rules, pairs)
        except NothingToCheck as exc:
            if not base:
                done.append({"document": name, "status": "not checked", "why": str(exc)})
                continue
            rep = make_report(doc, rules, [], {})      # the baseline alone is still a check
        said = []
        if base:
            from ..validate.baseline import apply
            said.append(apply(rep, doc, [bd for _, bd in base], ", ".join(n for n, _ in base),
                              given.get("tolerance", 0.10), rules["min_size"]))
            compared += rep["checked"]["baseline"]["compared"]
        for f in rep["findings"]:
            f["document"] = name
            f["message"] = f"{name}: {f['message']}"
        rep["left_out"] = left_out(doc, pairs, rep, rules)
        rep["expected"] = expected.compare(doc, given.get("profile"))
        done.append({"document": name, "status": rep["status"], "report": rep, "code": exit_code(rep),
                     "doc": doc, "said": said})
    checked = [d for d in done if "report" in d]
    if not checked:
        raise UsageError("nothing to check in any of " + "; ".join(f"{d['document']} ({d['why']})" for d in done))
    if bases and not compared:
        raise UsageError(f"--baseline: no transport, op, mode and size in common with any of the {len(paths)} "
                         f"documents (bandwidth sizes from {rules['min_size']} up)")
    codes = {d["code"] for d in checked}
    code = 1 if 1 in codes else 3 if 3 in codes else 0
    status = {1: "fail", 3: "unconfirmed", 0: "pass"}[code]
    from .validate_merge import merge
    merged, rows, mdoc = merge(checked)
    write_outputs(merged, mdoc, given.get("junit"), given.get("drain_list"), given.get("prometheus"), rows)
    if given.get("node_problem") is not None:   # NPD reads one line and the exit code, nothing else
        from ..validate.npd import verdict
        npd_code, line = verdict(rows, merged, given["node_problem"])
        click.echo(line)
        return npd_code
    if as_json:
        click.echo(json.dumps({"status": status, "documents": [
            dict({k: v for k, v in d.items() if k not in ("report", "code", "doc", "said")},
                 report=json.loads(to_json(d["report"])) if "report" in d else None) for d in done]}, indent=1))
    else:
        for d in done:
            click.echo(f"== {d['document']}")
            if "report" not in d:
                click.echo(fit(f"not checked: {d['why']}", 4))
                continue
            click.echo(prose("\n".join(d["said"] + [with_left_out(format_text(d["report"]), d["report"]["left_out"])]
                                           + expected.lines(d["report"]["expected"], "", given.get("profile")))))
        per = ", ".join(f"{d['document']} {d['status']}" for d in done)
        click.echo(fit(f"validate: {status.upper()} over {len(paths)} documents ({per})", 4))
    if given.get("slurm_drain"):
        from ..validate import drain
        drain.slurm_drain(rows, given.get("dry_run"),
                          echo=lambda s: click.echo(s, err=as_json or not given.get("dry_run")))
    return code
