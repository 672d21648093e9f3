"""The server side of the rendezvous store (light_store.py is the client): one thread, one event
loop (epoll), every connection non-blocking, so rank 0 serves thousands of ranks with a socket
each. The loop is C++ (csrc/core/store_*.cpp, part of comm_bench._C, which is always built),
started here through ctypes; this module holds its caps. C++ because a barrier is 2N small
messages through that loop, and the Python loop it replaced spent about twice TCPStore's
time on each (docs/benchmarks/store.md).

What it promises (docs/reliability.md, "The rendezvous store"):
- A connection must answer the server's challenge with the run's secret in its first
  frame (at most MAX_HELLO bytes) within AUTH_WINDOW seconds, or it is closed: a process
  without the secret can neither write, wait, nor make the server hold more than a hello.
- Memory is bounded: a connection's request is read only while it has no reply pending
  (so it holds at most one message in and one out); while replies not yet sent exceed
  MAX_OUTBOUND in total (4,096 ranks reading a 4 MB gather at once), further requests
  wait their turn; stored values are capped at MAX_STORED bytes in total (a SET beyond it
  is refused, naming the cap).
- A SET_QUIET is answered only when refused (SET_REFUSED, naming the key and why), as
  TCPStore answers no SET: a 256-rank barrier spent a third of the Python loop's time
  sending 256 `OK`s nobody needed (docs/benchmarks/store.md). Everything else is answered in order.
- A blocked GET or WAIT is indexed by the keys it waits for: a SET wakes only its own
  waiters. Waits on the same keys share one entry per key (4,096 ranks waiting for the
  same 4,096 keys are indexed once, not 4,096 times). A WAIT names at most MAX_WAIT_KEYS keys.
- A MULTI_GET asked again for the same keys with the store unchanged gets the same reply
  object: the 4,096 readers of a gather share one reply, built and counted once.
- An accept that fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
  ENOMEM) drops that connection, never the server: the oldest unauthenticated connection
  is closed first, then a descriptor kept in reserve lets one pending connection be
  accepted and closed, so the backlog never wedges. The same happens before the store's
  connections would take the descriptors the rest of rank 0 needs (keep_free: a socket
  per peer and fd_limit.SPARE): a CI run's flood of 1,100 connections at a 1,024 limit
  left none, and rank 0 failed to write its results.
- Every field of every request is checked before use (issue 44): the number of fields of
  each op; a timeout or an ADD amount is a decimal whole number of at most 19 digits (a
  timeout is then clamped to 0..MAX_WAIT_MS); a counter stays within 64 bits; a CHECK,
  DELETE, MULTI_GET or MULTI_SET names at most MAX_LIST_KEYS keys. Anything else is
  refused with a reason, and the connection goes on.
- No request stops the loop: an exception while serving one connection (a bug) drops that
  connection, named in one line on stderr (the peer's address and the error), and every
  other connection goes on.
"""
from __future__ import annotations

import ctypes
import resource
import threading

from ..system import native
from .store_wire import MAX_HELLO, MAX_MESSAGE

AUTH_WINDOW = 10.0            # seconds a connection has to prove it holds the secret
MAX_STORED = 1 << 30          # bytes of keys and values held in total
MAX_WAIT_KEYS = 1 << 16       # keys one WAIT may name (a 4,096-rank gather names 4,096)
MAX_OUTBOUND = 256 << 20      # bytes of replies not wholly sent, in total: past it, requests wait
MAX_WAIT_MS = 1_000_000_000   # the longest a GET or WAIT waits (--timeout's own maximum, 1,000,000 s)
MAX_LIST_KEYS = 1 << 20       # keys one CHECK, DELETE, MULTI_GET or MULTI_SET may name
MAX_LOGGED = 20               # dropped connections named on stderr; later ones are counted only

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _native() -> ctypes.CDLL:
    """comm_bench._C's own file, opened for the server's C entry points
    (csrc/core/store_capi.cpp)."""
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(native.require("_C").__file__)
            lib.cb_store_start.restype = ctypes.c_void_p
            lib.cb_store_start.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_long,
                                           ctypes.POINTER(ctypes.c_longlong), ctypes.c_double]
            lib.cb_store_counter.restype = ctypes.c_longlong
            lib.cb_store_counter.argtypes = [ctypes.c_void_p, ctypes.c_int]
            _lib = lib
        return _lib


class StoreServer:
    """Serves the store on listen_fd (which it takes over) from a thread of its own, for the
    life of the process. The caps are this module's constants as they are now."""

    def __init__(self, listen_fd: int, secret: bytes, keep_free: int = 0) -> None:
        """keep_free: descriptors of this process the store's connections leave to the rest."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        max_conns = -1 if soft == resource.RLIM_INFINITY else max(1, soft - keep_free)
        limits = (ctypes.c_longlong * 9)(MAX_MESSAGE, MAX_HELLO, MAX_STORED, MAX_WAIT_KEYS, MAX_OUTBOUND,
                                         MAX_WAIT_MS, MAX_LIST_KEYS, MAX_LOGGED, max_conns)
        self._lib = _native()
        self._handle = self._lib.cb_store_start(listen_fd, secret, len(secret), limits, AUTH_WINDOW)
        if not self._handle:
            raise OSError("the rendezvous store's server could not start (its line on stderr says why)")

    def _counter(self, which: int) -> int:
        return int(self._lib.cb_store_counter(self._handle, which))

    @property
    def refused_hellos(self) -> int:
        """Connections closed for a wrong or missing proof."""
        return self._counter(0)

    @property
    def dropped(self) -> int:
        """Connections dropped because serving them failed."""
        return self._counter(1)

    @property
    def indexed(self) -> tuple[int, int]:
        """(wait groups, keys waited for) in the wait index, as of the loop's last turn."""
        return self._counter(2), self._counter(3)

    @property
    def connections(self) -> int:
        return self._counter(4)
