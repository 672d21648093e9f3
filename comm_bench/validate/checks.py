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
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .latency_confirm import confirm_latency
from .pair_obs import Observations, PairColumns, segment_medians, stream_with
from .suspects import first_pass
from .stats import robust_low
from ..results.records import measured_gbs, one_buffer, pair_records, superseded
from ..results.document import collector_paused
from ..sizes import human_size
from .finding_kinds import NothingToCheck, finding, status
from .latency import check_latency
from .rules import (class_rule, document_outlier_rules, expected_collective_min, expected_min, load_rules,
                    outlier_rules, parse_size)

if TYPE_CHECKING:
    Key = tuple[Any, int, Any]      # an Observations group: (op, size, link class)
# ----------------------------------------------------------------------------- check
def check(doc: dict[str, Any], rules: dict[str, Any] | None = None,
          pairs: PairColumns | None = None) -> dict[str, Any]:
    """pairs: the first-pass pair records' figures (PairColumns) where a streaming reader
    kept them instead of the records; the pair records left in doc["results"] join them."""
    from ..topology.linkmap import LinkMap

    rules = rules or load_rules()
    one_buffer(doc, "validate", pairs.labels if pairs else ())   # host and GPU-buffer records are never one link's figures
    transport = (doc.get("transport") or "").lower()
    lm = pairs.lm if pairs else LinkMap(doc)
    findings: list[dict[str, Any]] = []
    if doc.get("status") == "failed":
        f = doc.get("failure") or {}
        findings.append(finding("run-failed", f"the run failed on rank {f.get('rank')} "
                                 f"(host {f.get('host')}): {f.get('reason')}",
                                 rank=f.get("rank"), host=f.get("host")))
    from . import findings as diag
    old = superseded_findings(doc)
    findings += old
    all_recs = [r for r in pair_records(doc) if superseded(r) is None]   # their figures are wrong
    cols = pairs or PairColumns(lm)
    for r in first_pass(all_recs):
        cols.add(r)
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
    if not cols.count:
        findings, diagnosis = diag.extend(doc, rules, lm, None, [], findings, all_recs)
        merge_latency(diagnosis, latency_diagnosis)
        if findings or latency or (latency_checked or {}).get("ranks_compared") \
                or any(c["expected_gbs"] is not None for c in collective["checked"]):
            return report(doc, rules, findings + latency, {"collectives": collective["checked"], "diagnosis": diagnosis,
                                                           "latency": latency_checked})
        from .health import present
        if present(doc):    # the GPUs' and NICs' own readings are a check of their own
            return report(doc, rules, findings + latency, {"collectives": collective["checked"],
                                                           "diagnosis": diagnosis, "latency": latency_checked})
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
    checked_sizes = checked_size_list(cols.sizes(), rules)
    o = outlier_rules(rules, transport)
    obs = Observations(cols, set(checked_sizes))    # (op, size, class) groups: each pair's median GB/s
    names = sorted({k[2] for k in obs.keys})
    ocls = np.array([names.index(k[2]) for k in obs.keys], dtype=int)[obs.g]
    gmed = obs.gmed[obs.g]
    # 1. ranks, per link class: the median of their pairs' values relative to the
    #    group median, compared across ranks
    ok = (obs.s != obs.d) & (gmed > 0)
    rel = np.divide(obs.v, gmed, out=np.zeros(len(obs)), where=ok)
    all_ranks: set[int] = set()
    bad_ranks: dict[int, dict[str, Any]] = {}
    for ci, cls in enumerate(names):
        m = ok & (ocls == ci)
        ranks, scores = segment_medians(np.concatenate([obs.s[m], obs.d[m]]), np.concatenate([rel[m], rel[m]]))
        all_ranks.update(ranks.tolist())
        if len(ranks) < max(3, int(o["min_peers"])):
            continue
        idx, med, mad = robust_low(cast("Sequence[float]", scores), o["z"], o["ratio"])    # an array: asarray'd there
        for i in idx:
            bad_ranks.setdefault(int(ranks[i]), {"score": float(scores[i]), "peer_score": med,
                                                 "reason": "outlier", "class": cls})
    # 2. pairs: below expected, or outliers among the pairs not explained by a bad rank
    # pair -> sizes flagged / below the expected minimum
    bad_pair_sizes: dict[tuple[int, int], set[int]] = {}
    below_sizes: dict[tuple[int, int], set[int]] = {}
    peer_med: dict[tuple[Key, tuple[int, int]], float | None] = {}  # (key, pair) -> its peers' median (outliers)
    class_wide: list[tuple[Key, int, int, float, float]] = []
    min_share = rules["blame"]["min_share"]
    rate_sizes = rate_checked_sizes(obs.keys, rules, transport)
    exp = np.full(len(obs), np.nan)     # the expected minimum each pair is held against
    # one lookup per (class, theoretical rate), not per pair: 137,000 pairs at 1,024 ranks
    exp_of = functools.lru_cache(maxsize=None)(lambda cls, theo: expected_min(rules, transport, cls, theo))
    bad_mask = np.zeros(int(max(obs.s.max(initial=0), obs.d.max(initial=0))) + 1, dtype=bool)
    bad_mask[list(bad_ranks)] = True
    for gi, key in enumerate(obs.keys):
        op, size, cls = key
        sl = obs.group(gi)
        s, d, v = obs.s[sl], obs.d[sl], obs.v[sl]
        if size in rate_sizes[cls]:
            links, inverse = np.unique(obs.link[sl], return_inverse=True)
            mins = [exp_of(cls, obs.links[li][1]) for li in links.tolist()]
            exp[sl] = np.array([np.nan if x is None else x for x in mins])[inverse]
        below = np.flatnonzero(v < exp[sl])     # NaN (no expected minimum) compares False
        if len(below) and len(below) >= 0.5 * len(v) and len(v) >= 2:
            # most of the class is slow: a few shared ends, or the whole class?
            nranks = len(np.union1d(s, d))
            cover, left = _cover(set(zip(s[below].tolist(), d[below].tolist())), _ends(s, d), min_share,
                                 max(1, (nranks - 1) // 2))
            if left:
                class_wide.append((key, len(below), len(v), float(np.median(v[below])), float(exp[sl][below[0]])))
                below = below[:0]
        for p in zip(s[below].tolist(), d[below].tolist()):
            below_sizes.setdefault(p, set()).add(size)
        rest = np.flatnonzero(~bad_mask[s] & ~bad_mask[d] & (s != d))
        if len(rest) >= max(3, int(o["min_peers"])):
            idx, med, mad = robust_low(cast("Sequence[float]", v[rest]), o["z"], o["pair_ratio"])  # asarray'd there
            for i in rest[idx]:
                p = (int(s[i]), int(d[i]))
                bad_pair_sizes.setdefault(p, set()).add(size)
                peer_med[(key, p)] = med
    seen = _sizes_of(obs, set(bad_pair_sizes) | set(below_sizes), exp)
    bad_pairs = {p for p, ss in bad_pair_sizes.items() if len(ss) >= o["min_size_fraction"] * len(seen[p][0])}
    bad_pairs |= {p for p, ss in below_sizes.items() if len(ss) >= o["min_size_fraction"] * len(seen[p][1])}
    # 3. blame, per link class: pairs of already-bad ranks are explained; a greedy cover
    #    names the ends that most bad pairs share
    remaining: set[tuple[int, int]] = set()
    pair_class = {p: seen[p][2] for p in bad_pairs}     # the class of a pair's last group
    for cls in sorted(set(pair_class.values())):
        bad = {p for p in bad_pairs if pair_class[p] == cls and p[0] not in bad_ranks and p[1] not in bad_ranks}
        cover, left = _cover(bad, _measured_ends(obs, ocls, names.index(cls)), min_share, len(bad))
        for end, nbad, share in cover:
            bad_ranks[end] = {"reason": "shared end", "bad_pairs": nbad, "share": share, "class": cls}
        remaining |= left
    # findings for ranks, merged into hosts / devices
    findings += _entity_findings(bad_ranks, lm, obs)
    for key, nbelow, npairs, low_med, exp_min in class_wide:
        op, size, cls = key
        findings.append(finding(
            "class-below-expected",
            f"{nbelow} of {npairs} {cls} pairs ({op} {human_size(size)}) are below the expected "
            f"minimum {exp_min:.3g} GB/s (their median {low_med:.3g} GB/s): check the fabric or the "
            f"rules' efficiency for {cls}", link_class=cls, size=size, op=op,
            measured_gbs=low_med, expected_gbs=exp_min))
    for p in sorted(remaining):
        findings.append(_pairfinding(p, lm, obs, peer_med, rules, transport,
                                     bad_pair_sizes.get(p, set()) | below_sizes.get(p, set())))
    findings, diagnosis = diag.extend(doc, rules, lm, cols, checked_sizes, findings, all_recs, obs)
    merge_latency(diagnosis, latency_diagnosis)
    npairs = len(np.unique(obs.codes()[0]))
    return report(doc, rules, findings + latency, {"diagnosis": diagnosis, "latency": latency_checked,
                                                   "pairs": npairs, "sizes": checked_sizes,
                                          "groups": [dict(_group_rate(obs, gi, rules, transport, rate_sizes),
                                                          op=k[0], size=k[1], pairs=int(obs.end[gi] - obs.start[gi]),
                                                          median_gbs=float(obs.gmed[gi]))
                                                     for gi, k in sorted(enumerate(obs.keys), key=_group_order)],
                                          "ranks": len(all_ranks), "collectives": collective["checked"]})


def _sizes_of(obs: Observations, pairs: set[tuple[int, int]],
              exp: np.ndarray) -> dict[tuple[int, int], tuple[set[int], set[int], Any]]:
    """pair -> (its checked sizes, those held against an expected minimum, the class of its
    last group), for the few pairs flagged."""
    out: dict[tuple[int, int], tuple[set[int], set[int], Any]] = {p: (set(), set(), None) for p in pairs}
    if not pairs:
        return out
    code, n = obs.codes()
    want = np.array([s * n + d for s, d in pairs if s < n and d < n], dtype=code.dtype)
    for i in np.flatnonzero(np.isin(code, want)).tolist():
        p, (_op, size, cls) = (int(obs.s[i]), int(obs.d[i])), obs.keys[obs.g[i]]
        sizes, exp_sizes, _ = out[p]
        sizes.add(size)
        if not np.isnan(exp[i]):
            exp_sizes.add(size)
        out[p] = (sizes, exp_sizes, cls)
    return out


def _ends(s: np.ndarray, d: np.ndarray) -> dict[int, int]:
    """rank -> how many of the pairs (s[i], d[i]) it is an end of."""
    ranks, counts = np.unique(np.concatenate([s, d[d != s]]), return_counts=True)
    return dict(zip(ranks.tolist(), counts.tolist()))


def _measured_ends(obs: Observations, ocls: np.ndarray, ci: int) -> dict[int, int]:
    """_ends of the distinct pairs whose last group is of class ci."""
    code = obs.codes()[0]
    _, back = np.unique(code[::-1], return_index=True)
    last = len(code) - 1 - back
    last = last[ocls[last] == ci]
    return _ends(obs.s[last], obs.d[last])


def merge_latency(diagnosis: dict[str, Any], latency: dict[str, Any]) -> None:
    """The latency confirm verdicts beside bandwidth's in one diagnosis (latency_confirm.py)."""
    diagnosis["latency_verdicts"] = latency["verdicts"]
    diagnosis["withdrawn"] = diagnosis.get("withdrawn", []) + latency["withdrawn"]
    diagnosis["unconfirmed_findings"] = diagnosis.get("unconfirmed_findings", []) + latency["unconfirmed_findings"]


def superseded_findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One finding per reason: records whose figure came from a method since found wrong
    are not checked against anything, and the run does not pass with them."""
    by_why: dict[str, list[dict[str, Any]]] = {}
    for r in doc.get("results") or []:
        why = superseded(r) if isinstance(r, dict) else None
        if why:
            by_why.setdefault(why, []).append(r)
    return [finding("superseded-method", f"{len(rs)} record(s) ({', '.join(sorted({str(r.get('op')) for r in rs}))}"
                    f" {', '.join(human_size(s) for s in sorted({r.get('size') or 0 for r in rs}))}): {why}",
                    records=len(rs), op=rs[0].get("op"))
            for why, rs in by_why.items()]


def checked_size_list(sizes: Iterable[int], rules: dict[str, Any]) -> list[int]:
    """The sizes bandwidth checks use: those >= rules.min_size, else the largest."""
    min_size = parse_size(rules["min_size"])
    ordered = sorted(set(sizes))
    return [s for s in ordered if s >= min_size] or [ordered[-1]]


def rate_checked_sizes(groups: Iterable[Key], rules: dict[str, Any], transport: str) -> dict[Any, set[int]]:
    """class -> the sizes held against the class's expected minimum: those from its own
    min_size (a link class whose rate small transfers cannot reach), else its largest."""
    out: dict[Any, set[int]] = {}
    for _, size, cls in groups:
        out.setdefault(cls, set()).add(size)
    for cls, sizes in out.items():
        given = class_rule(rules, transport, cls).get("min_size")
        floor = parse_size(given) if given is not None else 0
        out[cls] = {s for s in sizes if s >= floor} or {max(sizes)}
    return out


def _group_rate(obs: Observations, gi: int, rules: dict[str, Any], transport: str,
                rate_sizes: dict[Any, set[int]]) -> dict[str, Any]:
    """A checked group's link: class, the slowest theoretical rate among its pairs and
    the expected minimum held against them at this size (None: compared with peers only)."""
    key = obs.keys[gi]
    rates = [r for r in (obs.links[li][1] for li in np.unique(obs.link[obs.group(gi)]).tolist()) if r]
    theo = min(rates) if rates else None
    exp = expected_min(rules, transport, key[2], theo) if key[1] in rate_sizes[key[2]] else None
    return {"class": key[2], "theoretical_gbs": theo, "expected_gbs": exp}


def _group_order(kv: tuple[int, Key]) -> tuple[str, int, str]:
    """(op, size, class) with the size as a number: 1M, 2M, 16M (op/class may be None)."""
    op, size, cls = kv[1]
    return (str(op), size, str(cls))


def collective_checks(doc: dict[str, Any], lm: Any, rules: dict[str, Any],
                      transport: str) -> dict[str, list[dict[str, Any]]]:
    """Collectives on 2+ ranks: at the largest size of each op, busbw against the expected
    minimum of the slowest link its ring crosses (rank r -> r+1, the link every byte of a
    ring algorithm passes). Returns {"findings": [...], "checked": [...]}."""
    n = doc.get("world_size") or 0
    recs = [r for r in doc.get("results") or [] if isinstance(r, dict) and r.get("pattern") == "collective"
            and r.get("mode", "bw") == "bw" and measured_gbs(r) is not None]
    out: dict[str, list[dict[str, Any]]] = {"findings": [], "checked": []}
    if n < 2 or not recs:
        return out
    links = [lm.classify(r, (r + 1) % n) for r in range(n)]
    known = [(theo, cls) for cls, theo in links if theo]
    theo, cls = min(known) if known else (None, links[0][0])
    largest: dict[Any, dict[str, Any]] = {}
    for r in recs:
        if r.get("size", 0) >= largest.get(r.get("op"), {}).get("size", -1):
            largest[r.get("op")] = r
    for op, r in sorted(largest.items()):
        exp = expected_collective_min(rules, transport, cls, theo)
        got = cast(float, measured_gbs(r))     # not None: recs hold only records with a figure
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


def _cover(bad: set[tuple[int, int]], measured: dict[int, int], min_share: float,
           max_ends: int) -> tuple[list[tuple[int, int, float]], set[tuple[int, int]]]:
    """Greedy: ranks that most bad pairs share, each with >= min_share of its measured
    pairs bad and >= 2 bad pairs (measured: rank -> its measured pairs).
    Returns ([(rank, bad pairs, share)], unexplained)."""
    cover: list[tuple[int, int, float]] = []
    left = set(bad)
    while left and len(cover) < max_ends:
        count: dict[int, int] = {}
        for p in left:
            for r in set(p):
                count[r] = count.get(r, 0) + 1
        r, c = max(count.items(), key=lambda kv: (kv[1], -kv[0]))
        share = c / max(1, measured.get(r, 0))
        if c < 2 or share < min_share:
            break
        mine = {p for p in left if r in p}
        if any(q != r and {p for p in left if q in p} == mine for q in count):
            break     # another end shares every one of these pairs (a 2-rank run): neither is named
        cover.append((r, c, share))
        left = {p for p in left if r not in p}
    return cover, left


def _pair_stats(rank_set: set[int], obs: Observations,
                classes: set[Any] | None = None) -> tuple[float | None, float | None, tuple[int | None, list[Any]]]:
    """median measured GB/s of the pairs involving rank_set at the largest checked size
    (of the given link classes), and the peers' median there."""
    if not obs.keys:
        return None, None, (None, [])
    size = max(k[1] for k in obs.keys)
    at = np.array([k[1] == size and not (classes and k[2] not in classes) for k in obs.keys])[obs.g]
    ends = list(rank_set)
    mine = at & (np.isin(obs.s, ends) | np.isin(obs.d, ends))
    cls = sorted({obs.keys[g][2] for g in np.unique(obs.g[mine]).tolist()})
    peers = obs.v[at & ~mine]
    return (float(np.median(obs.v[mine])) if mine.any() else None,
            float(np.median(peers)) if len(peers) else None, (size, cls))


def _entity_findings(bad_ranks: dict[int, dict[str, Any]], lm: Any, obs: Observations) -> list[dict[str, Any]]:
    """Findings of the bad ranks, merged into hosts and devices (the sizes quoted are never
    None: a rank is bad only in a group of obs)."""
    out: list[dict[str, Any]] = []
    for node, rs, all_of_node in lm.by_node(bad_ranks):
        bad_cls = {bad_ranks[r].get("class") for r in rs} - {None}
        mine, peers, (size, classes) = _pair_stats(set(rs), obs, bad_cls)
        npairs = int((np.isin(obs.s, rs) | np.isin(obs.d, rs)).sum())
        pct = f", {100 * mine / peers:.0f}% of the others' {peers:.3g} GB/s" if mine and peers else ""
        what = f"{mine:.3g} GB/s" if mine is not None else "?"
        devs = [lm.device(r)[1] for r in rs]
        if all_of_node:
            dev_txt = f", device {devs[0]}" if len(rs) == 1 and devs[0] is not None else ""
            out.append(finding(
                "bad-host", f"host {node} (rank{'s' if len(rs) > 1 else ''} "
                f"{', '.join(map(str, rs))}{dev_txt}) is slow: its pairs run at {what} median"
                f"{pct} ({'/'.join(classes)}, {human_size(cast(int, size))}, {npairs} pair measurements)",
                host=node, ranks=rs, rank=rs[0] if len(rs) == 1 else None,
                device=devs[0] if len(rs) == 1 else None, measured_gbs=mine, peer_median_gbs=peers,
                link_class=classes[0] if len(classes) == 1 else classes, size=size))
            continue
        nic_groups: dict[Any, list[int]] = {}
        for r in rs:
            nic = lm.nic(r, None, "src")
            nic_groups.setdefault(nic.get("name") if nic else None, []).append(r)
        for nic, group in nic_groups.items():
            shared = [r for r in lm.ranks_of(node) if (lm.nic(r, None, "src") or {}).get("name") == nic]
            if nic and len(shared) > 1 and set(group) >= set(shared):
                m2, p2, (size2, cls2) = _pair_stats(set(group), obs, bad_cls)
                out.append(finding(
                    "bad-device", f"NIC {nic} on host {node} (ranks {', '.join(map(str, group))}) is slow: "
                    f"{m2:.3g} GB/s median vs {p2:.3g} GB/s for the others ({human_size(cast(int, size2))})",
                    host=node, ranks=group, device=nic, measured_gbs=m2, peer_median_gbs=p2, size=size2))
                continue
            for r in group:
                kind, val = lm.device(r)
                m3, p3, (size3, cls3) = _pair_stats({r}, obs, bad_cls)
                dev = f"GPU{val}" if kind == "gpu" else val
                out.append(finding(
                    "bad-device" if dev is not None else "bad-rank",
                    f"rank {r} ({'device ' + str(dev) + ' ' if dev is not None else ''}on host {node}) is slow: "
                    f"{m3:.3g} GB/s median vs {p3:.3g} GB/s for the others ({'/'.join(cls3)}, "
                    f"{human_size(cast(int, size3))})" if m3 is not None and p3 is not None else
                    f"rank {r} on host {node} is slow",
                    host=node, rank=r, ranks=[r], device=dev, measured_gbs=m3, peer_median_gbs=p3,
                    size=size3))
    return out


def _pairfinding(p: tuple[int, int], lm: Any, obs: Observations,
                 peer_med: dict[tuple[Key, tuple[int, int]], float | None], rules: dict[str, Any], transport: str,
                 flagged: Iterable[int] = ()) -> dict[str, Any]:
    """The finding of a bad pair, quoting the largest size it was flagged at (below its
    expected minimum, or an outlier among its peers), with that size's figures."""
    idx = obs.at(p)
    sizes = {obs.keys[g][1] for g in obs.g[idx].tolist()}
    size = max(sizes & set(flagged) or sizes)
    i = next(i for i in idx.tolist() if obs.keys[obs.g[i]][1] == size)
    key, v = obs.keys[obs.g[i]], float(obs.v[i])
    exp = expected_min(rules, transport, key[2], obs.links[obs.link[i]][1])
    med = peer_med.get((key, p))
    if med is None:
        med = float(obs.gmed[obs.g[i]])
    why = (f"below the expected minimum {exp:.3g} GB/s" if exp is not None and v < exp
           else f"an outlier among its {key[2]} peers (median {med:.3g} GB/s)")
    return finding("bad-pair", f"pair {lm.label(p[0])} -> {lm.label(p[1])} (ranks {p[0]}->{p[1]}): "
                    f"{v:.3g} GB/s at {human_size(size)}, {why}",
                    src=p[0], dst=p[1], src_host=lm.node(p[0]), dst_host=lm.node(p[1]),
                    link_class=key[2], size=size, measured_gbs=v, expected_gbs=exp,
                    peer_median_gbs=med)


def report(doc: dict[str, Any], rules: dict[str, Any], findings: list[dict[str, Any]],
           checked: dict[str, Any]) -> dict[str, Any]:
    from . import health
    findings, read = health.apply(doc, findings, finding)    # causes beside findings; health findings
    if read is not None:
        checked = dict(checked, health=read)
    out = {"findings": findings, "checked": checked,
            "transport": doc.get("transport"), "world_size": doc.get("world_size"),
            "rules": {"min_size": rules["min_size"],
                      "outliers": document_outlier_rules(rules, doc)}}
    return {"status": status(out), **out}


# ----------------------------------------------------------------------------- output
def run(results_path: str, rules_path: str | None = None) -> dict[str, Any]:
    """read + check (what `comm-bench check` calls)."""
    rules = load_rules(rules_path)
    doc, pairs = read(results_path)
    with collector_paused():
        return check(doc, rules, pairs)


def read(path: str) -> tuple[dict[str, Any], PairColumns | None]:
    """(doc, pairs): a large document streamed, its plain pair records kept as PairColumns
    (pairs), the others in doc["results"]; a small one read whole (pairs None)."""
    return stream_with(path, PairColumns)
