"""Records as the readers see them: a pair's measured bandwidth, pair records (with the
reverse direction of a bidirectional record).
Sizes are labelled with comm_bench.sizes.human_size. Everything that reads results documents (heatmap, validate, compare, plot, report) takes
these from here, so no reader depends on another reader.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..errors import UsageError


def number(v: object) -> float | None:
    """A finite int/float as float, else None (bools and strings are not numbers here)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


FIGURES = ("busbw", "algbw", "bw_peak")     # time_us is always there (the schema): not a figure alone


def has_figure(rec: dict[str, Any]) -> bool:
    """A record that measured something: a finite rate, or a latency figure."""
    if type(rec) is not dict:
        return False
    if any(number(rec.get(k)) is not None for k in FIGURES):
        return True
    lat = rec.get("latency_us")
    return type(lat) is dict and any(number(v) is not None for v in lat.values())


def no_figures(path: str, count: int) -> UsageError:
    """The one line for a document whose records hold no measured figure (exit 2)."""
    from ..errors import UsageError
    return UsageError(f"'{path}' holds {count} record(s) but not one measured figure (every rate and "
                      "latency is null): nothing to read; was every size of the sweep refused or failed?")


def _measured_keys(doc: dict[str, Any]) -> set[tuple[Any, Any, Any]]:
    return {(r.get("op"), r.get("mode", "bw"), r.get("size")) for r in doc.get("results") or [] if has_figure(r)}


def nothing_in_common(docs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """compare's refusal where it would judge nothing: the line naming the first run (after
    the first) that shares no op, mode and size with a measured figure with the first run,
    or None. docs: [(name, doc)]."""
    if len(docs) < 2:
        return None
    (first, _), ref_keys = docs[0], _measured_keys(docs[0][1])
    for name, doc in docs[1:]:
        keys = _measured_keys(doc)
        if not keys & ref_keys:
            def said(ks: set[tuple[Any, Any, Any]]) -> str:
                ops = sorted({f"{op}" + ("" if mode == "bw" else f" ({mode})") for op, mode, _ in ks})
                return ", ".join(map(str, ops[:4])) + (" ..." if len(ops) > 4 else "") or "nothing"
            return (f"'{name}' shares no op, mode and size with '{first}' ({first}: {said(ref_keys)}; "
                    f"{name}: {said(keys)}): nothing to compare; compare runs of the same ops and sizes")
    return None


# The transports' link kinds (comm_bench.links.LINK_KINDS) as of the documents written before
# the writer recorded link_kind; frozen, since every later document carries its own, so that
# no reader imports a transport (tests/test_link_kind.py holds it against the classes).
LINK_KIND_BEFORE_RECORDED = {"tcp": "cpu", "gloo": "cpu", "mpi": "cpu", "grpc": "cpu", "rdma": "rdma",
                             "cuda": "gpu", "nccl": "gpu", "torch-nccl": "gpu"}


def link_kind(doc: dict[str, Any]) -> str | None:
    """What the run's data crossed (links.LINK_KINDS): as the writer recorded it in the header or
    (a header without it) in the first record; for an older document, its transport's kind as
    of then; None for a transport this version does not know."""
    kind = doc.get("link_kind")
    if kind is None:
        first = next(iter(doc.get("results") or ()), None)
        kind = first.get("link_kind") if isinstance(first, dict) else None
    return kind or LINK_KIND_BEFORE_RECORDED.get(str(doc.get("transport") or "").lower())


def superseded(rec: dict[str, Any]) -> str | None:
    """Why a record's figure came from a method since found wrong (one line), or None.
    Known by what the record holds: the method that replaced it writes a field the old
    one never did. Only a new run corrects such a record."""
    extra = rec["extra"] if isinstance(rec.get("extra"), dict) else {}
    if rec.get("op") == "peer_bidir" and not {"per_direction_gbps", "reverse_direction_of"} & set(extra):
        # before 2026-11-30 one GPU drove both copies (its write and a read of the peer);
        # nvbandwidth's bidirectional figure has both GPUs write to each other at once
        return ("peer_bidir measured by the method replaced on 2026-11-30 (one GPU drove both copies; "
                "its figure is about half the link's per-direction rate): re-run the sweep")
    return None


def buffer_label(rec: dict[str, Any]) -> str:
    """Where a record's buffers lived and how they travelled: "host", or "cuda:LIB/direct" or
    "cuda:LIB/staged" (extra.buffer, transports/_gpu_buffers.py). Records with different
    labels measure different paths: no reader merges or compares them as one link."""
    buf = (rec.get("extra") or {}).get("buffer") if isinstance(rec.get("extra"), dict) else None
    if not isinstance(buf, dict) or buf.get("kind", "host") == "host":
        return "host"
    return f"{buf.get('kind')}:{buf.get('library')}/{buf.get('path')}"


def one_buffer(doc: dict[str, Any], what: str, more: Iterable[str] = ()) -> str:
    """The one buffer label of a document's records (and `more`: those of records a streaming
    reader did not keep), or UsageError where it mixes several (a hand-merged file: a link
    is judged from one path at a time)."""
    from ..errors import UsageError

    labels = sorted({buffer_label(r) for r in doc.get("results") or [] if isinstance(r, dict)} | set(more))
    if len(labels) > 1:
        raise UsageError(f"{what}: the records were measured with different buffers ({', '.join(labels)}); "
                         "a link is judged from one kind at a time: keep one sweep's records per file")
    return labels[0] if labels else "host"


def measured_gbs(rec: dict[str, Any]) -> float | None:
    """The pair bandwidth of a record (busbw, else algbw), or None. Per direction: a
    bidirectional record (peer_bidir, rdma --bidir) carries its src->dst direction there
    (both directions and their total are in extra), so it compares with a link's
    one-direction rate like every other record."""
    v = number(rec.get("busbw"))
    return v if v is not None else number(rec.get("algbw"))


def median_latency_us(rec: dict[str, Any]) -> float | None:
    """A --mode lat record's median one-way latency (us), or None."""
    lat = rec["latency_us"] if isinstance(rec.get("latency_us"), dict) else {}
    return number(lat.get("median"))


def inverse_latency(rec: dict[str, Any]) -> float | None:
    """A --mode lat record's speed, 1 / its median one-way latency (per us): the figure the
    confirm phase compares, higher is better as for bandwidth. None where there is none."""
    v = median_latency_us(rec)
    return 1.0 / v if v else None


def latency_pair_records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Latency records of pair patterns (src and dst given, mode lat, a median)."""
    return [r for r in doc.get("results") or [] if type(r) is dict and r.get("mode") == "lat"
            and type(r.get("src")) is int and type(r.get("dst")) is int and type(r.get("size")) is int
            and median_latency_us(r) is not None]


def pair_records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Bandwidth records of pair patterns (src and dst given, mode bw). A concurrent
    bidirectional record also measured dst->src: that direction becomes a record of its
    own unless the run measured the reverse pair itself (pairwise patterns do)."""
    out = []
    for rec in doc.get("results") or []:
        if type(rec) is not dict or rec.get("mode", "bw") != "bw":
            continue
        if type(rec.get("src")) is int and type(rec.get("dst")) is int and type(rec.get("size")) is int \
                and measured_gbs(rec) is not None:
            out.append(rec)
    measured = {(r.get("op"), r["size"], r["src"], r["dst"]) for r in out}
    for rec in list(out):
        extra = rec["extra"] if type(rec.get("extra")) is dict else {}
        per_dir = extra.get("per_direction_gbps")
        back = number(per_dir.get("dst->src")) if type(per_dir) is dict else None
        if back is None or (rec.get("op"), rec["size"], rec["dst"], rec["src"]) in measured:
            continue
        out.append(dict(rec, src=rec["dst"], dst=rec["src"], src_host=rec.get("dst_host"),
                        dst_host=rec.get("src_host"), src_device=rec.get("dst_device"),
                        dst_device=rec.get("src_device"), algbw=back, busbw=back,
                        extra={"reverse_direction_of": f"{rec['src']}->{rec['dst']}"}))
    return out
