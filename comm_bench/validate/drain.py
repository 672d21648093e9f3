"""validate's verdict per node, for the scheduler: which nodes to drain and why.

    rows = hosts(report, doc)     # [(node, [its findings, worst first], reason or None)]
    drain_list(rows)              # "node<TAB>reason" lines for the bad nodes ("" when none)
    slurm_drain(rows, dry_run)    # scontrol update NodeName=... State=DRAIN Reason=...

A node is the host name a rank recorded (the document's ranks[].host, Slurm's node name
when the run was launched by srun): findings name "host/addr" where several namespaces
or containers share one host name, and the drain names the host they share.
Findings that name a node: host, rank and device findings (the node of their ranks) and
link-degraded (a link of that host trained low). Pair and switch-port findings name no
node: either end could be at fault, and validate already names an end (a rank or host
finding) when the pairs' evidence points at it. Findings about a class, a collective, a
method, wrong data, a failed run or a baseline name no node either.
"""
from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import RunFailed, UsageError
from ..sizes import human_size
from .finding_kinds import FINDING_KINDS

if TYPE_CHECKING:
    Row = tuple[str, list[dict[str, Any]], str | None]  # (node, its findings worst first, the drain reason)

PREFIX = "comm-bench: "     # a site's resume script can pick out the nodes comm-bench drained
# the kinds that name a node: bad-host, unstable-rank, high-latency-host... (a kind added later
# with such a name too) and link-degraded
NODE_SUFFIXES, NODE_KINDS = ("-host", "-rank", "-device"), ("link-degraded",)
MAX_REASON = 250            # sinfo and squeue show reasons on one line: the worst findings first
SLURM_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")   # a host name, never a hostlist ("n[1-9]", "a,b")
SCONTROL_TIMEOUT = 60


def clean(text: object) -> str:
    """One line with no control characters (Slurm reasons, TAB-separated lines, XML):
    each is written as a backslash escape, as Python's repr writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def names_node(f: dict[str, Any]) -> bool:
    kind = str(f.get("kind"))
    return kind.endswith(NODE_SUFFIXES) or kind in NODE_KINDS


def hosts(report: dict[str, Any], doc: dict[str, Any]) -> list[Row]:
    """[(node, findings, reason)] for every node of the run (ranks[].host, in rank order),
    then any other node a finding names; findings worst first, reason None for a good node."""
    rank_host: dict[int, str] = {}
    for r in doc.get("ranks") or []:
        if isinstance(r, dict) and isinstance(r.get("rank"), int) and r.get("host") is not None:
            rank_host[r["rank"]] = str(r["host"])
    rows: dict[str, list[dict[str, Any]]] = {h: [] for _, h in sorted(rank_host.items())}
    for f in report.get("findings") or []:
        if names_node(f):
            node = _node(f, rank_host, rows)
            if node is not None:
                rows.setdefault(node, []).append(f)
    return node_rows(rows)


def node_rows(by_node: Mapping[str, list[dict[str, Any]]]) -> list[Row]:
    """[(node, its findings worst first, the drain reason or None)] of {node: findings}."""
    out: list[Row] = []
    for node, fs in by_node.items():
        fs = sorted(fs, key=_worst)
        out.append((node, fs, reason(fs, node) if fs else None))
    return out


def _node(f: dict[str, Any], rank_host: dict[int, str], known: Mapping[str, Any]) -> str | None:
    listed = f.get("ranks")
    ranks = listed if isinstance(listed, list) else [f.get("rank")]
    for r in ranks:
        if isinstance(r, int) and r in rank_host:
            return rank_host[r]
    h = f.get("host")
    if h is None:
        return None
    h = str(h)
    base = h.rsplit("/", 1)[0]       # "host/addr": a namespace of host
    return base if h not in known and base in known else h


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _fraction(f: dict[str, Any]) -> float:
    """How much of the expected the finding got (lower is worse): GB/s over the expected,
    expected latency over the measured, 1 / unsteadiness, link width over the expected."""
    m, ref = _num(f.get("measured_gbs")), _num(f.get("peer_median_gbs")) or _num(f.get("expected_gbs"))
    if m is not None and ref:
        return m / ref
    m, ref = _num(f.get("measured_us")), _num(f.get("peer_median_us"))
    if m and ref is not None:
        return ref / m
    u = _num(f.get("unsteadiness_ratio"))
    if u:
        return 1.0 / u
    w, e = (re.fullmatch(r"x(\d+(?:\.\d+)?)", str(f.get(k) or "")) for k in ("measured", "expected"))
    if w is not None and e is not None and float(e.group(1)):
        return float(w.group(1)) / float(e.group(1))
    return 1.0


def _worst(f: dict[str, Any]) -> tuple[float, float, int]:
    kind = f.get("kind")
    order = FINDING_KINDS.index(kind) if kind in FINDING_KINDS else len(FINDING_KINDS)
    return (_fraction(f), -(_num(f.get("confidence")) or 0.0), order)


def reason(findings: Sequence[dict[str, Any]], node: str) -> str:
    """One line: what was measured against what was expected, for each finding of the
    node, worst first, cut at MAX_REASON characters."""
    parts = [clean(_part(f, node)) for f in findings]
    out = PREFIX + parts[0]
    for i, p in enumerate(parts[1:], 1):
        more = f"; +{len(parts) - i} more finding(s)"
        if len(out) + 2 + len(p) + (len(more) if i < len(parts) - 1 else 0) > MAX_REASON:
            return out + more
        out += "; " + p
    return out if len(out) <= MAX_REASON else out[:MAX_REASON - 3] + "..."


def _part(f: dict[str, Any], node: str) -> str:
    """e.g. "slow host: 7.2 of 12 GB/s (60%), ib 16M, confidence 1.00"."""
    figures = _figures(f)
    cls = f.get("link_class")
    cls = "/".join(map(str, cls)) if isinstance(cls, list) else cls
    size = f.get("size") if isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool) else None
    where = " ".join(str(x) for x in (cls, human_size(size) if size else None) if x)
    c = _num(f.get("confidence"))
    # below 1 never rounds up to "1.00": the text report says 0.996 there
    conf = None if c is None else "1.00" if c >= 1 else f"{min(c, 0.999):.3g}"
    said = [x for x in (figures, where, f"confidence {conf}" if conf else None) if x]
    return f"{_who(f, node)}: {', '.join(said)}" if said else f"{_who(f, node)}: {f.get('message')}"


def _who(f: dict[str, Any], node: str) -> str:
    kind = str(f.get("kind"))
    what = {"bad": "slow", "unstable": "unstable", "high-latency": "high latency"}
    head, _, tail = kind.rpartition("-")
    adj = what.get(head, head.replace("-", " "))
    ranks = [r for r in (f.get("ranks") or [f.get("rank")]) if r is not None]
    on = f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})" if ranks else ""
    if kind == "link-degraded":
        return f"degraded {f.get('link') or ''} link of {f.get('device')}".replace("  ", " ")
    if tail == "host":
        host = str(f.get("host") or node)
        return f"{adj} host" + (f" {host}" if host != node else "")      # a namespace of the node
    if tail == "device" and f.get("device") is not None:
        return f"{adj} device {f['device']}{on}"
    if tail in ("rank", "device"):
        return f"{adj} rank {', '.join(map(str, ranks))}"
    return f"{adj}{on}" if head in what else f"{kind.replace('-', ' ')}{on}"


def _figures(f: dict[str, Any]) -> str | None:
    m, ref = _num(f.get("measured_gbs")), _num(f.get("peer_median_gbs")) or _num(f.get("expected_gbs"))
    if m is not None and ref:
        return f"{m:.3g} of {ref:.3g} GB/s ({m / ref:.0%})"
    m, ref = _num(f.get("measured_us")), _num(f.get("peer_median_us"))
    if m is not None and ref:
        return f"{m:.3g} us one-way where peers take {ref:.3g} us ({m / ref:.2g}x)"
    u = _num(f.get("unsteadiness_ratio"))
    if u:
        given = f.get("confirm")
        c = given if isinstance(given, dict) else {}
        mm, rm = _num(c.get("max_over_median")), _num(c.get("reference_max_over_median"))
        per = f" (per-iteration max/median {mm:.2g}x vs {rm:.2g}x)" if mm and rm else ""
        return f"{u:.2g}x as unsteady as known-good pairs{per}"
    if f.get("measured") is not None and f.get("expected") is not None:
        return f"{f['measured']} of {f['expected']}"
    return None


def bad(rows: Iterable[Row]) -> list[tuple[str, str]]:
    return [(node, why) for node, _, why in rows if why]


def drain_list(rows: Iterable[Row]) -> str:
    """One "node<TAB>reason" line per bad node; "" for a clean run."""
    return "".join(f"{clean(node)}\t{why}\n" for node, why in bad(rows))


def scontrol_argv(node: str, why: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={why}"]


def slurm_drain(rows: Iterable[Row], dry_run: bool = False, echo: Callable[[str], Any] = print) -> list[str]:
    """Drain each bad node with Slurm's scontrol (dry_run: echo the commands instead).
    UsageError: a node name Slurm would read as something else, or no scontrol;
    RunFailed: scontrol refused or failed for a node (the others are still drained)."""
    todo = bad(rows)
    odd = [n for n, _ in todo if not SLURM_NODE.fullmatch(n)]
    if odd:
        raise UsageError(f"--slurm-drain: host name '{clean(odd[0])}' of the results is not a Slurm node "
                         f"name (letters, digits, '.', '_', '-'): no node drained")
    if dry_run:
        for node, why in todo:
            echo(shlex.join(scontrol_argv(node, why)))
        return []
    exe = require_scontrol()
    failed: list[tuple[str, str]] = []
    for node, why in todo:
        argv = [exe, *scontrol_argv(node, why)[1:]]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT)
            said = (p.stderr or p.stdout).strip().splitlines()
            err = None if p.returncode == 0 else f"exit {p.returncode}: {clean(said[-1] if said else 'no output')}"
        except subprocess.TimeoutExpired:
            err = f"no answer within {SCONTROL_TIMEOUT}s"
        except OSError as exc:
            err = exc.strerror
        if err:
            failed.append((node, err))
        else:
            echo(f"slurm: drained {node}: {why}")
    if failed:
        node, err = failed[0]
        raise RunFailed(f"--slurm-drain: scontrol update NodeName={node} State=DRAIN failed ({err}); "
                        f"{len(todo) - len(failed)} of {len(todo)} bad node(s) drained")
    return [n for n, _ in todo]


def require_scontrol() -> str:
    exe = shutil.which("scontrol")
    if exe is None:
        raise UsageError("--slurm-drain needs Slurm's scontrol on PATH: run validate where the Slurm client "
                         "tools are (with SLURM_CONF set), or write --drain-list FILE, or add --dry-run")
    return exe
