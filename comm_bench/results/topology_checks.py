"""hosts[i].topology of a results document, checked as untrusted input: the fields the
readers use (topology/linkmap.py, views/expected.py, views/report_html.py) have the type
they should and the link matrix is square, or one UsageError names the field (exit 2).
A fuzzed document with a GPU list that was an object, or a NIC's addresses a number, made
validate and report exit 70. Unknown keys are left alone; null or absent is always fine.
Format: topology/discover.py.
"""
from __future__ import annotations

from typing import Any, NoReturn

from ..errors import UsageError
from .health_checks import COUNT, FLAG, NONNEG, NUMBER, TEXT, walk
from .record_checks import shown

PCIE = {"cur_gen": COUNT, "max_gen": COUNT, "cur_width": COUNT, "max_width": COUNT, "cur_gbs": NONNEG,
        "max_gbs": NONNEG}
GPU = {"index": COUNT, "label": TEXT, "name": TEXT, "uuid": TEXT, "pci": TEXT, "numa_node": NUMBER,
       "memory_total": NONNEG, "pcie": PCIE,
       "nvlink": {"links": COUNT, "version": COUNT, "gbs": NONNEG, "to_nvswitch": COUNT, "peers": {"*": COUNT},
                  "reason": TEXT}}
NIC = {"label": TEXT, "name": TEXT, "kind": TEXT, "pci": TEXT, "netdev": TEXT, "numa_node": NUMBER,
       "state": TEXT, "rate_gbs": NONNEG, "speed_mbps": NUMBER, "mtu": COUNT, "addrs": [TEXT], "pcie": PCIE,
       "virtual": FLAG}
MATRIX = {"labels": [TEXT], "kinds": [TEXT], "cells": [[TEXT]], "classes": [[TEXT]], "rates_gbs": [[NONNEG]]}
TOPOLOGY = {"host": TEXT, "gpus": [GPU], "nics": [NIC], "matrix": MATRIX,
            "numa": [{"node": COUNT, "cpulist": TEXT, "ncpus": COUNT, "mem_total_kb": COUNT, "distance": [NUMBER]}]}


def check(doc: dict[str, Any], path: str = "results") -> None:
    """UsageError (one line) at the first malformed field of any host's topology."""
    def fail(where: str, what: str, value: Any) -> NoReturn:
        raise UsageError(f"'{path}' is not a valid comm-bench results document: {where} must be {what} "
                         f"(got {shown(value)}; a topology is read as untrusted input)")

    for i, host in enumerate(doc.get("hosts") or []):
        topo = host.get("topology") if isinstance(host, dict) else None
        if topo is None:
            continue
        where = f"hosts[{i}].topology"
        walk(topo, TOPOLOGY, where, fail)
        _square(topo.get("matrix"), f"{where}.matrix", fail)


def _square(m: Any, where: str, fail: Any) -> None:
    """The readers index kinds, cells and rates by a label's position: every one n long
    (classes too where it is recorded)."""
    n = len((m or {}).get("labels") or [])
    if not n:
        return
    for key in ("kinds", "cells", "classes", "rates_gbs"):
        rows = m.get(key)
        if rows is None and key == "classes":
            continue
        if rows is None:
            fail(f"{where}.{key}", f"{n} entries (one per label)", rows)
        if len(rows) != n or (key != "kinds" and any(r is None or len(r) != n for r in rows)):
            fail(f"{where}.{key}", f"{n} entries{'' if key == 'kinds' else f' of {n}'} (one per label)", rows)
