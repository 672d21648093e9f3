"""Small network helpers: free ports, this host's address towards a peer, interfaces."""
from __future__ import annotations

import fcntl
import socket
import struct


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def source_addr_towards(peer: str) -> str:
    """The local address the kernel would use to reach `peer` (no packet is sent)."""
    try:
        infos = socket.getaddrinfo(peer, 9, type=socket.SOCK_DGRAM)
        family, _, _, _, sockaddr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def iface_addrs():
    """{ifname: [IPv4]} of this network namespace (live only; SIOCGIFADDR, no subprocess)."""
    out = {}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex()[:512]:
                try:
                    req = struct.pack("256s", name.encode()[:15])
                    out[name] = [socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])]  # SIOCGIFADDR
                except OSError:
                    out[name] = []
    except OSError:
        pass
    return out


def iface_for_addr(addr: str):
    """Name of the interface holding IPv4 `addr`, or None."""
    return next((name for name, addrs in iface_addrs().items() if addr in addrs), None)
