"""Another local user against a sweep run as root (docs/reliability.md, "Security"):
the rendezvous store listens on loopback only and ignores what someone without the
run's secret writes into it; planted symlinks never redirect the results file."""
import encodings.idna  # noqa: F401 - the other user's child resolves hosts and cannot import it
import json
import os
import socket
import subprocess
import time
from datetime import timedelta

import pytest
from torch.distributed import TCPStore  # imported here: the other user's child uses it after fork

from comm_bench.errors import RunFailed
from comm_bench.system.netutil import free_port
from comm_bench.control.light_store import LightStore
from comm_bench.control.store_wire import SET, frame
from comm_bench.control.rendezvous import Store

from cbtest import COMM_BENCH, assert_no_traceback, load_results, rank_pids, run_cli
from localuser import as_user, other_user, user_dir  # noqa: F401 - fixtures
from test_failures import wait_for_records

# long enough (well over the watchdog's 1 s poll) for an attack mid-run to be seen
LONG = ["-b", "8", "-e", "64M", "-n", "200", "-w", "2", "--no-progress", "--timeout", "30"]
SHORT = ["-b", "8", "-e", "64K", "-n", "5", "-w", "1", "--no-progress"]


def start_sweep(out, args, cwd):
    return subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "2", "-o", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def wait_ranks(parent, n=2, limit=60):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        pids = rank_pids(parent.pid)
        if len(pids) == n:
            return pids
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    raise AssertionError("the ranks did not start")


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def listening(port):
    """Local addresses listening on TCP `port`, from the kernel's own tables."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if state == "0A" and int(p, 16) == port:
                    raw = bytes.fromhex(addr)
                    # /proc/net shows each 32-bit word in host (little-endian) order
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                    out.append(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw))
    return out


def finish(proc, limit=300):
    out, err = proc.communicate(timeout=limit)
    return proc.returncode, out, err


# ----------------------------------------------------------------------------- the store
def test_store_listens_on_loopback_only(tmp_path):
    parent = start_sweep(tmp_path / "r.json", LONG, tmp_path)
    try:
        pids = wait_ranks(parent)
        port = int(environ_of(pids[0])["MASTER_PORT"])
        wait_for_records(tmp_path / "r.json")
        assert listening(port) == ["127.0.0.1"], listening(port)
    finally:
        parent.terminate()
        parent.communicate(timeout=120)


def _forge_abort(port):
    """As the other user: what anyone who can reach the store can try without the secret
    (a tcp run's store is the standard-library one, light_store): it admits no connection
    that cannot prove the secret, so neither a guessed secret nor a raw SET gets a value in."""
    refused = 0
    try:
        LightStore("127.0.0.1", port, False, 10.0, secret=b"a guess at the run's secret")
    except ConnectionError:
        refused += 1
    forged = json.dumps({"rank": 1, "host": "evil", "reason": "forged by another user"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(frame(SET, (b"cb/abort", forged)))
        try:
            while raw.recv(1 << 16):      # the greeting, then the server closes the connection
                pass
            refused += 1
        except ConnectionResetError:
            refused += 1
    return refused == 2


def _read_environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except PermissionError:
        return None


def test_another_user_cannot_abort_a_run_or_forge_its_failure(tmp_path, other_user):  # noqa: F811 - fixtures
    out = tmp_path / "r.json"
    parent = start_sweep(out, LONG, tmp_path)
    pids = wait_ranks(parent)
    port = int(environ_of(pids[0])["MASTER_PORT"])
    secret = environ_of(pids[0])["COMM_BENCH_SECRET"]
    wait_for_records(out)
    # the secret travels in the ranks' environment, which only their owner can read
    assert as_user(other_user, _read_environ, pids[0]) is None
    assert as_user(other_user, _forge_abort, port)
    forged_at = time.monotonic()
    rc, stdout, err = finish(parent)
    ran_on = time.monotonic() - forged_at
    assert ran_on > 3, f"the sweep ended {ran_on:.1f} s after the forgery: too short to test the watchdog"
    assert rc == 0, err[-2000:]
    doc = load_results(out)
    assert doc["status"] == "ok" and doc["failure"] is None
    text = out.read_text()
    assert "evil" not in text and "evil" not in err
    assert secret not in text  # the secret is never recorded


def _intruder(torch_store, port, secret):
    """Raw writes: TCPStore takes them from anyone; light_store only from a connection that
    proved the secret (a rank of this run), whose unsealed writes are still refused."""
    return TCPStore("127.0.0.1", port, None, False, timedelta(seconds=5), wait_for_workers=False) \
        if torch_store else LightStore("127.0.0.1", port, False, 5.0, secret=secret)


@pytest.mark.parametrize("torch_store", [True, False], ids=["TCPStore", "light_store"])
def test_forged_values_count_as_absent_and_name_the_intruder(torch_store):
    port = free_port()
    store = Store("127.0.0.1", port, 0, 1, 2.0, secret=b"0123456789abcdef0123", torch_store=torch_store)
    intruder = _intruder(torch_store, port, b"0123456789abcdef0123")
    store.set("k", {"a": 1})
    assert store.check(["k"]) and store.get_json("k") == {"a": 1}
    intruder.set("k", json.dumps({"a": 2}))
    assert not store.check(["k"])
    with pytest.raises(RunFailed, match="fails authentication"):
        store.get("k")
    store.beat("hb")
    assert store.beats("hb") == 1
    intruder.set("hb", b"99")
    assert store.beats("hb") is None
    # another run's key (or a wrong secret) does not open this run's values either; light_store
    # does not even admit its connection
    store.set("k2", b"x")
    if not torch_store:
        with pytest.raises(RunFailed, match="refused"):
            Store("127.0.0.1", port, 1, 1, 1.0, is_master=False, secret=b"another-secret-0123456",
                  torch_store=False)
        return
    other = Store("127.0.0.1", port, 1, 1, 1.0, is_master=False, secret=b"another-secret-0123456",
                  torch_store=torch_store)
    assert not other.check(["k2"])


def test_secret_file_must_be_private(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef0123456789abcdef\n")
    secret.chmod(0o644)
    proc = run_cli("sweep", "--nprocs", "2", "-o", tmp_path / "r.json", *SHORT, cwd=tmp_path,
                   env={"COMM_BENCH_SECRET_FILE": str(secret)})
    assert proc.returncode == 2, proc.stderr
    assert_no_traceback(proc)
    assert "chmod 600" in proc.stderr
    secret.chmod(0o600)
    run_cli("sweep", "--nprocs", "2", "-o", tmp_path / "r.json", *SHORT, cwd=tmp_path,
            env={"COMM_BENCH_SECRET_FILE": str(secret)}, check_rc=0)


# ----------------------------------------------------------------------------- the results file
def _plant(folder, names, victim):
    for name in names:
        os.symlink(victim, os.path.join(folder, name))
    return sorted(os.listdir(folder))


def test_planted_temporary_symlinks_do_not_redirect_the_results(tmp_path, other_user, user_dir):  # noqa: F811 - fixtures
    """The old writer used `<output>.tmp<pid>`: the other user, who can see pids, plants
    those names as links to a file of root's, which the root-run sweep then overwrote."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = os.path.join(user_dir, "r.json")
    parent = start_sweep(out, SHORT, tmp_path)
    pids = [parent.pid, *wait_ranks(parent).values()]
    as_user(other_user, _plant, user_dir, [f"r.json.tmp{p}" for p in pids], str(victim))
    rc, _, err = finish(parent)
    assert rc == 0, err[-2000:]
    assert victim.read_text() == "precious\n"
    assert not os.path.islink(out) and load_results(out)["status"] == "ok"
    assert not [n for n in os.listdir(user_dir) if n.endswith(".tmp") or n.endswith(".lock")]


@pytest.mark.parametrize("planted,fragment", [("r.json", "symbolic link"), (".r.json.lock", "cannot lock")])
def test_results_path_planted_as_a_symlink_is_refused(tmp_path, other_user, user_dir, planted, fragment):  # noqa: F811 - fixtures
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    as_user(other_user, _plant, user_dir, [planted], str(victim))
    proc = run_cli("sweep", "--nprocs", "2", "-o", os.path.join(user_dir, "r.json"), *SHORT, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-1000:])
    assert_no_traceback(proc)
    assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr
    assert victim.read_text() == "precious\n"
