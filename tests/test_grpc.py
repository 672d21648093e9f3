"""The gRPC transport with real grpcio servers and real ranks.

Loopback tests run anywhere grpcio is installed; tests marked `netns` put each
rank in its own network namespace (tools/netns_fabric.py; root + iproute2) and
launch it torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
TLS certificates are made by the test with the openssl CLI.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading

import pytest

grpc = pytest.importorskip("grpc")

from comm_bench import registry  # noqa: E402
from comm_bench.transports import grpc_streams as gs  # noqa: E402
from comm_bench.errors import TransportUnavailable, UsageError  # noqa: E402
from comm_bench.transports.base import RankContext, TransportError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
ENV = dict(os.environ, GRPC_VERBOSITY="NONE", PYTHONUNBUFFERED="1")


# ------------------------------------------------------------------ helpers
def sweep(args, tmp_path, timeout=240, name="r.json"):
    out = tmp_path / name
    cmd = [sys.executable, "-m", "comm_bench", "sweep", "-t", "grpc", "--no-progress",
           "-o", str(out), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=tmp_path)
    doc = json.loads(out.read_text()) if out.exists() else None
    return p, doc


def error_lines(stderr: str) -> list:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def assert_clean_failure(p, code, *needles):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    hit = [ln for ln in error_lines(p.stderr) if all(n.lower() in ln.lower() for n in needles)]
    assert hit, f"no stderr line with {needles}:\n{p.stderr}"
    return hit[0]


def check_records(doc, n_records, mode="bw"):
    assert doc["status"] == "ok", doc.get("failure")
    confirm = [r for r in doc["results"] if "confirm" in r]   # pair sweeps' default confirm phase
    assert all(r["wrong"] == 0 and r["transport"] == "grpc" for r in confirm), confirm
    recs = [r for r in doc["results"] if "confirm" not in r]
    assert len(recs) == n_records, [(r["op"], r["size"], r.get("src"), r.get("dst")) for r in recs]
    for r in recs:
        assert r["wrong"] == 0, r
        assert r["transport"] == "grpc"
        assert r["time_us"] > 0 and r["algbw"] > 0, r
        if mode == "lat":
            assert r["latency_us"]["median"] > 0
    return recs


def make_certs(d, ips, ca_names=("ca", "ca2")):
    """CA(s) + one node certificate signed by the first CA, valid for `ips`."""
    if not shutil.which("openssl"):
        pytest.skip("openssl CLI not found (apt-get install openssl)")
    d.mkdir(exist_ok=True)

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ca_names:
        run("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
            "-subj", f"/CN=comm-bench test {ca}", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=comm-bench node")
    san = ",".join(f"IP:{ip}" for ip in ips)
    (d / "ext.cnf").write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                               "keyUsage=digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth,clientAuth\n")
    run("x509", "-req", "-in", "node.csr", "-CA", f"{ca_names[0]}.pem", "-CAkey", f"{ca_names[0]}.key",
        "-CAcreateserial", "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf")
    return {k: str(d / f) for k, f in (("cert", "node.pem"), ("key", "node.key"),
                                       ("ca", "ca.pem"), ("ca2", "ca2.pem"))}


class FakeStore:
    """all_gather answers with fixed endpoints (for one-process failure tests)."""

    def __init__(self, endpoints):
        self.endpoints = endpoints

    def all_gather(self, tag, obj):
        return self.endpoints


def ctx(rank=0, world=2, store=None, timeout=5.0, max_bytes=1 << 20, **options):
    opts = {o.dest: o.default for o in gs.GrpcTransport.options}
    opts.update(options)
    return RankContext(rank=rank, world_size=world, local_rank=rank, local_world_size=world,
                       host=socket.gethostname(), addr="127.0.0.1", store=store, timeout=timeout,
                       options=opts, max_bytes=max_bytes, ops=("sendrecv",))


# ------------------------------------------------------------------ pieces
def test_registered_with_its_options():
    cls = registry.get("grpc")
    assert cls is gs.GrpcTransport
    assert cls.probe() == (True, "")
    flags = {o.flag for o in cls.options}
    assert {"--streams", "--grpc-max-message", "--grpc-window", "--grpc-no-bdp", "--grpc-compression",
            "--grpc-keepalive", "--tls-cert", "--tls-key", "--tls-ca", "--grpc-port"} <= flags
    assert set(cls.patterns) == {"pair", "pairwise", "pairwise-concurrent"}


def test_sizes_patterns_and_wrong_counts():
    assert gs.parse_size("64M", "x") == 64 << 20 and gs.parse_size("4K", "x") == 4096
    assert gs.parse_size("", "x") == 0
    with pytest.raises(UsageError):
        gs.parse_size("lots", "--grpc-window")
    a = gs.pattern(1001, 7)
    assert len(a) == 1001 and a == gs.pattern(1001, 7) and a != gs.pattern(1001, 8)
    assert gs.count_wrong(a, a, 4) == 0
    a = gs.pattern(1000, 7)
    b = bytearray(a)
    b[0] ^= 1
    b[1] ^= 1          # same float32 element
    b[900] ^= 0xFF
    assert gs.count_wrong(bytes(b), a, 4) == 2
    assert gs.count_wrong(bytes(b), a, 1) == 3
    assert gs.count_wrong(a[:-1], a, 1) == 1000       # short message: every element wrong


# ------------------------------------------------------------------ sweeps on loopback
def test_sweep_two_ranks_bw_bidir_checked(tmp_path):
    p, doc = sweep(["-N", "2", "--op", "sendrecv,bidir", "-b", "1K", "-e", "4M", "-f", "16",
                    "-n", "8", "-w", "2", "-c", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    recs = check_records(doc, 2 * 4)          # 1K, 16K, 256K, 4M
    assert {r["op"] for r in recs} == {"sendrecv", "bidir"}
    bidir = [r for r in recs if r["op"] == "bidir"]
    assert all(r["extra"]["total_gbps"] == pytest.approx(2 * r["algbw"]) for r in bidir)


def test_sweep_two_ranks_latency_checked(tmp_path):
    p, doc = sweep(["-N", "2", "--mode", "lat", "-b", "8", "-e", "64K", "-f", "64",
                    "-n", "20", "-w", "3", "-c", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    check_records(doc, 3, mode="lat")


@pytest.mark.slow
@pytest.mark.parametrize("pattern,rounds", [("pairwise", 12), ("pairwise-concurrent", 12)])
def test_sweep_four_ranks_checked(tmp_path, pattern, rounds):
    # pairwise: 12 ordered pairs one at a time; pairwise-concurrent: 6 rounds x 2 pairs
    p, doc = sweep(["-N", "4", "--pattern", pattern, "--op", "sendrecv,bidir", "-b", "4K", "-e", "1M",
                    "-f", "256", "-n", "6", "-w", "1", "-c", "1", "--streams", "2"], tmp_path, timeout=400)
    assert p.returncode == 0, p.stderr
    recs = check_records(doc, 2 * 2 * rounds)
    assert {(r["src"], r["dst"]) for r in recs} == {(s, d) for s in range(4) for d in range(4) if s != d}
    assert all(r["extra"]["streams"] == 2 for r in recs)


def test_tuning_options_accepted(tmp_path):
    p, doc = sweep(["-N", "2", "-b", "64K", "-e", "1M", "-f", "16", "-n", "5", "-c", "1",
                    "--grpc-window", "4M", "--grpc-no-bdp", "--grpc-compression", "gzip",
                    "--grpc-keepalive", "10", "--grpc-max-message", "2M", "--streams", "3"], tmp_path)
    assert p.returncode == 0, p.stderr
    check_records(doc, 2)
    assert doc["ranks"][0]["devices"]["compression"] == "gzip"


# ------------------------------------------------------------------ TLS
def test_tls_mutual_and_wrong_ca(tmp_path):
    certs = make_certs(tmp_path / "tls", ["127.0.0.1"])
    tls = ["--tls-cert", certs["cert"], "--tls-key", certs["key"]]
    p, doc = sweep(["-N", "2", "-b", "1K", "-e", "1M", "-f", "32", "-n", "5", "-c", "1",
                    *tls, "--tls-ca", certs["ca"]], tmp_path)
    assert p.returncode == 0, p.stderr
    check_records(doc, 3)
    assert doc["ranks"][0]["devices"]["tls"] is True

    p, bad = sweep(["-N", "2", "-b", "1K", "-e", "1K", "-n", "2", "--timeout", "20",
                    *tls, "--tls-ca", certs["ca2"]], tmp_path, name="bad.json")
    line = assert_clean_failure(p, 1, "TLS handshake", "failed")
    assert "--tls-ca" in line
    # the cause on top of the document too, not a rank that only noticed it
    assert bad["status"] == "failed" and "TLS handshake" in bad["failure"]["reason"], bad["failure"]


def test_tls_needs_cert_and_key(tmp_path):
    p, _ = sweep(["-N", "2", "-b", "1K", "-e", "1K", "--tls-cert", str(tmp_path / "x.pem")], tmp_path)
    assert_clean_failure(p, 2, "--tls-cert", "--tls-key")


def test_tls_key_of_another_certificate(tmp_path):
    """Before: grpc's failed credentials read 'could not bind'."""
    certs = make_certs(tmp_path / "tls", ["127.0.0.1"])
    p, _ = sweep(["-N", "2", "-b", "1K", "-e", "1K", "--tls-cert", certs["cert"],
                  "--tls-key", str(tmp_path / "tls" / "ca.key")], tmp_path)
    line = assert_clean_failure(p, 2, "--tls-key", "is not the key of")
    assert "bind" not in p.stderr and error_lines(p.stderr) == [line]


# ------------------------------------------------------------------ clear errors
def held_port_below_ephemeral():
    """A listening socket on a port P below the kernel's ephemeral range, with P+1 free:
    rank 1 binds P+1, and a CI run had P+1 taken by a connection's own port (bind(0) hands
    out ports from that range)."""
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for port in random.sample(range(max(1024, lo - 8000), lo - 2), 200):
        s, nxt = socket.socket(), socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            nxt.bind(("127.0.0.1", port + 1))
        except OSError:
            s.close()
            continue
        finally:
            nxt.close()
        s.listen(1)
        return s, port
    raise AssertionError("no free port pair below the ephemeral range")


def test_port_in_use(tmp_path):
    s, port = held_port_below_ephemeral()
    try:
        p, _ = sweep(["-N", "2", "-b", "1K", "-e", "1K", "--grpc-port", str(port), "--timeout", "20"],
                     tmp_path)
    finally:
        s.close()
    assert_clean_failure(p, 1, f"port {port}", "in use")


def test_message_larger_than_option_is_a_usage_error(tmp_path):
    p, _ = sweep(["-N", "2", "-b", "1K", "-e", "1M", "--grpc-max-message", "64K"], tmp_path)
    assert_clean_failure(p, 2, "message too large", "--grpc-max-message")


def test_unreachable_peer_is_one_line():
    # rank 1's endpoint is a port nobody listens on: connection refused until the deadline
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    t = gs.GrpcTransport()
    eps = [{"addr": "127.0.0.1", "port": 0, "host": "a"}, {"addr": "127.0.0.1", "port": dead, "host": "b"}]
    t.setup(ctx(store=FakeStore(eps), timeout=3.0))
    try:
        with pytest.raises(TransportError) as err:
            t.run("sendrecv", 1024, 5, 1, peer=1, role="src")
    finally:
        t.teardown()
    msg = str(err.value)
    assert "\n" not in msg
    assert "rank 1" in msg and f"127.0.0.1:{dead}" in msg and "unreachable" in msg, msg


def test_receiver_limit_reports_message_too_large():
    """A receiver whose limit is below the message: gRPC's RESOURCE_EXHAUSTED becomes one line."""
    from comm_bench.system.netutil import free_port
    from comm_bench.control.rendezvous import Store

    port = free_port()
    stores = [Store("127.0.0.1", port, r, 2, 20, secret=b"test-secret") for r in range(2)]
    ts = [gs.GrpcTransport(), gs.GrpcTransport()]
    ctxs = [ctx(0, store=stores[0], timeout=10.0, max_bytes=1 << 20),
            ctx(1, store=stores[1], timeout=10.0, max_bytes=0, grpc_max_message="64K")]
    th = threading.Thread(target=ts[1].setup, args=(ctxs[1],))
    th.start()
    ts[0].setup(ctxs[0])
    th.join(30)
    try:
        with pytest.raises(TransportUnavailable) as err:
            ts[0].run("sendrecv", 256 * 1024, 3, 0, peer=1, role="src")
        assert "message too large" in str(err.value) and "--grpc-max-message" in str(err.value)
        assert "\n" not in str(err.value)
    finally:
        for t in ts:
            t.teardown()


# ------------------------------------------------------------------ network namespaces
def _netns():
    try:
        import netns_fabric
    except ImportError:
        pytest.skip("tools/netns_fabric.py not found")
    ok, why = netns_fabric.available()
    if not ok:
        pytest.skip(why)
    return netns_fabric


def run_fabric_sweep(fab, n, args, tmp_path, timeout=300, addr_override=None, name="r.json"):
    """One rank per namespace, torchrun-style; returns (rank 0's process, its stderr, doc)."""
    out = tmp_path / name
    procs = []
    for r in range(n):
        env = dict(ENV, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR=fab.addr(0), MASTER_PORT="29517")
        extra = ["--addr", addr_override[r]] if addr_override and r in addr_override else []
        cmd = [*fab.exec_prefix(r), sys.executable, "-m", "comm_bench", "sweep", "-t", "grpc",
               "--no-progress", "-o", str(out), *args, *extra]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env, cwd=tmp_path))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    doc = json.loads(out.read_text()) if out.exists() else None
    return procs, outs, doc


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize("n,pattern,rounds", [(2, "pair", 1), (4, "pairwise-concurrent", 12)])
def test_netns_sweep_checked(tmp_path, n, pattern, rounds):
    nf = _netns()
    with nf.Fabric(n, prefix="cbg", subnet=f"10.77.{50 + n}") as fab:
        procs, outs, doc = run_fabric_sweep(
            fab, n, ["--pattern", pattern, "--op", "sendrecv,bidir", "-b", "4K", "-e", "4M", "-f", "32",
                     "-n", "6", "-w", "1", "-c", "1", "--streams", "2"], tmp_path)
    assert [p.returncode for p in procs] == [0] * n, outs
    recs = check_records(doc, 2 * 3 * rounds)
    hosts = {r["addr"] for r in doc["ranks"]}
    assert hosts == {f"10.77.{50 + n}.{i + 1}" for i in range(n)}
    assert all(r["devices"]["endpoint"].startswith(r["addr"] + ":") for r in doc["ranks"])
    assert len(recs) == 2 * 3 * rounds


@pytest.mark.netns
@pytest.mark.slow
def test_netns_tls_and_wrong_ca(tmp_path):
    nf = _netns()
    with nf.Fabric(2, prefix="cbg", subnet="10.77.60") as fab:
        certs = make_certs(tmp_path / "tls", fab.addrs())
        tls = ["--tls-cert", certs["cert"], "--tls-key", certs["key"]]
        procs, outs, doc = run_fabric_sweep(
            fab, 2, ["-b", "1K", "-e", "1M", "-f", "32", "-n", "5", "-c", "1", *tls, "--tls-ca", certs["ca"]],
            tmp_path)
        assert [p.returncode for p in procs] == [0, 0], outs
        check_records(doc, 3)
        procs, outs, _ = run_fabric_sweep(
            fab, 2, ["-b", "1K", "-e", "1K", "-n", "2", "--timeout", "20", *tls, "--tls-ca", certs["ca2"]],
            tmp_path, name="bad.json")
    assert procs[0].returncode == 1, outs
    assert "Traceback" not in outs[0][1]
    assert any("TLS handshake" in ln for ln in error_lines(outs[0][1])), outs[0][1]


@pytest.mark.netns
@pytest.mark.slow
def test_netns_unreachable_peer(tmp_path):
    """Rank 1 advertises an address that exists only inside its namespace (no route to it)."""
    nf = _netns()
    with nf.Fabric(2, prefix="cbg", subnet="10.77.61") as fab:
        ns1 = fab.netns(1)
        # on h1's loopback device: h1 can bind it, h0 has no route to it
        subprocess.run(["ip", "-n", ns1, "addr", "add", "10.77.62.9/32", "dev", "lo"], check=True)
        procs, outs, _ = run_fabric_sweep(fab, 2, ["-b", "1K", "-e", "1K", "-n", "2", "--timeout", "10"],
                                          tmp_path, timeout=120, addr_override={1: "10.77.62.9"})
    assert procs[0].returncode == 1, outs
    err = outs[0][1]
    assert "Traceback" not in err
    assert any("10.77.62.9" in ln and "unreachable" in ln for ln in error_lines(err)), err


def test_more_streams_than_iterations_loses_no_message(tmp_path):
    """--streams 8 with -n 2 and the default 5 warm-ups: the warm-ups used to be dealt over
    5 streams while only 2 were opened, so 3 never went and the check counted them lost."""
    p, doc = sweep(["-N", "2", "--op", "sendrecv,bidir", "--streams", "8", "-b", "1K", "-e", "1K",
                    "-n", "2", "-c", "1"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert [r["wrong"] for r in check_records(doc, 2)] == [0, 0]
