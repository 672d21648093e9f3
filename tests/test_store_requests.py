"""Authenticated requests against the rendezvous store's server (issue 44): every field of
every request is checked before use, and one request that fails ends its own connection
only, never the server's loop. A real server process, real client sockets speaking the
wire protocol (comm_bench/control/store_wire.py), loopback only."""
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

import pytest

from comm_bench.control.light_store import _read_frame
from comm_bench.control.store_server import MAX_LIST_KEYS, MAX_WAIT_MS
from comm_bench.control.store_wire import (ADD, AUTH, CHECK, DELETE, GET, MULTI_GET, MULTI_SET, OK,
                                           REFUSED, SET, SET_QUIET, TIMED_OUT, WAIT, frame, pack_values,
                                           proof)

SECRET = b"0123456789abcdef-store-requests"

# A store server in a process of its own. "plant" sets the server's test hook
# (csrc/core/store_loop.cpp): a SET of the key "boom" raises inside the server, as a bug in
# one request would.
SERVER = r'''
import sys, time
from comm_bench.control.rendezvous import _listener
from comm_bench.control.store_server import StoreServer
from comm_bench.system.netutil import free_port
port = free_port()
StoreServer(_listener("127.0.0.1", port, True), sys.argv[1].encode())
print(port, flush=True)
time.sleep(300)
'''


@pytest.fixture
def server(request):
    plant = getattr(request, "param", "")
    env = dict(os.environ, COMM_BENCH_TEST_STORE_FAULT="boom") if plant else None
    proc = subprocess.Popen([sys.executable, "-c", SERVER, SECRET.decode()], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.wait()


def connect(port, secret=SECRET, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    _, (challenge,) = _read_frame(s)
    if secret is not None:
        s.sendall(frame(AUTH, (proof(secret, challenge),)))
        assert _read_frame(s)[0] == OK
    return s


def call(s, op, fields):
    s.sendall(frame(op, fields))
    status, out = _read_frame(s)
    return status, [bytes(f) for f in out]


def answers(port) -> bool:
    """A fresh, well-formed client still gets its answers."""
    with connect(port) as s:
        assert call(s, SET, (b"still", b"here")) == (OK, [])
        return call(s, GET, (b"still", b"1000")) == (OK, [b"here"])


def server_log(proc) -> str:
    proc.kill()
    return proc.communicate()[1]


HOSTILE_TIMEOUTS = [b"1" + b"0" * 400, b"9" * 5000, b"-" + b"9" * 400, b"1e400", b"nan", b"inf", b"3.5",
                    b" 5", b"0x10", b"1_000", b"\xff\xfe", b"", b"\xd9\xa3"]    # \xd9\xa3: an Arabic-Indic 3


def test_a_huge_or_malformed_timeout_is_refused_and_the_store_goes_on(server):
    """A GET or WAIT with a timeout of 10^400 ms overflowed the loop's deadline: its only
    thread died, nothing was answered again, and the run failed 40 s later blaming WORLD_SIZE."""
    proc, port = server
    for op in (GET, WAIT):
        for t in HOSTILE_TIMEOUTS:
            with connect(port) as s:
                fields = (b"never", t) if op == GET else (t, b"never")
                status, out = call(s, op, fields)
                assert status == REFUSED and b"timeout" in out[0], (op, t[:20], status, out)
            assert answers(port), (op, t[:20])
    assert proc.poll() is None
    assert "Traceback" not in server_log(proc)


def test_a_timeout_beyond_the_maximum_is_clamped(server):
    """A whole number of milliseconds beyond MAX_WAIT_MS waits MAX_WAIT_MS; a negative one
    times out at once; both leave the server serving."""
    _, port = server
    with connect(port) as s:
        assert call(s, GET, (b"never", b"-5")) == (TIMED_OUT, [])
        assert call(s, WAIT, (b"-1", b"never")) == (TIMED_OUT, [])
    with connect(port) as waiter, connect(port) as setter:
        waiter.sendall(frame(GET, (b"later", b"9" * 19)))     # 10^19 ms: clamped to MAX_WAIT_MS
        time.sleep(0.2)
        assert call(setter, SET, (b"later", b"v")) == (OK, [])
        assert _read_frame(waiter)[0] == OK
    assert MAX_WAIT_MS == 1_000_000_000       # --timeout's own maximum, 1,000,000 s


@pytest.mark.parametrize("op, fields, why", [
    (ADD, (b"n", b"1" + b"0" * 400), b"amount"),
    (ADD, (b"n", b"9223372036854775807"), None),                  # fine on its own ...
    (ADD, (b"n", b"1"), b"64-bit"),                               # ... but one more overflows
    (ADD, (b"n", b"1.5"), b"amount"),
    (ADD, (b"n",), b"fields"),
    (GET, (b"k",), b"fields"),
    (GET, (b"k", b"1", b"extra"), b"fields"),
    (SET, (b"k",), b"fields"),
    (WAIT, (b"1",), b"fields"),
    (MULTI_GET, (b"\0" * MAX_LIST_KEYS,), b"keys"),
    (CHECK, (b"\0" * MAX_LIST_KEYS,), b"keys"),
    (DELETE, (b"\0" * MAX_LIST_KEYS,), b"keys"),
    (MULTI_SET, (b"a\0b", *pack_values([1, -7], [b"x"])), b"malformed"),
    (MULTI_SET, (b"a", b"\x01\x00\x00", b"x"), b"malformed"),
    (99, (b"k",), b"unknown"),
])
def test_every_field_is_checked_before_use(server, op, fields, why):
    proc, port = server
    with connect(port) as s:
        if op == ADD and fields[1:] == (b"1",):
            assert call(s, ADD, (b"n", b"9223372036854775807"))[0] == OK
        status, out = call(s, op, fields)
        if why is None:
            assert status == OK
        else:
            assert status == REFUSED and why in out[0], (status, out)
    assert answers(port)
    assert "Traceback" not in server_log(proc)


def test_a_counter_holding_a_non_number_is_refused(server):
    _, port = server
    with connect(port) as s:
        assert call(s, SET, (b"n", b"not a number"))[0] == OK
        status, out = call(s, ADD, (b"n", b"1"))
        assert status == REFUSED and b"does not hold a whole number" in out[0]
    assert answers(port)


@pytest.mark.parametrize("server", ["plant"], indirect=True)
def test_a_request_that_fails_drops_its_connection_only_and_names_it(server):
    """Whatever a request raises ends that connection, named in one log line; every other
    connection (one waiting meanwhile included) goes on."""
    proc, port = server
    with connect(port) as waiting, connect(port) as bad:
        waiting.sendall(frame(GET, (b"after", b"20000")))
        time.sleep(0.1)
        bad_port = bad.getsockname()[1]
        bad.sendall(frame(SET, (b"boom", b"1")))
        assert bad.recv(100) == b""               # closed by the server
        with connect(port) as other:
            assert call(other, SET, (b"after", b"v")) == (OK, [])
        assert _read_frame(waiting)[0] == OK
    assert answers(port)
    log = server_log(proc)
    lines = [line for line in log.splitlines() if "dropped" in line]
    assert len(lines) == 1 and f"127.0.0.1:{bad_port}" in lines[0] and "a planted fault" in lines[0], log
    assert "Traceback" not in log


def _mutate(rng, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        how = rng.randrange(5)
        if how == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1 and len(data) > 5:
            del data[rng.randrange(5, len(data)):]
        elif how == 2:
            data[rng.randrange(len(data) + 1):0] = rng.randbytes(rng.randrange(1, 16))
        elif how == 3 and len(data) >= 4:       # the frame's length says something else
            data[0:4] = struct.pack("!I", max(1, len(data) - 4 + rng.randint(-8, 8)))
        else:
            at = rng.randrange(len(data) + 1)
            data[at:at] = data[:rng.randrange(len(data) + 1)]
    return bytes(data)


def _number(rng) -> bytes:
    return rng.choice([b"0", b"1", b"-1", b"250", b"9" * rng.randint(15, 25), b"1" + b"0" * 400,
                       b"1e400", b"nan", b"-0", b"18446744073709551616", b"9223372036854775807",
                       rng.randbytes(rng.randrange(8)), str(rng.randint(-10**6, 10**6)).encode()])


def _fields(rng):
    keys = [b"fz/%d" % rng.randrange(8) for _ in range(rng.randint(0, 5))]
    values = [rng.randbytes(rng.randrange(40)) for _ in keys]
    pool = [b"\0".join(keys), rng.choice(keys or [b""]), _number(rng), rng.randbytes(rng.randrange(64)),
            *pack_values([len(v) if rng.random() < 0.8 else rng.randint(-3, 99) for v in values], values)]
    return [rng.choice(pool) for _ in range(rng.randint(0, 4))]


def _typed(rng) -> bytes:
    """A known op with the fields it takes, each drawn from hostile values of its kind."""
    def k():
        return rng.choice([b"fz/%d" % rng.randrange(8), b"", rng.randbytes(rng.randrange(1, 20)),
                           b"\0".join(b"fz/%d" % rng.randrange(8) for _ in range(rng.randint(2, 6)))])

    def set_fields():
        return k(), rng.choice([b"1", _number(rng), rng.randbytes(rng.randrange(30))])
    op = rng.choice([SET, SET_QUIET, GET, ADD, CHECK, DELETE, WAIT, MULTI_GET, MULTI_SET])
    fields = {SET: set_fields, SET_QUIET: set_fields,
              GET: lambda: (k(), _number(rng)), ADD: lambda: (k(), _number(rng)), CHECK: lambda: (k(),),
              DELETE: lambda: (k(),), WAIT: lambda: (_number(rng), k()), MULTI_GET: lambda: (k(),),
              MULTI_SET: lambda: (k(), *_fields(rng)[:2])}[op]()
    return frame(op, fields)


def _sane(rng) -> bytes:
    """A well-formed request (often a wait that times out quickly)."""
    k = b"fz/%d" % rng.randrange(8)
    op = rng.choice([SET, SET_QUIET, GET, ADD, CHECK, DELETE, WAIT, MULTI_GET, MULTI_SET])
    fields = {SET: (k, b"v"), SET_QUIET: (k, b"v"), GET: (k, b"5"), ADD: (k, b"2"), CHECK: (k,), DELETE: (k,), WAIT: (b"5", k),
              MULTI_GET: (k + b"\0fz/1",), MULTI_SET: (k, *pack_values([1], [b"v"]))}[op]
    return frame(op, fields)


def test_fuzzing_the_wire_protocol_leaves_a_store_that_answers(server):
    """2,000 random and mutated frames, on authenticated and unauthenticated connections,
    within 20 s: no request raises inside the server (nothing dropped, no traceback), and a
    well-formed request is answered afterwards."""
    proc, port = server
    rng = random.Random(44)
    sent, started, conns = 0, time.monotonic(), 0
    while sent < 2000 and time.monotonic() - started < 20:
        authed = rng.random() < 0.7
        try:
            s = connect(port, SECRET if authed else None, timeout=2.0)
        except (OSError, ValueError, struct.error) as exc:
            pytest.fail(f"the store stopped accepting after {sent} frames: {exc}")
        conns += 1
        with s:
            for _ in range(rng.randint(1, 25)):
                pick = rng.random()
                if pick < 0.2:
                    data = frame(rng.randrange(12), _fields(rng))
                elif pick < 0.5:
                    data = _typed(rng)
                elif pick < 0.7:
                    data = _mutate(rng, _sane(rng))
                elif pick < 0.8:
                    data = rng.randbytes(rng.randrange(1, 300))
                else:
                    data = _sane(rng)
                try:
                    s.sendall(data)
                except OSError:
                    break             # the server ended this connection: a new one
                sent += 1
                if select.select([s], [], [], 0.002)[0]:
                    try:
                        if not s.recv(1 << 16):
                            break
                    except OSError:
                        break
    elapsed = time.monotonic() - started
    print(f"{sent} frames on {conns} connections in {elapsed:.1f} s")
    assert sent >= 2000 or elapsed >= 20, sent
    assert answers(port), f"no answer after {sent} frames on {conns} connections"
    assert proc.poll() is None
    log = server_log(proc)
    assert "dropped" not in log and "Traceback" not in log, log[-3000:]
