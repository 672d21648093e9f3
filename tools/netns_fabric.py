#!/usr/bin/env python3
"""N hosts on one Linux bridge, each in its own network namespace (needs root + iproute2).

Layout: one namespace per host with one veth `eth0`
(address <subnet>.<i+1>/24) whose peer `p<i>` sits in a bridge namespace on bridge `br0`.
Nothing is created in the initial namespace, so parallel fabrics never collide and the
machine's own interfaces are never touched. A host can be shaped with tc tbf on both
ends of its veth (its egress and its ingress), which gives a known-degraded link.
(Over 400 lines: building, shaping and tearing down one fabric share its namespace state;
named hosts for launchers are in netns_hosts.py.)

Python API (used by tests):

    import netns_fabric            # tools/ on sys.path
    with netns_fabric.Fabric(4, prefix="cb", subnet="10.77.3", shape={2: "200mbit"}) as fab:
        fab.addr(0)                # "10.77.3.1"
        fab.netns(0)               # "cb-1234-0-h0"
        fab.exec_prefix(0)         # ["ip", "netns", "exec", "cb-1234-0-h0"]
        fab.run(1, ["ping", "-c1", fab.addr(0)])
    # every namespace of the fabric is deleted here, also after an exception

CLI:
    python tools/netns_fabric.py up 4 --name demo [--subnet 10.77.0] [--shape 2=200mbit]
    python tools/netns_fabric.py down --name demo       # or: down --stale (dead owners)
    python tools/netns_fabric.py list
    python tools/netns_fabric.py check 4 --shape 1=200mbit   # up, measure, down
"""
import argparse
import atexit
import ipaddress
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

_seq = itertools.count()
_live = set()          # fabrics not yet torn down (atexit safety net)
_lock = threading.Lock()

RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)?\s*$", re.I)


class FabricError(RuntimeError):
    pass


def _ip(*args, check=True):
    return _sh(["ip", *args], check=check)


def _sh(cmd, check=True, timeout=30):
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise FabricError(f"{' '.join(cmd)} failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def rate_bits(rate):
    """'200mbit' -> 200e6 (tc units: bit suffix = bits/s, bps = bytes/s)."""
    m = RATE_RE.match(str(rate))
    if not m:
        raise FabricError(f"bad rate {rate!r}: use e.g. 200mbit, 1gbit, 500kbit")
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2).lower()]
    if (m.group(3) or "bit").lower() == "bps":
        v *= 8
    return v


def available():
    """(ok, reason): can this process make network namespaces?"""
    if not shutil.which("ip") or not shutil.which("tc"):
        return False, "iproute2 (ip, tc) not found: apt-get install iproute2"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return False, "network namespaces need root"
    name = f"cbprobe-{os.getpid()}-{next(_seq)}"
    p = _ip("netns", "add", name, check=False)
    if p.returncode != 0:
        return False, f"ip netns add failed: {p.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return True, ""


def list_namespaces():
    p = _ip("netns", "list", check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cleanup_stale(prefix="cb"):
    """Delete namespaces <prefix>-<pid>-<seq>-* whose owning process is gone."""
    removed = []
    pat = re.compile(rf"^{re.escape(prefix)}-(\d+)-(\d+)-(h\d+|br)$")
    for ns in list_namespaces():
        m = pat.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _ip("netns", "del", ns, check=False)
            removed.append(ns)
    return removed


class Fabric:
    """N hosts (namespaces) joined by a bridge (in its own namespace).

    shape: {host_index: rate} or {host_index: {"rate": "200mbit", "burst": "256kb",
    "latency": "50ms", "delay": "1ms"}}; the rate applies in both directions of that
    host's link. pair_shape: {(src, dst): rate or {"rate", "burst"}}: traffic from src to dst only (one
    direction of one pair), under src's own shape. name: fixed base name (CLI); default
    <prefix>-<pid>-<seq> (unique). leaves: [leaf of host i], a two-level fabric: each leaf
    a bridge of its own, joined to the spine bridge br0 by one uplink (a veth pair);
    uplink_shape: {leaf: rate}, that uplink shaped both ways (a bad switch port).
    """

    def __init__(self, n_hosts, prefix="cb", subnet="10.77.0", shape=None, name=None,
                 mtu=None, keep=False, pair_shape=None, leaves=None, uplink_shape=None):
        if not 1 <= int(n_hosts) <= 250:
            raise FabricError(f"n_hosts must be 1..250, got {n_hosts}")
        self.n = int(n_hosts)
        self.subnet = self._check_subnet(subnet)
        self.shape = {int(k): (v if isinstance(v, dict) else {"rate": v})
                      for k, v in (shape or {}).items()}
        for k, v in self.shape.items():
            if not 0 <= k < self.n:
                raise FabricError(f"shape: host {k} not in 0..{self.n - 1}")
            rate_bits(v["rate"])
        self.pair_shape = {(int(a), int(b)): (r if isinstance(r, dict) else {"rate": r})
                           for (a, b), r in (pair_shape or {}).items()}
        for (a, b), r in self.pair_shape.items():
            if not (0 <= a < self.n and 0 <= b < self.n and a != b):
                raise FabricError(f"pair_shape: ({a}, {b}) is not a pair of hosts 0..{self.n - 1}")
            rate_bits(r["rate"])
        self.leaves = list(leaves) if leaves is not None else None
        if self.leaves is not None and len(self.leaves) != self.n:
            raise FabricError(f"leaves: {len(self.leaves)} entries for {self.n} hosts")
        self.uplink_shape = {int(k): {"rate": v} for k, v in (uplink_shape or {}).items()}
        if self.uplink_shape and (self.leaves is None or not set(self.uplink_shape) <= set(self.leaves)):
            raise FabricError("uplink_shape: every leaf shaped must be one of `leaves`")
        self.mtu = mtu
        self.keep = keep
        self.base = name or f"{prefix}-{os.getpid()}-{next(_seq)}"
        self.bridge_ns = f"{self.base}-br"
        self._hosts = [f"{self.base}-h{i}" for i in range(self.n)]
        self._up = False

    @staticmethod
    def _check_subnet(subnet):
        s = str(subnet).strip()
        if s.endswith(".0/24"):
            s = s[:-5]
        parts = s.split(".")
        if len(parts) == 4 and parts[3] == "0":
            parts = parts[:3]
        try:
            if len(parts) != 3:
                raise ValueError
            ipaddress.IPv4Network(".".join(parts) + ".0/24")
        except ValueError:
            raise FabricError(f"subnet {subnet!r}: give the first three octets, e.g. 10.77.3") from None
        return ".".join(parts)

    # --- queries -----------------------------------------------------------
    def addr(self, i):
        self._check_index(i)
        return f"{self.subnet}.{i + 1}"

    def netns(self, i):
        self._check_index(i)
        return self._hosts[i]

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.netns(i)]

    @property
    def n_hosts(self):
        return self.n

    @property
    def namespaces(self):
        return [*self._hosts, self.bridge_ns]

    def addrs(self):
        return [self.addr(i) for i in range(self.n)]

    def describe(self):
        return {"name": self.base, "bridge_netns": self.bridge_ns, "subnet": self.subnet + ".0/24",
                "hosts": [{"index": i, "netns": self._hosts[i], "addr": self.addr(i), "dev": "eth0",
                           "shape": self.shape.get(i)} for i in range(self.n)]}

    def run(self, i, cmd, **kw):
        """subprocess.run(cmd) inside host i's namespace (kw passed through)."""
        return subprocess.run([*self.exec_prefix(i), *cmd], **kw)

    def popen(self, i, cmd, **kw):
        return subprocess.Popen([*self.exec_prefix(i), *cmd], **kw)

    def _check_index(self, i):
        if not 0 <= i < self.n:
            raise IndexError(f"host {i} not in fabric of {self.n}")

    # --- lifecycle ---------------------------------------------------------
    def up(self):
        if self._up:
            return self
        existing = set(list_namespaces())
        clash = [ns for ns in self.namespaces if ns in existing]
        if clash:
            raise FabricError(f"namespace {clash[0]} already exists "
                              f"(run: python tools/netns_fabric.py down --name {self.base})")
        with _lock:
            _live.add(self)
        self._up = True     # from here on, down() removes whatever was made
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self):
        br = self.bridge_ns
        _ip("netns", "add", br)
        _ip("-n", br, "link", "set", "lo", "up")
        _ip("-n", br, "link", "add", "br0", "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
        _ip("-n", br, "link", "set", "br0", "up")
        for leaf in sorted(set(self.leaves or ())):
            # leaf bridge l<k>, its uplink u<k> (leaf side) / d<k> (spine side)
            _ip("-n", br, "link", "add", f"l{leaf}", "type", "bridge", "stp_state", "0", "forward_delay", "0")
            _ip("-n", br, "link", "add", f"u{leaf}", "type", "veth", "peer", "name", f"d{leaf}")
            for dev, master in ((f"u{leaf}", f"l{leaf}"), (f"d{leaf}", "br0")):
                _ip("-n", br, "link", "set", dev, "master", master)
                _ip("-n", br, "link", "set", dev, "up")
                if leaf in self.uplink_shape:
                    self._shape(br, dev, self.uplink_shape[leaf])
            _ip("-n", br, "link", "set", f"l{leaf}", "up")
        for i, ns in enumerate(self._hosts):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            port = f"p{i}"
            # veth made directly inside the two namespaces: no name in the initial namespace
            _ip("-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            if self.mtu:
                _ip("-n", br, "link", "set", port, "mtu", str(self.mtu))
                _ip("-n", ns, "link", "set", "eth0", "mtu", str(self.mtu))
            _ip("-n", br, "link", "set", port, "master", f"l{self.leaves[i]}" if self.leaves else "br0")
            _ip("-n", br, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            dsts = {b: r for (a, b), r in self.pair_shape.items() if a == i}
            if dsts:
                self._shape_pairs(ns, self.shape.get(i), dsts)
            elif i in self.shape:
                self._shape(ns, "eth0", self.shape[i])     # host egress
            if i in self.shape:
                self._shape(br, port, self.shape[i])       # host ingress
        self._wait_ready()

    @staticmethod
    def _tbf_args(spec):
        rate = spec["rate"]
        bits = rate_bits(rate)
        # burst ~ 10 ms of traffic (>= rate/HZ, >= 64kb): 244kb at 200mbit (recipe: 256kb)
        burst = spec.get("burst") or f"{max(64, min(4096, int(bits / 8 / 100 / 1024)))}kb"  # ~10 ms
        return ["rate", str(rate), "burst", burst, "latency", spec.get("latency", "50ms")]

    @classmethod
    def _shape(cls, ns, dev, spec, parent=None, handle=None):
        where = ["parent", parent, "handle", handle] if parent else ["root"]
        if spec.get("delay") and not parent:
            _sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem",
                 "delay", spec["delay"]])
            _sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                 "tbf", *cls._tbf_args(spec)])
        else:
            _sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, *where, "tbf", *cls._tbf_args(spec)])

    def _shape_pairs(self, ns, spec, dsts):
        """Host egress: an htb root (this kernel has no prio qdisc) whose default class takes
        all traffic (under the host's own tbf shape, if any) and one class per shaped
        destination, picked by a u32 filter, each with its own tbf."""
        _sh(["tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"])
        classes = [(1, spec, None)] + [(k, r, dst) for k, (dst, r) in enumerate(sorted(dsts.items()), 2)]
        for k, sp, dst in classes:
            _sh(["tc", "-n", ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", f"1:{k}", "htb",
                 "rate", "100gbit", "quantum", "60000"])
            if sp:
                self._shape(ns, "eth0", sp, parent=f"1:{k}", handle=f"{10 * k}:")
            if dst is not None:
                _sh(["tc", "-n", ns, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
                     "u32", "match", "ip", "dst", f"{self.addr(dst)}/32", "flowid", f"1:{k}"])

    def set_rate(self, i, rate):
        """Change host i's shaped rate (both directions) on a live fabric (tbf shapes only)."""
        spec = dict(self.shape[i], rate=rate)
        for ns, dev in ((self.netns(i), "eth0"), (self.bridge_ns, f"p{i}")):
            _sh(["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "tbf", *self._tbf_args(spec)])

    def toggle(self, i, rates, period):
        """Context manager: host i's rate cycles through `rates`, `period` seconds each, in a
        thread (an intermittent link), until the block ends."""
        return _Toggle(self, i, rates, period)

    def _wait_ready(self, timeout=10.0):
        """Links up and DAD irrelevant (IPv4); wait until each port is forwarding."""
        deadline = time.monotonic() + timeout
        for i in range(self.n):
            while True:
                p = _ip("-n", self.bridge_ns, "-j", "link", "show", f"p{i}", check=False)
                try:
                    info = json.loads(p.stdout)[0]
                    if "LOWER_UP" in info.get("flags", []):
                        break
                except (ValueError, IndexError, KeyError):
                    pass
                if time.monotonic() > deadline:
                    raise FabricError(f"port p{i} of {self.bridge_ns} did not come up in {timeout}s")
                time.sleep(0.05)

    def down(self):
        if not self._up or self.keep:
            return
        errors = []
        for ns in self.namespaces:
            p = _ip("netns", "del", ns, check=False)
            if p.returncode != 0 and "No such file" not in p.stderr:
                errors.append(p.stderr.strip())
        self._up = False
        with _lock:
            _live.discard(self)
        if errors:
            raise FabricError("; ".join(errors))

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False

    def __repr__(self):
        return f"Fabric({self.n}, name={self.base!r}, subnet={self.subnet!r}, shape={self.shape})"


class _Toggle:
    def __init__(self, fab, i, rates, period):
        self.fab, self.i, self.rates, self.period = fab, i, list(rates), float(period)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.changes = 0

    def _loop(self):
        k = 0
        while not self.stop.wait(self.period):
            k += 1
            self.fab.set_rate(self.i, self.rates[k % len(self.rates)])
            self.changes += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        return False


@atexit.register
def _cleanup_live():
    for fab in list(_live):
        try:
            fab.down()
        except Exception:  # noqa: BLE001 - at exit: take down what can be
            pass


def down_named(name):
    pat = re.compile(rf"^{re.escape(name)}-(h\d+|br)$")
    removed = []
    for ns in list_namespaces():
        if pat.match(ns):
            _ip("netns", "del", ns, check=False)
            removed.append(ns)
    return removed


def measure(fab, src, dst, seconds=1.0, port=5299):
    """Bytes/s from host src to host dst over TCP (plain sockets, bounded time)."""
    server = ("import socket,sys\n"
              "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
              f"s.bind(({fab.addr(dst)!r},{port}));s.listen(1);s.settimeout(20)\n"
              "c,_=s.accept();n=0\n"
              "while True:\n b=c.recv(1<<20)\n if not b: break\n n+=len(b)\n"
              "print(n)\n")
    client = ("import socket,time\n"
              f"c=socket.create_connection(({fab.addr(dst)!r},{port}),timeout=20)\n"
              "buf=b'x'*(1<<20);t=time.monotonic();n=0\n"
              f"while time.monotonic()-t<{seconds}: c.sendall(buf);n+=len(buf)\n"
              "c.close();print(time.monotonic()-t)\n")
    srv = fab.popen(dst, [sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    for _ in range(100):      # wait for listen (bounded)
        if f":{port}" in _sh([*fab.exec_prefix(dst), "ss", "-ltn"], check=False).stdout:
            break
        time.sleep(0.05)
    cli = fab.run(src, [sys.executable, "-c", client], stdout=subprocess.PIPE, text=True,
                  timeout=60)
    out, _ = srv.communicate(timeout=60)
    return int(out.strip()) / float(cli.stdout.strip())


def _parse_shape(items):
    shape = {}
    for item in items or []:
        k, _, v = item.partition("=")
        if not v:
            raise SystemExit(f"--shape {item!r}: use HOST=RATE, e.g. 2=200mbit")
        shape[int(k)] = v
    return shape


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="create a fabric and leave it up (prints JSON)")
    up.add_argument("n_hosts", type=int)
    up.add_argument("--name", required=True, help="base name of the namespaces")
    up.add_argument("--subnet", default="10.77.0")
    up.add_argument("--shape", action="append", metavar="HOST=RATE")
    up.add_argument("--mtu", type=int)
    dn = sub.add_parser("down", help="delete a fabric's namespaces")
    dn.add_argument("--name", help="base name given to up")
    dn.add_argument("--stale", action="store_true", help="namespaces of dead test processes")
    dn.add_argument("--prefix", default="cb")
    sub.add_parser("list", help="list namespaces")
    ck = sub.add_parser("check", help="up, ping + measure each host to host 0, down")
    ck.add_argument("n_hosts", type=int)
    ck.add_argument("--subnet", default="10.77.0")
    ck.add_argument("--shape", action="append", metavar="HOST=RATE")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            fab = Fabric(a.n_hosts, name=a.name, subnet=a.subnet, shape=_parse_shape(a.shape),
                         mtu=a.mtu)
            fab.up()
            with _lock:
                _live.discard(fab)        # stays up after exit
            print(json.dumps(fab.describe(), indent=1))
        elif a.cmd == "down":
            if not a.name and not a.stale:
                raise SystemExit("down: give --name NAME or --stale")
            removed = down_named(a.name) if a.name else cleanup_stale(a.prefix)
            print(f"removed {len(removed)} namespaces: {' '.join(removed)}")
        elif a.cmd == "list":
            print("\n".join(list_namespaces()))
        elif a.cmd == "check":
            with Fabric(a.n_hosts, subnet=a.subnet, shape=_parse_shape(a.shape)) as fab:
                for i in range(1, fab.n):
                    bw = measure(fab, i, 0, seconds=1.0)
                    print(f"{fab.netns(i)} {fab.addr(i)} -> {fab.addr(0)}: {bw * 8 / 1e6:.0f} Mbit/s")
    except FabricError as e:
        print(f"netns_fabric: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
