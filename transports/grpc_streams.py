"""gRPC transport (grpcio): unary ping-pong latency, client-streaming and
bidirectional-streaming bandwidth between ranks. (Over 400 lines: the server, the client
loops and the data-check rounds share one connection state; errors and payloads are in
_grpc_errors.py and _grpc_payload.py.)

Each rank runs one grpcio server bound to ``ctx.addr`` (an explicit address;
all interfaces only with ``--grpc-bind-all``); endpoints are exchanged with
``ctx.store.all_gather``. Methods are generic handlers with ``bytes`` payloads
and identity (de)serialisers: no protobuf code generation, no copies in Python
beyond what grpcio itself makes.

    /commbench.Bench/Hello  unary          -> this server's rank (connect check)
    /commbench.Bench/Ping   unary          echo; op sendrecv, mode "lat"
    /commbench.Bench/Push   client-stream  ack (count, wrong); op sendrecv, mode "bw"
    /commbench.Bench/Bidir  bidi-stream    both sides stream; op bidir
    /commbench.Bench/Done   unary          src tells dst that a run() finished

Definitions (same as the other transports, docs/internal-contracts.md):
- ``sendrecv`` mode ``lat``: ``iters`` unary calls carrying S bytes each way;
  the samples are round trips (the record reports half).
- ``sendrecv`` mode ``bw``: S-byte messages from src to dst over ``--streams K``
  client streams (messages dealt round robin across streams, each a whole
  S-byte gRPC message). Bandwidth = S x iters / (first timed send -> the server's
  acknowledgement of the last message). Samples are the gaps between the
  moments grpcio takes each message for sending, the last one ending at the ack,
  so their sum is that whole time and algbw = S / mean(sample).
- ``bidir``: both sides stream S-byte messages at the same time over K
  bidirectional streams (dst sends as many as it receives). S is per direction,
  so algbw is the per-direction rate; extra["total_gbps"] is the sum (comm_bench.metrics).
  Bandwidth only (``--mode lat`` is refused for it); ``--streams`` does not apply to lat.
- The src rank keeps the record and the #wrong count (the receiver's counts come
  back in the acknowledgement / trailing metadata); dst's run() returns when src
  tells it (Done) that the op finished, or fails after ctx.timeout.

GPU buffers (``--buffer cuda[:LIB]``) are staged as in the tcp transport: the timed
streams carry the same bytes objects, the device -> pinned host and pinned host -> device
copies are timed in a pass of their own and added to each message
(_gpu_buffers.staged_samples), and the ``-c`` messages are built on the source's GPU and
compared on the receiver's GPU (lat: on the source's, after the echo).

TLS: ``--tls-cert/--tls-key`` turn TLS on; with ``--tls-ca`` both sides verify
each other against that CA (mutual TLS). Ranks are dialled by IP address, so the
certificates need the ranks' addresses as IP subjectAltNames.

Timing: hot loops stay out of Python (docs/internal-contracts.md), but grpcio *is* a Python
API: the object measured is grpcio as Python programs use it, so the loop that
drives it is the framework path (like gloo or mpi4py, see RunResult). It is kept
lean: payloads are built once per size before timing, the request generators do
nothing but stamp ``time.perf_counter_ns()`` into a preallocated list and yield
the same bytes object, the server only counts messages and their lengths, and
the ``-c`` data check runs as a separate untimed round (distinct patterns per
message, every byte compared on the receiver). tools/bench_grpc.py compares this
path with a minimal hand-written grpcio loop (docs/benchmarks/grpc.md).

All gRPC failures become one line: port in use, peer unreachable, message too
large, TLS mismatch, timeouts (TransportError exit 1, TransportUnavailable or
UsageError exit 2); the wording lives in _grpc_errors.py, the check payloads in
_grpc_payload.py.
"""
from __future__ import annotations

import os
import queue
import ssl
import threading
import time

from .. import ops as ops_mod
from ._grpc_errors import bind_error, hostport, is_tls, rpc_error
from . import _gpu_buffers as gb
from ._grpc_payload import ACK, count_wrong, message_seed, pattern
from ..errors import TransportUnavailable
from .base import GPU_OPTION, Option, RankContext, RunResult, Transport, TransportError

SERVICE = "commbench.Bench"
_SLACK = 64 * 1024                   # head room over the largest message (gRPC framing)


def _import_grpc():
    # gRPC's C core logs its own multi-line errors to stderr; the transport
    # reports one line instead. A user-set GRPC_VERBOSITY (e.g. debug) wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    import grpc
    return grpc


def parse_size(text, what: str) -> int:
    """An optional size option ('64M'); 0 when unset."""
    from ..sizes import parse_size as parse  # one size syntax for every option

    return 0 if text in (None, "", 0) else parse(text, what)


def _connect_window(timeout: float) -> float:
    """How long a first connection to a peer is retried (its server already listens)."""
    return min(timeout, 15.0)

def _check_key_pair(cert: str, key: str) -> None:
    """grpc reports a key that is not the certificate's as a failed bind: say what it is."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=lambda: b"")
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TransportUnavailable(f"--tls-key {key} is not the key of --tls-cert {cert}") from None
        raise TransportUnavailable(f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate "
                                   f"and its unencrypted key ({exc.reason or exc})") from None


class GrpcTransport(Transport):
    name = "grpc"
    description = "gRPC (grpcio) unary ping-pong and client/bidirectional streams with bytes payloads"
    link_kind = "cpu"
    ops = ("sendrecv", "bidir")
    patterns = ("pair", "pairwise", "pairwise-concurrent")
    modes = ("bw", "lat")
    dtypes = ("float32", "uint8")
    options = (
        Option("--streams", int, 1, "parallel streams per pair (gRPC: HTTP/2 streams on one channel)",
               low=1, high=1024),
        Option("--grpc-port", int, 0, "port of rank 0's gRPC server; rank r uses port + local_rank "
                                      "(0: any free port)", low=0, high=65535),
        Option("--grpc-bind-all", bool, False, "bind the gRPC server to all interfaces "
                                               "(default: only the rank's address)"),
        Option("--grpc-max-message", str, "", "gRPC max send/receive message size, e.g. 64M "
                                              "(default: raised to fit the largest size)"),
        Option("--grpc-window", str, "", "HTTP/2 flow-control window per stream, e.g. 4M "
                                         "(grpc.http2.lookahead_bytes; default: gRPC's)"),
        Option("--grpc-no-bdp", bool, False, "turn off HTTP/2 BDP probing (fixed window)"),
        Option("--grpc-compression", str, "none", "gRPC compression: none, gzip or deflate",
               choices=("none", "gzip", "deflate")),
        Option("--grpc-keepalive", float, 0.0, "HTTP/2 keepalive ping interval in seconds (0: off)",
               low=0, high=86400),
        Option("--tls-cert", str, None, "PEM certificate chain of this rank (turns TLS on)"),
        Option("--tls-key", str, None, "PEM private key for --tls-cert"),
        Option("--tls-ca", str, None, "PEM CA bundle that peers' certificates must chain to "
                                      "(also requires client certificates: mutual TLS)"),
    ) + gb.OPTIONS + (GPU_OPTION,)

    # -- discovery -----------------------------------------------------------
    @classmethod
    def probe(cls) -> tuple:
        try:
            _import_grpc()
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return False, f"grpcio is not importable ({exc}); install it: pip install grpcio"
        return True, ""

    def describe(self) -> dict:
        try:
            grpc = _import_grpc()
            version = grpc.__version__
        except Exception:  # noqa: BLE001
            version = None
        info = {"grpcio": version}
        if getattr(self, "ctx", None) is not None:
            info.update(tls=self._tls is not None, compression=self._compression_name,
                        streams=self._streams, endpoint=getattr(self, "_endpoint", None))
            if getattr(self, "gpu", None) is not None:
                info.update(self.gpu.info())
        return info

    # -- setup ---------------------------------------------------------------
    @classmethod
    def supports(cls, op: str, pattern: str, mode: str) -> str:
        if op == "bidir" and mode == "lat":
            return "op bidir measures streaming bandwidth only; run it with --mode bw (latency: --op sendrecv)"
        return super().supports(op, pattern, mode)

    @classmethod
    def check_options(cls, options: dict, max_bytes: int) -> None:
        cls()._read_options(options, max_bytes)
        gb.check_staged_only(options, cls.name)

    def _read_options(self, options: dict, max_bytes: int) -> None:
        o = options or {}
        self._streams = int(o.get("streams") or 1)
        self._port = int(o.get("grpc_port") or 0)
        self._bind_all = bool(o.get("grpc_bind_all"))
        fit = max(int(max_bytes or 0), 4 * 1024 * 1024) + _SLACK
        given = parse_size(o.get("grpc_max_message"), "--grpc-max-message")
        self._max_message = given or fit
        if given and max_bytes and max_bytes > given:
            raise TransportUnavailable(
                f"message too large: the sweep's largest size ({max_bytes} bytes) exceeds "
                f"--grpc-max-message {given}; raise --grpc-max-message or lower -e/--maxbytes")
        self._window = parse_size(o.get("grpc_window"), "--grpc-window")
        self._bdp = not bool(o.get("grpc_no_bdp"))
        self._compression_name = (o.get("grpc_compression") or "none").lower()
        self._keepalive = float(o.get("grpc_keepalive") or 0.0)
        cert, key, ca = o.get("tls_cert"), o.get("tls_key"), o.get("tls_ca")
        self._tls = None
        if cert or key or ca:
            if not (cert and key):
                raise TransportUnavailable("TLS needs both --tls-cert and --tls-key "
                                           "(and --tls-ca for a private CA)")
            pem = {}
            for flag, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-ca", ca)):
                if path:
                    try:
                        with open(path, "rb") as f:
                            pem[flag] = f.read()
                    except OSError as exc:
                        raise TransportUnavailable(f"{flag} {path}: cannot read it ({exc.strerror})") from None
            _check_key_pair(cert, key)
            self._tls = pem

    def _channel_options(self, server: bool) -> list:
        opts = [("grpc.max_send_message_length", self._max_message),
                ("grpc.max_receive_message_length", self._max_message),
                ("grpc.http2.bdp_probe", 1 if self._bdp else 0),
                ("grpc.enable_retries", 0)]
        if self._window:
            opts.append(("grpc.http2.lookahead_bytes", self._window))
        if self._keepalive > 0:
            ms = max(1, int(self._keepalive * 1000))
            opts += [("grpc.keepalive_time_ms", ms),
                     ("grpc.keepalive_timeout_ms", max(ms, 20000)),
                     ("grpc.keepalive_permit_without_calls", 1),
                     ("grpc.http2.max_pings_without_data", 0)]
            if server:
                opts += [("grpc.http2.min_ping_interval_without_data_ms", ms),
                         ("grpc.http2.min_recv_ping_interval_without_data_ms", ms)]
        if server:
            opts.append(("grpc.so_reuseport", 0))   # a port in use must fail, not be shared
        else:
            # one connection per (rank, peer) channel, never shared with another channel
            opts.append(("grpc.use_local_subchannel_pool", 1))
        return opts

    def setup(self, ctx: RankContext) -> None:
        self.ctx = ctx
        self._read_options(ctx.options, ctx.max_bytes)
        self.lib, self.gpu = gb.open_for(ctx, self.resolve_options(ctx.options))
        grpc = _import_grpc()
        self._grpc = grpc
        self._compression = {"none": grpc.Compression.NoCompression,
                             "gzip": grpc.Compression.Gzip,
                             "deflate": grpc.Compression.Deflate}[self._compression_name]
        self._payloads: dict = {}          # (kind, nbytes, peer) -> bytes, current size only
        self._done: dict = {}              # src rank -> queue of finished run() tokens
        self._done_lock = threading.Lock()
        self._channels: dict = {}
        self._stubs: dict = {}
        self._server = None
        from concurrent.futures import ThreadPoolExecutor
        workers = max(8, 2 * self._streams * max(1, ctx.world_size) + 4)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc-srv")
        handlers = {
            "Hello": grpc.unary_unary_rpc_method_handler(self._h_hello),
            "Ping": grpc.unary_unary_rpc_method_handler(self._h_ping),
            "Push": grpc.stream_unary_rpc_method_handler(self._h_push),
            "Bidir": grpc.stream_stream_rpc_method_handler(self._h_bidir),
            "Done": grpc.unary_unary_rpc_method_handler(self._h_done),
        }
        server = grpc.server(self._pool, handlers=[grpc.method_handlers_generic_handler(SERVICE, handlers)],
                             options=self._channel_options(server=True),
                             compression=self._compression)
        port = self._port + ctx.local_rank if self._port else 0
        bind_addr = ("[::]" if ":" in ctx.addr else "0.0.0.0") if self._bind_all else ctx.addr
        target = hostport(bind_addr, port)
        try:
            if self._tls:
                creds = grpc.ssl_server_credentials(
                    [(self._tls["--tls-key"], self._tls["--tls-cert"])],
                    root_certificates=self._tls.get("--tls-ca"),
                    require_client_auth=bool(self._tls.get("--tls-ca")))
                bound = server.add_secure_port(target, creds)
            else:
                bound = server.add_insecure_port(target)
        except Exception as exc:  # noqa: BLE001 - grpcio raises RuntimeError on bind failure
            server.stop(0)
            raise bind_error(ctx.rank, bind_addr, port, exc) from None
        if not bound:
            server.stop(0)
            raise bind_error(ctx.rank, bind_addr, port, None)
        server.start()
        self._server = server
        self._endpoint = hostport(ctx.addr, bound)
        self._endpoints = ctx.store.all_gather("grpc/endpoints", {"addr": ctx.addr, "port": bound,
                                                                  "host": ctx.host})

    # -- server side -----------------------------------------------------------
    @staticmethod
    def _md(context) -> dict:
        return dict(context.invocation_metadata())

    def _h_hello(self, request, context):
        return str(self.ctx.rank).encode()

    def _h_ping(self, request, context):
        return request          # echo the same bytes object: no copy in Python

    def _h_done(self, request, context):
        src = int(request.decode())
        self._done_queue(src).put(1)
        return b""

    def _done_queue(self, src: int) -> queue.Queue:
        with self._done_lock:
            q = self._done.get(src)
            if q is None:
                q = self._done[src] = queue.Queue()
            return q

    def _h_push(self, request_iterator, context):
        md = self._md(context)
        size = int(md["cb-size"])
        n = 0
        bad = 0
        if "cb-check" in md:                       # untimed check round: compare every byte
            src, dst, esize = int(md["cb-src"]), self.ctx.rank, int(md["cb-esize"])
            for msg in request_iterator:
                bad += self._check_wrong(msg, size, esize, message_seed(src, dst, n, 0))
                n += 1
        else:                                      # timed: count messages and check lengths
            for msg in request_iterator:
                n += 1
                if len(msg) != size:
                    bad += 1
        return ACK.pack(n, bad)

    def _h_bidir(self, request_iterator, context):
        md = self._md(context)
        size, n_out, src = int(md["cb-size"]), int(md["cb-n"]), int(md["cb-src"])
        check = "cb-check" in md
        esize = int(md.get("cb-esize", "1"))
        result = [0, 0]

        def drain():
            n = bad = 0
            try:
                for msg in request_iterator:
                    if check:
                        bad += self._check_wrong(msg, size, esize, message_seed(src, self.ctx.rank, n, 0))
                    elif len(msg) != size:
                        bad += 1
                    n += 1
            except Exception:  # noqa: BLE001 - the call was cancelled; the client reports it
                pass
            result[0], result[1] = n, bad

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        if check:
            for i in range(n_out):
                yield self._check_payload(size, esize, message_seed(self.ctx.rank, src, i, 1))
        else:
            payload = self._payload("bidir-srv", size)
            for _ in range(n_out):
                yield payload
        reader.join(self.ctx.timeout)
        context.set_trailing_metadata((("cb-count", str(result[0])), ("cb-wrong", str(result[1]))))

    def _check_payload(self, nbytes: int, esize: int, seed: int) -> bytes:
        """A -c message: the seeded pattern, or with GPU buffers values built on this GPU
        and copied out through pinned host memory."""
        if self.gpu is None:
            return pattern(nbytes, seed)
        values, dt = gb.check_values(nbytes, esize, seed)
        with self.gpu.current():        # server threads too
            return gb.outbound(self.gpu, values, dt).tobytes()

    def _check_wrong(self, msg: bytes, nbytes: int, esize: int, seed: int) -> int:
        """Wrong elements of an arrived -c message (GPU buffers: compared on this GPU)."""
        if self.gpu is None:
            return count_wrong(msg, pattern(nbytes, seed), esize)
        values, dt = gb.check_values(nbytes, esize, seed)
        with self.gpu.current():
            return gb.inbound_wrong(self.gpu, msg, values, dt)

    def _payload(self, kind: str, nbytes: int) -> bytes:
        key = (kind, nbytes)
        p = self._payloads.get(key)
        if p is None:
            # keep only the current size's payloads: 64 MiB each adds up
            for k in [k for k in self._payloads if k[1] != nbytes]:
                del self._payloads[k]
            p = self._payloads[key] = pattern(nbytes, hash(kind) & 0xFFFF)
        return p

    # -- client side -----------------------------------------------------------
    def _stub(self, peer: int):
        stub = self._stubs.get(peer)
        if stub is not None:
            return stub
        grpc = self._grpc
        ep = self._endpoints[peer]
        target = hostport(ep["addr"], ep["port"])
        opts = self._channel_options(server=False)
        if self._tls:
            creds = grpc.ssl_channel_credentials(root_certificates=self._tls.get("--tls-ca"),
                                                 private_key=self._tls["--tls-key"],
                                                 certificate_chain=self._tls["--tls-cert"])
            channel = grpc.secure_channel(target, creds, options=opts, compression=self._compression)
        else:
            channel = grpc.insecure_channel(target, options=opts, compression=self._compression)
        ident = None  # identity serialisers: bytes in, bytes out
        m = f"/{SERVICE}/"
        stub = {
            "target": target,
            "Hello": channel.unary_unary(m + "Hello", request_serializer=ident, response_deserializer=ident),
            "Ping": channel.unary_unary(m + "Ping", request_serializer=ident, response_deserializer=ident),
            "Push": channel.stream_unary(m + "Push", request_serializer=ident, response_deserializer=ident),
            "Bidir": channel.stream_stream(m + "Bidir", request_serializer=ident, response_deserializer=ident),
            "Done": channel.unary_unary(m + "Done", request_serializer=ident, response_deserializer=ident),
        }
        self._channels[peer] = channel
        self._connect(peer, stub)
        self._stubs[peer] = stub
        return stub

    def _connect(self, peer: int, stub: dict) -> None:
        """First call to a peer. Every server listens before the endpoints are exchanged, so
        a refused or unroutable connection is retried only briefly (min(timeout, 15 s));
        TLS errors fail at once."""
        grpc = self._grpc
        self._connect_window = _connect_window(self.ctx.timeout)
        deadline = time.monotonic() + self._connect_window
        last = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                got = int(stub["Hello"](b"", timeout=min(left, 5.0)).decode())
            except grpc.RpcError as exc:
                last = exc
                if is_tls(exc) or exc.code() not in (grpc.StatusCode.UNAVAILABLE,
                                                     grpc.StatusCode.DEADLINE_EXCEEDED):
                    break
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            if got != peer:
                raise TransportError(f"rank {self.ctx.rank}: {stub['target']} answered as rank {got}, "
                                     f"expected rank {peer} (stale endpoint or address clash)")
            return
        raise self._error(last, peer, stub["target"], "connect", connecting=True)

    def _error(self, exc, peer: int, target: str, step: str, connecting: bool = False) -> Exception:
        return rpc_error(self._grpc, exc, self.ctx.rank, peer, target, step, connecting,
                         self._connect_window, self.ctx.timeout)

    # -- run -------------------------------------------------------------------
    def run(self, op: str, nbytes: int, iters: int, warmup: int, *,
            dtype: str = "float32", check: bool = False, mode: str = "bw",
            peer: int | None = None, role: str | None = None) -> RunResult:
        if peer is None:
            if self.ctx.rank > 1:
                return RunResult([])
            peer = 1 - self.ctx.rank
            role = "src" if self.ctx.rank == 0 else "dst"
        if nbytes > self._max_message - _SLACK // 2:
            raise TransportUnavailable(
                f"message too large: {nbytes} bytes exceeds --grpc-max-message {self._max_message}; "
                f"raise --grpc-max-message or lower -e/--maxbytes")
        if role == "dst":
            return self._serve_wait(peer, op)
        stub = self._stub(peer)
        esize = ops_mod.DTYPES[dtype][1]
        try:
            if op == "sendrecv" and mode == "lat":
                res = self._lat(stub, nbytes, iters, warmup)
                wrong = self._lat_check(stub, peer, nbytes, esize, iters) if check else 0
            elif op == "sendrecv":
                res = self._push(stub, peer, nbytes, iters, warmup, esize)
                wrong = self._push_check(stub, peer, nbytes, esize, iters) if check else 0
            else:
                res = self._bidir(stub, peer, nbytes, iters, warmup, esize)
                wrong = self._bidir_check(stub, peer, nbytes, esize, iters) if check else 0
            stub["Done"](str(self.ctx.rank).encode(), timeout=self.ctx.timeout)
        except self._grpc.RpcError as exc:
            raise self._error(exc, peer, stub["target"], f"{op}/{mode} at {nbytes} bytes") from None
        res.wrong += wrong
        res.extra = dict(res.extra, buffer=gb.byte_transport_buffer(self.lib, self.gpu, res, nbytes, iters))
        return res

    def _serve_wait(self, peer: int, op: str) -> RunResult:
        # Longer than the active side may take to fail on its own (connect window, the op,
        # Done), so the rank that hits an error names it; a peer that dies or hangs is
        # caught sooner by the heartbeats (comm_bench/control/watchdog.py).
        wait = 2 * self.ctx.timeout + _connect_window(self.ctx.timeout) + 5
        try:
            self._done_queue(peer).get(timeout=wait)
        except queue.Empty:
            raise TransportError(f"rank {self.ctx.rank}: rank {peer} did not finish its gRPC {op} "
                                 f"towards this rank within {wait:.0f} s") from None
        return RunResult([], 0, {})   # src keeps the record (and the wrong count, from the acks)

    def _meta(self, nbytes: int, n: int, esize: int = 1, check: bool = False) -> tuple:
        md = (("cb-size", str(nbytes)), ("cb-n", str(n)), ("cb-src", str(self.ctx.rank)),
              ("cb-esize", str(esize)))
        return md + (("cb-check", "1"),) if check else md

    def _lat(self, stub, nbytes: int, iters: int, warmup: int) -> RunResult:
        ping = stub["Ping"]
        payload = self._payload("ping", nbytes)
        timeout = self.ctx.timeout
        for _ in range(warmup):
            ping(payload, timeout=timeout)
        stamps = [0] * (iters + 1)
        pc = time.perf_counter_ns
        for i in range(iters):
            stamps[i] = pc()
            ping(payload, timeout=timeout)
        stamps[iters] = pc()
        samples = [(stamps[i + 1] - stamps[i]) / 1e3 for i in range(iters)]   # round trips, us
        return RunResult(samples, 0, {"streams": 1}, round_trip=True)

    def _split(self, iters: int, warmup: int) -> tuple:
        """(timed, warm-up) messages per stream: as many streams as there are timed
        messages (at most --streams), each stream's warm-up share over the same streams."""
        k = min(self._streams, max(1, iters))
        share = lambda n: [n // k + (1 if s < n % k else 0) for s in range(k)]  # noqa: E731
        return share(iters), share(warmup)

    @staticmethod
    def _gen(payload: bytes, warm: int, n: int, stamps: list):
        for _ in range(warm):
            yield payload
        pc = time.perf_counter_ns
        for i in range(n):
            stamps[i] = pc()
            yield payload

    def _bw_result(self, stamp_lists: list, t_end: int, nbytes: int, iters: int, extra: dict) -> RunResult:
        stamps = sorted(t for lst in stamp_lists for t in lst)
        stamps.append(t_end)
        samples = [(stamps[i + 1] - stamps[i]) / 1000.0 for i in range(len(stamps) - 1)]
        # the samples add up to the whole span, so the record's algbw is S x iters / span
        return RunResult(samples, 0, dict(extra, streams=len(stamp_lists)))

    def _push(self, stub, peer: int, nbytes: int, iters: int, warmup: int, esize: int) -> RunResult:
        push = stub["Push"]
        payload = self._payload("push", nbytes)
        counts, warms = self._split(iters, warmup)
        stamp_lists = [[0] * c for c in counts]
        timeout = self.ctx.timeout
        if len(counts) == 1:
            ack = push(self._gen(payload, warms[0], counts[0], stamp_lists[0]),
                       metadata=self._meta(nbytes, warms[0] + counts[0]), timeout=timeout)
            t_end = time.perf_counter_ns()
            acks = [ack]
        else:
            futs = [push.future(self._gen(payload, w, c, st), metadata=self._meta(nbytes, w + c),
                                timeout=timeout)
                    for w, c, st in zip(warms, counts, stamp_lists)]
            acks = [f.result() for f in futs]
            t_end = time.perf_counter_ns()
        got = bad = 0
        for a in acks:
            n, b = ACK.unpack(a)
            got, bad = got + n, bad + b
        res = self._bw_result(stamp_lists, t_end, nbytes, iters, {})
        expected = iters + sum(warms)
        res.wrong = bad + abs(expected - got) * max(1, nbytes // esize)   # a lost message: all its elements
        return res

    def _bidir(self, stub, peer: int, nbytes: int, iters: int, warmup: int, esize: int) -> RunResult:
        bidir = stub["Bidir"]
        payload = self._payload("bidir-cli", nbytes)
        counts, warms = self._split(iters, warmup)
        stamp_lists = [[0] * c for c in counts]
        timeout = self.ctx.timeout
        calls = [bidir(self._gen(payload, w, c, st), metadata=self._meta(nbytes, w + c), timeout=timeout)
                 for w, c, st in zip(warms, counts, stamp_lists)]
        received = [0] * len(calls)
        bad = 0

        def read(j, call):
            n = 0
            for msg in call:
                n += 1
            received[j] = n

        threads = [threading.Thread(target=read, args=(j, c), daemon=True) for j, c in enumerate(calls[1:], 1)]
        for t in threads:
            t.start()
        read(0, calls[0])
        for t in threads:
            t.join(timeout)
        t_end = time.perf_counter_ns()
        got = 0
        for c in calls:
            tm = dict(c.trailing_metadata() or ())
            got += int(tm.get("cb-count", 0))
            bad += int(tm.get("cb-wrong", 0))
        res = self._bw_result(stamp_lists, t_end, nbytes, iters, {})
        expected = iters + sum(warms)
        missing = abs(expected - got) + abs(expected - sum(received))
        res.wrong = bad + missing * max(1, nbytes // esize)
        res.both_directions = True
        return res

    # -- untimed data-check rounds -------------------------------------------------
    def _n_check(self, iters: int) -> int:
        return max(1, min(iters, 3))

    def _push_check(self, stub, peer: int, nbytes: int, esize: int, iters: int) -> int:
        msgs = [self._check_payload(nbytes, esize, message_seed(self.ctx.rank, peer, i, 0))
                for i in range(self._n_check(iters))]
        n, bad = ACK.unpack(stub["Push"](iter(msgs), metadata=self._meta(nbytes, len(msgs), esize, True),
                                          timeout=self.ctx.timeout))
        return bad + abs(n - len(msgs)) * max(1, nbytes // esize)

    def _lat_check(self, stub, peer: int, nbytes: int, esize: int, iters: int) -> int:
        bad = 0
        for i in range(self._n_check(iters)):
            seed = message_seed(self.ctx.rank, peer, i, 0)
            echo = stub["Ping"](self._check_payload(nbytes, esize, seed), timeout=self.ctx.timeout)
            bad += self._check_wrong(echo, nbytes, esize, seed)
        return bad

    def _bidir_check(self, stub, peer: int, nbytes: int, esize: int, iters: int) -> int:
        k = self._n_check(iters)
        msgs = [self._check_payload(nbytes, esize, message_seed(self.ctx.rank, peer, i, 0)) for i in range(k)]
        call = stub["Bidir"](iter(msgs), metadata=self._meta(nbytes, k, esize, True), timeout=self.ctx.timeout)
        bad = n = 0
        for msg in call:
            bad += self._check_wrong(msg, nbytes, esize, message_seed(peer, self.ctx.rank, n, 1))
            n += 1
        tm = dict(call.trailing_metadata() or ())
        bad += int(tm.get("cb-wrong", 0))
        missing = abs(k - n) + abs(k - int(tm.get("cb-count", 0)))
        return bad + missing * max(1, nbytes // esize)

    # -- teardown ----------------------------------------------------------------
    def teardown(self) -> None:
        for ch in getattr(self, "_channels", {}).values():
            try:
                ch.close()
            except Exception:  # noqa: BLE001
                pass
        self._channels, self._stubs = {}, {}
        server = getattr(self, "_server", None)
        if server is not None:
            server.stop(grace=None).wait(5)
            self._server = None
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
