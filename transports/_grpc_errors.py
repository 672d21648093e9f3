"""One-line errors of the gRPC transport: bind failures, RPC errors, TLS reasons."""
from __future__ import annotations

import socket

from ..errors import TransportUnavailable
from .base import TransportError


def hostport(addr: str, port: int) -> str:
    """host:port, with brackets around an IPv6 address."""
    return f"[{addr}]:{port}" if ":" in addr and not addr.startswith("[") else f"{addr}:{port}"


def bind_error(rank: int, addr: str, port: int, exc) -> Exception:
    """Why the server could not bind, found by binding a plain socket the same way."""
    reason = "unknown reason"
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.bind((addr.strip("[]"), port))
        if exc is not None:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    except OSError as err:
        import errno
        if err.errno == errno.EADDRINUSE:
            return TransportError(
                f"rank {rank}: gRPC port {port} on {addr} is in use by another process; "
                f"pick another --grpc-port (or 0 for any free port)")
        if err.errno == errno.EADDRNOTAVAIL:
            return TransportUnavailable(
                f"rank {rank}: address {addr} is not on this host (cannot bind the gRPC server); "
                f"pass this rank's own address with --addr / COMM_BENCH_ADDR")
        reason = err.strerror or str(err)
    finally:
        s.close()
    return TransportError(f"rank {rank}: gRPC server could not bind {hostport(addr, port)}: {reason}")


def rpc_error(grpc, exc, me: int, peer: int, target: str, step: str, connecting: bool,
              connect_window: float, timeout: float) -> Exception:
    """The one-line error for a failed RPC (None: nothing answered within the connect window)."""
    if exc is None:
        return TransportError(f"rank {me}: rank {peer}'s gRPC server at {target} is unreachable: "
                              f"no answer within {connect_window:.0f} s ({step})")
    code = exc.code() if hasattr(exc, "code") else None
    detail = details(exc)
    if is_tls(exc):
        return TransportError(
            f"rank {me}: TLS handshake with rank {peer} at {target} failed ({tls_reason(detail)}); "
            f"check that both ranks' --tls-cert are signed by the --tls-ca they use and name "
            f"their address")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return TransportUnavailable(
            f"rank {me}: message too large for rank {peer} at {target} ({detail}); "
            f"raise --grpc-max-message or lower -e/--maxbytes")
    if code == grpc.StatusCode.UNAVAILABLE:
        what = "unreachable" if connecting else "connection lost"
        why = "connection refused" if "refused" in detail.lower() else detail
        return TransportError(
            f"rank {me}: rank {peer}'s gRPC server at {target} is {what} during {step} ({why}); "
            f"check that the rank runs and that this address is routable from here")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        if connecting:
            return TransportError(
                f"rank {me}: rank {peer}'s gRPC server at {target} is unreachable: no answer "
                f"within {connect_window:.0f} s; check the route/firewall to that address")
        return TransportError(f"rank {me}: {step} with rank {peer} at {target} did not finish within "
                              f"{timeout:.0f} s (peer stuck or too slow; raise --timeout)")
    return TransportError(f"rank {me}: gRPC {step} with rank {peer} at {target} failed: "
                          f"{code.name if code else type(exc).__name__}: {detail}")


def details(exc) -> str:
    try:
        d = exc.details() or ""
    except Exception:  # noqa: BLE001
        d = str(exc)
    return " ".join(d.split())[:300]


def is_tls(exc) -> bool:
    d = details(exc).lower()
    return any(w in d for w in ("ssl", "tls", "handshake", "certificate"))


def tls_reason(detail: str) -> str:
    d = detail.lower()
    if "certificate_verify_failed" in d or "verify" in d:
        return "certificate not trusted by the CA in use"
    if "certificate_required" in d or "peer did not return a certificate" in d:
        return "the server requires a client certificate"
    if "wrong_version_number" in d or "record" in d:
        return "one side speaks TLS and the other plaintext"
    tail = detail.split(":")[-1].strip()
    return tail or "handshake failed"
