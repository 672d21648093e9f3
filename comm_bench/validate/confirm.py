"""The confirm phase of a pair sweep (`sweep --confirm K`, and `check`): after the first
pass of an op, rank 0 names the suspects (suspects.py) and every rank re-measures them,
one pair at a time at the largest size, K times, each time next to a known-good
reference measured just before or after it (the order alternates), so slow drift, a CPU
hog or another job hits both sides of each comparison alike. verdicts.py reads the records.

Records of this phase carry "confirm": {"id", "target", "why", "alt", "role", "dir"}.
A `--mode lat` sweep confirms its latency suspects the same way, at its smallest size,
comparing speeds = 1 / the median one-way latency (measure_of).
"""
from __future__ import annotations

import json
import math
import statistics


# alternations per suspect unless --confirm says otherwise (sweep, check, simulate): the
# one-sided signed-rank test needs 5 to reach 0.95 at all; 8 reached it for a 60% host and
# a flapping one on the netns fabric (docs/validate-rules.md)
DEFAULT_ALTERNATIONS = 8
LONG_S = 0.5    # a suspect's measurements last at least this long (up to 4x --iters)


def span_iters(iters, t_us):
    """Iterations for a suspect whose first-pass iteration took t_us: enough that each of its
    measurements spans LONG_S of a link's swings, at most 4x the sweep's own. Every suspect
    gets them, not only those named unstable: a link toggling every 0.3 s can read merely
    slow in the first pass, and 8 iterations of 17 ms then often fall inside one phase (a
    recorded CI run: unsteady in 3 of 8 alternations, so not named unstable). A slow suspect's
    own iterations are long, so it rarely needs more."""
    if not t_us or t_us <= 0:
        return None
    return min(4 * iters, max(iters, math.ceil(LONG_S * 1e6 / t_us)))


def plan(suspects, good, alternations):
    """Rounds [(src, dst, tag, iters)] for the suspects; none without two known-good ranks.
    A suspect's "iters" (span_iters) are used for it and its references; absent: the sweep's own."""
    rounds = []
    if len(good) < 2:
        return rounds
    for i, s in enumerate(suspects):
        target = {"rank": s["rank"]} if s["kind"] == "rank" else {"src": s["src"], "dst": s["dst"]}
        base = {"id": i, "kind": s["kind"], "target": target, "why": list(s["why"])}
        iters = s.get("iters")
        for k in range(int(alternations)):
            if s["kind"] == "rank":
                p, g = good[k % len(good)], good[(k + 1) % len(good)]
                sus = [(s["rank"], p, "out"), (p, s["rank"], "in")]
                ref = [(g, p, "out"), (p, g, "in")]
            else:
                others = [r for r in good if r not in (s["src"], s["dst"])] or good
                g, h = others[k % len(others)], others[(k + 1) % len(others)]
                sus, ref = [(s["src"], s["dst"], "out")], [(g, h, "out")]
            first, second = (sus, ref) if k % 2 == 0 else (ref, sus)
            roles = ("suspect", "reference") if k % 2 == 0 else ("reference", "suspect")
            for a, b in zip(first, second):
                for (src, dst, d), role in ((a, roles[0]), (b, roles[1])):
                    rounds.append((src, dst, dict(base, alt=k, role=role, dir=d), iters))
    return rounds


def measure_of(mode):
    """(the document's records of a mode, value(rec): a speed, higher is better) that
    suspects and verdicts compare: bandwidth in GB/s, or 1 / the median one-way latency."""
    from ..results.records import inverse_latency, latency_pair_records, measured_gbs, pair_records

    return (latency_pair_records, inverse_latency) if mode == "lat" else (pair_records, measured_gbs)


def suspects_of(doc, rules, mode="bw"):
    """Rank 0: suspects, known-good ranks, and each suspect's median time_us at the largest
    size (a rank: over its pairs; a pair: its own), in the order of the suspects. mode "lat":
    suspects by latency, at every size (validate_latency checks them all)."""
    from ..topology.linkmap import LinkMap
    from .checks import checked_size_list
    from .pair_obs import PairColumns
    from .rules import document_outlier_rules
    from .suspects import PairTable, find, first_pass, suspect_key

    records, value = measure_of(mode)
    recs = first_pass(records(doc))
    if not recs:
        return [], [], []
    lm = LinkMap(doc)
    cols = PairColumns(lm, value)
    for r in recs:
        cols.add(r)
    sizes = cols.sizes() if mode == "lat" else checked_size_list(cols.sizes(), rules)
    table = PairTable(cols, sizes)
    o = document_outlier_rules(rules, doc)
    sus, good = find(table, rules["confirm"], int(rules["outliers"]["min_peers"]),
                     named=latency_named(doc, lm, o) if mode == "lat" else (),
                     pair_ratio=0.0 if mode == "lat" else o["pair_ratio"])
    size = max(r["size"] for r in recs)
    keys = [suspect_key(s) for s in sus]
    times = {k: [] for k in keys}
    for r in recs:      # one pass: a 4,096-node first pass holds millions of records
        t = r.get("time_us")
        if r["size"] == size and isinstance(t, (int, float)) and t > 0:
            for k in (("rank", r["src"]), ("rank", r["dst"]), ("pair", r["src"], r["dst"])):
                if k in times:
                    times[k].append(t)
    return sus, good, [statistics.median(times[k]) if times[k] else None for k in keys]


def latency_named(doc, lm, o):
    """The ranks and pairs validate's latency check names from the first pass, as suspects
    (o: the document's outlier rules)."""
    from .latency import check_latency

    found, _ = check_latency(doc, lm, o)
    out = []
    for f in found:
        if f["kind"] == "high-latency-pair":
            out.append({"kind": "pair", "src": f["src"], "dst": f["dst"], "why": ["slow"], "score": None})
        else:
            out += [{"kind": "rank", "rank": r, "why": ["slow"], "score": None} for r in f.get("ranks") or []]
    return out


def run_phase(run, op, first_round=0):
    """Every rank of a sweep (_RankRun) after the first pass of a pair op."""
    from .rules import load_rules

    rounds = None
    mode = getattr(run.cfg, "mode", "bw")
    if run.rank == 0:
        rules = load_rules(run.cfg.rules)
        # a beat before finding the suspects of a large first pass (a long step of its own):
        # the others then wait at least one more --timeout for the plan
        run.store.progressing()
        doc = dict(run.writer.meta, results=[json.loads(r) for r in run.writer.records])
        sus, good, times = suspects_of(doc, rules, mode)
        for s, t_us in zip(sus, times):
            s["iters"] = span_iters(run.cfg.iters, t_us)
        rounds = plan(sus, good, run.cfg.confirm)
        if sus:
            names = ", ".join(f"rank {s['rank']}" if s["kind"] == "rank" else f"pair {s['src']}->{s['dst']}"
                              for s in sus)
            run.progress.line(f"# confirm: re-measuring {names} against known-good pairs "
                              f"({len(rounds)} measurements)")
    rounds = run.store.broadcast(0, f"cb/confirm/{op}", rounds)
    # bandwidth: the largest size (the figure a link is judged by); latency: the smallest
    size, asked = run._plan(op)[0 if mode == "lat" else -1]
    for idx, (src, dst, tag, iters) in enumerate(rounds):
        run._pairs(op, size, first_round + idx, [(src, dst)], asked, tag={"confirm": tag}, iters=iters)
        # one pair a round: the other ranks wait here for each one, not for the whole phase at
        # the run's end (a phase of slow pairs can outlast --timeout; one of its rounds cannot)
        run.store.barrier(f"cb/confirm/{op}/round")
    if run.rank == 0:
        recs = [r for r in map(json.loads, run.writer.records) if r.get("op") == op
                and isinstance(r.get("confirm"), dict)]
        run.progress.line(verdict_line(sus, good, recs, rules, mode))


def verdict_line(suspects, good, recs, rules, mode="bw"):
    """The confirm phase's outcome in one line: each suspect slow / unstable (confirmed,
    with its ratio to the references and the confidence) or not reproduced."""
    from .verdicts import judge

    value = measure_of(mode)[1]
    unit = "speed (1 / latency)" if mode == "lat" else "GB/s"
    if not suspects:
        return "# confirm verdict: no suspects: every rank and pair ran like its peers in the first pass"
    if len(good) < 2:
        return "# confirm verdict: not re-measured: fewer than two known-good ranks to compare the suspects with"
    parts = []
    for v in judge(recs, rules, value):
        t = v["target"]
        name = f"rank {t['rank']}" if "rank" in t else f"pair {t['src']}->{t['dst']}"
        found = [w for w in ("slow", "unstable") if v.get(w)]
        if "ratio" not in v:
            parts.append(f"{name} not judged (no complete alternation)")
        elif found:
            conf = max(v.get(f"{w}_confidence") or 0 for w in found)
            parts.append(f"{name} {' and '.join(found).upper()} ({v['ratio']:.2f}x its references' {unit}, "
                         f"confidence {conf:.3g}, {v['alternations']} alternations)")
        else:
            parts.append(f"{name} not reproduced ({v['ratio']:.2f}x its references' {unit} over "
                         f"{v['alternations']} alternations): not a finding")
    return "# confirm verdict: " + "; ".join(parts)
