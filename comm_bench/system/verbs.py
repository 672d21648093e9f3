"""RDMA ports through rdma-core's own Python bindings (pyverbs, Debian's python3-pyverbs),
where importable: state, physical state, active width x speed -> rate, link layer, LID and
the GID table, as libibverbs reports them. sysfs.py beside it reads the same from sysfs and
is used where pyverbs is not importable (or for recorded trees); both give the same answers
(tests/rdma_vm/test_in_vm.py checks that on Soft-RoCE). tools/install.sh makes pyverbs
importable from the project's environment without the rest of the system's packages."""
from __future__ import annotations

# sysfs's words for the port states and physical states (include/rdma/ib_verbs.h)
STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
               6: "LinkErrorRecovery", 7: "Phy Test"}
WIDTH_LANES = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
# per-lane rate in 0.1 Gb/s, as the kernel's sysfs `rate` computes it
SPEED_DECIGBPS = {1: 25, 2: 50, 4: 100, 8: 100, 16: 140, 32: 250, 64: 500, 128: 1000, 256: 2000}
LINK_LAYERS = {1: "InfiniBand", 2: "Ethernet"}
GID_TYPES = {0: "IB/RoCE v1", 1: "RoCE v2"}   # ibv_query_gid_type's sysfs enum


def available() -> tuple:
    """(True, version) when pyverbs imports, else (False, why)."""
    try:
        import pyverbs.device
    except ImportError as exc:
        return False, f"pyverbs is not importable ({exc}): apt install python3-pyverbs, then tools/install.sh"
    import pyverbs
    return True, f"from {pyverbs.__path__[0]}"


def ports(device: str) -> list | None:
    """[{port, state, phys_state, rate_gbps, link_layer, lid, gids: [{index, gid, type}]}] of one
    device, or None where pyverbs cannot open it (not importable, no such device)."""
    try:
        from pyverbs.device import Context
        ctx = Context(name=device)
    except Exception:  # noqa: BLE001 - ImportError, PyverbsRDMAError: the sysfs reader answers
        return None
    try:
        out = []
        for port in range(1, ctx.query_device().phys_port_cnt + 1):
            a = ctx.query_port(port)
            lanes, speed = WIDTH_LANES.get(a.active_width), SPEED_DECIGBPS.get(a.active_speed)
            out.append({"port": port, "state": STATES.get(a.state, str(a.state)),
                        "phys_state": PHYS_STATES.get(a.phys_state, str(a.phys_state)),
                        "rate_gbps": lanes * speed / 10 if lanes and speed else None,
                        "link_layer": LINK_LAYERS.get(a.link_layer, "InfiniBand"),
                        "lid": hex(a.lid), "gids": _gids(ctx, port, a.gid_tbl_len)})
        return out
    finally:
        ctx.close()


def _gids(ctx, port: int, size: int) -> list:
    out = []
    for index in range(size):
        try:
            g = ctx.query_gid(port, index)
            gid = str(getattr(g, "gid", g))
            kind = GID_TYPES.get(ctx.query_gid_type(port, index))
        except Exception:  # noqa: BLE001 - an empty or unreadable entry
            continue
        if gid.replace("0", "").replace(":", ""):
            out.append({"index": index, "gid": gid, "type": kind})
    return out
