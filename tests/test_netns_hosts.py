"""Named network-namespace hosts (tools/netns_hosts.py) and the ssh stand-in tools/netns_rsh,
which the launcher tests build on. Needs root and iproute2."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import netns_fabric  # noqa: E402
import netns_hosts  # noqa: E402

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]


def test_hosts_have_names_that_every_host_resolves():
    with netns_hosts.NamedHosts(["alpha", "beta"], prefix="cbnh", subnet="10.79.41") as h:
        out = h.run(1, ["sh", "-c", "hostname; getent hosts alpha"], capture_output=True, text=True).stdout
        assert out.split() == ["beta", "10.79.41.1", "alpha"]
        env = dict(os.environ, NETNS_HOSTS=h.map_file)
        rsh = [ROOT / "tools" / "netns_rsh", "-x", "alpha", "echo $(hostname)", "on", "alpha"]
        p = subprocess.run(rsh, env=env, capture_output=True, text=True, timeout=30)
        assert p.stdout.split() == ["alpha", "on", "alpha"]
        p = subprocess.run([*rsh[:2], "gamma", "true"], env=env, capture_output=True, text=True, timeout=30)
        assert p.returncode == 255 and "no host gamma" in p.stderr
        sleeper = h.popen(0, ["sleep", "600"])
        spaces, map_file = h.fabric.namespaces, h.map_file
    assert sleeper.poll() is not None                      # killed at teardown
    assert not set(spaces) & set(netns_fabric.list_namespaces())
    assert not os.path.exists(map_file) and not any((netns_hosts.ETC / ns).exists() for ns in spaces)


def test_a_killed_runs_hosts_are_cleaned_up_by_the_next():
    """A test run killed outright (no finalizer ran) leaves namespaces and processes; the
    next NamedHosts of that prefix removes them."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import netns_hosts\n"
            "h = netns_hosts.NamedHosts(['a'], prefix='cbnhk', subnet='10.79.42').up()\n"
            "h.popen(0, ['sleep', '600']); print(h.fabric.netns(0), h.map_file, flush=True)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "tools")], stdout=subprocess.PIPE, text=True)
    ns, map_file = owner.stdout.readline().split()
    # `ip netns exec` enters the namespace after its fork: wait (5 s at most) until the sleep is in it
    deadline, left = time.monotonic() + 5, []
    while not left and time.monotonic() < deadline:
        left = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        time.sleep(0 if left else 0.05)
    owner.kill()
    owner.wait()
    assert left and ns in netns_fabric.list_namespaces() and os.path.exists(map_file)
    with netns_hosts.NamedHosts(["b"], prefix="cbnhk", subnet="10.79.42"):
        assert ns not in netns_fabric.list_namespaces() and not os.path.exists(map_file)
    time.sleep(0.2)
    for pid in map(int, left):
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
