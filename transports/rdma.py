"""RDMA transport over rdma-core ibverbs (InfiniBand and RoCE, Soft-RoCE included).

Ops (perftest's ib_*_bw / ib_*_lat): write, read, send, write_imm; modes bw and
lat; patterns pair, pairwise, pairwise-concurrent. The hot loops live in
csrc/ibverbs/ibverbs.cpp (comm_bench._ibverbs); this file chooses the device, port and
GID, exchanges connection data through the rendezvous store, and sequences each
run between the two ranks of a pair.

Roles: the "src" rank posts the ops (perftest's client). write, send and
write_imm move data src -> dst; read fetches dst's buffer into src's.

Definitions (docs/internal-contracts.md, Measurement definitions; as perftest):
- bw: src streams `iters` ops (tx depth per QP, one signalled completion per
  cq-mod ops). bandwidth = bytes x iters / (last completion - first post);
  samples are the times between completions (spread over the ops each
  completion covers), so they sum to that time. bw_peak is the best rate over
  any tx-depth x qps consecutive completions; msg_rate_mpps = iters / time.
- lat: ping-pong on QP 0; the samples are round trips, which the record halves
  for write, send and write_imm; a read's latency is its whole round trip.
- -c: src fills its buffer with a pattern that depends on size and run; the
  side the bytes landed on counts wrong bytes after the run.
- extra["counters"]: deltas of /sys/class/infiniband/<dev>/ports/<p>/counters
  and hw_counters around the run, warm-up included: read before either rank
  starts and after both are done, each reading taken at least hw_counters'
  cache lifespan after the last traffic (the dst's own deltas arrive under
  extra["dst"] via the sweep).

GPU memory (GPUDirect RDMA through dma-buf) is designed for (the buffer is one
registered region per peer, so a dma-buf MR can replace it) but does not work
yet: --use-dmabuf is refused with that message.
"""
from __future__ import annotations

import time
import zlib

from .. import ops as ops_mod
from ..errors import TransportUnavailable
from .base import Option, RankContext, RunResult, Transport, TransportError

# perftest's default inline sizes (ctx_set_max_inline): latency tests inline small
# messages, bandwidth tests do not.
LAT_INLINE = {"write": 220, "send": 236, "write_imm": 220, "read": 0}
QP_INLINE_CAP = 236


class RdmaTransport(Transport):
    name = "rdma"
    description = "RDMA verbs over rdma-core (InfiniBand, RoCE, Soft-RoCE): write, read, send, write_imm"
    link_kind = "rdma"
    ops = ("write", "read", "send", "write_imm")
    patterns = ("pair", "pairwise", "pairwise-concurrent")
    modes = ("bw", "lat")
    dtypes = ops_mod.ALL_DTYPES
    options = (
        Option("--device", str, None, "RDMA device (e.g. mlx5_0); a comma list = one per local rank; "
               "'auto' = a NUMA-local device; default: the first device"),
        Option("--ib-port", int, 1, "port of the RDMA device", low=1, high=255),
        Option("--gid-index", int, None, "GID index (default: RoCE v2 IPv4 GID on Ethernet, LID on InfiniBand)",
               low=-1, high=255),
        # upper bounds: far above what perftest users set, low enough that a typo cannot
        # ask the NIC for millions of queue entries
        Option("--qps", int, 1, "RC queue pairs per peer (bw ops are spread over them)", low=1, high=1024),
        Option("--tx-depth", int, 128, "outstanding sends per queue pair (perftest -t)", low=1, high=16384),
        Option("--rx-depth", int, 512, "posted receives per queue pair (send, write_imm)", low=1, high=16384),
        Option("--cq-mod", int, 100, "signal one completion every N sends (perftest -Q)", low=1, high=65536),
        Option("--bidir", bool, False, "bw: both ranks of a pair send at the same time (perftest -b)"),
        Option("--inline-size", int, None, "inline messages up to this size (default as perftest: "
               "220/236 B for latency, 0 for bandwidth)", low=0, high=4096),
        Option("--use-dmabuf", bool, False, "GPU memory through dma-buf (GPUDirect RDMA): NOT WORKING YET"),
    )

    @classmethod
    def host_bytes(cls, max_bytes: int, world_size: int) -> int:
        return 2 * max(max_bytes, 4096) * max(1, world_size - 1)  # a buffer pair per peer

    @classmethod
    def probe(cls) -> tuple:
        from ..system import native as _native, rdma_sysfs

        mod, why = _native.load("_ibverbs")
        if mod is None:
            return False, why
        try:
            devs = mod.device_names() or rdma_sysfs.devices()
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return False, f"libibverbs failed: {exc}"
        if not devs:
            return False, rdma_sysfs.SOFT_ROCE_HINT
        return True, f"devices: {', '.join(devs)}; {rdma_sysfs.GPU_MEMORY_NOTE}"

    # -- setup ------------------------------------------------------------------
    def setup(self, ctx: RankContext) -> None:
        from ..system import native as _native, rdma_sysfs

        self.ctx = ctx
        opt = self.resolve_options(ctx.options)
        self.opt = opt
        if opt["use_dmabuf"]:
            raise TransportUnavailable(f"--use-dmabuf: {rdma_sysfs.GPU_MEMORY_NOTE}")
        mod = _native.require("_ibverbs")
        devs = mod.device_names() or rdma_sysfs.devices()
        if not devs:
            raise TransportUnavailable(rdma_sysfs.SOFT_ROCE_HINT)
        dev = rdma_sysfs.pick_device(opt["device"], ctx.local_rank) or devs[0]
        if dev not in devs:
            raise TransportUnavailable(f"unknown RDMA device '{dev}' (rank {ctx.rank}); devices here: "
                                       f"{', '.join(devs)}")
        port = opt["ib_port"]
        state = rdma_sysfs.port_state(dev, port)
        if state and state != "ACTIVE":
            raise TransportUnavailable(f"port {port} of {dev} is {state}, not ACTIVE "
                                       f"(check the link: `ibv_devinfo -d {dev}`)")
        gid = opt["gid_index"]
        if gid is None or gid < 0:
            gid = rdma_sysfs.auto_gid_index(dev, port)
        peers = [r for r in range(ctx.world_size) if r != ctx.rank]
        buf = max(int(ctx.max_bytes or 0), 4096)
        problem = rdma_sysfs.memlock_problem(2 * buf * len(peers) + 65536)
        if problem:
            raise TransportUnavailable(f"rdma rank {ctx.rank}: {problem}")
        try:
            self.engine = mod.Engine(dev, port, gid, float(ctx.timeout), ctx.rank)
        except mod.NativeError as exc:
            raise TransportUnavailable(f"rdma rank {ctx.rank}: {exc}") from None
        self.native_error = mod.NativeError
        self.dev, self.port = dev, port
        self.info = self.engine.port_info()
        self.read_counters = lambda: rdma_sysfs.counters(dev, port)
        self.counter_settle_s = rdma_sysfs.counter_settle_s(dev, port)
        self.counters_fresh = False  # read after this rank's last traffic had settled
        self.delta = rdma_sysfs.counter_delta
        self.seq: dict = {}
        inline_cap = QP_INLINE_CAP if opt["inline_size"] is None else max(0, opt["inline_size"])
        access = mod.ACCESS_LOCAL_WRITE | mod.ACCESS_REMOTE_WRITE | mod.ACCESS_REMOTE_READ
        ops = set(ctx.ops or self.ops)
        if not ops & {"write", "write_imm"}:
            access &= ~mod.ACCESS_REMOTE_WRITE
        if "read" not in ops:
            access &= ~mod.ACCESS_REMOTE_READ
        mine = {}
        try:
            for peer in peers:
                mine[str(peer)] = self.engine.add_peer(peer, opt["qps"], opt["tx_depth"], opt["rx_depth"],
                                                       opt["cq_mod"], inline_cap, buf, access)
        except mod.NativeError as exc:
            raise TransportUnavailable(str(exc)) from None
        everyone = ctx.store.all_gather("rdma/conn", mine)
        try:
            for peer in peers:
                self.engine.connect(peer, everyone[peer][str(ctx.rank)])
        except mod.NativeError as exc:
            raise TransportError(str(exc)) from None
        ctx.store.barrier("rdma/connected")

    # -- one measurement -----------------------------------------------------------
    def run(self, op: str, nbytes: int, iters: int, warmup: int, *, dtype: str = "float32",
            check: bool = False, mode: str = "bw", peer: int | None = None,
            role: str | None = None) -> RunResult:
        try:
            return self._run(op, nbytes, iters, warmup, check, mode, peer, role == "src")
        except self.native_error as exc:
            raise TransportError(str(exc)) from None

    def _run(self, op, nbytes, iters, warmup, check, mode, peer, src) -> RunResult:
        eng, store, rank = self.engine, self.ctx.store, self.ctx.rank
        n = self.seq.get(peer, 0)
        self.seq[peer] = n + 1
        key = f"rdma/{min(rank, peer)}-{max(rank, peer)}/{n}"
        seed = zlib.crc32(f"{op}/{nbytes}/{n}".encode())
        bidir = bool(self.opt["bidir"]) and mode == "bw"
        sends_here = src or bidir
        receives = op in ("send", "write_imm")
        total = warmup + iters
        if mode == "bw":
            recvs = total if receives and (not src or bidir) else 0
            inline = self.opt["inline_size"] or 0
        else:
            recvs = -total if receives and op != "read" else 0
            inline = LAT_INLINE[op] if self.opt["inline_size"] is None else self.opt["inline_size"]
        eng.prepare(peer, nbytes, seed, check, recvs, inline)
        # Both ranks read the counters before either starts and after both are
        # done, each reading at least the counter cache's lifespan after any traffic
        # (after the previous run's settled reading, none of this rank's has happened).
        if not self.counters_fresh:
            time.sleep(self.counter_settle_s)
        self.counters_fresh = False
        before = self.read_counters()
        store.set(f"{key}/ready/{rank}", b"1")
        store.get(f"{key}/ready/{peer}")

        if mode == "bw":
            res = self._stream(op, nbytes, iters, warmup, peer, sends_here, receives and recvs > 0)
        else:
            res = self._pingpong(op, nbytes, iters, warmup, peer, src)
        store.set(f"{key}/done/{rank}", b"1")
        store.get(f"{key}/done/{peer}")  # the peer's data has landed (its ops completed)
        time.sleep(self.counter_settle_s)
        after = self.read_counters()
        self.counters_fresh = True

        wrong = self._wrong(op, mode, nbytes, seed, peer, src, bidir) if check else 0
        extra: dict = {"counters": self.delta(before, after), "device": f"{self.dev}:{self.port}"}
        if res is not None and res["samples_us"]:
            # bw: the samples add up to the whole span, so the record's algbw is perftest's
            # average (S x iters / span); the peak window comes from the native sampler
            extra.update(qps=self.opt["qps"] if mode == "bw" else 1, tx_depth=self.opt["tx_depth"],
                         inline_size=inline, bidir=bidir)
            return RunResult(samples_us=res["samples_us"], wrong=wrong, extra=extra,
                             round_trip=mode == "lat" and op != "read",
                             peak_gbps=res["peak_gbps"] if mode == "bw" else None)
        return RunResult(samples_us=[], wrong=wrong, extra=extra)

    def _stream(self, op, nbytes, iters, warmup, peer, sends_here, receives_here):
        eng = self.engine
        if not sends_here:  # a passive sink: wait for the sends (write/read need no CPU here)
            if receives_here:
                eng.stream(peer, op, nbytes, 0, warmup + iters, False)
            return None
        warm_recvs = warmup if receives_here else 0
        if warmup:
            eng.stream(peer, op, nbytes, warmup, warm_recvs, False)
        return eng.stream(peer, op, nbytes, iters, warm_recvs + (iters if receives_here else 0), True)

    def _pingpong(self, op, nbytes, iters, warmup, peer, src):
        eng = self.engine
        if not src:
            if op != "read":  # a read's target answers in hardware, not here
                eng.pingpong(peer, op, nbytes, warmup + iters, False, False)
            return None
        if warmup:
            eng.pingpong(peer, op, nbytes, warmup, True, False)
        return eng.pingpong(peer, op, nbytes, iters, True, True)

    def _wrong(self, op, mode, nbytes, seed, peer, src, bidir) -> int:
        """Wrong bytes where the data landed: the reader's buffer for read, the target's otherwise."""
        lands_here = src if op == "read" else (not src)
        if mode == "lat" and op != "read":
            lands_here = True  # ping-pong: both directions carry the pattern
        if bidir:
            lands_here = True
        if not lands_here:
            return 0
        return int(self.engine.count_wrong(peer, nbytes, seed, mode == "lat" and op == "write"))

    def teardown(self) -> None:
        self.engine = None  # destroys QPs, CQs, MRs, the PD and the device context

    def describe(self) -> dict:
        from ..system import rdma_sysfs

        info = getattr(self, "info", None)
        if not info:
            return {}
        return {"device": f"{info['device']}:{info['port']}", "link_layer": info["link_layer"],
                "gid_index": info["gid_index"], "gid": info["gid"], "lid": info["lid"],
                "active_mtu": info["active_mtu"], "numa_node": rdma_sysfs.numa_node(info["device"]),
                "gpu_memory": rdma_sysfs.GPU_MEMORY_NOTE}


