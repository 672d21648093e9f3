"""Record this node's topology into a fixture tree (plain folders and files, no symlinks):

    comm-bench topo --record DIR      # DIR/sys/..., DIR/nvml.json, DIR/meta.json

Only the sysfs attributes the readers use are copied, so a tree is small and holds no
secrets. The result reads back with snapshot(DIR) exactly as the live node does.
"""
import json
import os
import socket
import time

from ..results.safefile import write_file
from .nvml_snapshot import read_nvml
from ..system.sysfs import BDF_RE, ROOT_RE, listdir

PCI_ATTRS = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device",
             "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
             "numa_node", "local_cpulist")
NET_ATTRS = ("speed", "operstate", "mtu", "address", "type")
IB_ATTRS = ("node_guid", "fw_ver", "hca_type", "node_type")
PORT_ATTRS = ("state", "phys_state", "rate", "link_layer", "lid")


def _copy(src, dst, binary=False, limit=4096):
    try:
        with open(src, "rb") as f:
            data = f.read(limit)
    except OSError:
        return False
    if not binary:
        try:
            data.decode()
        except UnicodeDecodeError:
            return False
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    write_file(dst, data, "topo --record")
    return True


def _copy_net(src, dst):
    for a in NET_ATTRS:
        _copy(os.path.join(src, a), os.path.join(dst, a))
    os.makedirs(dst, exist_ok=True)


def _copy_ib(src, dst):
    os.makedirs(dst, exist_ok=True)
    for a in IB_ATTRS:
        _copy(os.path.join(src, a), os.path.join(dst, a))
    numa = os.path.join(src, "device", "numa_node")
    for p in listdir(os.path.join(src, "ports")):
        ps, pd = os.path.join(src, "ports", p), os.path.join(dst, "ports", p)
        os.makedirs(pd, exist_ok=True)
        for a in PORT_ATTRS:
            _copy(os.path.join(ps, a), os.path.join(pd, a))
        nd = os.path.join(ps, "gid_attrs", "ndevs")
        for g in listdir(nd)[:4]:
            _copy(os.path.join(nd, g), os.path.join(pd, "gid_attrs", "ndevs", g))
    return numa


def record(out, root="/", nvml=True):
    """Copy the topology-relevant part of root/sys into out/sys, NVML into out/nvml.json."""
    t0 = time.monotonic()
    src_dev = os.path.join(root, "sys", "devices")
    dst_dev = os.path.join(out, "sys", "devices")
    n = 0
    for rc in listdir(src_dev):
        if not ROOT_RE.match(rc):
            continue
        stack = [(os.path.join(src_dev, rc), os.path.join(dst_dev, rc))]
        while stack and n < 20000:
            s, d = stack.pop()
            for name in listdir(s):
                sf, df = os.path.join(s, name), os.path.join(d, name)
                if os.path.islink(sf) or not os.path.isdir(sf):
                    continue
                if BDF_RE.match(name):
                    n += 1
                    os.makedirs(df, exist_ok=True)
                    for a in PCI_ATTRS:
                        _copy(os.path.join(sf, a), os.path.join(df, a))
                    _copy(os.path.join(sf, "config"), os.path.join(df, "config"), binary=True)
                    if os.path.islink(os.path.join(sf, "driver")):
                        write_file(os.path.join(df, "driver"),
                                   os.path.basename(os.readlink(os.path.join(sf, "driver"))) + "\n", "topo --record")
                    stack.append((sf, df))
                    # class children: net/, infiniband/, and one non-PCI level (virtio0/net)
                    for sub in [""] + [x for x in listdir(sf) if not BDF_RE.match(x)
                                       and os.path.isdir(os.path.join(sf, x))
                                       and not os.path.islink(os.path.join(sf, x))]:
                        for kind in ("net", "infiniband"):
                            k = os.path.join(sf, sub, kind)
                            if os.path.isdir(k) and not os.path.islink(k):
                                for ifn in listdir(k):
                                    fn = _copy_net if kind == "net" else _copy_ib
                                    fn(os.path.join(k, ifn), os.path.join(df, sub, kind, ifn))
    vnet = os.path.join(src_dev, "virtual", "net")
    for ifn in listdir(vnet):
        _copy_net(os.path.join(vnet, ifn), os.path.join(dst_dev, "virtual", "net", ifn))
    # RDMA devices without a PCI function (rxe, siw)
    cls = os.path.join(root, "sys", "class", "infiniband")
    for dev in listdir(cls):
        real = os.path.realpath(os.path.join(cls, dev))
        if not any(BDF_RE.match(p) for p in real.split(os.sep)):
            _copy_ib(os.path.join(cls, dev), os.path.join(out, "sys", "class", "infiniband", dev))
    node = os.path.join(src_dev, "system", "node")
    for nd in listdir(node):
        if nd.startswith("node") and nd[4:].isdigit():
            for a in ("cpulist", "distance"):
                _copy(os.path.join(node, nd, a), os.path.join(dst_dev, "system", "node", nd, a))
            try:
                with open(os.path.join(node, nd, "meminfo")) as f:
                    line = next((ln for ln in f if "MemTotal" in ln), None)
                if line:
                    write_file(os.path.join(dst_dev, "system", "node", nd, "meminfo"), line, "topo --record")
            except OSError:
                pass
    doc = read_nvml() if nvml else {"available": False, "reason": "not recorded", "gpus": []}
    os.makedirs(out, exist_ok=True)
    write_file(os.path.join(out, "nvml.json"), json.dumps(doc, indent=1), "topo --record")
    meta = {"host": socket.gethostname(), "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pci_functions": n, "elapsed_s": round(time.monotonic() - t0, 3)}
    write_file(os.path.join(out, "meta.json"), json.dumps(meta, indent=1), "topo --record")
    return meta
