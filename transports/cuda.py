"""CUDA copies as nvbandwidth measures them (csrc/cuda/cuda_copy.cu).

Ops (S = bytes copied; a device-local copy of N bytes counts N):
  h2d, d2h      host <-> this rank's GPU
  bidir         both at once (S per direction; time until both are done)
  d2d           device-local copy on this rank's GPU
  peer          this rank's GPU writes into the peer rank's GPU (pair patterns)
  peer_read     this rank's GPU reads from the peer rank's GPU
  peer_bidir    both GPUs of the pair write to each other at once (nvbandwidth's
                bidirectional write): algbw per direction (src -> dst), extra holds
                both directions and their total
Each by a copy engine (--copy ce: cudaMemcpyAsync) or an SM kernel (--copy sm),
with pinned or pageable host memory placed on the GPU's NUMA node.

One rank per GPU: the local rank picks the GPU (--gpu overrides). Peer copies
between ranks go through CUDA IPC, so the ranks of a pair must share a host;
`--pattern pairwise` gives the GPU x GPU matrix.
"""
from __future__ import annotations

from .. import ops as ops_mod
from ..errors import TransportUnavailable
from .base import GPU_OPTION, Option, RankContext, RunResult, Transport, TransportError

HOST_OPS = ("h2d", "d2h", "bidir")
LOCAL_OPS = HOST_OPS + ("d2d",)
PEER_OPS = ("peer", "peer_read", "peer_bidir")


def load_native():
    """(module, "") or (None, reason) for comm_bench._cuda."""
    from ..system.native import load

    return load("_cuda")


def gpu_count() -> tuple:
    """(number of GPUs, why none), never raising."""
    mod, why = load_native()
    if mod is None:
        return 0, why
    try:
        return mod.device_count()
    except Exception as exc:  # noqa: BLE001
        return 0, str(exc).splitlines()[0]


def probe_gpu() -> tuple:
    """(ok, reason): the native module is built and a GPU answers. Never raises."""
    try:
        mod, why = load_native()
        if mod is None:
            return False, why
        n, why = gpu_count()
    except Exception as exc:  # noqa: BLE001 - probe never raises
        return False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if n == 0:
        return False, (f"no usable CUDA GPU here ({why}): run on a machine with an NVIDIA GPU "
                       "and its driver")
    return True, ""


def one_rank_per_gpu() -> int:
    """--nprocs default of the GPU transports: every GPU of this host (at least 1)."""
    return max(1, gpu_count()[0])


def pick_gpu(ctx: RankContext, requested, count: int) -> int:
    """This rank's GPU: --gpu if given, else the local rank (one rank per GPU)."""
    if requested is not None and int(requested) >= 0:
        dev = int(requested)
        if dev >= count:
            raise TransportUnavailable(f"rank {ctx.rank}: --gpu {dev} does not exist here "
                                       f"({count} GPU(s) visible)")
        return dev
    if ctx.local_rank >= count:
        raise TransportUnavailable(
            f"rank {ctx.rank}: local rank {ctx.local_rank} has no GPU of its own ({count} GPU(s) on "
            f"{ctx.host}): run at most {count} rank(s) per host (--nprocs {count})")
    return ctx.local_rank


def gpu_description(mod, dev: int) -> dict:
    """What the results record about a GPU: CUDA's view plus NVML's links."""
    from ..system import nvml_counters as nvml

    info = dict(mod.device_info(dev))
    info["cuda_driver"] = mod.driver_version()
    info["cuda_runtime"] = mod.runtime_version()
    reading = nvml.device(bus_id=info.get("pci_bus_id"))
    if reading:
        info["nvml"] = reading
    return info


class CudaCopyTransport(Transport):
    buffers = "both"  # for the memory check before a sweep starts
    name = "cuda"
    description = "CUDA copies (copy engines and SM kernels): host<->GPU, device-local, GPU->GPU"
    link_kind = "gpu"
    ops = LOCAL_OPS + PEER_OPS
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops, collective_ops = PEER_OPS, LOCAL_OPS  # peer copies need a pair; the others one GPU each
    modes = ("bw",)
    dtypes = ops_mod.ALL_DTYPES  # copies move bytes; the dtype only sets the count column
    options = (
        Option("--copy", str, "ce", "copy by: ce (copy engine, cudaMemcpyAsync) or sm (SM copy kernel)",
               choices=("ce", "sm")),
        Option("--host-mem", str, "pinned", "host buffers: pinned or pageable", choices=("pinned", "pageable")),
        Option("--numa", int, -1, "NUMA node of host buffers: -1 the GPU's node (where there are "
                                  "several), -2 leave placement to the OS", low=-2, high=1023),
        GPU_OPTION,
    )

    @classmethod
    def probe(cls):
        return probe_gpu()

    @classmethod
    def default_ranks(cls) -> int:
        return one_rank_per_gpu()

    def setup(self, ctx: RankContext) -> None:
        from ..system.native import require

        self.ctx = ctx
        mod = self.mod = require("_cuda")
        o = self.resolve_options(ctx.options)
        self.method, self.host_mem = o["copy"], o["host_mem"]
        if self.method == "sm" and self.host_mem == "pageable" and any(op in HOST_OPS for op in ctx.ops):
            raise TransportUnavailable("an SM copy kernel cannot read pageable host memory: "
                                       "use --host-mem pinned with --copy sm")
        count, why = mod.device_count()
        if count == 0:
            raise TransportUnavailable(f"rank {ctx.rank}: no CUDA GPU on {ctx.host} ({why})")
        self.dev = pick_gpu(ctx, o.get("gpu"), count)
        numa = o.get("numa")
        numa = -1 if numa is None else int(numa)
        try:
            self.bench = mod.CopyBench(self.dev, numa)
            self.info = gpu_description(mod, self.dev)
        except mod.NativeError as exc:
            raise TransportError(f"rank {ctx.rank}: {exc}") from None
        self.peers: dict = {}
        self._gate_seq: dict = {}
        self.peer_table = None
        wants_peers = ctx.world_size > 1 and (not ctx.ops or any(op in PEER_OPS for op in ctx.ops))
        if wants_peers:
            # every rank exports a buffer peers write into / read from, and learns the others'
            size = max(int(ctx.max_bytes or 0), 1 << 20)
            try:
                handle = self.bench.export_peer_buffer(size)
            except mod.NativeError as exc:
                raise TransportError(f"rank {ctx.rank}: {exc}") from None
            self.peer_table = ctx.store.all_gather("cuda/peer-buffers", {
                "handle": handle.hex(), "gpu": self.dev, "host": ctx.host, "bytes": size,
                "bus_id": self.info.get("pci_bus_id")})

    def _peer_slot(self, peer: int) -> int:
        if peer in self.peers:
            return self.peers[peer]
        if self.peer_table is None:
            raise TransportUnavailable("peer copies need at least 2 ranks")
        entry = self.peer_table[peer]
        if entry["host"] != self.ctx.host:
            raise TransportUnavailable(f"rank {self.ctx.rank} ({self.ctx.host}) and rank {peer} "
                                       f"({entry['host']}) are on different hosts: GPU peer copies need "
                                       "one host (use the nccl transport across hosts)")
        try:
            slot = self.bench.open_peer(bytes.fromhex(entry["handle"]), entry["gpu"], entry["bytes"])
        except self.mod.NativeError as exc:
            raise TransportError(f"rank {self.ctx.rank}: {exc}") from None
        self.peers[peer] = slot
        return slot

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        from ..system import nvml_counters as nvml

        # (which pattern runs which op: pair_ops / collective_ops, checked by the sweep)
        if op in PEER_OPS:
            if role == "dst" and op != "peer_bidir":
                return RunResult([], 0, {})  # the source drives (and checks) the copy
            slot = self._peer_slot(peer)
        else:
            slot = -1
        bus = [self.info.get("pci_bus_id")]
        if peer is not None and self.peer_table:
            bus.append(self.peer_table[peer].get("bus_id"))
        gate_role, sync = 0, None
        if op == "peer_bidir":  # both ranks write to each other at once (nvbandwidth)
            gate_role, sync = self._gate(peer, role)
        try:
            with nvml.Sampler(bus) as sampled:
                out = self.bench.run(op, self.method, self.host_mem, int(nbytes), int(iters), int(warmup),
                                     bool(check), slot, float(self.ctx.timeout), gate_role=gate_role,
                                     sync=sync)
        except self.mod.NativeError as exc:
            raise TransportError(f"rank {self.ctx.rank} (GPU {self.dev}): {op} of {nbytes} B failed: "
                                 f"{exc}") from None
        extra = {"copy": self.method, "gpu": self.dev}
        if op in HOST_OPS:
            extra["host_mem"] = self.host_mem
            extra["numa_node"] = out["numa_node"]
        if peer is not None:
            extra["peer_gpu"] = self.peer_table[peer]["gpu"] if self.peer_table else None
        if out["blocking_timed_out"]:
            extra["blocking_kernel_timed_out"] = True  # launch gaps may be in the samples
        if sampled.result:
            extra["nvml_counters"] = sampled.result
        if role == "dst":  # the reverse direction of peer_bidir: its time goes into the src's record
            extra["direction"] = "dst->src"
            return RunResult([], int(out["wrong"]), extra, mean_us=out["mean_us"])
        return RunResult(list(out["samples_us"]), int(out["wrong"]), extra, mean_us=out["mean_us"],
                         both_directions=op == "bidir")

    def _gate(self, peer, role):
        """(gate role, handshake) of one concurrent peer_bidir run: the src leads. Both ranks
        count their runs per pair in step, so the keys of one run never meet another's."""
        src, dst = (self.ctx.rank, peer) if role != "dst" else (peer, self.ctx.rank)
        seq = self._gate_seq.get((src, dst), 0)
        self._gate_seq[(src, dst)] = seq + 1
        leader = role != "dst"
        store = self.ctx.store

        def sync(step):
            key = f"cuda/gate/{src}-{dst}/{seq}/{step}"
            if (step % 2 == 0) == leader:  # even: the leader's gate is closed; odd: the follower queued
                store.set(key, "1")
            else:
                store.get(key)
        return (1 if leader else 2), sync

    def teardown(self) -> None:
        bench = getattr(self, "bench", None)
        if bench is not None:
            self.bench = None
            del bench

    def describe(self) -> dict:
        from ..system import nvml_counters as nvml

        info = getattr(self, "info", {}) or {}
        return {"device": f"cuda:{getattr(self, 'dev', '?')}", "gpu": info,
                "copy": getattr(self, "method", None), "host_mem": getattr(self, "host_mem", None),
                "nvml": nvml.system()}
