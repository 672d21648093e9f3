"""Topology discovery, link model and GPU/NIC matrices; installed as comm_bench.topology.

    from comm_bench.topology import snapshot, format_text
    snap = snapshot()                               # this node, live, < 1 s, never raises
    snap = snapshot(fixture_root("dgx-h100"))       # a recorded tree (tests)
"""
if __package__ != "comm_bench.topology":
    raise ImportError("import comm_bench.topology, not the source folder 'topology' "
                      "(install the package: pip install -e .)")

import os as _os

from .discover import format_text, iface_addrs, snapshot  # noqa: F401
# the link table is comm_bench/links.py (system/ reads it too); `topology.links` still names it
from .. import links  # noqa: F401
from ..links import LINK_CLASSES  # noqa: F401
from .record import record  # noqa: F401

FIXTURES = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "fixtures")


def fixture_root(name):
    """Path of a recorded fixture tree shipped in topology/fixtures/ (e.g. 'dgx-h100')."""
    return _os.path.join(FIXTURES, name)


def fixture_names():
    try:
        return sorted(d for d in _os.listdir(FIXTURES) if _os.path.isdir(_os.path.join(FIXTURES, d, "sys")))
    except OSError:
        return []
