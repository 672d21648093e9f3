"""The heatmap's cells as columns of numbers, not a dict of per-cell lists: a full pairwise
run of 1,024 ranks and 2 sizes is 2 million cells (heatmap took 4.1 GiB of it).

    cells = Cells(lm, by, value)      # cells.add(rec) per pair record; cells.take(rec): the
                                      # same for a streaming reader (plain records only);
                                      # cells.take_columns(recs, columns): a batch at once
    keys, labels, panels, classes_seen = cells.panels(op, sizes)
"""
from __future__ import annotations

from array import array

import numpy as np

from ..results.records import buffer_label, measured_gbs, superseded
from ..validate.pair_obs import batch_links, column_array, extend, plain_batch, segment_medians


class Cells:
    def __init__(self, lm, by, value=measured_gbs):
        self.lm, self.by, self.value = lm, by, value
        self.labels_seen = set()     # buffer labels of the records taken
        # axis entities: every rank of the run (so unmeasured ones show as N/A), then pairs
        self.rank_side = {r: _axis_key(lm, r, None, "src", by) for r in sorted(lm.ranks)}
        self.keys, self.labels, self._id = [], [], {}     # axis key by id, its label
        for k, lab in self.rank_side.values():
            self._key(k, lab)
        self.ranks_keys = len(self.keys)
        self._ends = {}       # (rank, device) -> (key id, LinkMap.end_info)
        self.links, self._link = [], {}     # (class, GB/s) by id
        self.cols = {}        # (op, size) -> (src key id, dst key id, value, link id)
        self.counts = {}      # op -> records
        self.count = 0

    def _key(self, k, label):
        i = self._id.get(k)
        if i is None:
            i = self._id[k] = len(self.keys)
            self.keys.append(k)
            self.labels.append(label)
        return i

    def _end(self, rank, dev, rec, side):
        e = self._ends.get((rank, dev))
        if e is None:
            if dev is None and rank in self.rank_side:
                k, lab = self.rank_side[rank]
            else:
                k, lab = _axis_key(self.lm, rank, rec, side, self.by)
            e = self._ends[(rank, dev)] = (self._key(k, lab), self.lm.end_info(rank, dev, rec, side))
        return e

    def _ids(self, s, d, sd, dd, rec):
        """(src axis key id, dst axis key id, link id) of a pair record."""
        ks, es = self._end(s, sd, rec, "src")
        kd, ed = self._end(d, dd, rec, "dst")
        return ks, kd, self._link_id(self.lm.classify_ends(es, ed, s, d, rec))

    def _link_id(self, link):
        li = self._link.get(link)
        if li is None:
            li = self._link[link] = len(self.links)
            self.links.append(link)
        return li

    def _columns(self, op, size):
        c = self.cols.get((op, size))
        if c is None:
            c = self.cols[(op, size)] = (array("l"), array("l"), array("d"), array("l"))
        return c

    def add(self, rec, value=None) -> None:
        s, d, get = rec["src"], rec["dst"], rec.get
        ks, kd, li = self._ids(s, d, get("src_device"), get("dst_device"), rec)
        op = get("op")
        self.counts[op] = self.counts.get(op, 0) + 1
        c = self._columns(op, rec["size"])
        c[0].append(ks)
        c[1].append(kd)
        c[2].append(self.value(rec) if value is None else value)
        c[3].append(li)
        self.count += 1

    def take(self, rec) -> bool:
        """A streaming reader's consumer: a bandwidth pair record that is one cell's figure
        and nothing more (no second direction, no counters, not superseded)."""
        if type(rec) is not dict:
            return False
        get = rec.get
        extra = get("extra")
        if get("mode", "bw") != "bw" or type(get("src")) is not int or type(get("dst")) is not int \
                or type(get("size")) is not int or (extra and (type(extra) is not dict or "per_direction_gbps"
                                                               in extra or "counters" in extra)):
            return False
        v = measured_gbs(rec)
        if v is None or superseded(rec) is not None:
            return False
        self.labels_seen.add(buffer_label(rec))
        self.add(rec, v)
        return True

    def take_columns(self, recs, cols) -> bool:
        """take() for a whole batch (stream_read.columns): True when every record was one
        cell's figure and taken, False when none was (offer them one by one)."""
        if self.value is not measured_gbs:
            return False
        b = plain_batch(recs, cols, refused_extra=("per_direction_gbps", "counters"))
        if b is None or (b.s == b.d).any():
            return False
        self.labels_seen.add(b.label)
        ks, kd, li = batch_links(b, recs, self._end, lambda i: self._ids(int(b.s[i]), int(b.d[i]), b.src_device[i],
                                                                          b.dst_device[i], recs[i])[2])
        self.counts[b.op] = self.counts.get(b.op, 0) + len(recs)
        extend(self._columns, b.op, b.size, (ks, kd, b.v, li))
        self.count += len(recs)
        return True

    def __getstate__(self):     # what merge() needs, sent from the process that read a part
        return {k: getattr(self, k) for k in ("keys", "labels", "links", "cols", "counts", "labels_seen", "count")}

    def merge(self, later):
        """The cells another Cells took from a later part of the document, after these."""
        keys = np.array([self._key(k, lab) for k, lab in zip(later.keys, later.labels)] or [0], dtype=np.int_)
        links = np.array([self._link_id(link) for link in later.links] or [0], dtype=np.int_)
        for (op, size), c in later.cols.items():
            ks, kd, v, li = (column_array(x) for x in c)
            extend(self._columns, op, np.full(len(ks), size), (keys[ks], keys[kd], v, links[li]))
        for op, n in later.counts.items():
            self.counts[op] = self.counts.get(op, 0) + n
        self.labels_seen |= later.labels_seen
        self.count += later.count

    def panels(self, op, sizes):
        """(axis keys sorted, their labels, panels {size, measured, theoretical, classes},
        classes_seen {class: {theoretical GB/s}}) of one op at the given sizes: a cell's
        figure is the median of its records, its link the first record's."""
        used = {*range(self.ranks_keys)}
        for size in sizes:
            c = self.cols[(op, size)]
            used.update(np.unique(np.concatenate([column_array(c[0]), column_array(c[1])])).tolist())
        ids = sorted(used, key=lambda i: _sort_key(self.keys[i]))
        pos = np.full(len(self.keys), -1)
        pos[ids] = np.arange(len(ids))
        n = len(ids)
        theo_of = np.array([t if t else np.nan for _, t in self.links] or [np.nan])
        cls_of = np.array([c for c, _ in self.links] or [""], dtype=object)
        panels, seen = [], {}
        for size in sizes:
            ks, kd, v, li = (column_array(x) for x in self.cols[(op, size)])
            code = pos[ks] * n + pos[kd]
            uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
            med = v[first] if len(uniq) == len(code) else segment_medians(inverse, v)[1]
            meas, theo = np.full((n, n), np.nan), np.full((n, n), np.nan)
            classes = np.full((n, n), "", dtype=object)
            meas.flat[uniq], theo.flat[uniq], classes.flat[uniq] = med, theo_of[li[first]], cls_of[li[first]]
            for link in np.unique(li[first]).tolist():
                seen.setdefault(self.links[link][0], set()).add(self.links[link][1])
            panels.append({"size": size, "measured": meas, "theoretical": theo, "classes": classes})
        return [self.keys[i] for i in ids], [self.labels[i] for i in ids], panels, seen


def _axis_key(lm, rank, rec, side, by):
    node = lm.node(rank, rec, side)
    if by == "rank":
        return (node, rank), lm.label(rank, rec, side)
    if by == "host":
        return (node,), node
    if by == "gpu":
        kind, val = lm.device(rank, rec, side)
        if kind == "gpu":
            return (node, "gpu", val), f"{node}:GPU{val}"
        return (node, "rank", rank), lm.label(rank, rec, side)
    nic = lm.nic(rank, rec, side)
    if nic is not None:
        return (node, "nic", nic.get("name")), f"{node}:{nic.get('name')}"
    kind, val = lm.device(rank, rec, side)
    if kind == "nic":
        return (node, "nic", val), f"{node}:{val}"
    return (node, "rank", rank), lm.label(rank, rec, side)


def _sort_key(k):
    return tuple((0, x) if isinstance(x, int) else (1, str(x)) for x in k)
