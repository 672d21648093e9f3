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
A collective whose shape (ranks per node x nodes) was measured is read off that curve.
Inter-node: when every GPU of a node drives the network at once, a GPU gets the node's
aggregate / G, the aggregate = beta x min(G, k) / min(r, k) for a run of r ranks per node
over k NICs (RDMA NICs for ib/roce, else one port): a full-node collective measures the
aggregate, a NIC pair one NIC (LinkModel._share).
"""
from __future__ import annotations

from ..errors import UsageError
from ..validate.rules import DEFAULT_RULES
from .collectives import busbw_gbs, flat, hierarchical_stages

RANK = {"measured": 0, "extrapolated": 1, "assumed": 2}
ASSUMED_ALPHA_US = {"intra-node": 10.0, "inter-node": 20.0}   # NCCL-like per-step latency
LINK_PREFERENCE = ("all_reduce", "reduce_scatter", "all_gather", "p2p", "alltoall")
PER_RANK_OPS = ("alltoall",)


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


def human_s(t):
    """Seconds as a person reads them: 84.1 us, 3.2 ms, 1.25 s."""
    if t is None:
        return "-"
    if abs(t) < 1e-3:
        return f"{t * 1e6:.3g} us"
    if abs(t) < 1:
        return f"{t * 1e3:.3g} ms"
    return f"{t:.4g} s"


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

    def _nics(self, cls):
        """NICs a node drives between nodes: its RDMA NICs (one per GPU on rail-optimized
        nodes) for ib/roce, else one Ethernet port."""
        return self.cluster["nics_per_node"] if cls in ("ib", "roce") else 1

    def _share(self, scope, group):
        """Per-GPU inter-node bandwidth / the measured beta, when every GPU of a node talks
        across nodes at once: node aggregate = beta x min(G, k) / min(r, k) (the run drove
        min(r, k) of the node's k NICs with its r ranks per node), per GPU = aggregate / G."""
        if scope != "inter-node":
            return 1.0
        G = max(1, self.cluster["gpus_per_node"])
        r = group.ranks_per_node if group else 1
        k = self._nics(group.cls if group else self.cluster.get("inter_class"))
        return min(G, k) / (min(r, k) * G)

    def share_note(self, scope, group):
        if scope != "inter-node":
            return ""
        G, r = self.cluster["gpus_per_node"], group.ranks_per_node
        k = self._nics(group.cls)
        return (f"; per GPU = beta x min(G={G}, NICs={k}) / (min(ranks per node={r}, NICs={k}) x G) "
                f"= beta x {self._share(scope, group):.3g}")

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
            beta = g.busbw_top() if g.op != "p2p" else g.beta
            lk = Link(scope, g.cls, g.alpha, beta, "measured",
                      f"{g.op} n={g.n} measured ({g.doc}: {g.transport}, {g.cls}): busbw {beta / 1e9:.4g} GB/s "
                      f"at its largest size, alpha {g.alpha * 1e6:.3g} us (fit error {g.max_rel_err:.0%})"
                      + self.share_note(scope, g), g, self._share(scope, g))
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
        share = self._share(scope, None)
        return Link(scope, cls, ASSUMED_ALPHA_US[scope] * 1e-6, rate * eff * 1e9, "assumed",
                    f"{cls} theoretical {rate:g} GB/s x efficiency {eff:g} (validate rules), "
                    f"alpha {ASSUMED_ALPHA_US[scope]:g} us assumed", None, share)

    # --- times -----------------------------------------------------------------------------
    def op_time(self, op, S, n, scope):
        if n <= 1 and op != "p2p":
            return ZERO
        groups = [] if self.flags[scope] else self.scope_groups(scope)   # a given figure replaces them
        for g in sorted(groups, key=lambda g: -len(g.points)):
            # a run measured alone is the figure only where concurrency changes nothing:
            # intra-node, or one rank per node with a NIC of its own
            if g.op != op or g.n != n or (scope == "inter-node" and self._share(scope, g) < 1):
                continue
            return self._from_curve(g, op, S, n, scope)
        same = [g for g in groups if g.op == op and g.op != "p2p"]
        if same:                       # the op's own curve at another n: its busbw through the formula
            g = max(same, key=lambda g: (len(g.points), g.n))
            # an alltoall's busbw is each rank's own rate (every rank sends to all the others
            # over its own NIC), measured under the node's full concurrency when r = G
            full = op in PER_RANK_OPS and g.ranks_per_node >= self.cluster["gpus_per_node"]
            share = 1.0 if full else self._share(scope, g)
            if op in PER_RANK_OPS and scope == "inter-node" and g.n > 1:
                # the rank's own network rate: of the measured S/t (busbw x n/(n-1)) the
                # (n - r)/n that left its node crossed its NIC; hierarchical_stages prices the
                # share that leaves the node at that rate ((n_inter - 1)/n_inter of S)
                share *= (g.n - g.ranks_per_node) / (g.n - 1)
            t = flat(op, S, n, g.alpha, g.busbw_top() * share)
            return Est(t, "extrapolated", f"{scope} {op} n={n} at {human(S)}: ring from the measured {op} n={g.n} "
                                          f"({g.doc}): busbw {g.busbw_top() / 1e9:.4g} GB/s x GPU share {share:.3g}, "
                                          f"alpha {g.alpha * 1e6:.3g} us")
        lk = self.link(scope)
        t = flat(op, S, n, lk.alpha, lk.beta * lk.share)
        src = "extrapolated" if lk.source == "measured" else "assumed"
        share = f" x GPU share {lk.share:.3g}" if lk.share < 1 else ""
        return Est(t, src, f"{scope} {op} n={n} at {human(S)}: ring/tree from alpha {lk.alpha * 1e6:.3g} us, "
                           f"beta {lk.beta / 1e9:.3g} GB/s{share} ({lk.note})")

    def _from_curve(self, g, op, S, n, scope):
        t, inside = g.curve(S)
        where = "measured" if inside else "extrapolated"
        how = "" if inside else " (beyond the measured sizes: the curve's end continued)"
        return Est(t, where, f"{scope} {op} n={n}: busbw {busbw_gbs(op, S, n, t):.3g} GB/s at {human(S)} "
                             f"{where}{how} ({g.doc}: {g.transport}, {g.cls}, {g.ranks_per_node} rank(s)/node)")

    def measured_shape(self, op, n_intra, n_inter):
        """A group measured with exactly this shape: n_intra ranks on each of n_inter nodes."""
        if n_inter <= 1 or self.flags["inter-node"]:
            return None
        gs = [g for g in self.groups if g.scope == "inter-node" and g.op == op
              and g.n == n_intra * n_inter and g.ranks_per_node == n_intra]
        return max(gs, key=lambda g: len(g.points), default=None)

    def collective(self, op, S, n_intra, n_inter):
        """Time of one collective of size S over n_intra GPUs on each of n_inter nodes:
        read off a run of that very shape where there is one, else composed."""
        g = self.measured_shape(op, n_intra, n_inter)
        if g is not None:
            return self._from_curve(g, op, S, g.n, "inter-node")
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
