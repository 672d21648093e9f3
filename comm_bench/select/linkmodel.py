"""Collective times at the scope each collective runs on, from the fitted groups.

    lm = LinkModel(groups, cluster, intra_gbs=None, inter_gbs=None)
    est = lm.collective("all_reduce", S, n_intra, n_inter)   # Est(seconds, source, note)

Per (op, size, ranks, scope), in order of preference:
  measured      the same op measured at the same rank count on that scope: the measured
                time at that size (log-log interpolation between measured sizes);
  extrapolated  the fit outside the measured sizes, or the scope's link terms (alpha,
                beta of its best-measured group) through the ring / tree cost models for
                another op or rank count, or a hierarchical composition;
  assumed       no measurement on that scope: theoretical rate x validate's efficiency
                for the link class, or --intra-node-gbs / --inter-node-gbs, with an
                assumed per-step latency.
Inter-node: when every GPU of a node drives the network at once, a GPU gets
beta x min(1, max(ranks per node measured, RDMA NICs per node) / GPUs per node).
"""
from __future__ import annotations

from ..errors import UsageError
from ..validate_rules import DEFAULT_RULES
from .collectives import busbw_gbs, flat, hierarchical_stages

RANK = {"measured": 0, "extrapolated": 1, "assumed": 2}
ASSUMED_ALPHA_US = {"intra-node": 10.0, "inter-node": 20.0}   # NCCL-like per-step latency
LINK_PREFERENCE = ("all_reduce", "reduce_scatter", "all_gather", "p2p")


def worst(*sources):
    return max(sources, key=lambda s: RANK[s]) if sources else "measured"


class Est:
    def __init__(self, seconds, source, note):
        self.seconds, self.source, self.note = seconds, source, note

    def __add__(self, other):
        notes = [n for n in (self.note, other.note) if n]
        return Est(self.seconds + other.seconds, worst(self.source, other.source), "; ".join(notes))


ZERO = Est(0.0, "measured", "")


def human(n):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n:.0f} B"


class Link:
    def __init__(self, scope, cls, alpha, beta, source, note, group=None, share=1.0):
        self.scope, self.cls, self.alpha, self.beta = scope, cls, alpha, beta
        self.source, self.note, self.group, self.share = source, note, group, share

    def row(self):
        g = self.group
        return {"class": self.cls, "scope": self.scope, "op": "link", "n": g.n if g else None,
                "alpha_us": round(self.alpha * 1e6, 3), "beta_gbs": round(self.beta * self.share / 1e9, 3),
                "max_rel_err": round(g.max_rel_err, 4) if g else None,
                "source": "extrapolated" if self.source == "measured" else self.source,
                "note": self.note}


class LinkModel:
    def __init__(self, groups, cluster, intra_gbs=None, inter_gbs=None):
        self.groups, self.cluster = groups, cluster
        self.flags = {"intra-node": intra_gbs, "inter-node": inter_gbs}
        self._links = {}

    # --- which groups describe a scope ------------------------------------------------
    def scope_groups(self, scope):
        gs = [g for g in self.groups if g.scope == scope]
        want = self.cluster.get("intra_class" if scope == "intra-node" else "inter_class")
        same = [g for g in gs if g.cls == want]
        return same or gs

    def _share(self, scope, group):
        if scope != "inter-node":
            return 1.0
        c = self.cluster
        rpn = group.ranks_per_node if group else 1
        # a pairwise run drives one NIC; the node has nics_per_node of them only when the
        # measured class is the RDMA one (Ethernet: one port per node)
        nics = c["nics_per_node"] if group is None or group.cls in ("ib", "roce") else 1
        return min(1.0, max(rpn, nics) / max(1, c["gpus_per_node"]))

    def link(self, scope):
        if scope in self._links:
            return self._links[scope]
        gs = self.scope_groups(scope)
        flag = self.flags[scope]
        if flag:                                   # an explicit figure wins, labelled assumed
            cls = self.cluster.get("intra_class" if scope == "intra-node" else "inter_class") or "given"
            lk = Link(scope, cls, ASSUMED_ALPHA_US[scope] * 1e-6, flag * 1e9, "assumed",
                      f"--{scope}-gbs {flag:g} GB/s given, alpha {ASSUMED_ALPHA_US[scope]:g} us assumed")
        elif gs:
            g = min(gs, key=lambda g: (LINK_PREFERENCE.index(g.op), -g.n, -len(g.points)))
            lk = Link(scope, g.cls, g.alpha, g.beta, "measured",
                      f"{g.op} n={g.n} measured ({g.doc}: {g.transport}, {g.cls})", g, self._share(scope, g))
        else:
            lk = self._assumed(scope)
        self._links[scope] = lk
        return lk

    def _assumed(self, scope):
        c = self.cluster
        cls = c.get("intra_class" if scope == "intra-node" else "inter_class")
        rate = c.get("intra_theoretical_gbs" if scope == "intra-node" else "inter_theoretical_gbs")
        eff = ((DEFAULT_RULES["classes"].get(cls) or {}).get("efficiency")) if cls else None
        if not rate or not eff:
            flag = "--intra-node-gbs" if scope == "intra-node" else "--inter-node-gbs"
            raise UsageError(f"no {scope} measurement in the results and no theoretical rate for it "
                             f"in the topology: give a results file measured {scope.replace('-node', '')} "
                             f"nodes or {flag} GB/s")
        share = min(1.0, c["nics_per_node"] / max(1, c["gpus_per_node"])) if scope == "inter-node" else 1.0
        return Link(scope, cls, ASSUMED_ALPHA_US[scope] * 1e-6, rate * eff * 1e9, "assumed",
                    f"{cls} theoretical {rate:g} GB/s x efficiency {eff:g} (validate rules), "
                    f"alpha {ASSUMED_ALPHA_US[scope]:g} us assumed", None, share)

    # --- times -----------------------------------------------------------------------------
    def op_time(self, op, S, n, scope):
        if n <= 1 and op != "p2p":
            return ZERO
        gpn = self.cluster["gpus_per_node"]
        groups = [] if self.flags[scope] else self.scope_groups(scope)   # a given figure replaces them
        for g in sorted(groups, key=lambda g: -len(g.points)):
            if g.op != op or g.n != n or (scope == "inter-node" and g.ranks_per_node < gpn
                                          and self._share(scope, g) < 1):
                continue
            t = g.interpolate(S)
            if t is not None:
                return Est(t, "measured", f"{scope} {op} n={n}: busbw {busbw_gbs(op, S, n, t):.3g} GB/s "
                                          f"at {human(S)} measured ({g.doc}: {g.transport}, {g.cls})")
            t = g.a + g.b * S
            return Est(t, "extrapolated", f"{scope} {op} n={n}: fit alpha {g.alpha * 1e6:.3g} us, "
                                          f"beta {g.beta / 1e9:.3g} GB/s beyond the measured sizes ({g.doc})")
        lk = self.link(scope)
        t = flat(op, S, n, lk.alpha, lk.beta * lk.share)
        src = "extrapolated" if lk.source == "measured" else "assumed"
        share = f" x GPU share {lk.share:.3g}" if lk.share < 1 else ""
        return Est(t, src, f"{scope} {op} n={n} at {human(S)}: ring/tree from alpha {lk.alpha * 1e6:.3g} us, "
                           f"beta {lk.beta / 1e9:.3g} GB/s{share} ({lk.note})")

    def collective(self, op, S, n_intra, n_inter):
        """Time of one collective of size S over n_intra GPUs on each of n_inter nodes."""
        if n_inter <= 1:
            return self.op_time(op, S, n_intra, "intra-node")
        if n_intra <= 1:
            return self.op_time(op, S, n_inter, "inter-node")
        total = ZERO
        for sop, sS, sn, scope in hierarchical_stages(op, S, n_intra, n_inter):
            total = total + self.op_time(sop, sS, sn, scope)
        return Est(total.seconds, worst(total.source, "extrapolated"), "hierarchical: " + total.note)

    def rows(self, scopes):
        out = [g.row() for g in self.groups]
        for scope in scopes:            # the link terms, where they are not a measured row
            lk = self.link(scope)
            if lk.source != "measured" or lk.share < 1:
                out.append(lk.row())
        return out
