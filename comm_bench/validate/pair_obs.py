"""First-pass pair figures as columns of numbers, not records or dicts of pairs: a full
pairwise run of 1,024 ranks and 2 sizes is 2 million pairs, ~40 bytes each here where a
dict entry per pair took ~500 (validate, suspects and the fabric check built several).

    cols = PairColumns(lm)            # cols.add(rec) for each first-pass pair record;
                                      # cols.take(rec): the same for a streaming reader
                                      # (cols.take_columns(recs, columns): a batch at once)
    obs = Observations(cols, sizes)   # per (op, size, class) group, each pair's median
    obs.keys[g], obs.g, obs.s, obs.d, obs.v, obs.gmed[g]   # arrays, pairs in first-measured order
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from ..results.records import buffer_label, measured_gbs, superseded

if TYPE_CHECKING:
    # one (op, size)'s columns: src, dst, value, instability (NaN: none), link index
    Columns = tuple[array[int], array[int], array[float], array[float], array[int]]
    Link = tuple[Any, Any]      # (class, theoretical GB/s or None): LinkMap.classify's answer


def instability(rec: dict[str, Any]) -> float | None:
    """log(max / median) of a record's per-iteration times, or None."""
    lat = rec["latency_us"] if isinstance(rec.get("latency_us"), dict) else {}
    mx, med = lat.get("max"), lat.get("median")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (mx, med)):
        return None
    return math.log(mx / med)  # type: ignore[operator]  # both numbers > 0: tested above


def plain(rec: dict[str, Any]) -> float | None:
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


class PlainBatch(NamedTuple):
    """A batch of plain() pair records of one op as arrays, in record order."""
    op: str
    size: np.ndarray
    s: np.ndarray
    d: np.ndarray
    v: np.ndarray       # measured_gbs
    u: np.ndarray       # instability, NaN where none
    src_device: tuple[Any, ...]     # the records' devices
    dst_device: tuple[Any, ...]
    label: str          # the records' one buffer label


def plain_batch(recs: list[dict[str, Any]], cols: dict[str, tuple[Any, ...]],
                refused_extra: tuple[str, ...] = ("per_direction_gbps",)) -> PlainBatch | None:
    """The batch (stream_read.columns) as arrays where every record is a plain() pair record
    of one op whose extra is the same for all (and holds none of refused_extra); None
    otherwise: the records go one by one."""
    n, get = len(recs), cols.get
    mode, conf, wrong, extra, op = get("mode"), get("confirm"), get("wrong"), get("extra"), get("op")
    if (mode is not None and mode.count("bw") != n) or (conf is not None and conf.count(None) != n) \
            or op is None or op.count(op[0]) != n or (wrong is not None and any(wrong)):
        return None
    e = extra[0] if extra is not None else None
    if extra is not None and (extra.count(e) != n or (e and (type(e) is not dict or
                                                             any(k in e for k in refused_extra)))):
        return None
    if superseded(recs[0]) is not None:       # one op, one extra: all or none superseded
        return None
    try:
        s, d, size = (np.array(get(k)) for k in ("src", "dst", "size"))
        v = np.array(get("busbw") or (None,) * n, dtype=float)
        if not np.isfinite(v).all():        # measured_gbs: busbw, else algbw
            v = np.where(np.isfinite(v), v, np.array(get("algbw") or (None,) * n, dtype=float))
    except (TypeError, ValueError):
        return None
    if not (s.dtype.kind == d.dtype.kind == size.dtype.kind == "i") or not np.isfinite(v).all():
        return None
    return PlainBatch(op[0], size, s, d, v, _instabilities(recs, get("latency_us")), get("src_device") or
                      (None,) * n, get("dst_device") or (None,) * n, buffer_label(recs[0]))


def batch_links(b: PlainBatch, recs: list[dict[str, Any]],
                end: Callable[[int, Any, dict[str, Any], str], tuple[Any, tuple[Any, ...]]],
                link: Callable[[int], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src end value, dst end value, link id) of each record of a PlainBatch, as arrays:
    end(rank, device, rec, side) -> (value, LinkMap.end_info) is called once per distinct
    end and link(i) -> link id once per distinct class key (LinkMap.classify_ends' key; i:
    the first record that has it), each in the order first seen, as record by record."""
    ends: list[tuple[np.ndarray, list[tuple[Any, tuple[Any, ...]]]]] = []
    for ranks, devs, side in ((b.s, b.src_device, "src"), (b.d, b.dst_device, "dst")):
        if devs.count(devs[0]) == len(devs):      # one device name (most runs): no codes to give
            code = ranks
        else:
            codes: dict[Any, int] = {}
            code = ranks * len(devs) + np.array([codes.setdefault(x, len(codes)) for x in devs], dtype=np.int_)
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
        vals: list[tuple[Any, tuple[Any, ...]] | None] = [None] * len(first)
        for j in np.argsort(first, kind="stable").tolist():
            i = int(first[j])
            vals[j] = end(int(ranks[i]), devs[i], recs[i], side)
        ends.append((inv, cast("list[tuple[Any, tuple[Any, ...]]]", vals)))     # each set just above
    nodes: dict[Any, int] = {}
    (inv_s, vs), (inv_d, vd) = ends
    info = [np.array([(nodes.setdefault(v[1][0], len(nodes)), v[1][1], v[1][2]) for v in vals],
                     dtype=np.int_).reshape(-1, 3)[inv] for inv, vals in ends]
    same = info[0][:, 0] == info[1][:, 0]
    k1 = np.where(same, info[0][:, 1], info[0][:, 2])
    k2 = np.where(same, info[1][:, 1], info[1][:, 2])
    code = (k1 * (int(max(k1.max(), k2.max())) + 1) + k2) * 2 + same
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    ids = np.zeros(len(first), dtype=np.int_)
    for j in np.argsort(first, kind="stable").tolist():
        ids[j] = link(int(first[j]))
    return (np.array([v[0] for v in vs])[inv_s], np.array([v[0] for v in vd])[inv_d], ids[inv])


def _instabilities(recs: list[dict[str, Any]], lat: Sequence[Any] | None) -> np.ndarray:
    """instability() of each record, as an array (NaN: none)."""
    if lat is None or not any(lat):
        return np.full(len(recs), math.nan)
    try:
        mx, med = np.array(list(map(itemgetter("max", "median"), lat)), dtype=float).T
    except (TypeError, ValueError, KeyError):
        return np.array([math.nan if u is None else u for u in map(instability, recs)])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((mx > 0) & (med > 0), np.log(mx / med), math.nan)


def extend(columns: Callable[[Any, int], Columns], op: Any, sizes: np.ndarray, arrays: Iterable[np.ndarray]) -> None:
    """Append a batch's arrays to columns(op, size) (array.array columns, made there when
    new), size by size in the order first seen, records in their order."""
    _, first = np.unique(sizes, return_index=True)
    for size in sizes[np.sort(first)].tolist():
        m = sizes == size
        cs: tuple[array[Any], ...] = columns(op, size)
        for col, x in zip(cs, arrays):
            col.frombytes(np.ascontiguousarray(x[m], dtype=np.int_ if col.typecode == "l" else float).tobytes())


def column_array(a: array[int] | array[float]) -> np.ndarray:
    """An array.array column as a numpy array (no copy)."""
    dtype = np.int_ if a.typecode == "l" else float
    return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype)


def segment_medians(keys: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, the median of the values of each), as statistics.median takes it
    (NaN sorts last)."""
    keys, values = np.asarray(keys), np.asarray(values, dtype=float)
    if not len(keys):
        return keys, values
    if keys.dtype.kind in "iu" and keys.min() >= 0 and keys.max() < 1 << 16:
        return _small_key_medians(keys, values)
    order = np.lexsort((values, keys))
    k, x = keys[order], values[order]
    uk, start, count = np.unique(k, return_index=True, return_counts=True)
    return uk, (x[start + (count - 1) // 2] + x[start + count // 2]) / 2


def _small_key_medians(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """segment_medians for keys below 2^16 (ranks): one radix sort by key, then each
    segment's middle by partition: a quarter of lexsort's time on millions of values."""
    count = np.bincount(keys)
    uk = np.flatnonzero(count)
    x = values[np.argsort(keys.astype(np.uint16), kind="stable")]
    ends = np.cumsum(count[uk])
    med = np.empty(len(uk))
    for i, (a, b) in enumerate(zip((ends - count[uk]).tolist(), ends.tolist())):
        lo, hi = (b - a - 1) // 2, (b - a) // 2
        seg = np.partition(x[a:b], [lo, hi])
        med[i] = (seg[lo] + seg[hi]) / 2
    return uk.astype(keys.dtype), med


class PairColumns:
    """Pair records' figures by (op, size): src, dst, value, instability (NaN: none), link."""

    def __init__(self, lm: Any, value: Callable[[dict[str, Any]], float | None] = measured_gbs) -> None:
        self.lm, self.value = lm, value     # lm: the run's LinkMap
        self.cols: dict[tuple[Any, int], Columns] = {}      # (op, size) -> (src, dst, value, instability, link index)
        self.links: list[Link] = []     # (class, theoretical GB/s or None) by index
        self._link: dict[Link, int] = {}    # (class, GB/s) -> its index
        self._keyed: dict[tuple[Any, ...], int] = {}    # classify's key of a pair's two ends -> the link index
        self._ends: dict[tuple[int, Any], tuple[Any, ...]] = {}     # (rank, device) -> LinkMap.end_info
        self.labels: set[str] = set()   # buffer labels of the records taken
        self._plain_label = buffer_label({})
        self.count = 0

    def add(self, rec: dict[str, Any], value: float | None = None) -> None:
        s, d = rec["src"], rec["dst"]
        get = rec.get
        li = self._link_index(s, d, get("src_device"), get("dst_device"), rec)
        c = self._columns(get("op"), rec["size"])
        u = instability(rec) if get("latency_us") else None
        c[0].append(s)
        c[1].append(d)
        # pair_records and latency_pair_records keep only records whose value is not None
        c[2].append(cast(float, self.value(rec) if value is None else value))

        c[3].append(math.nan if u is None else u)
        c[4].append(li)
        self.count += 1

    def _columns(self, op: Any, size: int) -> Columns:
        c = self.cols.get((op, size))
        if c is None:
            c = self.cols[(op, size)] = (array("l"), array("l"), array("d"), array("d"), array("l"))
        return c

    def _link_index(self, s: int, d: int, sd: Any, dd: Any, rec: dict[str, Any]) -> int:
        # classify's own cache, keyed as it keys it: one lookup per end, one per class key
        es = self._ends.get((s, sd)) or self._end(s, sd, rec, "src")
        ed = self._ends.get((d, dd)) or self._end(d, dd, rec, "dst")
        key = (0, es[1], ed[1]) if es[0] == ed[0] else (1, es[2], ed[2])
        li = self._keyed.get(key) if s != d else None
        if li is None:
            li = self._link_id(self.lm.classify_ends(es, ed, s, d, rec))
            if s != d:
                self._keyed[key] = li
        return li

    def _link_id(self, link: Link) -> int:
        li = self._link.setdefault(link, len(self.links))
        if li == len(self.links):
            self.links.append(link)
        return li

    def _end(self, rank: int, dev: Any, rec: dict[str, Any], side: str) -> tuple[Any, ...]:
        info: tuple[Any, ...] = self.lm.end_info(rank, dev, rec, side)
        self._ends[(rank, dev)] = info
        return info

    def take(self, rec: Any) -> bool:
        """A streaming reader's consumer: keep a plain record's figures, not the record."""
        v = plain(rec) if type(rec) is dict else None
        if v is None:
            return False
        self.labels.add(buffer_label(rec) if rec.get("extra") else self._plain_label)   # most records: no extra
        self.add(rec, v)
        return True

    def take_columns(self, recs: list[dict[str, Any]], cols: dict[str, tuple[Any, ...]]) -> bool:
        """take() for a whole batch (stream_read.columns): True when every record was plain
        and taken, False when none was (offer them one by one)."""
        if self.value is not measured_gbs:
            return False
        b = plain_batch(recs, cols)
        if b is None or (b.s == b.d).any():
            return False
        self.labels.add(b.label)
        _, _, li = batch_links(b, recs, lambda r, dev, rec, side: (0, self._ends.get((r, dev)) or
                                                                  self._end(r, dev, rec, side)),
                               lambda i: self._link_index(int(b.s[i]), int(b.d[i]), b.src_device[i],
                                                          b.dst_device[i], recs[i]))
        extend(self._columns, b.op, b.size, (b.s, b.d, b.v, b.u, li))
        self.count += len(recs)
        return True

    def __getstate__(self) -> dict[str, Any]:     # what merge() needs, sent from the process that read a part
        return dict(links=self.links, cols=self.cols, labels=self.labels, count=self.count)

    def merge(self, later: PairColumns) -> None:
        """The figures another PairColumns took from a later part of the document, after these."""
        remap = np.array([self._link_id(link) for link in later.links] or [0], dtype=np.int_)
        for (op, size), c in later.cols.items():
            s, d, v, u, li = (column_array(x) for x in c)
            extend(self._columns, op, np.full(len(s), size), (s, d, v, u, remap[li]))
        self.labels |= later.labels
        self.count += later.count

    def pairs(self) -> set[tuple[int, int]]:
        """Every (src, dst) measured, at any size."""
        out: set[tuple[int, int]] = set()
        for key in self.cols:
            s, d = self.arrays(key)[:2]
            out.update(zip(s.tolist(), d.tolist()))
        return out

    def sizes(self) -> list[int]:
        return sorted({size for _, size in self.cols})

    def arrays(self, key: tuple[Any, int]) -> tuple[np.ndarray, ...]:
        return tuple(column_array(x) for x in self.cols[key])


class Observations:
    """validate's table: per (op, size, class) group at the given sizes, each pair's value
    (the median of its records) and the group's median. Groups are contiguous slices of
    the arrays, in the order first measured, and so are the pairs of a group."""

    def __init__(self, cols: PairColumns, sizes: set[int], skip_self: bool = False) -> None:
        self.links = cols.links
        keys: list[tuple[Any, int, Any]] = []     # (op, size, class) of each group
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        inst: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for (op, size), arrays in cols.cols.items():
            if size not in sizes:
                continue
            s, d, v, u, li = cols.arrays((op, size))
            if skip_self:
                keep = s != d
                s, d, v, u, li = s[keep], d[keep], v[keep], u[keep], li[keep]
            inst.append((s, d, u))
            first: dict[Any, int] = {}      # class -> its first record, its links
            links_of: dict[Any, list[int]] = {}
            for link, at in zip(*(x.tolist() for x in np.unique(li, return_index=True))):
                cls = self.links[link][0]
                first[cls] = min(first.get(cls, at), at)
                links_of.setdefault(cls, []).append(link)
            for cls in sorted(first, key=lambda c: first[c]):      # classes in the order first measured
                m = np.isin(li, links_of[cls])
                keys.append((op, size, cls))
                parts.append(_pairs(s[m], d[m], v[m], li[m]))
        self.keys = keys
        bounds = np.cumsum([0] + [len(p[0]) for p in parts])
        self.start, self.end = bounds[:-1], bounds[1:]

        def cat(i: int, t: type) -> np.ndarray:
            return np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, t)

        self.s, self.d, self.v, self.link = cat(0, np.int_), cat(1, np.int_), cat(2, float), cat(3, np.int_)
        self.g = np.repeat(np.arange(len(keys)), self.end - self.start)
        self.gmed = np.array([np.median(self.v[a:b]) for a, b in zip(self.start, self.end)])
        self.inst = tuple(np.concatenate([x[i] for x in inst]) if inst else np.zeros(0) for i in range(3))

    def __len__(self) -> int:
        return len(self.v)

    def group(self, g: int) -> slice:
        """The slice of group g's pairs."""
        return slice(int(self.start[g]), int(self.end[g]))

    def theo(self, idx: Any) -> list[Any]:
        """Theoretical GB/s (None where unknown) of the pairs at indices idx."""
        return [self.links[i][1] for i in self.link[idx]]

    def classes(self) -> np.ndarray:
        """The link class of each pair, as an array."""
        return np.array([k[2] for k in self.keys], dtype=object)[self.g] if len(self.keys) else \
            np.zeros(0, dtype=object)

    def codes(self) -> tuple[np.ndarray, int]:
        """src * N + dst of each pair (N: one more than the largest rank)."""
        n = int(max(self.s.max(initial=0), self.d.max(initial=0))) + 1
        return self.s * n + self.d, n

    def at(self, pair: tuple[int, int]) -> np.ndarray:
        """Indices of the observations of one pair, in group order."""
        return np.flatnonzero((self.s == pair[0]) & (self.d == pair[1]))

    def values(self) -> dict[tuple[int, int], float]:
        """{(src, dst): value} (the last group's where several hold the pair)."""
        return dict(zip(zip(self.s.tolist(), self.d.tolist()), self.v.tolist()))


def _pairs(s: np.ndarray, d: np.ndarray, v: np.ndarray,
           li: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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


def stream_with(path: str, make: Callable[[Any], Any]) -> tuple[dict[str, Any], Any]:
    """(doc, kept): a document read by results/stream_read.py, the records it streams
    offered to kept = make(LinkMap(header)) (its take(rec) -> True: kept there, not in
    doc["results"]; take_columns for a batch); kept is None where it was read whole (small,
    or make gave None)."""
    from ..results.stream_read import read
    from ..topology.linkmap import LinkMap

    kept: list[Any] = []

    def consume(header: dict[str, Any]) -> Any:
        kept.append(make(LinkMap(header)))
        return kept[0]

    doc, streamed = read(path, consume)
    return doc, (kept[0] if streamed else None)

