"""What JSON Schema cannot say about a results document, checked record by record before
any reader uses a figure: ranks below world_size and listed once, figures finite, above
zero where a measurement cannot be zero, never subnormal and never beyond any link's or
timer's physical range, confirm targets naming ranks of the run, known dtypes, no pair
from a rank to itself, no record twice. A document that contradicts itself is refused
with one line naming the record (exit 2), never read with a guess or dropped silently.

    checker = RecordChecker(doc, path)    # the header: world_size, ranks
    checker.check(i, rec)                 # each record, in order (streaming readers too)
    checker.check_batch(i, recs, cols)    # records i.. at once: cols from stream_read.columns

A streaming reader gives keys=array("q"): the records' identities are kept as 8-byte hashes
(16 MB at 2 million records, where a dict of them took ~200 MB) and check_repeats() finds a
record given twice once the last is read.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from itertools import repeat
from operator import itemgetter
from typing import Any

from ..errors import UsageError

MAX_GBS = 1e6   # 1 PB/s: beyond any link or memory; a larger figure is a corrupted document
MIN_GBS = 1e-9  # 1 byte/s: a measured rate below it (or a subnormal one) is a corrupted figure
MIN_US = 1e-6   # 1 ps: no timer resolves less; a time below it is a corrupted figure
MAX_US = 1e10   # ~3 hours for one iteration: beyond any --timeout
# what one record measured: no two records of a document share all of these (and the buffer)
RECORD_IDENTITY = ("transport", "op", "mode", "pattern", "size", "dtype", "src", "dst", "root", "round")
LATENCY_FIGURES = ("min", "max", "avg", "median", "p99", "p999")
# fields the schema calls "integer": JSON Schema takes 3.0 and 1e300 as integers, the readers
# do not (a slow pair whose records said "src": 3.0 dropped out of validate and the heatmap)
INTEGER_FIELDS = ("size", "count", "iters", "warmup", "wrong", "round", "src", "dst", "root")
NAME_FIELDS = ("transport", "op", "mode", "pattern", "dtype", "redop", "src_host", "dst_host")
MAX_NAME = 1024     # characters of a name (a host name is at most 253): a 1 MiB one is a damaged document


def shown(value: Any) -> str:
    """A value from an untrusted document, as a refusal quotes it: JSON, at most 60 characters."""
    text = json.dumps(value, default=repr) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _within(col: list[Any], lo: float, hi: float) -> bool:
    """Every value of a column a number in [lo, hi] (None reads as NaN: not within)."""
    import numpy as np
    a = np.array(col, dtype=float)
    return bool(((a >= lo) & (a <= hi)).all())


_LATENCY_ROW = itemgetter(*LATENCY_FIGURES, "stdev")


def _latencies_ok(col: list[Any]) -> bool:
    """Every record's latency_us holds all its figures, each in range, min <= median <= max."""
    import numpy as np
    a = np.array(list(map(_LATENCY_ROW, col)), dtype=float)
    figs, sd = a[:, :len(LATENCY_FIGURES)], a[:, -1]
    lo, mx, med = (a[:, LATENCY_FIGURES.index(k)] for k in ("min", "max", "median"))
    return bool(((figs >= MIN_US) & (figs <= MAX_US)).all() and ((sd >= 0) & (sd <= MAX_US)).all()
                and ((lo <= med) & (med <= mx)).all())


def _whole(v: Any) -> bool:
    """None or an int written as one (3.0 and 1e300 are floats: not whole numbers here)."""
    return v is None or v.__class__ is int


def _name_ok(v: Any) -> bool:
    return not isinstance(v, str) or len(v) <= MAX_NAME


def _num(v: Any) -> int | float | None:
    return None if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) else v


class RecordChecker:
    def __init__(self, doc: dict[str, Any], path: str, keys: Any = None) -> None:
        from ..ops import DTYPES
        from .records import buffer_label

        self.path, self.dtypes, self.buffer_label = path, DTYPES, buffer_label
        self.n = doc.get("world_size")
        self._header(doc)
        listed = [r.get("rank") for r in doc.get("ranks") or []]
        if self.n is not None:
            beyond = next((r for r in listed if r is not None and r >= self.n), None)
            if beyond is not None:
                raise self.bad(f"'ranks' lists rank {beyond}, but the run had {self.n} rank(s)")
        if len(set(listed)) != len(listed):
            rank = next(r for i, r in enumerate(listed) if r in listed[:i])
            raise self.bad(f"rank {rank} appears twice in 'ranks'")
        if listed and self.n is not None and len(listed) != self.n:
            raise self.bad(f"world_size is {self.n} but 'ranks' lists {len(listed)} rank(s)")
        # hash of a record's identity -> its index (a hash: 2M records at 1,024 ranks)
        self.seen: dict[int, int] = {}
        self.keys = keys    # or the hashes in record order (streaming readers: check_repeats)

    def bad(self, what: str) -> UsageError:
        return UsageError(f"'{self.path}' is not a valid comm-bench results document: {what}")

    def _header(self, doc: dict[str, Any]) -> None:
        """The header's whole numbers written as such, its names of a sane length (the schema
        has checked their types otherwise)."""
        fields = [("world_size", doc.get("world_size")), ("schema_version", doc.get("schema_version"))]
        for i, r in enumerate(doc.get("ranks") or []):
            if isinstance(r, dict):
                fields += [(f"ranks[{i}].{k}", r.get(k)) for k in ("rank", "local_rank", "pid")]
                if not _name_ok(r.get("host")):
                    raise self.bad(f"ranks[{i}].host is {len(r['host']):,} characters long (at most {MAX_NAME})")
        rdv = doc.get("rendezvous")
        if isinstance(rdv, dict):
            fields += [(f"rendezvous.{k}", rdv.get(k)) for k in ("last_rank", "rejected_values")]
        for i, r in enumerate(doc.get("resumed") or []):
            if isinstance(r, dict):
                fields += [(f"resumed[{i}].{k}", r.get(k)) for k in ("records_kept", "restart_count")]
        err = doc.get("data_error")
        if isinstance(err, dict):
            fields.append(("data_error.wrong", err.get("wrong")))
            for i, e in enumerate(err.get("records") or []):
                if isinstance(e, dict):
                    fields += [(f"data_error.records[{i}].{k}", e.get(k)) for k in ("size", "wrong", "src", "dst")]
        for where, v in fields:
            if v.__class__ is float:
                raise self.bad(f"{where} is {v!r}, not a whole number (write it without a decimal point or exponent)")
        for i, host in enumerate(doc.get("hosts") or []):
            if not isinstance(host, dict):
                continue
            if not _name_ok(host.get("host")):
                raise self.bad(f"hosts[{i}].host is {len(host['host']):,} characters long (at most {MAX_NAME})")
            for r in host.get("ranks") or []:
                if r.__class__ is float:
                    raise self.bad(f"hosts[{i}].ranks holds {r!r}, not a whole number")
                if isinstance(r, int) and isinstance(self.n, int) and r >= self.n:
                    raise self.bad(f"hosts[{i}].ranks lists rank {r}, but the run had {self.n} rank(s)")

    def _types(self, i: int, rec: dict[str, Any]) -> None:
        """A record's integer fields hold ints, its names are of a sane length."""
        get: Callable[[str], Any] = rec.get
        if float not in set(map(type, map(get, INTEGER_FIELDS))) and "requested_sizes" not in rec and \
                max(map(len, filter(str.__instancecheck__, map(get, NAME_FIELDS))), default=0) <= MAX_NAME:
            return      # the usual record, at C speed
        for key in INTEGER_FIELDS:
            if get(key).__class__ is float:
                raise self.bad(f"record {i} (results[{i}].{key}) is {get(key)!r}, not a whole number (write "
                               "it without a decimal point or exponent)")
        sizes = get("requested_sizes")
        if isinstance(sizes, list) and any(v.__class__ is float for v in sizes):
            raise self.bad(f"record {i} (results[{i}].requested_sizes) holds a number that is not a whole number")
        for key in NAME_FIELDS:
            if not _name_ok(get(key)):
                raise self.bad(f"record {i} (results[{i}].{key}) is {len(get(key)):,} characters long "
                               f"(at most {MAX_NAME})")

    def check(self, i: int, rec: dict[str, Any]) -> None:
        """One record (the schema has checked its types): UsageError naming it, or None."""
        get = rec.get
        self._types(i, rec)
        src, dst = get("src"), get("dst")
        n = self.n
        if n is not None:
            for key, v in (("src", src), ("dst", dst), ("root", get("root"))):
                if v is not None and v >= n:
                    raise self._rank(i, key, v)
        if src is not None and src == dst:
            raise self.bad(f"record {i} (results[{i}]) is a pair from rank {src} to itself (src == dst)")
        if (src is None) != (dst is None):
            # every reader of a pair takes both ends (a fuzzed record without its dst: report exit 70)
            have, lack = ("src", "dst") if dst is None else ("dst", "src")
            raise self.bad(f"record {i} (results[{i}]) has a {have} but no {lack}: a pair record names both ranks")
        dtype = get("dtype")
        if dtype is not None and dtype not in self.dtypes:
            raise self.bad(f"record {i} (results[{i}].dtype) is {shown(dtype)}, not one of {', '.join(self.dtypes)}")
        for key in ("algbw", "busbw", "bw_peak"):
            v = get(key)
            if v.__class__ is float or v.__class__ is int:
                if not MIN_GBS <= v <= MAX_GBS:
                    self._rate(i, key, v, pair=src is not None)
        t = get("time_us")
        if (t.__class__ is float or t.__class__ is int) and not MIN_US <= t <= MAX_US:
            raise self._time(i, "time_us", t)
        lat = get("latency_us")
        if lat:
            self._latency(i, lat)
        conf = get("confirm")
        if conf is not None:
            self._confirm(i, conf)
        ident = (*map(get, RECORD_IDENTITY), self.buffer_label(rec))
        try:
            h = hash(ident)
        except TypeError:       # a list or object where a scalar belongs: hash its text
            h = hash(tuple(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in ident))
        if self.keys is not None:
            self.keys.append(h)
            return
        first = self.seen.setdefault(h, i)
        if first != i:
            raise self._twice(i, first)

    def check_batch(self, first: int, recs: list[dict[str, Any]], cols: dict[str, list[Any]] | None) -> None:
        """Records first, first + 1, ... as check() checks them one by one: on columns at C
        speed where the batch holds one set of keys (cols) and every column is as the sweep
        writes it; otherwise, or where a figure is out of range, record by record, so an
        error is the line check() gives."""
        keys = self._column_keys(recs, cols) if cols is not None else None
        if keys is None:
            for k, rec in enumerate(recs):
                self.check(first + k, rec)
            return
        if self.keys is not None:
            self.keys.extend(keys)
            return
        for k, key in enumerate(keys):
            if self.seen.setdefault(key, first + k) != first + k:
                raise self._twice(first + k, self.seen[key])

    def _column_keys(self, recs: list[dict[str, Any]], cols: dict[str, list[Any]]) -> list[int] | None:
        """The records' identity hashes where every check holds on the columns, else None."""
        import numpy as np      # here, not at the top: a sweep of host transports never imports numpy

        n, get = len(recs), cols.get
        try:
            if get("confirm", (None,)).count(None) != len(get("confirm", (None,))):
                return None
            for key in INTEGER_FIELDS:      # a float where a whole number belongs: record by record
                col = get(key)
                if col is not None and float in set(map(type, col)):
                    return None
            if "requested_sizes" in cols:
                return None
            for key in NAME_FIELDS:
                col = get(key)
                if col is not None and str in set(map(type, col)) and \
                        max(map(len, filter(str.__instancecheck__, col))) > MAX_NAME:
                    return None
            ranks: dict[str, Any] = {}
            for key in ("src", "dst", "root"):
                col = get(key)
                if col is not None and col.count(None) != n:
                    ranks[key] = np.array(col, dtype=np.int64)
                    if self.n is not None and (ranks[key] >= self.n).any():
                        return None
            if "src" in ranks and "dst" in ranks and (ranks["src"] == ranks["dst"]).any():
                return None
            ends = [get("src") or [None] * n, get("dst") or [None] * n]
            if [v is None for v in ends[0]] != [v is None for v in ends[1]]:
                return None          # a record with one end only: the record-by-record check names it
            if not set(get("dtype", ())) <= set(self.dtypes):
                return None
            for key, lo in (("algbw", MIN_GBS), ("busbw", MIN_GBS), ("bw_peak", MIN_GBS), ("time_us", MIN_US)):
                col = get(key)
                if col is not None and col.count(None) != n and not _within(col, lo, MAX_GBS if lo == MIN_GBS
                                                                             else MAX_US):
                    return None
            lat = get("latency_us")
            if lat is not None and any(lat) and not _latencies_ok(lat):
                return None
            ident = [get(k) or repeat(None, n) for k in RECORD_IDENTITY]
            extra = get("extra")
            labels = repeat("host", n) if extra is None or not any(extra) else map(self.buffer_label, recs)
            return list(map(hash, zip(*ident, labels)))
        except (TypeError, ValueError, KeyError, OverflowError):     # a column not all numbers/scalars
            return None

    def _twice(self, i: int, first: int) -> UsageError:
        return self.bad(f"record {i} (results[{i}]) measures what record {first} measured (same "
                        f"{', '.join(RECORD_IDENTITY)}): a record given twice")

    def check_repeats(self) -> None:
        """keys mode, after the last record: the first record that repeats an earlier one."""
        import numpy as np

        keys = np.frombuffer(self.keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        ks = keys[order]
        dup = np.flatnonzero(ks[1:] == ks[:-1]) + 1
        if not len(dup):
            return
        later = order[dup]
        k = dup[np.argmin(later)]
        start = np.searchsorted(ks, ks[k])
        raise self._twice(int(order[k]), int(order[start]))

    def _rank(self, i: int, key: str, v: Any) -> UsageError:
        return self.bad(f"record {i} (results[{i}].{key}) names rank {v}, but the run had {self.n} rank(s)")

    def _rate(self, i: int, key: str, v: float, pair: bool) -> None:
        """A rate outside [MIN_GBS, MAX_GBS]: refused, except busbw 0 of a collective (a
        1-rank all_reduce's bus factor 2(n-1)/n is 0) and bw_peak 0; a pair's rate never is."""
        where = f"record {i} (results[{i}].{key}) is {v!r}"
        if not math.isfinite(v):
            raise self.bad(f"{where}, not a finite number")
        if v > MAX_GBS:
            raise self.bad(f"{where} GB/s, more than any link or memory carries ({MAX_GBS:g} GB/s)")
        if v != 0 or key == "algbw" or (pair and key == "busbw"):
            raise self.bad(f"{where} GB/s: a measured rate is at least {MIN_GBS:g} GB/s")

    def _time(self, i: int, key: str, v: float) -> UsageError:
        where = f"record {i} (results[{i}].{key}) is {v!r} us"
        if not math.isfinite(v):
            return self.bad(f"record {i} (results[{i}].{key}) is {v}, not a finite number")
        if v < MIN_US:
            return self.bad(f"{where}: a measured time is at least {MIN_US:g} us")
        return self.bad(f"{where}, longer than any run ({MAX_US:g} us)")

    def _latency(self, i: int, lat: dict[str, Any]) -> None:
        for k in LATENCY_FIGURES:
            v = lat.get(k)
            if (v.__class__ is float or v.__class__ is int) and not MIN_US <= v <= MAX_US:
                raise self._time(i, f"latency_us.{k}", v)
        sd = _num(lat.get("stdev"))
        if sd is not None and not 0 <= sd <= MAX_US:
            raise self.bad(f"record {i} (results[{i}].latency_us.stdev) is {sd!r}, not 0 to {MAX_US:g} us")
        lo, mid, hi = (_num(lat.get(k)) for k in ("min", "median", "max"))
        if None not in (lo, mid, hi) and not lo <= mid <= hi:  # type: ignore[operator]
            raise self.bad(f"record {i} (results[{i}].latency_us) has min {lo!r}, median {mid!r}, max {hi!r}: "
                           f"not in that order")

    def _confirm(self, i: int, conf: dict[str, Any]) -> None:
        """Target ranks of the run (the schema has checked their types and that they are >= 0)."""
        t = conf.get("target") or {}
        for key in ("id", "alt"):
            if conf.get(key).__class__ is float:
                raise self.bad(f"record {i} (results[{i}].confirm.{key}) is {conf.get(key)!r}, not a whole number")
        for key in ("rank", "src", "dst"):
            if t.get(key).__class__ is float:
                raise self.bad(f"record {i} (results[{i}].confirm.target.{key}) is {t.get(key)!r}, not a whole number")
        for key in ("rank", "src", "dst"):
            v = t.get(key)
            if v is not None and self.n is not None and v >= self.n:
                raise self._rank(i, f"confirm.target.{key}", v)
        if t.get("src") is not None and t.get("src") == t.get("dst"):
            raise self.bad(f"record {i} (results[{i}].confirm.target) names a pair from rank {t['src']} to itself")
        kind = conf.get("kind")
        if kind == "pair" and "src" not in t or kind == "rank" and "rank" not in t:
            raise self.bad(f"record {i} (results[{i}].confirm) is of kind {kind!r} but its target is "
                           f"{shown(t)}: a {kind} target is " + ('{"src": A, "dst": B}' if kind == "pair"
                                                                  else '{"rank": R}'))
