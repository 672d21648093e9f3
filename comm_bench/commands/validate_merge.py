"""`validate A.json B.json ...` with an output flag: the checked documents' reports made one
report, one list of nodes and one document for validate's writers (JUnit, drain list,
scontrol, OpenMetrics, Node Problem Detector), so every output says the verdict over all.

    merged, rows, doc = merge(done)    # done: [{"document", "report", "doc"}] checked ones

A node named by findings of several documents gets them all, worst first, in one reason;
JUnit cases of a checked group carry their document's name; the OpenMetrics labels name
every transport (a,b) and the largest world size; the run time is the latest document's.
"""
from __future__ import annotations


def merge(done):
    from ..validate import drain
    from ..validate.finding_kinds import status
    findings, groups, latency, diagnosis = [], [], [], {}
    nodes = {}
    for d in done:
        rep, name = d["report"], d["document"]
        findings += rep["findings"]
        c = rep.get("checked") or {}
        groups += [dict(g, **{"class": f"{name}: {g['class']}"}) for g in c.get("groups") or []]
        latency += [dict(g, **{"class": f"{name}: {g['class']}"}) for g in (c.get("latency") or {}).get("groups") or []]
        for k in ("unconfirmed_suspects", "unconfirmed_findings"):
            diagnosis[k] = (diagnosis.get(k) or []) + list((c.get("diagnosis") or {}).get(k) or [])
        for node, fs, _ in drain.hosts(rep, d["doc"]):
            nodes.setdefault(node, []).extend(fs)
    merged = {"findings": findings,
              "checked": {"groups": groups, "latency": {"groups": latency}, "diagnosis": diagnosis}}
    merged["status"] = status(merged)
    rows = drain.node_rows(nodes)
    docs = [d["doc"] for d in done]
    latest = max(docs, key=lambda x: str(x.get("finished") or x.get("started") or ""))
    doc = dict(latest, transport=",".join(dict.fromkeys(str(x.get("transport")) for x in docs)),
               world_size=max((x.get("world_size") or 0) for x in docs))
    return merged, rows, doc
