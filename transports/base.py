"""The transport interface: what every transport file implements.

A transport is small: it says whether it can run here (`probe`), connects the
ranks (`setup`), runs one op at one size and hands back per-iteration times
measured in native code (`run`), and cleans up (`teardown`). Byte counts and
bus factors belong to the op (comm_bench.ops), never to the transport.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

if __package__ in (None, "", "transports"):  # imported as a top-level package by mistake
    raise ImportError("import comm_bench.transports, not the source folder 'transports'")



from ..errors import RunFailed, UsageError

# Test hook of the Python data checks (gloo, mpi, grpc, torch-nccl): one element of each checked
# result is changed after it arrived, so a test sees the check count it
# (tests/test_data_checks.py). Read once at import, never in a timed loop.
TEST_CORRUPT_CHECK = bool(os.environ.get("COMM_BENCH_TEST_CORRUPT_CHECK"))


class TransportError(RunFailed):
    """A run failed (peer unreachable, completion error...): one line naming what and where; exit 1."""


@dataclass(frozen=True)
class Option:
    """A transport's own sweep option, e.g. Option("--ib-port", int, 1, "HCA port").

    The sweep command adds every transport's options (one flag may be shared by
    several transports, e.g. --device); the value reaches the transport as
    ctx.options[dest] where dest is the flag without dashes, '-' -> '_'.
    Each also reads its default from COMM_BENCH_<DEST> (upper case).
    type: str, int, float, or bool (a plain on/off flag).
    choices / low / high: what a value may be; Transport.resolve_options checks every
    option against them once, before any rank starts (one line naming the flag, exit 2).
    """
    flag: str
    type: type = str
    default: Any = None
    help: str = ""
    aliases: tuple = ()      # other spellings, e.g. ("-G",) for --cudagraph
    choices: tuple = ()      # allowed values (str options; compared in lower case)
    low: Any = None          # smallest allowed value (int/float options)
    high: Any = None         # largest allowed value

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def checked(self, value):
        """The value in its type, or UsageError naming the flag and what it may be."""
        if value is None or self.type is bool:
            return bool(value) if self.type is bool else None
        try:
            value = self.type(value)
        except (TypeError, ValueError):
            raise UsageError(f"{self.flag} {value!r}: not a{'n' if self.type is int else ''} "
                             f"{self.type.__name__}") from None
        if self.choices:
            value = str(value).lower()
            if value not in self.choices:
                raise UsageError(f"{self.flag} {value!r}: choose one of {', '.join(self.choices)}")
        if self.type in (int, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise UsageError(f"{self.flag} {value}: not a finite number")
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise UsageError(f"{self.flag} {value}: must be {self._range()}")
        return value

    def _range(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.low} to {self.high}"
        return f"at least {self.low}" if self.low is not None else f"at most {self.high}"


# The one --gpu option every GPU transport shares (comm_bench.transports.cuda.pick_gpu reads it).
GPU_OPTION = Option("--gpu", int, -1, "GPU of this rank (-1: the local rank)", low=-1, high=1023)
# nccl-tests' -a, for the NCCL transports: how the ranks' times make the record's time_us
AVERAGE_OPTION = Option("--average", int, 1, "nccl-tests' -a: time_us from the ranks' times, 0 rank 0's, "
                                             "1 their mean, 2 the lowest, 3 the highest",
                        aliases=("-a",), low=0, high=3)
# What the NCCL transports' time figures are (nccl-tests src/common.cu, BenchTime): their
# records' extra["timing"].
NCCL_TESTS_TIMING = {
    "time_us": "pass 1: host clock from after a barrier of the ranks over iters launches + stream "
               "synchronize, / iters (-G N: N launches of a graph of iters, / iters x N); ranks "
               "combined as extra.average (nccl-tests -a); iteration i at buffer offset "
               "bytes x (i % (buffer / bytes)), as nccl-tests' startColl (no L2 reuse between iterations)",
    "gpu_time_us": "pass 1b: events around a batch of the same launches / launches",
    "latency_us": "pass 2: an event after each launch"}


@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    host: str                 # this rank's hostname
    addr: str                 # address peers reach this rank on (servers bind here)
    store: Any                # comm_bench.control.rendezvous.Store: set/get/add/barrier/all_gather
    timeout: float            # seconds any blocking step may wait for a peer
    options: dict = field(default_factory=dict)  # transport options from the CLI (Option.dest keys)
    max_bytes: int = 0        # largest size the sweep will ask for (buffers can be sized once)
    ops: tuple = ()           # the ops the sweep will run
    redop: str = "sum"        # --redop: the reduction of all_reduce, reduce, reduce_scatter
    root: int = 0             # --root: the root rank of broadcast and reduce


@dataclass
class RunResult:
    """What one rank measured for one (op, size).

    samples_us: per-iteration times in microseconds, measured in native code (or,
      for framework transports such as gloo and mpi4py, around the framework's own
      call: that overhead is part of what they measure).
    wrong: number of wrong elements/bytes found by the data check (0 when unchecked).
    extra: transport-specific fields copied into the record (counters, devices...).
    mean_us: the time per iteration from a pass of its own (GPU transports: two events
      around the whole batch, as nccl-tests and nvbandwidth time), when the samples come
      from a second pass that times each iteration; None: the mean of the samples.
    round_trip: the samples are whole ping-pong round trips; the record reports
      half of each as the one-way latency (comm_bench.metrics, for every transport).
    both_directions: S bytes moved each way at once in the time measured (a host<->GPU
      bidir copy, gRPC bidir streams): the record's algbw is per direction and
      extra.total_gbps the sum of both.
    peak_gbps: the best sliding window a native sampler saw (rdma), where it measures one;
      otherwise the record's bw_peak comes from the fastest sample.

    Transports return these raw figures only; every derived figure (time, algbw, busbw,
    one-way latency, message rate, totals) is computed once, in comm_bench.metrics.
    """
    samples_us: list
    wrong: int = 0
    extra: dict = field(default_factory=dict)
    mean_us: float | None = None
    round_trip: bool = False
    both_directions: bool = False
    peak_gbps: float | None = None


class Transport:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # what its data crosses (comm_bench.links.LINK_KINDS): every transport declares it; the
    # writer records it in the document, where topology/linkmap.py reads it
    link_kind: ClassVar[str] = ""
    ops: ClassVar[tuple] = ()
    # "collective": every rank takes part in each op; "pairwise" and
    # "pairwise-concurrent": run() is called on both ranks of the active pair(s)
    patterns: ClassVar[tuple] = ("collective",)
    modes: ClassVar[tuple] = ("bw",)        # "bw" streaming, "lat" ping-pong
    dtypes: ClassVar[tuple] = ("float32",)
    redops: ClassVar[tuple] = ("sum",)     # --redop values its reducing ops run (ops.REDOPS)
    options: ClassVar[tuple] = ()           # Option(...) entries for the sweep command
    # ops a pattern runs (None: every op of the transport): e.g. a collective library's pair
    # patterns measure sendrecv between two ranks, and cuda's peer copies need a pair
    pair_ops: ClassVar[tuple | None] = None
    collective_ops: ClassVar[tuple | None] = None
    buffers: ClassVar[str] = "host"         # where a rank's send/receive buffers live: host|gpu|both
    # whether torch.distributed is handed the rendezvous store (ctx.store.raw): then it must be
    # torch's TCPStore; else the standard-library store, and a rank never imports torch to meet
    torch_store: ClassVar[bool] = False
    # whether `--nprocs` local ranks are started by mpirun (MPI_Init needs its launcher) rather
    # than by comm-bench's own spawner
    spawn_with_mpirun: ClassVar[bool] = False

    @classmethod
    def before_rendezvous(cls) -> None:
        """Start, on every rank, what blocks until every rank has started it, before any rank
        waits on the store: rank 0's light store serves from Python threads, so a rank 0 held
        in such a start with the GIL taken (MPI_Init in mpi4py's import) would stop it."""

    @classmethod
    def probe(cls) -> tuple:
        """(ok, reason): can this transport run here? Never raises."""
        return True, ""

    @classmethod
    def supports(cls, op: str, pattern: str, mode: str) -> str:
        """"" when this transport runs `op` with `pattern` in `mode`, else why not (one line
        that says what to run instead). The sweep waives an op it cannot run and records why."""
        if op not in cls.ops:
            return f"{cls.name} has no op '{op}'; it has: {', '.join(cls.ops)}"
        from ..schedule import runs_as
        if runs_as(pattern) not in cls.patterns:
            return f"{cls.name} does not run --pattern {pattern}; it runs: {', '.join(cls.patterns)}"
        if mode not in cls.modes:
            return f"{cls.name} has no mode '{mode}'; it has: {', '.join(cls.modes)}"
        if pattern == "collective" and cls.collective_ops is not None and op not in cls.collective_ops:
            return (f"{op} moves data between two ranks: run it with --pattern pair, pairwise or "
                    f"pairwise-concurrent")
        if pattern != "collective" and cls.pair_ops is not None and op not in cls.pair_ops:
            return (f"--pattern {pattern} runs {', '.join(cls.pair_ops)} between two ranks; {op} "
                    f"runs on all ranks together: use --pattern collective")
        return ""

    @classmethod
    def default_ranks(cls) -> int:
        """Local ranks --nprocs spawns when not given (GPU transports: one per GPU)."""
        return 2

    @classmethod
    def host_bytes(cls, max_bytes: int, world_size: int) -> int:
        """Host memory one rank holds for sizes up to `max_bytes`: a send and a receive buffer."""
        return 2 * max_bytes if cls.buffers in ("host", "both") else 0

    @classmethod
    def gpu_bytes(cls, max_bytes: int, world_size: int) -> int:
        """GPU memory one rank holds for sizes up to `max_bytes` (0: none)."""
        return 2 * max_bytes if cls.buffers in ("gpu", "both") else 0

    @classmethod
    def resolve_options(cls, raw: dict) -> dict:
        """This transport's options, each in its type with its default filled in and
        checked against its declaration (Option.checked): the sweep calls it before any
        rank starts, and setup() reads ctx.options, which holds the same values."""
        raw = raw or {}
        return {o.dest: o.checked(o.default if raw.get(o.dest) is None else raw[o.dest]) for o in cls.options}

    @classmethod
    def check_options(cls, options: dict, max_bytes: int) -> None:
        """Checks that involve more than one option or the sweep's sizes (each option's own
        type, range and choices are declared on it); raise UsageError or TransportUnavailable."""

    def setup(self, ctx: RankContext) -> None:
        self.ctx = ctx

    def run(self, op: str, nbytes: int, iters: int, warmup: int, *,
            dtype: str = "float32", check: bool = False, mode: str = "bw",
            peer: int | None = None, role: str | None = None) -> RunResult:
        """Run `op` on `nbytes` (bytes per rank as defined by the op) `warmup`
        untimed then `iters` timed iterations. In pairwise patterns `peer` is the
        other rank and `role` is "src" (sender, whose record is kept) or "dst"."""
        raise NotImplementedError

    def teardown(self) -> None:
        pass

    def describe(self) -> dict:
        """Devices and library versions of this rank, recorded in the results."""
        return {}
