"""ranks[i].health of a results document, checked as untrusted input: every field the
readers use has the type and range it should, or one UsageError names it (exit 2).
Unknown keys are left alone (a later comm-bench may record more); a document without
health blocks (written before they existed) needs nothing here.
Format: comm_bench/system/rank_health.py, gpu_health.py, rdma_health.py.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

from ..errors import UsageError
from .record_checks import shown

MAX_TEXT = 256
MAX_ITEMS = 1024


def _count(v: Any) -> bool:       # a counter or a setting that cannot be negative
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _nonneg(v: Any) -> bool:
    return _number(v) and v >= 0


def _text(v: Any) -> bool:
    return isinstance(v, str) and len(v) <= MAX_TEXT and v.isprintable()


def _flag(v: Any) -> bool:
    return isinstance(v, bool)


# field -> test, what it must be; a dict: an object of those fields; a list [spec]: a list of them
_OPT = object()
COUNT, NUMBER, NONNEG, TEXT, FLAG = ((_count, "a whole number >= 0"), (_number, "a finite number"),
                                     (_nonneg, "a number >= 0"), (_text, f"printable text of at most {MAX_TEXT} characters"),
                                     (_flag, "true or false"))
GPU = {
    "available": FLAG, "why": TEXT, "source": TEXT, "xid_watch": FLAG,
    "gpu": {"index": COUNT, "name": TEXT, "uuid": TEXT, "bus_id": TEXT},
    "clocks_mhz": {"sm": NONNEG, "sm_max": NONNEG, "mem": NONNEG, "mem_max": NONNEG},
    "clock_events": {"mask": COUNT, "active": [TEXT]},
    "throttle_ns": {"*": NONNEG},
    "temperature": {"gpu_c": NUMBER, "slowdown_c": NUMBER, "shutdown_c": NUMBER},
    "power": {"draw_w": NONNEG, "limit_w": NONNEG, "default_limit_w": NONNEG},
    "pcie": {"gen": COUNT, "gen_max": COUNT, "width": COUNT, "width_max": COUNT, "replays": COUNT},
    "nvlink": {"supported": FLAG, "links": [{"link": COUNT, "up": FLAG}]},
    "ecc": {"enabled": FLAG, "volatile_uncorrected": COUNT, "aggregate_uncorrected": COUNT,
            "volatile_corrected": COUNT},
    "retired_pages": {"single_bit": COUNT, "double_bit": COUNT, "pending": FLAG},
    "row_remap": {"correctable": COUNT, "uncorrectable": COUNT, "pending": FLAG, "failed": FLAG},
    "xid": {"watched": FLAG, "events": [{"xid": COUNT}]},
}
NIC = {
    "available": FLAG, "why": TEXT, "source": TEXT, "device": TEXT, "port": COUNT, "state": TEXT,
    "phys_state": TEXT, "link_layer": TEXT, "rate": TEXT, "rate_gbps": NONNEG,
    "counters": {"*": COUNT}, "hw_counters": {"*": COUNT},
}
BLOCK = {"gpu": {"before": GPU, "after": GPU}, "nic": {"before": NIC, "after": NIC}, "error": TEXT}


def walk(value: Any, spec: Any, where: str, fail: Callable[[str, str, Any], NoReturn]) -> None:
    """value against spec: a (test, what) leaf, [spec] a list of them, {field: spec} an object
    ("*": any other key); fail(where, what, value) at the first that is not so."""
    if value is None:            # any field may be absent or null: the GPU did not say
        return
    if isinstance(spec, tuple):
        test, what = spec
        if not test(value):
            fail(where, what, value)
        return
    if isinstance(spec, list):
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            fail(where, f"a list of at most {MAX_ITEMS} items", value)
        for i, item in enumerate(value):
            walk(item, spec[0], f"{where}[{i}]", fail)
        return
    if not isinstance(value, dict) or len(value) > MAX_ITEMS:
        fail(where, "an object", value)
    for key, item in value.items():
        sub = spec.get(key, spec.get("*"))
        if sub is None:
            continue             # a field this version does not read
        if "*" in spec and not _text(key):
            fail(f"{where} key", "printable text", key)
        walk(item, sub, f"{where}.{key}", fail)


def check(doc: dict[str, Any], path: str = "results") -> None:
    """UsageError (one line) at the first malformed field of any rank's health block."""
    def fail(where: str, what: str, value: Any) -> NoReturn:
        raise UsageError(f"'{path}' is not a valid comm-bench results document: {where} must be {what} "
                         f"(got {shown(value)}; a health block is read as untrusted input)")

    for i, rank in enumerate(doc.get("ranks") or []):
        if isinstance(rank, dict) and rank.get("health") is not None:
            walk(rank["health"], BLOCK, f"ranks[{i}].health", fail)
