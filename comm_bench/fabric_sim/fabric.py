"""The simulated fat-tree and the faults injected into it.

Nodes 0..n-1 (one rank each), `leaf` nodes per leaf switch, `pod` leaves per pod (0: none;
pods group leaves for the topology pattern only: the rate model is two tiers, leaf and
spine). Every host link runs at `host_gbs` each way. A leaf has leaf/oversub uplinks of
host_gbs; its uplinks act as one pool shared by the round's cross-leaf flows (adaptive
routing), except that a flow whose ECMP hash (of the unordered pair, so both directions
take the same port) lands on a degraded port runs at that port's rate.

Faults (`--fault` text, NODE/LEAF/PORT are numbers):
    slow-host:NODE:F         the node's link runs at F x its rate, both directions
    slow-link:A:B:F          traffic between A and B only (a bad route) at F x
    flap:NODE:F:PERIOD       the node's link toggles between full rate and F x every
                             PERIOD seconds (simulated clock)
    bad-port:LEAF:PORT:F     uplink port PORT of leaf LEAF at F x its rate
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError
from ..validate.fabric import ROUTING, ecmp_port   # the routing its documents name, read by validate

FAULT_KINDS = {"slow-host": "if", "slow-link": "iif", "flap": "iff", "bad-port": "iif"}  # argument types


@dataclass
class Fault:
    kind: str
    args: tuple

    def describe(self) -> dict:
        a = self.args
        if self.kind == "slow-host":
            return {"kind": self.kind, "node": a[0], "factor": a[1]}
        if self.kind == "slow-link":
            return {"kind": self.kind, "nodes": [a[0], a[1]], "factor": a[2]}
        if self.kind == "flap":
            return {"kind": self.kind, "node": a[0], "factor": a[1], "period_s": a[2]}
        return {"kind": self.kind, "leaf": a[0], "port": a[1], "factor": a[2]}


def parse_fault(text: str) -> Fault:
    kind, _, rest = text.partition(":")
    parts = rest.split(":") if rest else []
    types = FAULT_KINDS.get(kind)
    if types is None or len(parts) != len(types):
        raise UsageError(f"--fault {text!r}: use slow-host:NODE:F, slow-link:A:B:F, flap:NODE:F:PERIOD "
                         "or bad-port:LEAF:PORT:F")
    try:
        args = tuple(int(p) if t == "i" else float(p) for p, t in zip(parts, types))
    except ValueError:
        raise UsageError(f"--fault {text!r}: NODE, LEAF and PORT are whole numbers, F and PERIOD numbers") from None
    factor = args[-1] if kind != "flap" else args[1]
    if not 0 < factor <= 1 or any(x < 0 for x in args) or (kind == "flap" and args[2] <= 0):
        raise UsageError(f"--fault {text!r}: F is a rate factor in (0, 1], PERIOD > 0 seconds")
    return Fault(kind, args)


@dataclass
class Fabric:
    nodes: int
    leaf: int = 32               # nodes per leaf switch
    pod: int = 0                 # leaves per pod (grouping only; 0: none)
    host_gbs: float = 50.0       # 400 Gb/s NICs
    oversub: float = 1.0         # leaf downlinks : uplinks
    noise: float = 0.02          # lognormal sigma per measurement (and per iteration, halved)
    latency_us: float = 3.0      # per-message start-up time
    faults: list = field(default_factory=list)

    def __post_init__(self):
        if self.nodes < 2 or self.leaf < 1 or self.pod < 0 or self.host_gbs <= 0 or self.oversub < 1:
            raise UsageError("simulate: need --nodes >= 2, --leaf >= 1, --pod >= 0, --host-gbs > 0, --oversub >= 1")
        self.uplinks = max(1, int(self.leaf / self.oversub))
        leaves = -(-self.nodes // self.leaf)
        for f in self.faults:
            a = f.args
            bad = (f.kind in ("slow-host", "flap") and a[0] >= self.nodes) or \
                  (f.kind == "slow-link" and max(a[0], a[1]) >= self.nodes) or \
                  (f.kind == "bad-port" and (a[0] >= leaves or a[1] >= self.uplinks))
            if bad:
                raise UsageError(f"--fault {f.kind}:{':'.join(map(str, a))}: no such node, leaf or port "
                                 f"({self.nodes} nodes, {leaves} leaves of {self.uplinks} uplinks)")

    # --- where things are -----------------------------------------------------------
    def leaf_of(self, node: int) -> int:
        return node // self.leaf

    def groups(self) -> list:
        """(pod, leaf) of every node (the topology pattern's grouping), or (leaf,)."""
        if self.pod:
            return [(self.leaf_of(r) // self.pod, self.leaf_of(r)) for r in range(self.nodes)]
        return [(self.leaf_of(r),) for r in range(self.nodes)]

    def host(self, node: int) -> str:
        return f"node{node:04d}"

    def port(self, a: int, b: int) -> int | None:
        """The uplink port (of either leaf) the pair a-b crosses; None inside one leaf."""
        if self.leaf_of(a) == self.leaf_of(b):
            return None
        return ecmp_port(a, b, self.uplinks)

    def describe(self) -> dict:
        """What the document says about the fabric (no faults: validate must find them)."""
        return {"kind": "fat-tree", "nodes": self.nodes, "leaf": self.leaf, "pod": self.pod,
                "host_gbs": self.host_gbs, "oversub": self.oversub, "uplinks": self.uplinks,
                "routing": ROUTING, "noise": self.noise,
                "switch_of": {self.host(r): f"leaf{self.leaf_of(r)}" for r in range(self.nodes)}}

    # --- rates ----------------------------------------------------------------------
    def pair_rate(self, a: int, b: int, share: float, t: float) -> float:
        """GB/s of a -> b at simulated time t, given the cross-leaf share of the round."""
        rate = self.host_gbs * (share if self.leaf_of(a) != self.leaf_of(b) else 1.0)
        port = self.port(a, b)
        for f in self.faults:
            x = f.args
            if f.kind == "slow-host" and x[0] in (a, b):
                rate = min(rate, self.host_gbs * x[1])
            elif f.kind == "slow-link" and {x[0], x[1]} == {a, b}:
                rate = min(rate, self.host_gbs * x[2])
            elif f.kind == "flap" and x[0] in (a, b) and int(t / x[2]) % 2 == 1:
                rate = min(rate, self.host_gbs * x[1])
            elif f.kind == "bad-port" and port == x[1] and x[0] in (self.leaf_of(a), self.leaf_of(b)):
                rate = min(rate, self.host_gbs * x[2])
        return rate

    def flapping(self, a: int, b: int):
        """The toggle period of a flapping link on this pair, or None."""
        return next((f.args[2] for f in self.faults if f.kind == "flap" and f.args[0] in (a, b)), None)
