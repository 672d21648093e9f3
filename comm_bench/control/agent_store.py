"""A fresh store for each attempt under torchrun's agent store.

With TORCHELASTIC_USE_AGENT_STORE (torchrun's c10d rendezvous) MASTER_PORT is a store that
torchrun's agent hosts for its whole life: after a restart (--max-restarts) it still holds
the earlier attempt's keys (claims, gathers, aborts), and TORCHELASTIC_RESTART_COUNT differs
between agents (only the agent whose rank failed counts a restart), so it cannot name an
attempt. So rank 0 hosts a store of its own for each attempt and leaves its port in the
agent's store; the other ranks take the port that answers. An earlier attempt's port does
not: torchrun stops every rank of an attempt before it starts the next.
"""
from __future__ import annotations

import json
import socket
import time

from ..errors import RunFailed
from ..system.netutil import free_port
from .rendezvous import Store

PORT_KEY = "comm-bench/attempt-store"


def attempt_store_address(host: str, agent_port: int, rank: int, world_size: int, timeout: float,
                          secret: bytes) -> tuple[str, int]:
    """(host, port) of this attempt's store, agreed through the agent's store."""
    agent = Store(host, agent_port, rank, world_size, timeout, is_master=False, secret=secret)
    if rank == 0:
        port = free_port("0.0.0.0")
        agent.set(PORT_KEY, json.dumps({"port": port}))
        return host, port
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if agent.check([PORT_KEY]):
            port = agent.get_json(PORT_KEY)["port"]
            try:
                socket.create_connection((host, port), timeout=2).close()
                return host, port
            except OSError:
                pass  # an earlier attempt's, or rank 0 has not started listening yet
        time.sleep(0.1)
    raise RunFailed(f"rank {rank}: rank 0 did not open this attempt's store (announced through "
                    f"torchrun's store at {host}:{agent_port}) within {timeout:.0f} s")
