"""Which link a measured pair crosses, and that link's theoretical rate, from a results
document (its "hosts[].topology" snapshots, "ranks[].devices" and the records).

    lm = LinkMap(doc)
    lm.node(rank)           # "host" (or "host/addr" when several nodes share a hostname)
    lm.label(rank)          # "host:GPU3" / "host:mlx5_0" / "host:10.0.0.2"
    lm.nic(rank, rec, side) # the rank's NIC entry in its host's topology, or None
    lm.classify(src, dst, record) -> (link_class, theoretical_gbs or None)

Classes: see links.LINK_CLASSES. Ranks in separate network namespaces or containers
share a hostname; each of them is a node of its own when it is local rank 0 of its
host name more than once (node = "host/addr").
"""
import ipaddress
import re

from .. import links as L
from ..results.records import link_kind
from .matrix import nvlink_between


def _is_ip(s):
    try:
        ipaddress.ip_address(str(s))
        return True
    except ValueError:
        return False


class LinkMap:
    def __init__(self, doc):
        self.doc = doc
        self.transport = (doc.get("transport") or "").lower()
        self.link_kind = link_kind(doc)     # as the writer recorded it: no transport is imported
        self.ranks = {}
        for r in doc.get("ranks") or []:
            if isinstance(r, dict) and isinstance(r.get("rank"), int):
                self.ranks[r["rank"]] = r
        self.topo = {}
        for h in doc.get("hosts") or []:
            if isinstance(h, dict) and h.get("host") is not None:
                self.topo[h["host"]] = h.get("topology") if isinstance(h.get("topology"), dict) else None
        # several local-rank-0s on one hostname: namespaces/containers -> node = host/addr
        zeros = {}
        for r in self.ranks.values():
            if r.get("local_rank", 0) == 0:
                zeros.setdefault(r.get("host"), set()).add(r.get("addr"))
        self.split_hosts = {h for h, a in zeros.items() if len(a) > 1}
        self._cache = {}
        self._node_ranks = None

    # --- identity -------------------------------------------------------------------
    def host(self, rank, rec=None, side="src"):
        r = self.ranks.get(rank)
        if r is not None and r.get("host") is not None:
            return r["host"]
        if rec is not None and rec.get(f"{side}_host") is not None:
            return rec[f"{side}_host"]
        return "?"

    def node(self, rank, rec=None, side="src"):
        h = self.host(rank, rec, side)
        if h in self.split_hosts:
            return f"{h}/{self.ranks[rank].get('addr')}"
        return h

    def ranks_of(self, node) -> set:
        """The run's ranks on node (as node() names it); empty for a node the run did not list."""
        if self._node_ranks is None:
            self._node_ranks = {}
            for r in self.ranks:
                self._node_ranks.setdefault(self.node(r), set()).add(r)
        return self._node_ranks.get(node, set())

    def by_node(self, ranks):
        """[(node, its ranks among `ranks`, sorted, True when they are all of its ranks)] by
        node: a finding names the host when every rank of it is named."""
        groups = {}
        for r in ranks:
            groups.setdefault(self.node(r), []).append(r)
        return [(n, sorted(rs), set(rs) >= self.ranks_of(n)) for n, rs in sorted(groups.items())]

    def devices(self, rank):
        d = (self.ranks.get(rank) or {}).get("devices")
        return d if isinstance(d, dict) else {}

    def device(self, rank, rec=None, side="src"):
        """('gpu', index) | ('nic', name) | ('addr', ip) | ('cpu', None) | (None, None)"""
        key = (rank, rec.get(f"{side}_device") if rec else None)
        if key in self._cache:
            return self._cache[key]
        devs = self.devices(rank)
        cand = []
        if rec is not None and rec.get(f"{side}_device") is not None:
            cand.append(rec[f"{side}_device"])
        for k in ("gpu", "cuda_device", "nic", "ib_device", "hca", "device"):
            if devs.get(k) is not None:
                cand.append(devs[k] if k not in ("gpu", "cuda_device") else f"cuda:{devs[k]}")
        out = (None, None)
        topo = self.topo.get(self.host(rank, rec, side)) or {}
        nic_names = {n.get("name") for n in topo.get("nics") or []}
        for c in cand:
            s = str(c)
            m = re.match(r"^(?:cuda:|gpu|GPU)(\d+)$", s)
            if m or (isinstance(c, int) and not isinstance(c, bool)):
                out = ("gpu", int(m.group(1)) if m else c)
                break
            if s in nic_names or re.match(r"^(mlx\d+_\d+|rxe\d+|siw\d+|irdma\d+|efa_?\d+|bnxt_re\d+)$", s):
                out = ("nic", s)
                break
            if _is_ip(s):
                out = ("addr", s)
                break
            if s == "cpu":
                out = ("cpu", None)
        self._cache[key] = out
        return out

    def label(self, rank, rec=None, side="src"):
        """A name that tells ranks apart: "host:GPU3"; ranks that share it (every tcp rank
        of one host has the same address) get their rank too: "host:r2"."""
        base = self._label(rank, rec, side)
        if base not in self._shared_labels():
            return base
        kind, _ = self.device(rank, rec, side)
        return f"{self.node(rank, rec, side)}:r{rank}" if kind in ("addr", "cpu", None) else f"{base}/r{rank}"

    def _shared_labels(self):
        shared = self._cache.get("shared_labels")
        if shared is None:
            seen = {}
            for r in self.ranks:
                lab = self._label(r)
                seen[lab] = seen.get(lab, 0) + 1
            shared = self._cache["shared_labels"] = {lab for lab, k in seen.items() if k > 1}
        return shared

    def _label(self, rank, rec=None, side="src"):
        node = self.node(rank, rec, side)
        kind, val = self.device(rank, rec, side)
        if kind == "gpu":
            return f"{node}:GPU{val}"
        if kind == "nic":
            return f"{node}:{val}"
        if node != self.host(rank, rec, side):       # host/addr already names it
            return node
        if kind == "addr":
            return f"{node}:{val}"
        return f"{node}:r{rank}"

    # --- link classes ---------------------------------------------------------------
    def _gpu(self, topo, idx):
        for g in (topo or {}).get("gpus") or []:
            if g.get("index") == idx:
                return g
        return None

    def nic(self, rank, rec, side):
        """The NIC entry of a rank's topology: by NIC name, else by its address."""
        topo = self.topo.get(self.host(rank, rec, side)) or {}
        kind, val = self.device(rank, rec, side)
        nics = topo.get("nics") or []
        if kind == "nic":
            return next((n for n in nics if n.get("name") == val), None)
        addr = val if kind == "addr" else (self.ranks.get(rank) or {}).get("addr")
        if addr:
            for n in nics:
                if addr in (n.get("addrs") or []):
                    return n
        if self.node(rank, rec, side) != self.host(rank, rec, side):
            # another namespace/container of this host: the stored topology is a
            # sibling's; assume the same kind of interface as the sibling's own
            host = self.host(rank, rec, side)
            for r in self.ranks.values():
                if r.get("host") == host and r.get("addr"):
                    n = next((n for n in nics if r["addr"] in (n.get("addrs") or [])), None)
                    if n is not None:
                        return dict(n, addrs=[addr] if addr else [],
                                    inferred=True)
            return None
        if kind == "gpu" and self.link_kind in ("gpu", "rdma"):
            # NCCL picks the NIC closest to the GPU (PIX/PXB in the matrix)
            g = self._gpu(topo, val)
            m = topo.get("matrix") or {}
            if g and g.get("label") in (m.get("labels") or []):
                i = m["labels"].index(g["label"])
                best = None
                for j, lab in enumerate(m["labels"]):
                    if m["kinds"][j] == "nic" and m["cells"][i][j] in ("PIX", "PXB"):
                        best = next((n for n in nics if n.get("label") == lab), None)
                        if best:
                            return best
        return None

    def classify(self, src, dst, rec=None):
        """(link_class, theoretical GB/s or None) of the pair src -> dst."""
        if src == dst:
            return "same-device", None
        sd = rec.get("src_device") if rec else None
        dd = rec.get("dst_device") if rec else None
        return self.classify_ends(self.end_info(src, sd, rec, "src"), self.end_info(dst, dd, rec, "dst"),
                                  src, dst, rec)

    def end_info(self, rank, dev, rec=None, side="src"):
        """(node, intra_id, nic_id): small ids of what decides a pair's class at this end."""
        k = ("info", rank, dev)
        info = self._cache.get(k)
        if info is None:
            host, node, device = self._end(rank, dev, rec, side)
            ids = self._cache.setdefault("ids", {})
            intra = ids.setdefault(("in", host, device), len(ids))
            nic = ids.setdefault(("x", self._nic_cached(rank, dev, rec, side), node != host), len(ids))
            info = (node, intra, nic)
            self._cache[k] = info
        return info

    def classify_ends(self, es, ed, src, dst, rec=None):
        """classify() given end_info() of both ends (fast path for many records)."""
        if src == dst:
            return "same-device", None
        key = ("c", 0, es[1], ed[1]) if es[0] == ed[0] else ("c", 1, es[2], ed[2])
        out = self._cache.get(key)
        if out is None:
            out = self._classify(src, dst, rec)
            self._cache[key] = out
        return out

    def _end(self, rank, dev, rec, side):
        k = ("end", rank, dev)
        e = self._cache.get(k)
        if e is None:
            e = (self.host(rank, rec, side), self.node(rank, rec, side), self.device(rank, rec, side))
            self._cache[k] = e
        return e

    def _nic_cached(self, rank, dev, rec, side):
        k = ("nic", rank, dev)
        if k not in self._cache:
            n = self.nic(rank, rec, side)
            self._cache[k] = None if n is None else (n.get("name"), n.get("kind"), n.get("rate_gbs"),
                                                     bool(n.get("virtual")))
        return self._cache[k]

    def _classify(self, src, dst, rec):
        ns, nd = self.node(src, rec, "src"), self.node(dst, rec, "dst")
        ds, dd = self.device(src, rec, "src"), self.device(dst, rec, "dst")
        if src == dst or (ns == nd and ds == dd and ds[0] == "gpu"):
            return "same-device", None
        if ns == nd:
            topo = self.topo.get(self.host(src, rec, "src")) or {}
            if ds[0] == "gpu" and dd[0] == "gpu":
                ga, gb = self._gpu(topo, ds[1]), self._gpu(topo, dd[1])
                if ga and gb:
                    nl, ver = nvlink_between(_with_links(ga), _with_links(gb))
                    if nl:
                        return "nvlink", L.nvlink_gbs(ver, nl)
                    peers = (ga.get("nvlink") or {}).get("peers") or {}
                    if peers.get(gb.get("label")):     # a stored snapshot: links to that peer
                        return "nvlink", L.gpu_nvlink_gbs(ga.get("nvlink"), peers[gb["label"]])
                    rate = _matrix_rate(topo, ga.get("label"), gb.get("label"))
                    if rate is None:
                        rate = L.min_rate((ga.get("pcie") or {}).get("cur_gbs"),
                                          (gb.get("pcie") or {}).get("cur_gbs"))
                    return "pcie", rate
                return "pcie", None
            if ds[0] == "gpu" or dd[0] == "gpu":     # host <-> GPU copies
                g = self._gpu(topo, ds[1] if ds[0] == "gpu" else dd[1])
                return "pcie", (g.get("pcie") or {}).get("cur_gbs") if g else None
            return "loopback", None
        a, b = self.nic(src, rec, "src"), self.nic(dst, rec, "dst")
        if a is None and b is None:
            cls = "ib" if self.link_kind == "rdma" else "network"
            return cls, None
        kinds = {L.nic_class(n) for n in (a, b) if n}
        cls = next((k for k in ("ib", "roce", "ethernet", "virtual") if k in kinds), "network")
        rate = L.min_rate(*((n.get("rate_gbs") if n else None) for n in (a, b)))
        if a is None or b is None:
            rate = None if cls == "virtual" else rate
        return cls, rate


def _with_links(g):
    return g if "nvlinks" in g else dict(g, nvlinks=[])


def _matrix_rate(topo, la, lb):
    m = topo.get("matrix") or {}
    labels = m.get("labels") or []
    if la in labels and lb in labels:
        return m["rates_gbs"][labels.index(la)][labels.index(lb)]
    return None
