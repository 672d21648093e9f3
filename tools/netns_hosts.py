#!/usr/bin/env python3
"""Named hosts on a tools/netns_fabric.py fabric: each host has a name that every host
resolves (/etc/netns/<ns>/hosts, which `ip netns exec` mounts over /etc/hosts) and that
its processes see as their host name (a UTS namespace). Launchers that address hosts by
name (Slurm, torchrun's c10d rendezvous, mpirun's hostfile) then work as on real hosts;
tools/netns_rsh, given `map_file` as $NETNS_HOSTS, stands in for ssh to them.

    import netns_hosts                         # tools/ on sys.path
    with netns_hosts.NamedHosts(["a", "b"], prefix="cbx", subnet="10.79.1") as hosts:
        hosts.popen(1, ["hostname"])           # prints b
    # every process left in the hosts' namespaces is killed, and the namespaces deleted here
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns_fabric

ETC = Path("/etc/netns")
MAP_PREFIX = "netns-hosts-"    # map files: /tmp/netns-hosts-<fabric name>-XXXX


class NamedHosts:
    """names[i] is fabric host i; shape: {index: rate} as for netns_fabric.Fabric."""

    def __init__(self, names, prefix="cbhost", subnet="10.79.0", shape=None):
        self.names = list(names)
        self.prefix = prefix
        self.fabric = netns_fabric.Fabric(len(self.names), prefix=prefix, subnet=subnet, shape=shape)
        self.procs = []
        self.map_file = None

    def addr(self, name):
        return self.fabric.addr(self.names.index(name))

    def argv(self, i, cmd, setup=""):
        """cmd on host i, as host names[i]; `setup` (shell, ending in &&) runs first there."""
        return [*self.fabric.exec_prefix(i), "unshare", "--uts", "sh", "-c",
                f'hostname "$0" && {setup} exec "$@"', self.names[i], *map(str, cmd)]

    def popen(self, i, cmd, setup="", **kw):
        p = subprocess.Popen(self.argv(i, cmd, setup), **kw)
        self.procs.append(p)
        return p

    def run(self, i, cmd, **kw):
        return subprocess.run(self.argv(i, cmd), **kw)

    def pids(self):
        """Every process in the hosts' namespaces (and the ones started here, still running)."""
        pids = {p.pid for p in self.procs if p.poll() is None}
        for ns in self.fabric.namespaces:
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            pids |= {int(x) for x in out.split()}
        return pids

    def up(self):
        cleanup_stale(self.prefix)
        self.fabric.up()
        try:
            lines = ["127.0.0.1 localhost"] + [f"{self.fabric.addr(i)} {n}" for i, n in enumerate(self.names)]
            for ns in self.fabric.namespaces:
                (ETC / ns).mkdir(parents=True, exist_ok=True)
                (ETC / ns / "hosts").write_text("\n".join(lines) + "\n")
            fd, self.map_file = tempfile.mkstemp(prefix=f"{MAP_PREFIX}{self.fabric.base}-")
            with os.fdopen(fd, "w") as f:
                f.writelines(f"{n} {self.fabric.netns(i)}\n" for i, n in enumerate(self.names))
        except BaseException:
            self.down()
            raise
        return self

    def down(self):
        """Kill what runs on the hosts (by pid: only processes inside these namespaces),
        then delete the namespaces and their /etc/netns folders."""
        try:
            if self.fabric._up:
                for _ in range(5):
                    pids = self.pids()
                    if not pids:
                        break
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    time.sleep(0.2)
            for p in self.procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            self.procs = []
        finally:
            for ns in self.fabric.namespaces:
                shutil.rmtree(ETC / ns, ignore_errors=True)
            if self.map_file:
                os.unlink(self.map_file)
                self.map_file = None
            self.fabric.down()

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()
        return False


def cleanup_stale(prefix):
    """What a killed run (its owner process gone) left of <prefix> hosts: the processes
    still running in those namespaces, their /etc/netns folders, the namespaces."""
    pat = re.compile(rf"^{re.escape(prefix)}-(\d+)-\d+-(h\d+|br)$")
    for ns in netns_fabric.list_namespaces():
        m = pat.match(ns)
        if m and not netns_fabric._pid_alive(int(m.group(1))):
            out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            for pid in map(int, out.split()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(ETC / ns, ignore_errors=True)
    netns_fabric.cleanup_stale(prefix)
    for f in Path(tempfile.gettempdir()).glob(f"{MAP_PREFIX}{prefix}-*"):
        m = re.match(rf"{re.escape(MAP_PREFIX + prefix)}-(\d+)-", f.name)
        if m and not netns_fabric._pid_alive(int(m.group(1))):
            f.unlink(missing_ok=True)
