"""Cluster validation: which links, ranks, devices or hosts are bad.

    report = check(doc, load_rules(path_or_None))
    report["status"]  -> "pass" | "fail" | "unconfirmed" (finding_kinds.status);  report["findings"] -> [finding, ...]

Checks, on pair bandwidth records of at least rules.min_size, per op, size and link class
(comm_bench.topology.linkmap):
  1. expected minimum: theoretical rate x efficiency, or an absolute floor (rules);
  2. robust outliers among peers (median / MAD), first per rank (the median of its
     pairs relative to their peers, so one bad host cannot drag the reference down even
     when it is half of a small run's pairs), then per pair among the rest;
  3. bad pairs that share one end name that end: the rank, its device, or its host
     (when all ranks of the host are bad).
  4. suspects, confirm, verdicts, findings (beside this file): confirm-phase verdicts (keep, add or withdraw findings),
     instability, links trained below their peers, and each finding's confidence.
Also: records with #wrong > 0 and a run whose status is "failed".
Rules file format: docs/validate-rules.md; defaults: comm_bench/data/rules.yaml.
"""
from __future__ import annotations

import functools
import statistics

from .latency_confirm import confirm_latency
from .stats import robust_low
from ..results.records import measured_gbs, one_buffer, pair_records, superseded
from ..results.document import collector_paused, load as load_results
from ..sizes import human_size
from .finding_kinds import NothingToCheck, finding, status
from .latency import check_latency
from .rules import (class_rule, expected_collective_min, expected_min, load_rules, outlier_rules,
                             parse_size)

# ----------------------------------------------------------------------------- check
def check(doc, rules=None):
    from ..topology.linkmap import LinkMap

    rules = rules or load_rules()
    one_buffer(doc, "validate")     # host and GPU-buffer records are never one link's figures
    transport = (doc.get("transport") or "").lower()
    lm = LinkMap(doc)
    findings = []
    if doc.get("status") == "failed":
        f = doc.get("failure") or {}
        findings.append(finding("run-failed", f"the run failed on rank {f.get('rank')} "
                                 f"(host {f.get('host')}): {f.get('reason')}",
                                 rank=f.get("rank"), host=f.get("host")))
    from . import findings as diag
    old = superseded_findings(doc)
    findings += old
    all_recs = [r for r in pair_records(doc) if superseded(r) is None]   # their figures are wrong
    recs = diag.first_pass(all_recs)
    if rules.get("check_wrong", True):
        for r in doc.get("results") or []:
            if isinstance(r, dict) and isinstance(r.get("wrong"), int) and r["wrong"] > 0:
                where = f"pair {r.get('src')}->{r.get('dst')}" if "src" in r else "collective"
                findings.append(finding("wrong-data", f"{r['wrong']} wrong elements in {r.get('op')} "
                                         f"{human_size(r.get('size') or 0)} ({where})",
                                         src=r.get("src"), dst=r.get("dst"), size=r.get("size")))
    collective = collective_checks(doc, lm, rules, transport)
    findings += collective["findings"]
    latency, latency_checked = check_latency(doc, lm, outlier_rules(rules, transport))
    latency, latency_diagnosis = confirm_latency(doc, rules, lm, latency, outlier_rules(rules, transport)["latency_ratio"])
    if not recs:
        findings, diagnosis = diag.extend(doc, rules, lm, [], [], findings, all_recs)
        merge_latency(diagnosis, latency_diagnosis)
        if findings or latency or (latency_checked or {}).get("ranks_compared") \
                or any(c["expected_gbs"] is not None for c in collective["checked"]):
            return report(doc, rules, findings + latency, {"collectives": collective["checked"], "diagnosis": diagnosis,
                                                           "latency": latency_checked})
        if collective["checked"]:   # nothing to hold the busbw against: that is not a pass
            c = collective["checked"][0]
            raise NothingToCheck(f"nothing to check: collective records only, and no expected minimum for "
                             f"their link ({c['class']}: no theoretical rate known, no floor_gbs in the "
                             f"rules); add one with --rules, or run a sweep with --pattern pairwise")
        if latency_checked:
            raise NothingToCheck(f"nothing to check: latency records of {latency_checked['ranks']} ranks, and a rank's "
                                 f"latency is only held against its peers' (3 or more ranks, rules' min_peers)")
        raise NothingToCheck("no bandwidth or latency records to validate (run a sweep with --pattern "
                         "pairwise or pairwise-concurrent, --mode bw or lat, or a collective on 2 or more ranks)")
    checked_sizes = checked_size_list(recs, rules)
    o = outlier_rules(rules, transport)
    # observations: (op, size, class) -> {(src, dst): [values]}
    groups, theo_of = {}, {}
    for r in recs:
        if r["size"] not in checked_sizes:
            continue
        cls, theo = lm.classify(r["src"], r["dst"], r)
        key = (r.get("op"), r["size"], cls)
        groups.setdefault(key, {}).setdefault((r["src"], r["dst"]), []).append(measured_gbs(r))
        theo_of[(key, r["src"], r["dst"])] = theo
    obs = {}       # (key, pair) -> value
    for key, pairs in groups.items():
        for pair, vals in pairs.items():
            obs[(key, pair)] = statistics.median(vals)
    gmed = {key: statistics.median(obs[(key, p)] for p in pairs) for key, pairs in groups.items()}
    # 1. ranks, per link class: the median of their pairs' values relative to the
    #    group median, compared across ranks
    per_rank = {}   # class -> rank -> [relative values]
    for (key, (s, d)), v in obs.items():
        if s == d or gmed[key] <= 0:
            continue
        rel = v / gmed[key]
        per_cls = per_rank.setdefault(key[2], {})
        per_cls.setdefault(s, []).append(rel)
        per_cls.setdefault(d, []).append(rel)
    all_ranks = sorted({r for per_cls in per_rank.values() for r in per_cls})
    bad_ranks = {}
    for cls, per_cls in sorted(per_rank.items()):
        ranks = sorted(per_cls)
        if len(ranks) < max(3, int(o["min_peers"])):
            continue
        scores = [statistics.median(per_cls[r]) for r in ranks]
        idx, med, mad = robust_low(scores, o["z"], o["ratio"])
        for i in idx:
            bad_ranks.setdefault(ranks[i], {"score": scores[i], "peer_score": med,
                                            "reason": "outlier", "class": cls})
    # 2. pairs: below expected, or outliers among the pairs not explained by a bad rank
    bad_pair_sizes = {}     # pair -> set of sizes flagged
    pair_sizes = {}         # pair -> set of sizes checked
    pair_class = {}         # pair -> link class
    peer_med = {}           # (key, pair) -> median of its peers, for outlier pairs
    class_wide = []
    min_share = rules["blame"]["min_share"]
    rate_sizes = rate_checked_sizes(groups, rules, transport)
    exp_sizes, below_sizes = {}, {}   # pair -> sizes held against / below the expected minimum
    # one lookup per (class, theoretical rate), not per pair: 137,000 pairs at 1,024 ranks
    exp_of = functools.lru_cache(maxsize=None)(lambda cls, theo: expected_min(rules, transport, cls, theo))
    for key, pairs in groups.items():
        op, size, cls = key
        below = []
        for p in pairs:
            pair_sizes.setdefault(p, set()).add(size)
            pair_class[p] = cls
            exp = exp_of(cls, theo_of[(key,) + p]) if size in rate_sizes[cls] else None
            if exp is not None:
                exp_sizes.setdefault(p, set()).add(size)
            if exp is not None and obs[(key, p)] < exp:
                below.append((p, exp))
        if below and len(below) >= 0.5 * len(pairs) and len(pairs) >= 2:
            # most of the class is slow: a few shared ends, or the whole class?
            nranks = len({r for p in pairs for r in p})
            cover, left = _cover({p for p, _ in below}, set(pairs), min_share, max(1, (nranks - 1) // 2))
            if left:
                vals = [obs[(key, p)] for p, _ in below]
                class_wide.append((key, len(below), len(pairs), statistics.median(vals), below[0][1]))
                below = []
        for p, _ in below:
            below_sizes.setdefault(p, set()).add(size)
        rest = [p for p in pairs if p[0] not in bad_ranks and p[1] not in bad_ranks and p[0] != p[1]]
        if len(rest) >= max(3, int(o["min_peers"])):
            vals = [obs[(key, p)] for p in rest]
            idx, med, mad = robust_low(vals, o["z"], o["pair_ratio"])
            for i in idx:
                bad_pair_sizes.setdefault(rest[i], set()).add(size)
                peer_med[(key, rest[i])] = med
    bad_pairs = {p for p, s in bad_pair_sizes.items()
                 if len(s) >= o["min_size_fraction"] * len(pair_sizes.get(p, s))}
    bad_pairs |= {p for p, s in below_sizes.items() if len(s) >= o["min_size_fraction"] * len(exp_sizes[p])}
    # 3. blame, per link class: pairs of already-bad ranks are explained; a greedy cover
    #    names the ends that most bad pairs share
    remaining = set()
    for cls in sorted({pair_class[p] for p in bad_pairs}):
        bad = {p for p in bad_pairs if pair_class[p] == cls and p[0] not in bad_ranks and p[1] not in bad_ranks}
        measured = {p for p in pair_sizes if pair_class[p] == cls}
        cover, left = _cover(bad, measured, min_share, len(bad))
        for r, c, share in cover:
            bad_ranks[r] = {"reason": "shared end", "bad_pairs": c, "share": share, "class": cls}
        remaining |= left
    # findings for ranks, merged into hosts / devices
    findings += _entity_findings(bad_ranks, lm, obs, groups, gmed)
    for key, nbelow, npairs, med, exp in class_wide:
        op, size, cls = key
        findings.append(finding(
            "class-below-expected",
            f"{nbelow} of {npairs} {cls} pairs ({op} {human_size(size)}) are below the expected "
            f"minimum {exp:.3g} GB/s (their median {med:.3g} GB/s): check the fabric or the "
            f"rules' efficiency for {cls}", link_class=cls, size=size, op=op,
            measured_gbs=med, expected_gbs=exp))
    for p in sorted(remaining):
        findings.append(_pairfinding(p, lm, obs, groups, peer_med, theo_of, rules, transport))
    findings, diagnosis = diag.extend(doc, rules, lm, recs, checked_sizes, findings, all_recs, groups, (obs, gmed))
    merge_latency(diagnosis, latency_diagnosis)
    return report(doc, rules, findings + latency, {"diagnosis": diagnosis, "latency": latency_checked,
                                                   "pairs": len(pair_sizes), "sizes": checked_sizes,
                                          "groups": [dict(_group_rate(k, v, theo_of, rules, transport, rate_sizes),
                                                          op=k[0], size=k[1], pairs=len(v), median_gbs=gmed[k])
                                                     for k, v in sorted(groups.items(), key=_group_order)],
                                          "ranks": len(all_ranks), "collectives": collective["checked"]})


def merge_latency(diagnosis, latency):
    """The latency confirm verdicts beside bandwidth's in one diagnosis (latency_confirm.py)."""
    diagnosis["latency_verdicts"] = latency["verdicts"]
    diagnosis["withdrawn"] = diagnosis.get("withdrawn", []) + latency["withdrawn"]


def superseded_findings(doc):
    """One finding per reason: records whose figure came from a method since found wrong
    are not checked against anything, and the run does not pass with them."""
    by_why = {}
    for r in doc.get("results") or []:
        why = superseded(r) if isinstance(r, dict) else None
        if why:
            by_why.setdefault(why, []).append(r)
    return [finding("superseded-method", f"{len(rs)} record(s) ({', '.join(sorted({str(r.get('op')) for r in rs}))}"
                    f" {', '.join(human_size(s) for s in sorted({r.get('size') or 0 for r in rs}))}): {why}",
                    records=len(rs), op=rs[0].get("op"))
            for why, rs in by_why.items()]


def checked_size_list(recs, rules):
    """The sizes bandwidth checks use: those >= rules.min_size, else the largest."""
    min_size = parse_size(rules["min_size"])
    sizes = sorted({r["size"] for r in recs})
    return [s for s in sizes if s >= min_size] or [sizes[-1]]


def rate_checked_sizes(groups, rules, transport):
    """class -> the sizes held against the class's expected minimum: those from its own
    min_size (a link class whose rate small transfers cannot reach), else its largest."""
    out = {}
    for _, size, cls in groups:
        out.setdefault(cls, set()).add(size)
    for cls, sizes in out.items():
        floor = class_rule(rules, transport, cls).get("min_size")
        floor = parse_size(floor) if floor is not None else 0
        out[cls] = {s for s in sizes if s >= floor} or {max(sizes)}
    return out


def _group_rate(key, pairs, theo_of, rules, transport, rate_sizes):
    """A checked group's link: class, the slowest theoretical rate among its pairs and
    the expected minimum held against them at this size (None: compared with peers only)."""
    rates = [theo_of[(key,) + p] for p in pairs if theo_of[(key,) + p]]
    theo = min(rates) if rates else None
    exp = expected_min(rules, transport, key[2], theo) if key[1] in rate_sizes[key[2]] else None
    return {"class": key[2], "theoretical_gbs": theo, "expected_gbs": exp}


def _group_order(kv):
    """(op, size, class) with the size as a number: 1M, 2M, 16M (op/class may be None)."""
    op, size, cls = kv[0]
    return (str(op), size, str(cls))


def collective_checks(doc, lm, rules, transport):
    """Collectives on 2+ ranks: at the largest size of each op, busbw against the expected
    minimum of the slowest link its ring crosses (rank r -> r+1, the link every byte of a
    ring algorithm passes). Returns {"findings": [...], "checked": [...]}."""
    n = doc.get("world_size") or 0
    recs = [r for r in doc.get("results") or [] if isinstance(r, dict) and r.get("pattern") == "collective"
            and r.get("mode", "bw") == "bw" and measured_gbs(r) is not None]
    out = {"findings": [], "checked": []}
    if n < 2 or not recs:
        return out
    links = [lm.classify(r, (r + 1) % n) for r in range(n)]
    known = [(theo, cls) for cls, theo in links if theo]
    theo, cls = min(known) if known else (None, links[0][0])
    largest = {}
    for r in recs:
        if r.get("size", 0) >= largest.get(r.get("op"), {}).get("size", -1):
            largest[r.get("op")] = r
    for op, r in sorted(largest.items()):
        exp = expected_collective_min(rules, transport, cls, theo)
        got = measured_gbs(r)
        out["checked"].append({"op": op, "size": r["size"], "class": cls, "busbw": got,
                               "theoretical_gbs": theo, "expected_gbs": exp})
        if exp is not None and got < exp:
            out["findings"].append(finding(
                "collective-below-expected",
                f"{op} {human_size(r['size'])} on {n} ranks: busbw {got:.3g} GB/s is below the expected "
                f"minimum {exp:.3g} GB/s of its slowest link ({cls}, theoretical "
                f"{f'{theo:.3g} GB/s' if theo else 'unknown'})",
                op=op, size=r["size"], link_class=cls, measured_gbs=got, expected_gbs=exp))
    return out


def _cover(bad, measured, min_share, max_ends):
    """Greedy: ranks that most bad pairs share, each with >= min_share of its measured
    pairs bad and >= 2 bad pairs. Returns ([(rank, bad pairs, share)], unexplained)."""
    per_rank = {}
    for p in measured:
        for r in set(p):
            per_rank[r] = per_rank.get(r, 0) + 1
    cover, left = [], set(bad)
    while left and len(cover) < max_ends:
        count = {}
        for p in left:
            for r in set(p):
                count[r] = count.get(r, 0) + 1
        r, c = max(count.items(), key=lambda kv: (kv[1], -kv[0]))
        share = c / max(1, per_rank.get(r, 0))
        if c < 2 or share < min_share:
            break
        mine = {p for p in left if r in p}
        if any(q != r and {p for p in left if q in p} == mine for q in count):
            break     # another end shares every one of these pairs (a 2-rank run): neither is named
        cover.append((r, c, share))
        left = {p for p in left if r not in p}
    return cover, left


def _pair_stats(rank_set, obs, groups, gmed, classes=None):
    """median measured GB/s of the pairs involving rank_set at the largest checked size
    (of the given link classes), and the peers' median there."""
    if not groups:
        return None, None, (None, [])
    size = max(k[1] for k in groups)
    mine, peers, cls = [], [], set()
    for (key, p), v in obs.items():
        if key[1] != size or (classes and key[2] not in classes):
            continue
        if p[0] in rank_set or p[1] in rank_set:
            mine.append(v)
            cls.add(key[2])
        else:
            peers.append(v)
    return (statistics.median(mine) if mine else None,
            statistics.median(peers) if peers else None, (size, sorted(cls)))


def _entity_findings(bad_ranks, lm, obs, groups, gmed):
    out = []
    for node, rs, all_of_node in lm.by_node(bad_ranks):
        bad_cls = {bad_ranks[r].get("class") for r in rs} - {None}
        mine, peers, (size, classes) = _pair_stats(set(rs), obs, groups, gmed, bad_cls)
        npairs = sum(1 for (_, p) in obs if p[0] in rs or p[1] in rs)
        pct = f", {100 * mine / peers:.0f}% of the others' {peers:.3g} GB/s" if mine and peers else ""
        what = f"{mine:.3g} GB/s" if mine is not None else "?"
        devs = [lm.device(r)[1] for r in rs]
        if all_of_node:
            dev_txt = f", device {devs[0]}" if len(rs) == 1 and devs[0] is not None else ""
            out.append(finding(
                "bad-host", f"host {node} (rank{'s' if len(rs) > 1 else ''} "
                f"{', '.join(map(str, rs))}{dev_txt}) is slow: its pairs run at {what} median"
                f"{pct} ({'/'.join(classes)}, {human_size(size)}, {npairs} pair measurements)",
                host=node, ranks=rs, rank=rs[0] if len(rs) == 1 else None,
                device=devs[0] if len(rs) == 1 else None, measured_gbs=mine, peer_median_gbs=peers,
                link_class=classes[0] if len(classes) == 1 else classes, size=size))
            continue
        nic_groups = {}
        for r in rs:
            nic = lm.nic(r, None, "src")
            nic_groups.setdefault(nic.get("name") if nic else None, []).append(r)
        for nic, group in nic_groups.items():
            shared = [r for r in lm.ranks_of(node) if (lm.nic(r, None, "src") or {}).get("name") == nic]
            if nic and len(shared) > 1 and set(group) >= set(shared):
                m2, p2, (size2, cls2) = _pair_stats(set(group), obs, groups, gmed, bad_cls)
                out.append(finding(
                    "bad-device", f"NIC {nic} on host {node} (ranks {', '.join(map(str, group))}) is slow: "
                    f"{m2:.3g} GB/s median vs {p2:.3g} GB/s for the others ({human_size(size2)})",
                    host=node, ranks=group, device=nic, measured_gbs=m2, peer_median_gbs=p2, size=size2))
                continue
            for r in group:
                kind, val = lm.device(r)
                m3, p3, (size3, cls3) = _pair_stats({r}, obs, groups, gmed, bad_cls)
                dev = f"GPU{val}" if kind == "gpu" else val
                out.append(finding(
                    "bad-device" if dev is not None else "bad-rank",
                    f"rank {r} ({'device ' + str(dev) + ' ' if dev is not None else ''}on host {node}) is slow: "
                    f"{m3:.3g} GB/s median vs {p3:.3g} GB/s for the others ({'/'.join(cls3)}, "
                    f"{human_size(size3)})" if m3 is not None and p3 is not None else
                    f"rank {r} on host {node} is slow",
                    host=node, rank=r, ranks=[r], device=dev, measured_gbs=m3, peer_median_gbs=p3,
                    size=size3))
    return out


def _pairfinding(p, lm, obs, groups, peer_med, theo_of, rules, transport):
    size = max(k[1] for (k, q) in obs if q == p)
    key = next(k for (k, q) in obs if q == p and k[1] == size)
    v = obs[(key, p)]
    exp = expected_min(rules, transport, key[2], theo_of[(key,) + p])
    med = peer_med.get((key, p))
    if med is None:
        med = statistics.median(obs[(key, q)] for q in groups[key])
    why = (f"below the expected minimum {exp:.3g} GB/s" if exp is not None and v < exp
           else f"an outlier among its {key[2]} peers (median {med:.3g} GB/s)")
    return finding("bad-pair", f"pair {lm.label(p[0])} -> {lm.label(p[1])} (ranks {p[0]}->{p[1]}): "
                    f"{v:.3g} GB/s at {human_size(size)}, {why}",
                    src=p[0], dst=p[1], src_host=lm.node(p[0]), dst_host=lm.node(p[1]),
                    link_class=key[2], size=size, measured_gbs=v, expected_gbs=exp,
                    peer_median_gbs=med)


def report(doc, rules, findings, checked):
    out = {"findings": findings, "checked": checked,
            "transport": doc.get("transport"), "world_size": doc.get("world_size"),
            "rules": {"min_size": rules["min_size"],
                      "outliers": outlier_rules(rules, (doc.get("transport") or "").lower())}}
    return {"status": status(out), **out}


# ----------------------------------------------------------------------------- output
def run(results_path, rules_path=None):
    """load + check (what the command calls). check builds tables of a large document's
    pairs (a million objects at 1,024 ranks) and leaves no cycles: with the collector
    running it scanned them again and again, 1.5-2.3 s of a 7 s check."""
    rules = load_rules(rules_path)
    doc = load_results(results_path)
    with collector_paused():
        return check(doc, rules)


