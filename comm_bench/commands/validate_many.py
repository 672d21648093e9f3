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

# options whose output is one document's (a JUnit file, a drain list, NPD's one line ...)
ONE_DOCUMENT_ONLY = ("baseline", "junit", "drain_list", "slurm_drain", "prometheus", "node_problem")


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
    """Exit code of one verdict over the documents at paths."""
    from ..validate.checks import check, read
    from ..validate.finding_kinds import NothingToCheck, exit_code
    from ..validate.output import format_text, to_json
    from ..views.table import fit
    asked = [k for k in ONE_DOCUMENT_ONLY if given.get(k)]
    if asked:
        raise UsageError(f"--{asked[0].replace('_', '-')} writes one document's verdict: give one document "
                         f"(validate each of the {len(paths)} on its own)")
    done = []
    for path in paths:
        name = os.path.basename(path) if len({os.path.basename(p) for p in paths}) == len(paths) else path
        doc, pairs = read(path)
        try:
            rep = check(doc, rules, pairs)
        except NothingToCheck as exc:
            done.append({"document": name, "status": "not checked", "why": str(exc)})
            continue
        for f in rep["findings"]:
            f["document"] = name
            f["message"] = f"{name}: {f['message']}"
        rep["left_out"] = left_out(doc, pairs, rep, rules)
        done.append({"document": name, "status": rep["status"], "report": rep, "code": exit_code(rep)})
    checked = [d for d in done if "report" in d]
    if not checked:
        raise UsageError("nothing to check in any of " + "; ".join(f"{d['document']} ({d['why']})" for d in done))
    codes = {d["code"] for d in checked}
    code = 1 if 1 in codes else 3 if 3 in codes else 0
    status = {1: "fail", 3: "unconfirmed", 0: "pass"}[code]
    if as_json:
        click.echo(json.dumps({"status": status, "documents": [
            dict({k: v for k, v in d.items() if k not in ("report", "code")},
                 report=json.loads(to_json(d["report"])) if "report" in d else None) for d in done]}, indent=1))
        return code
    for d in done:
        click.echo(f"== {d['document']}")
        if "report" not in d:
            click.echo(fit(f"not checked: {d['why']}", 4))
            continue
        click.echo(with_left_out(format_text(d["report"]), d["report"]["left_out"]))
    per = ", ".join(f"{d['document']} {d['status']}" for d in done)
    click.echo(fit(f"validate: {status.upper()} over {len(paths)} documents ({per})", 4))
    return code
