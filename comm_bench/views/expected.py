""""% of expected for this hardware": a results document's large-size figures held against
the public figures of comm_bench/data/reference.yaml (`report --reference`), beside the
"% of link rate" of the link they crossed. `report` and `validate` print it when the
document's topology matches a row (its GPU model and count, link class and rate: the
row's `match`), or for the rows of the profile `--profile NAME` chooses.

    rows = compare(doc, profile=None)   # [{op, size, measured_gbs, expected_gbs, pct_expected,
                                        #   link_class, link_gbs, pct_link, profile, hardware, source}]
    lines(rows)                         # the text, 80 columns
"""
from __future__ import annotations

import statistics

from ..errors import UsageError
from ..results.records import buffer_label
from ..sizes import human_size
from . import reference
from .table import fit

HOST_COPIES = ("h2d", "d2h")


def names() -> list:
    return list(dict.fromkeys(r["profile"] for r in reference.load()))


def chosen(profile):
    """The reference rows of `profile` (None: every row); UsageError for a name no row has."""
    rows = reference.load()
    if profile is None:
        return rows
    if profile not in names():
        raise UsageError(f"--profile {profile}: no such profile (one of {', '.join(names())}; "
                         "comm-bench report --reference shows their figures)")
    return [r for r in rows if r["profile"] == profile]


def _ops(row):
    return [o.strip() for o in str(row["op"]).split(",")]


def _measured(r):
    v = r.get("busbw")
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _groups(doc):
    """{(op, link_class): [records at the op's largest size]} of the bandwidth records with a
    figure, host buffers only (a staged GPU buffer is another path)."""
    by_op = {}
    for r in doc.get("results") or []:
        if (isinstance(r, dict) and r.get("mode", "bw") == "bw" and _measured(r) is not None
                and isinstance(r.get("size"), int) and not r.get("confirm")
                and buffer_label(r) == "host"):
            by_op.setdefault(r.get("op"), []).append(r)
    out = {}
    for op, recs in by_op.items():
        size = max(r["size"] for r in recs)
        out[op] = [r for r in recs if r["size"] == size]
    return out


def _link(lm, doc, rec):
    """(class, theoretical GB/s or None) the record crossed: its pair's, the slowest link of
    a collective's ring (as validate holds collectives), a host copy's PCIe link."""
    n = doc.get("world_size") or 0
    if rec.get("src") is not None and rec.get("dst") is not None:
        return lm.classify(rec["src"], rec["dst"], rec)
    if rec.get("op") in HOST_COPIES:
        kind, idx = lm.device(rec.get("rank") or 0)
        topo = lm.topo.get(lm.host(rec.get("rank") or 0)) or {}
        gpu = next((g for g in topo.get("gpus") or [] if g.get("index") == idx), None) if kind == "gpu" else None
        return "pcie", ((gpu or {}).get("pcie") or {}).get("cur_gbs")
    if n < 2:
        return None, None
    links = [lm.classify(r, (r + 1) % n) for r in range(n)]
    known = [(theo, cls) for cls, theo in links if theo]
    return (min(known)[1], min(known)[0]) if known else (links[0][0], None)


def _gpus(lm, doc):
    """(GPU model names of the hosts, ranks per host at most, hosts)."""
    per = {}
    for r in lm.ranks.values():
        per[r.get("host")] = per.get(r.get("host"), 0) + 1
    models = {str(g.get("name") or "") for t in lm.topo.values() if t for g in t.get("gpus") or []}
    return models, max(per.values(), default=0), len(per)


def _fits(row, cls, rate, gpus):
    m = row.get("match") or {}
    if m.get("link") != cls:
        return False
    if m.get("link_gbs") is not None and not (rate and abs(rate - m["link_gbs"]) <= 0.05 * m["link_gbs"]):
        return False
    models, per_host, hosts = gpus
    if m.get("gpu") is not None and not any(m["gpu"] in name for name in models):
        return False
    return m.get("gpus") is None or (per_host == m["gpus"] and hosts == 1)


def compare(doc, profile=None) -> list:
    """One row per op of the document that a reference row applies to (profile: only that
    profile's rows, matched by op and link class alone: the hardware is the user's word)."""
    from ..topology.linkmap import LinkMap
    rows = chosen(profile)
    lm = LinkMap(doc)
    gpus = _gpus(lm, doc)
    out = []
    for op, recs in sorted(_groups(doc).items(), key=lambda kv: str(kv[0])):
        links: dict[tuple, list] = {}
        for r in recs:
            links.setdefault(_link(lm, doc, r), []).append(_measured(r))
        for (cls, rate), vals in sorted(links.items(), key=lambda kv: str(kv[0])):
            row = next((x for x in rows if op in _ops(x) and (
                (x.get("match") or {}).get("link") == cls if profile else _fits(x, cls, rate, gpus))), None)
            if row is None:
                continue
            got = statistics.median(vals)
            out.append({"op": op, "size": recs[0]["size"], "measured_gbs": got, "records": len(vals),
                        "expected_gbs": row["gbs"], "pct_expected": 100.0 * got / row["gbs"],
                        "link_class": cls, "link_gbs": rate, "pct_link": 100.0 * got / rate if rate else None,
                        "profile": row["profile"], "chosen": profile is not None, "hardware": row["hardware"],
                        "kind": row["kind"], "source": row["source"], "url": row["url"]})
    return out


def lines(rows, lead="# ", profile=None) -> list:
    """The text, 80 columns: per op the two percentages side by side, then what the
    expected figure is and where it is from; none when no row applies (with --profile, one
    line saying so)."""
    if not rows:
        return [fit(f"{lead}--profile {profile}: none of its figures applies to these records (other ops "
                    f"or links: comm-bench report --reference)", lead + "  ")] if profile else []
    how = "chosen with --profile" if rows[0]["chosen"] else "matched on the topology"
    out = [fit(f"{lead}% of expected for this hardware (profile {', '.join(dict.fromkeys(r['profile'] for r in rows))}"
               f", {how}; figures: comm-bench report --reference):", lead + "  ")]
    for r in rows:
        what = "median busbw" if r["records"] > 1 else "busbw"
        link = (f"{r['pct_link']:.0f}% of link rate {r['link_gbs']:.4g} GB/s" if r["pct_link"] is not None
                else f"link rate unknown ({r['link_class']})")
        out.append(fit(f"{lead}  {r['op']} {human_size(r['size'])}: {what} {r['measured_gbs']:.4g} GB/s: "
                       f"{r['pct_expected']:.0f}% of expected {r['expected_gbs']:g} GB/s, {link}", lead + "    "))
        out.append(fit(f"{lead}    expected: {r['hardware']}; {r['source']}", lead + "      "))
    return out
