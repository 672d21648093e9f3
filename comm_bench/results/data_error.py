"""Wrong data found by the -c check: what the results document and the run's last line say.

A measurement that completed keeps status "ok" (the figures are what was measured), and
the document's `data_error` says how many values arrived wrong and where; the run exits 1,
as nccl-tests does when any value is out of bounds. Readers take both from here.
"""
from __future__ import annotations

from typing import Any

from ..sizes import human_size

SHOWN = 5   # places named in the one-line summary; the document lists them all


def entry(record: dict[str, Any], ranks: dict[int, int] | None = None) -> dict[str, Any]:
    """One record's wrong values and where: op, size, and the pair or the ranks that saw them
    (ranks: {rank: wrong} of a collective, each rank's own count)."""
    out = {"op": record.get("op"), "size": record.get("size"), "wrong": record["wrong"]}
    if record.get("src") is not None:
        out.update(src=record["src"], dst=record.get("dst"))
    elif ranks:
        out["ranks"] = {str(r): w for r, w in sorted(ranks.items()) if w}
    for key in ("mode", "pattern", "round"):
        if record.get(key) is not None:
            out[key] = record[key]
    return out


def has_wrong(record: dict[str, Any]) -> bool:
    """True for a record whose check found wrong values (null: not checked)."""
    w = record.get("wrong") if isinstance(record, dict) else None
    return isinstance(w, int) and not isinstance(w, bool) and w > 0


def summary(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The document's data_error field: {"wrong": total, "records": [...]}, or None."""
    entries = [e for e in entries if e.get("wrong")]
    if not entries:
        return None
    return {"wrong": sum(e["wrong"] for e in entries), "records": entries}


def of_document(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The data_error a document holds, or one made from its records (documents written
    before the field existed, or a hand-merged file)."""
    found = doc.get("data_error")
    if isinstance(found, dict) and found.get("wrong"):
        return found
    return summary([entry(r) for r in doc.get("results") or [] if has_wrong(r)])


def where(e: dict[str, Any]) -> str:
    if e.get("src") is not None:
        place = f"pair {e['src']}->{e.get('dst')}"
    elif e.get("ranks"):
        place = "rank" + ("s " if len(e["ranks"]) > 1 else " ") + ",".join(e["ranks"])
    else:
        place = "collective"
    return f"{e.get('op')} {human_size(e.get('size') or 0)} {place}: {e['wrong']}"


def describe(err: dict[str, Any]) -> str:
    """How many values were wrong and where (the first SHOWN places)."""
    recs = err["records"]
    places = "; ".join(where(e) for e in recs[:SHOWN])
    more = f"; and {len(recs) - SHOWN} more record(s)" if len(recs) > SHOWN else ""
    return f"data check FAILED: {err['wrong']} wrong value(s) in {len(recs)} record(s): {places}{more}"


def line(err: dict[str, Any], path: str | None = None) -> str:
    """The run's last line."""
    kept = f" (all listed in {path}, data_error)" if path else ""
    return f"comm-bench: {describe(err)}{kept}"
