"""First-pass pair figures as columns of numbers, not records or dicts of pairs: a full
pairwise run of 1,024 ranks and 2 sizes is 2 million pairs, ~40 bytes each here where a
dict entry per pair took ~500 (validate, suspects and the fabric check built several).

    cols = PairColumns(lm)            # cols.add(rec) for each first-pass pair record;
                                      # cols.take(rec): the same for a streaming reader
    obs = Observations(cols, sizes)   # per (op, size, class) group, each pair's median
    obs.keys[g], obs.g, obs.s, obs.d, obs.v, obs.gmed[g]   # arrays, pairs in first-measured order
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from ..results.records import buffer_label, measured_gbs, superseded


def instability(rec):
    """log(max / median) of a record's per-iteration times, or None."""
    lat = rec.get("latency_us") if isinstance(rec.get("latency_us"), dict) else {}
    mx, med = lat.get("max"), lat.get("median")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (mx, med)):
        return None
    return math.log(mx / med)


def plain(rec):
    """The value of a first-pass pair bandwidth record with nothing a reader needs besides
    its figures (not a confirm record, no wrong elements, no second direction, not
    superseded), else None."""
    get = rec.get
    if get("mode", "bw") != "bw" or get("confirm") is not None or type(get("src")) is not int \
            or type(get("dst")) is not int or type(get("size")) is not int:
        return None
    wrong, extra = get("wrong"), get("extra")
    if (type(wrong) is int and wrong > 0) or (extra and (type(extra) is not dict or "per_direction_gbps" in extra)):
        return None
    return measured_gbs(rec) if superseded(rec) is None else None


def segment_medians(keys, values):
    """(sorted distinct keys, the median of the values of each), as statistics.median takes it."""
    keys, values = np.asarray(keys), np.asarray(values, dtype=float)
    if not len(keys):
        return keys, values
    order = np.lexsort((values, keys))
    k, x = keys[order], values[order]
    uk, start, count = np.unique(k, return_index=True, return_counts=True)
    return uk, (x[start + (count - 1) // 2] + x[start + count // 2]) / 2


class PairColumns:
    """Pair records' figures by (op, size): src, dst, value, instability (NaN: none), link."""

    def __init__(self, lm, value=measured_gbs):
        self.lm, self.value = lm, value
        self.cols = {}        # (op, size) -> (src, dst, value, instability, link index)
        self.links = []       # (class, theoretical GB/s or None) by index
        self._link = {}       # (class, GB/s) -> its index
        self._keyed = {}      # classify's key of a pair's two ends -> the link index
        self._ends = {}       # (rank, device) -> LinkMap.end_info
        self.labels = set()   # buffer labels of the records taken
        self._plain_label = buffer_label({})
        self.count = 0

    def add(self, rec, value=None) -> None:
        s, d = rec["src"], rec["dst"]
        get = rec.get
        # classify's own cache, keyed as it keys it: one lookup per end, one per class key
        sd, dd = get("src_device"), get("dst_device")
        es = self._ends.get((s, sd)) or self._end(s, sd, rec, "src")
        ed = self._ends.get((d, dd)) or self._end(d, dd, rec, "dst")
        key = (0, es[1], ed[1]) if es[0] == ed[0] else (1, es[2], ed[2])
        li = self._keyed.get(key) if s != d else None
        if li is None:
            link = self.lm.classify_ends(es, ed, s, d, rec)
            li = self._link.setdefault(link, len(self.links))
            if li == len(self.links):
                self.links.append(link)
            if s != d:
                self._keyed[key] = li
        c = self.cols.get((get("op"), rec["size"]))
        if c is None:
            c = self.cols[(get("op"), rec["size"])] = (array("l"), array("l"), array("d"), array("d"), array("l"))
        u = instability(rec) if get("latency_us") else None
        c[0].append(s)
        c[1].append(d)
        c[2].append(self.value(rec) if value is None else value)
        c[3].append(math.nan if u is None else u)
        c[4].append(li)
        self.count += 1

    def _end(self, rank, dev, rec, side):
        info = self._ends[(rank, dev)] = self.lm.end_info(rank, dev, rec, side)
        return info

    def take(self, rec) -> bool:
        """A streaming reader's consumer: keep a plain record's figures, not the record."""
        v = plain(rec) if type(rec) is dict else None
        if v is None:
            return False
        self.labels.add(buffer_label(rec) if rec.get("extra") else self._plain_label)   # most records: no extra
        self.add(rec, v)
        return True

    def pairs(self):
        """Every (src, dst) measured, at any size."""
        out = set()
        for key in self.cols:
            s, d = self.arrays(key)[:2]
            out.update(zip(s.tolist(), d.tolist()))
        return out

    def sizes(self):
        return sorted({size for _, size in self.cols})

    def arrays(self, key):
        s, d, v, u, li = self.cols[key]
        return (np.frombuffer(s, dtype=np.int_) if len(s) else np.zeros(0, np.int_),
                np.frombuffer(d, dtype=np.int_) if len(d) else np.zeros(0, np.int_),
                np.frombuffer(v) if len(v) else np.zeros(0), np.frombuffer(u) if len(u) else np.zeros(0),
                np.frombuffer(li, dtype=np.int_) if len(li) else np.zeros(0, np.int_))


class Observations:
    """validate's table: per (op, size, class) group at the given sizes, each pair's value
    (the median of its records) and the group's median. Groups are contiguous slices of
    the arrays, in the order first measured, and so are the pairs of a group."""

    def __init__(self, cols: PairColumns, sizes, skip_self=False):
        self.links = cols.links
        keys, parts, inst = [], [], []
        for (op, size), arrays in cols.cols.items():
            if size not in sizes:
                continue
            s, d, v, u, li = cols.arrays((op, size))
            if skip_self:
                keep = s != d
                s, d, v, u, li = s[keep], d[keep], v[keep], u[keep], li[keep]
            inst.append((s, d, u))
            first, links_of = {}, {}      # class -> its first record, its links
            for link, at in zip(*(x.tolist() for x in np.unique(li, return_index=True))):
                cls = self.links[link][0]
                first[cls] = min(first.get(cls, at), at)
                links_of.setdefault(cls, []).append(link)
            for cls in sorted(first, key=first.get):      # classes in the order first measured
                m = np.isin(li, links_of[cls])
                keys.append((op, size, cls))
                parts.append(_pairs(s[m], d[m], v[m], li[m]))
        self.keys = keys
        bounds = np.cumsum([0] + [len(p[0]) for p in parts])
        self.start, self.end = bounds[:-1], bounds[1:]
        cat = (lambda i, t: np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, t))  # noqa: E731
        self.s, self.d, self.v, self.link = cat(0, np.int_), cat(1, np.int_), cat(2, float), cat(3, np.int_)
        self.g = np.repeat(np.arange(len(keys)), self.end - self.start)
        self.gmed = np.array([np.median(self.v[a:b]) for a, b in zip(self.start, self.end)])
        self.inst = tuple(np.concatenate([x[i] for x in inst]) if inst else np.zeros(0) for i in range(3))

    def __len__(self):
        return len(self.v)

    def group(self, g):
        """The slice of group g's pairs."""
        return slice(int(self.start[g]), int(self.end[g]))

    def theo(self, idx):
        """Theoretical GB/s (None where unknown) of the pairs at indices idx."""
        return [self.links[i][1] for i in self.link[idx]]

    def classes(self):
        """The link class of each pair, as an array."""
        return np.array([k[2] for k in self.keys], dtype=object)[self.g] if len(self.keys) else \
            np.zeros(0, dtype=object)

    def codes(self):
        """src * N + dst of each pair (N: one more than the largest rank)."""
        n = int(max(self.s.max(initial=0), self.d.max(initial=0))) + 1
        return self.s * n + self.d, n

    def at(self, pair):
        """Indices of the observations of one pair, in group order."""
        return np.flatnonzero((self.s == pair[0]) & (self.d == pair[1]))

    def values(self):
        """{(src, dst): value} (the last group's where several hold the pair)."""
        return dict(zip(zip(self.s.tolist(), self.d.tolist()), self.v.tolist()))


def _pairs(s, d, v, li):
    """One group's distinct pairs in the order first measured: (src, dst, median value,
    the link of the last record of the pair)."""
    n = int(max(s.max(initial=0), d.max(initial=0))) + 1
    code = s * n + d
    uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    if len(uniq) == len(code):
        order = np.argsort(first, kind="stable")
        idx = first[order]
        return s[idx], d[idx], v[idx], li[idx]
    _, med = segment_medians(inverse, v)
    last = len(code) - 1 - np.unique(code[::-1], return_index=True)[1]
    order = np.argsort(first, kind="stable")
    return s[first[order]], d[first[order]], med[order], li[last[order]]


def stream_with(path, make):
    """(doc, kept): a document read by results/stream_read.py, the records it streams
    offered to kept = make(LinkMap(header)) (take(rec) -> True: kept there, not in
    doc["results"]); kept is None where it was read whole (small, or make gave None)."""
    from ..results.stream_read import read
    from ..topology.linkmap import LinkMap

    kept = []

    def consume(header):
        kept.append(make(LinkMap(header)))
        return kept[0].take if kept[0] is not None else None

    doc, streamed = read(path, consume)
    return doc, (kept[0] if streamed else None)

