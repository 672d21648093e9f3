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


def iface_for_addr(addr: str):
    """Name of the interface holding IPv4 `addr`, or None."""
    SIOCGIFADDR = 0x8915
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == addr:
                return name
    return None
