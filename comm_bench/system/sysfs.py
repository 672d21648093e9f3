"""sysfs readers. Every reader takes `root` ("/" on a live machine, a fixture folder in
tests) and reads only below root/sys. None of them raises on a missing or unreadable
file: absent attributes come back as None.

The PCI hierarchy is read from the nesting of root/sys/devices/pciDDDD:BB/... folders
(no symlinks are followed), so a recorded tree made of plain folders reads the same as
the live sysfs. Network and RDMA devices are found as net/<if> and infiniband/<dev>
folders below their PCI function (at most one non-PCI level deeper, e.g. virtio2/net),
plus root/sys/devices/virtual/net for virtual interfaces.
"""
import os
import re

BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ROOT_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")

PCI_VENDORS = {"0x10de": "NVIDIA", "0x15b3": "Mellanox", "0x8086": "Intel", "0x14e4": "Broadcom",
               "0x1000": "Broadcom/LSI", "0x1d0f": "Amazon", "0x1af4": "Red Hat (virtio)",
               "0x1002": "AMD", "0x1022": "AMD", "0x144d": "Samsung", "0x1dd8": "AMD Pensando"}

# PCIe capability, device/port type (bits 7:4 of the PCIe capabilities register)
PORT_TYPES = {0: "endpoint", 1: "legacy_endpoint", 4: "root_port", 5: "upstream",
              6: "downstream", 7: "pcie_to_pci", 8: "pci_to_pcie", 9: "rc_endpoint",
              10: "rc_event_collector"}
ACS_BITS = ["SV", "TB", "RR", "CR", "UF", "EC", "DT"]   # ACS control bits 0..6


def _p(root, *parts):
    return os.path.join(root, *[p.lstrip("/") for p in parts])


def natural_key(s):
    """'mlx5_10' sorts after 'mlx5_9'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def read_attr(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return default


def _int(s, base=10):
    try:
        return int(s, base)
    except (TypeError, ValueError):
        return None


def parse_cpulist(s):
    """'0-3,8,10-11' -> [0,1,2,3,8,10,11]"""
    out = []
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        try:
            out.extend(range(int(a), int(b or a) + 1))
        except ValueError:
            return []
    return out


def parse_link_speed(s):
    """'16.0 GT/s PCIe' / '8 GT/s' / '2.5 GT/s' -> GT/s as float, or None."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", s or "")
    return float(m.group(1)) if m else None


GT_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def pcie_gen(gts):
    return GT_TO_GEN.get(gts) if gts is not None else None


# --------------------------------------------------------------------------- config space
def parse_config(raw):
    """PCIe port type and ACS control from a config-space dump (bytes). Only root reads
    past byte 64, so either may be None."""
    out = {"port_type": None, "acs": None}
    if not raw or len(raw) < 0x40:
        return out
    status = int.from_bytes(raw[6:8], "little")
    if status & 0x10:       # capabilities list
        ptr, seen = raw[0x34] & 0xFC, 0
        while ptr and ptr + 4 <= len(raw) and seen < 48:
            seen += 1
            cap_id, nxt = raw[ptr], raw[ptr + 1] & 0xFC
            if cap_id == 0x10:      # PCI Express
                flags = int.from_bytes(raw[ptr + 2:ptr + 4], "little")
                out["port_type"] = PORT_TYPES.get((flags >> 4) & 0xF, "other")
                break
            ptr = nxt
    ptr, seen = 0x100, 0
    while ptr and ptr + 8 <= len(raw) and seen < 64:
        seen += 1
        hdr = int.from_bytes(raw[ptr:ptr + 4], "little")
        if hdr in (0, 0xFFFFFFFF):
            break
        if hdr & 0xFFFF == 0x000D:   # ACS extended capability
            cap = int.from_bytes(raw[ptr + 4:ptr + 6], "little")
            ctrl = int.from_bytes(raw[ptr + 6:ptr + 8], "little")
            enabled = [b for i, b in enumerate(ACS_BITS) if ctrl & (1 << i)]
            out["acs"] = {"cap": cap, "ctrl": ctrl, "enabled": enabled,
                          # P2P between functions below is redirected to the root
                          # complex when Request/Completion Redirect is on
                          "p2p_redirect": bool(ctrl & 0x0C)}
            break
        ptr = (hdr >> 20) & 0xFFC
    return out


def _read_config(path):
    try:
        with open(path, "rb") as f:
            return f.read(4096)
    except OSError:
        return b""


# --------------------------------------------------------------------------- PCI tree
def classify_pci(cls, vendor):
    c = _int(cls, 16)
    if c is None:
        return "other"
    base, sub = c >> 16, (c >> 8) & 0xFF
    if base == 0x06 and sub == 0x04:
        return "bridge"
    if base == 0x06:
        return "host_bridge" if sub == 0x00 else "other_bridge"
    if base == 0x03 or (base == 0x12 and vendor == "0x10de"):
        return "gpu" if vendor in ("0x10de", "0x1002") else "display"
    if base == 0x02:
        return "nic"
    if base == 0x0c and sub == 0x06:
        return "nic"        # InfiniBand controller class
    if base == 0x01:
        return "storage"
    if base == 0x06 and sub == 0x80:
        return "other_bridge"
    if c == 0x068000 or (vendor == "0x10de" and base == 0x06):
        return "nvswitch"
    return "other"


def _class_children(devdir, kind):
    """names of <kind> class devices (net, infiniband) below a PCI function dir."""
    names = []
    for base in [devdir] + [os.path.join(devdir, d) for d in listdir(devdir)
                            if not BDF_RE.match(d) and not os.path.islink(os.path.join(devdir, d))
                            and d not in (kind, "power", "msi_irqs", "pci_bus")]:
        k = os.path.join(base, kind)
        if os.path.isdir(k) and not os.path.islink(k):
            names.extend((n, os.path.join(k, n)) for n in listdir(k))
    return names


def listdir(d):
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def read_pci(root="/"):
    """{bdf: device} for every PCI function below root/sys/devices/pci*.

    device = {bdf, parent (bdf or None), root_complex, chain (bridges from the root
    port down, excluding the device), kind, class, vendor, vendor_name, device_id,
    numa_node, local_cpulist, link: {cur_gts, cur_width, max_gts, max_width, cur_gen,
    max_gen, degraded}, port_type, acs (bridges, root only), net: [...],
    infiniband: [...], _dirs: {class_name: path}}"""
    devs = {}
    base = _p(root, "sys/devices")
    for rc in listdir(base):
        if not ROOT_RE.match(rc):
            continue
        stack = [(os.path.join(base, rc), None, [])]
        while stack:
            path, parent, chain = stack.pop()
            for name in listdir(path):
                full = os.path.join(path, name)
                if not BDF_RE.match(name) or os.path.islink(full) or not os.path.isdir(full):
                    continue
                d = _read_pci_dev(full, name, parent, rc, chain)
                devs[name] = d
                if len(devs) > 20000:   # bounded
                    return devs
                stack.append((full, name, chain + [name]))
    return devs


def _read_pci_dev(full, bdf, parent, rc, chain):
    a = lambda n: read_attr(os.path.join(full, n))  # noqa: E731 - a one-line reader of this device's attributes
    vendor, cls = a("vendor"), a("class")
    kind = classify_pci(cls, vendor)
    cur, mx = parse_link_speed(a("current_link_speed")), parse_link_speed(a("max_link_speed"))
    cw, mw = _int(a("current_link_width")), _int(a("max_link_width"))
    link = None
    if cur or mx or cw or mw:
        link = {"cur_gts": cur, "cur_width": cw, "max_gts": mx, "max_width": mw,
                "cur_gen": pcie_gen(cur), "max_gen": pcie_gen(mx),
                "degraded": bool((cur and mx and cur < mx) or (cw and mw and cw < mw))}
    cfg = parse_config(_read_config(os.path.join(full, "config")))
    numa = _int(a("numa_node"))
    d = {"bdf": bdf, "parent": parent, "root_complex": rc, "chain": list(chain), "kind": kind,
         "class": cls, "vendor": vendor, "vendor_name": PCI_VENDORS.get(vendor),
         "device_id": a("device"), "numa_node": numa if numa is not None and numa >= 0 else None,
         "local_cpulist": a("local_cpulist"), "link": link, "port_type": cfg["port_type"],
         "acs": cfg["acs"] if kind == "bridge" else None, "driver": None}
    drv = os.path.join(full, "driver")
    if os.path.islink(drv):
        d["driver"] = os.path.basename(os.readlink(drv))
    elif os.path.isfile(drv):           # recorded trees store the name as a file
        d["driver"] = read_attr(drv)
    nets, ibs = _class_children(full, "net"), _class_children(full, "infiniband")
    d["net"] = [n for n, _ in nets]
    d["infiniband"] = [n for n, _ in ibs]
    d["_dirs"] = {**{("net", n): p for n, p in nets}, **{("infiniband", n): p for n, p in ibs}}
    return d


def pci_switch_depth(dev, devs):
    """Upstream switch ports above a device (each is one PCIe switch)."""
    return [b for b in switch_chain(dev, devs) if b[1] == "upstream"]


def switch_chain(dev, devs):
    """[(bdf, role)] for the bridges above dev; role from the PCIe port type in config
    space, else by position (root port, then upstream/downstream pairs)."""
    out = []
    for i, b in enumerate(dev["chain"]):
        pt = devs.get(b, {}).get("port_type")
        if pt not in ("root_port", "upstream", "downstream"):
            pt = "root_port" if i == 0 else ("upstream" if i % 2 == 1 else "downstream")
        out.append((b, pt))
    return out


# --------------------------------------------------------------------------- NUMA
def read_numa(root="/"):
    base = _p(root, "sys/devices/system/node")
    nodes = []
    for name in listdir(base):
        m = re.match(r"^node(\d+)$", name)
        if not m:
            continue
        d = os.path.join(base, name)
        mem = None
        mi = read_attr(os.path.join(d, "meminfo"))
        if mi:
            mm = re.search(r"MemTotal:\s+(\d+)\s*kB", mi)
            mem = int(mm.group(1)) if mm else None
        cl = read_attr(os.path.join(d, "cpulist"))
        dist = read_attr(os.path.join(d, "distance"))
        nodes.append({"node": int(m.group(1)), "cpulist": cl, "ncpus": len(parse_cpulist(cl)),
                      "mem_total_kb": mem,
                      "distance": [int(x) for x in dist.split()] if dist else None})
    return sorted(nodes, key=lambda n: n["node"])


# --------------------------------------------------------------------------- RDMA
IB_RATE_RE = re.compile(r"^\s*([\d.]+)\s*Gb/sec(?:\s*\((.*)\))?")


def parse_ib_rate(s):
    """'400 Gb/sec (4X NDR)' -> (400.0, '4X NDR')"""
    m = IB_RATE_RE.match(s or "")
    return (float(m.group(1)), (m.group(2) or "").strip() or None) if m else (None, None)


def _ib_ports(devdir):
    ports = []
    pbase = os.path.join(devdir, "ports")
    for pn in listdir(pbase):
        if not pn.isdigit():
            continue
        pd = os.path.join(pbase, pn)
        gbps, desc = parse_ib_rate(read_attr(os.path.join(pd, "rate")))
        state = read_attr(os.path.join(pd, "state"))
        phys = read_attr(os.path.join(pd, "phys_state"))
        ndevs = []
        nd = os.path.join(pd, "gid_attrs", "ndevs")
        for g in listdir(nd)[:4]:
            v = read_attr(os.path.join(nd, g))
            if v and v not in ndevs:
                ndevs.append(v)
        ports.append({"port": int(pn), "state": state.split(":")[-1].strip() if state else None,
                      "phys_state": phys.split(":")[-1].strip() if phys else None,
                      "rate": read_attr(os.path.join(pd, "rate")), "rate_gbps": gbps,
                      "rate_desc": desc, "link_layer": read_attr(os.path.join(pd, "link_layer")),
                      "lid": read_attr(os.path.join(pd, "lid")), "netdevs": ndevs, "gids": _gids(pd)})
    return ports


def _gids(portdir):
    """The port's non-zero GID table entries: [{index, gid, type}] (what pyverbs' query_gid
    and query_gid_type give; verbs.py)."""
    out = []
    for name in sorted(listdir(os.path.join(portdir, "gids")), key=lambda n: int(n) if n.isdigit() else -1):
        gid = read_attr(os.path.join(portdir, "gids", name)) if name.isdigit() else None
        if gid and gid.replace("0", "").replace(":", ""):
            out.append({"index": int(name), "gid": gid,
                        "type": read_attr(os.path.join(portdir, "gid_attrs", "types", name))})
    return out


def _pci_devices(pci, kind):
    """{name: (sysfs dir, PCI address)} of the `kind` devices ("net", "infiniband") that
    hang off the PCI functions read."""
    return {name: (d["_dirs"][(kind, name)], bdf) for bdf, d in pci.items() for name in d[kind]}


def _class_dir_devices(root, kind, found):
    """`found` plus the devices of root/sys/class/<kind> it lacks, with the PCI address
    taken from where their link points (None when they have none)."""
    cls = _p(root, f"sys/class/{kind}")
    for name in listdir(cls):
        if name not in found:
            full = os.path.join(cls, name)
            parts = os.path.realpath(full).split(os.sep)
            found[name] = (full, next((p for p in reversed(parts) if BDF_RE.match(p)), None))
    return found


def read_infiniband(root="/", pci=None, live=None):
    """RDMA devices: [{name, pci, numa_node, node_guid, fw_ver, hca_type, node_type,
    netdev, ports: [...], read_with}], from PCI functions and root/sys/class/infiniband;
    on this machine (root "/", unless live=False) the ports as pyverbs reports them where it
    imports (read_with "pyverbs"), else sysfs's."""
    live = (os.path.realpath(root) == "/") if live is None else live
    pci = read_pci(root) if pci is None else pci
    found = _class_dir_devices(root, "infiniband", _pci_devices(pci, "infiniband"))
    out = []
    for name, (path, bdf) in sorted(found.items(), key=lambda kv: natural_key(kv[0])):
        dev = pci.get(bdf) if bdf else None
        netdevs = list(dev["net"]) if dev else []
        ports = _ib_ports(path)
        for p in ports:
            netdevs += [n for n in p["netdevs"] if n not in netdevs]
        source = "sysfs"
        if live:  # rdma-core's own answers where pyverbs imports; netdevs only sysfs knows
            from .verbs import ports as verbs_ports
            by_verbs = {q["port"]: q for q in verbs_ports(name) or []}
            for p in ports:
                p.update(by_verbs.get(p["port"], {}))
            source = "pyverbs" if by_verbs else source
        numa = _int(read_attr(os.path.join(path, "device", "numa_node")))
        if numa is None and dev:
            numa = dev["numa_node"]
        out.append({"name": name, "pci": bdf, "numa_node": numa if numa is None or numa >= 0 else None,
                    "node_guid": read_attr(os.path.join(path, "node_guid")),
                    "fw_ver": read_attr(os.path.join(path, "fw_ver")),
                    "hca_type": read_attr(os.path.join(path, "hca_type")),
                    "node_type": read_attr(os.path.join(path, "node_type")),
                    "netdev": netdevs[0] if netdevs else None, "netdevs": netdevs, "ports": ports,
                    "read_with": source})
    return out


# --------------------------------------------------------------------------- Ethernet
def read_net(root="/", pci=None):
    """Network interfaces: [{name, pci (None when virtual), virtual, speed_mbps, operstate,
    mtu, mac, type, driver}]. Speed is None when unknown (link down, virtual)."""
    pci = read_pci(root) if pci is None else pci
    found = _pci_devices(pci, "net")
    vbase = _p(root, "sys/devices/virtual/net")
    for name in listdir(vbase):
        found.setdefault(name, (os.path.join(vbase, name), None))
    found = _class_dir_devices(root, "net", found)
    out = []
    for name, (path, bdf) in sorted(found.items()):
        a = lambda n: read_attr(os.path.join(path, n))  # noqa: E731 - a one-line reader of this device's attributes
        speed = _int(a("speed"))
        typ = _int(a("type"))
        out.append({"name": name, "pci": bdf, "virtual": bdf is None,
                    "speed_mbps": speed if speed and speed > 0 else None,
                    "operstate": a("operstate"), "mtu": _int(a("mtu")), "mac": a("address"),
                    "type": {1: "ether", 772: "loopback", 32: "infiniband"}.get(typ, typ),
                    "driver": pci[bdf]["driver"] if bdf in pci else None})
    return out
