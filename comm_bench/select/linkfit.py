"""Alpha-beta (Hockney) fits of measured records, per link class, scope, op and rank count.

A group is the records of one op measured at one world size over one kind of link, e.g.
(nvlink, intra-node, all_reduce, n=2). Its fit t(S) = a + b S minimises the relative error
(weighted least squares: sum ((a + b S) / t - 1)^2), so small and large sizes count alike;
the link terms follow from the op's cost model (collectives.terms):
alpha = a / k_alpha, beta = k_beta / b (bus bandwidth). max_rel_err is the largest
|fit - measured| / measured over the sizes used.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..topology.linkmap import LinkMap
from .collectives import model_op, terms

SCOPES = ("intra-node", "inter-node")


class Group:
    def __init__(self, key, doc_name, transport, ranks_per_node):
        self.cls, self.scope, self.op, self.n = key
        self.doc, self.transport, self.ranks_per_node = doc_name, transport, ranks_per_node
        self.points = {}                       # size -> [seconds, ...]
        self.a = self.b = self.alpha = self.beta = self.max_rel_err = None
        self._series = None                    # the medians, once: select prices thousands of ops

    def add(self, size, seconds):
        self.points.setdefault(size, []).append(seconds)
        self._series = None

    def series(self):
        """(sizes, median seconds) sorted by size."""
        if self._series is None:
            sizes = sorted(self.points)
            self._series = (np.array(sizes, float), np.array([float(np.median(self.points[s])) for s in sizes]))
        return self._series

    def fit(self):
        S, t = self.series()
        a, b = fit_alpha_beta(S, t)
        if b is None:
            return False
        ka, kb = terms(self.op, self.n)
        self.a, self.b = a, b
        self.alpha = a / ka if ka else 0.0
        self.beta = kb / b
        self.max_rel_err = float(np.max(np.abs((a + b * S) / t - 1.0)))
        return True

    def interpolate(self, S):
        """Measured time at size S (log-log between the neighbouring sizes), or None
        outside the measured sizes."""
        sizes, t = self.series()
        if len(sizes) == 0 or S < sizes[0] or S > sizes[-1]:
            return None
        return float(np.exp(np.interp(math.log(S), np.log(sizes), np.log(t))))

    def curve(self, S):
        """(seconds, inside): the measured curve at S, continued past its ends piecewise:
        below the smallest size its time (the latency floor), above the largest its
        bandwidth (t_max S / S_max), where one alpha-beta line misfits NCCL's protocols."""
        t = self.interpolate(S)
        if t is not None:
            return t, True
        sizes, ts = self.series()
        if S < sizes[0]:
            return float(ts[0]), False
        return float(ts[-1] * S / sizes[-1]), False

    def busbw_top(self):
        """Bus bandwidth (B/s) at the largest measured size."""
        sizes, ts = self.series()
        ka, kb = terms(self.op, self.n)
        return float(sizes[-1] / ts[-1] * kb)

    def row(self):
        sizes = sorted(self.points)
        return {"class": self.cls, "scope": self.scope, "op": self.op, "n": self.n,
                "alpha_us": round(self.alpha * 1e6, 3), "beta_gbs": round(self.beta / 1e9, 3),
                "max_rel_err": round(self.max_rel_err, 4), "source": "measured",
                "transport": self.transport, "sizes": [sizes[0], sizes[-1]], "points": len(sizes),
                "from": self.doc}


def fit_alpha_beta(S, t):
    """(a seconds, b seconds/byte) of t = a + b S, relative least squares; a >= 0."""
    S, t = np.asarray(S, float), np.asarray(t, float)
    ok = (S > 0) & (t > 0)
    S, t = S[ok], t[ok]
    if len(S) == 0:
        return None, None
    if len(set(S.tolist())) >= 2:
        A = np.stack([1.0 / t, S / t], axis=1)
        (a, b), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
        if a >= 0 and b > 0:
            return float(a), float(b)
    # one size, or a negative intercept: the bandwidth term alone (a = 0)
    x = S / t
    b = float(np.sum(x) / np.sum(x * x))
    return (0.0, b) if b > 0 else (None, None)


def _op(rec):
    return model_op(str(rec.get("op") or "")) if rec.get("op") else None


def groups_from(doc, name=None):
    """Fitted Groups of one results document (bandwidth records only)."""
    lm = LinkMap(doc)
    transport = doc.get("transport") or "?"
    ranks = sorted(lm.ranks)
    nodes = {}
    for r in ranks:
        nodes.setdefault(lm.node(r), []).append(r)
    per_node = max((len(v) for v in nodes.values()), default=1)
    name = name or "results"
    out = {}
    for rec in doc.get("results") or []:
        if not isinstance(rec, dict) or rec.get("mode", "bw") != "bw":
            continue
        op, size, t_us = _op(rec), rec.get("size"), rec.get("time_us")
        if op is None or not isinstance(size, (int, float)) or not isinstance(t_us, (int, float)) \
                or size <= 0 or t_us <= 0 or isinstance(size, bool):
            continue
        src, dst = rec.get("src"), rec.get("dst")
        if isinstance(src, int) and isinstance(dst, int):
            if src == dst:
                continue
            cls, _ = lm.classify(src, dst, rec)
            scope = "intra-node" if lm.node(src, rec, "src") == lm.node(dst, rec, "dst") else "inter-node"
            n, rpn = 2, 1                       # one pair at a time: one rank per node busy
        else:
            n = int(doc.get("world_size") or len(ranks) or 0)
            if n < 2 or len(ranks) < 2:
                continue                        # one rank: no link crossed
            cls, _ = lm.classify(ranks[0], ranks[1])
            scope = "intra-node" if len(nodes) == 1 else "inter-node"
            if scope == "inter-node":           # the class between nodes, not inside one
                a = ranks[0]
                b = next(r for r in ranks if lm.node(r) != lm.node(a))
                cls, _ = lm.classify(a, b)
            rpn = per_node
            if op == "p2p":
                n = 2
        key = (cls, scope, op, n)
        g = out.get(key)
        if g is None:
            g = out[key] = Group(key, name, transport, rpn)
        g.add(float(size), float(t_us) * 1e-6)
    return [g for g in out.values() if g.fit()]


def fit_documents(docs):
    """[(path, doc)] -> all fitted Groups."""
    groups = []
    for path, doc in docs:
        groups += groups_from(doc, os.path.basename(path))
    return groups
