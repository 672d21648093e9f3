"""`sweep --resume`: continue into the results document of an earlier, interrupted attempt
of the same sweep (a torchrun --max-restarts restart, a requeued Slurm job).

The same command runs again, so --resume is given from the first attempt: with no
document (or an empty one) it starts afresh. Otherwise the earlier document must
describe the same sweep; its records stay, what they cover is not measured again, and
the document gains a `resumed` entry saying from where and after what it continued.
A launcher may number the ranks differently after a restart (torchrun's c10d
rendezvous does): kept records are renumbered by (host, local rank).
"""
from __future__ import annotations

import os

from ..results import document as results
from ..errors import UsageError

# what must match for two attempts to be one sweep
SAME_RUN = ("transport", "world_size", "pattern")
SAME_OPTIONS = ("ops", "sizes", "iters", "warmup", "check", "dtype", "redop", "root", "mode", "transport_options")
# settings documents written before they existed held implicitly
OPTION_DEFAULTS = {"redop": "sum", "root": 0}
# launchers' restart counters, recorded with each resumption
RESTART_ENV = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")


def record_key(rec: dict) -> tuple:
    """What one record measured: (op, size, src, dst); src/dst None for a collective."""
    return (rec["op"], rec["size"], rec.get("src"), rec.get("dst"))


def earlier(path: str) -> dict | None:
    """The earlier attempt's document at `path`, read and every figure checked (results.load:
    a hostile one is refused here, before any rank measures), None if there is none."""
    try:
        if os.path.getsize(path) == 0:
            return None
    except FileNotFoundError:
        return None
    return results.load(path)


def previous(path: str, doc: dict) -> dict | None:
    """The earlier attempt's document at `path` to continue, None if there is none;
    UsageError if it is another sweep's."""
    old = earlier(path)
    if old is None:
        return None
    for key in SAME_RUN:
        if old.get(key) != doc[key]:
            raise UsageError(_differs(path, key, old.get(key), doc[key]))
    for key in SAME_OPTIONS:
        was, now = (old.get("options") or {}).get(key, OPTION_DEFAULTS.get(key)), doc["options"].get(key)
        if was != now:
            raise UsageError(_differs(path, key, was, now))
    return old


def _differs(path, key, was, now):
    return (f"--resume: '{path}' is a sweep with {key} {was!r}, this one has {now!r}: "
            "run the same command again to resume it, or choose another -o")


def renumbered(old: dict, doc: dict, path: str) -> list:
    """The earlier attempt's records with its rank numbers turned into this attempt's
    (the same process place, host and local rank, may have another rank number now)."""
    now = {(r["host"], r["local_rank"]): r["rank"] for r in doc["ranks"]}
    new_rank = {}
    for r in old["ranks"]:
        place = (r.get("host"), r.get("local_rank"))
        if place not in now:
            raise UsageError(f"--resume: '{path}' was measured with rank {r.get('rank')} on "
                             f"{place[0]} (local rank {place[1]}), which this run does not have: "
                             "resume on the same hosts, or choose another -o")
        new_rank[r["rank"]] = now[place]
    out = []
    for rec in old["results"]:
        rec = dict(rec)
        for key in ("src", "dst"):
            if rec.get(key) is not None:
                rec[key] = new_rank[rec[key]]
        out.append(rec)
    return out


def continued(old: dict, doc: dict, kept: list) -> dict:
    """The new attempt's document header: its own ranks, hosts and run id, the first
    attempt's start, and one more `resumed` entry."""
    entry = {"at": doc["started"], "records_kept": len(kept),
             "after": {k: kept[-1].get(k) for k in ("op", "size", "src", "dst", "round")} if kept else None,
             "previous_status": old.get("status"), "previous_failure": old.get("failure"),
             "previous_run_id": old.get("run_id"), "restart_count": _restart_count()}
    return dict(doc, started=old.get("started", doc["started"]),
                resumed=[*old.get("resumed", []), entry])


def _restart_count():
    for name in RESTART_ENV:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return None
