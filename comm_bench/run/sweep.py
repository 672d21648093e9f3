"""The sweep: what one rank does from rendezvous to the last record.
(One file over 400 lines: resolving the configuration, the rank's lifetime and the
record loop share SweepConfig and the store; split, each would import the others.)

Every rank runs the same loop; rank 0 also turns measurements into records,
prints the table and appends to the results file after each size (collective
pattern) or each round of pairs (pair patterns).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..results import data_error
from ..control import fd_limit, world_size as same_world
from .. import ops as ops_mod, registry
from . import resume
from ..errors import CommBenchError, Interrupted, TransportUnavailable, UsageError
from ..control.agent_store import attempt_store_address
from ..control.join import join
from .launch import LaunchInfo, own_address, rendezvous_address
from .limits import check_host
from ..metrics import make_record, slowest_per_iteration
from ..schedule import COST, DEFAULT_K, PATTERNS, my_pair, runs_as, schedule
from ..validate.confirm import DEFAULT_ALTERNATIONS
from .progress import Progress
from ..control.rendezvous import Store
from ..results.document import OUTPUT_CLAIMED_ENV, RUN_ID_ENV, ResultsWriter, claim_output, new_document
from ..control.secret import SECRET_ENV, SECRET_FILE_ENV, new_secret, run_secret
from ..views.table import Layout, footer, matrix, title
from ..transports.base import RankContext
from ..control.watchdog import Watchdog
from ..system.rank_health import HEALTH_ENV, RankHealth, block

# every timed iteration's sample reaches rank 0 (about 20 bytes of JSON each); this
# bounds that traffic and rank 0's memory per record
MAX_ITERS = 1_000_000
MAX_TIMEOUT_S = 1e6


@dataclass
class SweepConfig:
    transport: str
    ops: list
    sizes: list
    iters: int = 20
    warmup: int = 5
    check: bool = False
    dtype: str = "float32"
    redop: str = "sum"           # --redop (nccl-tests' -o): all_reduce, reduce, reduce_scatter
    root: int = 0                # --root (nccl-tests' -r): broadcast and reduce
    mode: str = "bw"
    pattern: str | None = None
    timeout: float = 60.0
    output: str = "results.json"
    options: dict = field(default_factory=dict)
    addr: str | None = None
    progress: bool = True
    force: bool = False          # replace -o whatever it holds (an earlier run's document is kept otherwise)
    oversubscribe: bool = False
    resume: bool = False         # continue an earlier attempt's -o document (resume.py)
    waived: list = field(default_factory=list)  # [{"op", "reason"}]: asked for, cannot run here
    confirm: int = DEFAULT_ALTERNATIONS   # pair patterns: re-measure suspects K times (as the CLI does)
    rules: str | None = None     # validate rules the confirm phase reads (None: the defaults)
    verdict: bool = True         # rank 0 prints validate's verdict of the file at the end (validate.said)
    runner: type | None = None   # another driver of the same rank life cycle (check)
    expect_busbw: float | None = None   # check: the collective's expected busbw (GB/s)
    localize: str = "auto"              # check: auto | always | never
    matchings: int = DEFAULT_K          # matchings / topology patterns: k (schedule.py)
    seed: int = 0                       # their random matchings' seed
    groups: str | None = None           # topology pattern: HOST LEAF [POD] file (groups.py)
    records: str = "inline"             # inline | jsonl (results_stream.py: DOC.records.jsonl)
    wrote: bool = False                 # rank 0: this run's document is at `output` (results_line)
    wide: bool = False                  # the tables' full nccl-tests form (--wide), else 80 columns


def resolve(cfg: SweepConfig, world_size: int):
    """Check the configuration against the transport; fill in the pattern. UsageError if bad."""
    cls = registry.get(cfg.transport)
    ok, why = cls.probe()
    if not ok:
        raise TransportUnavailable(f"transport '{cfg.transport}' is not available here: {why}")
    for op in cfg.ops:
        if op not in cls.ops:  # a typo, not a waiver
            raise UsageError(f"transport '{cfg.transport}' has no op '{op}'; it has: {', '.join(cls.ops)}")
    if cfg.mode not in cls.modes:
        raise UsageError(f"transport '{cfg.transport}' has no mode '{cfg.mode}'; it has: {', '.join(cls.modes)}")
    if cfg.dtype not in cls.dtypes:
        raise UsageError(f"transport '{cfg.transport}' does not take --dtype {cfg.dtype}; "
                         f"it takes: {', '.join(cls.dtypes)}")
    _check_redop_root(cfg, cls, world_size)
    elem = ops_mod.dtype_size(cfg.dtype)
    odd = [s for s in cfg.sizes if s % elem]
    if odd:
        raise UsageError(f"size {odd[0]} B is not a whole number of {cfg.dtype} elements ({elem} B each): "
                         f"choose -b/-e/-f that give multiples of {elem} B")
    if not (1 <= cfg.iters <= MAX_ITERS and 0 <= cfg.warmup <= MAX_ITERS):
        raise UsageError(f"--iters must be 1 to {MAX_ITERS} and --warmup_iters 0 to {MAX_ITERS}")
    if not 0 < cfg.timeout <= MAX_TIMEOUT_S:  # also refuses nan and inf
        raise UsageError(f"--timeout must be more than 0 and at most {MAX_TIMEOUT_S:.0f} seconds "
                         f"(got {cfg.timeout})")
    cfg.options = {**cfg.options, **cls.resolve_options(cfg.options)}
    cls.check_options(cfg.options, max(cfg.sizes))
    if cfg.pattern is None:
        collective = "collective" in cls.patterns and all(ops_mod.get(o).collective for o in cfg.ops)
        cfg.pattern = "collective" if collective else ("pair" if world_size == 2 else "pairwise")
    if cfg.pattern not in PATTERNS:
        raise UsageError(f"unknown --pattern '{cfg.pattern}'; choose one of: {', '.join(PATTERNS)}")
    if cfg.pattern == "topology" and not cfg.groups:
        raise UsageError("--pattern topology needs --groups FILE (HOST LEAF [POD] per line)")
    if runs_as(cfg.pattern) not in cls.patterns:
        raise UsageError(f"transport '{cfg.transport}' does not run --pattern {cfg.pattern}; "
                         f"it runs: {', '.join(cls.patterns)}")
    if cfg.pattern != "collective" and world_size < 2:
        raise UsageError(f"--pattern {cfg.pattern} needs at least 2 ranks (use --nprocs 2 or a launcher)")
    if cfg.runner is not None:  # another driver (check) runs each of its ops with its own pattern
        return cls
    # ops this pattern and mode cannot run are waived (recorded with the reason), unless none can
    if not cfg.ops:  # no --op given: the first op this pattern and mode run
        cfg.ops = [next((op for op in cls.ops if not cls.supports(op, cfg.pattern, cfg.mode)), cls.ops[0])]
    reasons = {op: cls.supports(op, cfg.pattern, cfg.mode) for op in cfg.ops}
    runnable = [op for op in cfg.ops if not reasons[op]]
    if not runnable:
        raise UsageError(reasons[cfg.ops[0]])
    cfg.waived = cfg.waived or [{"op": op, "reason": why} for op, why in reasons.items() if why]
    cfg.ops = runnable
    return cls


def _check_redop_root(cfg, cls, world_size):
    """--redop and --root against what the transport runs and the ranks there are."""
    if cfg.redop not in ops_mod.REDOPS:
        raise UsageError(f"--redop {cfg.redop}: use one of {', '.join(ops_mod.REDOPS)}")
    reducing = [o for o in cfg.ops or cls.ops if ops_mod.get(o).reduces]
    if cfg.redop != "sum" and reducing and cfg.redop not in cls.redops:
        raise UsageError(f"transport '{cfg.transport}' runs {reducing[0]} with --redop "
                         f"{', '.join(cls.redops)}, not {cfg.redop}")
    if not 0 <= cfg.root < world_size:
        raise UsageError(f"--root {cfg.root}: the root must be a rank, 0 to {world_size - 1}")


def document_options(cfg: SweepConfig) -> dict:
    """The sweep's settings as its results document records them."""
    options = {k: v for k, v in vars(cfg).items() if k not in ("options", "progress", "force", "runner", "wrote", "wide")}
    options["transport_options"] = cfg.options
    return options


def check_resumable(cfg: SweepConfig, world_size: int) -> None:
    """For the spawner: a --resume that cannot continue -o fails before any rank starts."""
    if cfg.resume:
        resume.previous(cfg.output, {"transport": cfg.transport, "world_size": world_size,
                                     "pattern": cfg.pattern, "options": document_options(cfg)})


@contextlib.contextmanager
def local_run(cfg: SweepConfig):
    """For the spawner: check and lock -o for the whole run (its ranks write under that
    lock; an earlier run's document there is kept, cfg.output becoming the numbered name
    taken instead), and hand the ranks a fresh store secret through their environment."""
    target = claim_output(cfg.output, cfg.force, keep=not cfg.resume)
    say_kept(cfg, target.path)
    cfg.output = target.path
    os.environ[OUTPUT_CLAIMED_ENV] = os.path.abspath(cfg.output)   # the ranks write there (claimed_output)
    os.environ[RUN_ID_ENV] = uuid.uuid4().hex  # the ranks write it; the spawner touches only that document
    if not os.environ.get(SECRET_ENV) and not os.environ.get(SECRET_FILE_ENV):
        os.environ[SECRET_ENV] = new_secret()
    try:
        yield
    finally:
        target.close()


def say_kept(cfg: SweepConfig, chosen: str) -> None:
    """One line at the start when -o holds another run's document, kept: where this run writes."""
    if chosen != cfg.output:
        how = "--force replaces it" + ("" if cfg.runner else ", --resume continues it")
        print(f"comm-bench: {cfg.output} is another comm-bench run's results, kept: this run writes "
              f"{chosen} ({how})", file=sys.stderr, flush=True)


def claimed_output(path: str) -> str:
    """The name a rank of this machine's spawner writes: the spawner claimed -o or a numbered
    name beside it (its ranks re-run the same command line, `-o results.json` included)."""
    claimed = os.environ.get(OUTPUT_CLAIMED_ENV)
    if not claimed or os.environ.get("COMM_BENCH_LAUNCHER") != "spawn":
        return path
    folder, name = os.path.split(claimed)
    stem, ext = os.path.splitext(os.path.basename(path))
    if folder != os.path.dirname(os.path.abspath(path)) or \
            not re.fullmatch(re.escape(stem) + r"(\.\d+)?" + re.escape(ext), name):
        return path
    return os.path.join(os.path.dirname(path), name)


def results_line(path: str, stream=None) -> None:
    """The run's last line: the file it wrote and the command to run next. Print nothing after it."""
    stream = stream or sys.stdout
    try:
        from ..views.table import prose
        print(prose(f"# results: {path} (next: comm-bench validate {shlex.quote(str(path))})"), file=stream, flush=True)
    except BrokenPipeError:     # `| head -1`: no reader left; the exit's own flush must not fail either
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def run_rank(cfg: SweepConfig, info: LaunchInfo) -> int:
    cfg.output = claimed_output(cfg.output)
    cls = resolve(cfg, info.world_size)
    check_host(cls, max(cfg.sizes), info.world_size, info.local_world_size, spawning=False,
               oversubscribe=cfg.oversubscribe)
    master, port = rendezvous_address(info)
    try:
        socket.getaddrinfo(master, port)
    except OSError as exc:
        raise UsageError(f"the rendezvous host MASTER_ADDR={master!r} does not resolve "
                         f"({exc.strerror or exc})") from None
    secret, source = run_secret(info)
    all_local = info.local_world_size >= info.world_size
    if info.agent_store:  # torchrun's store outlives an attempt: one of our own (agent_store.py)
        master, port = attempt_store_address(master, port, info.rank, info.world_size, cfg.timeout,
                                             secret)
    cls.before_rendezvous()
    fd_limit.raise_for(info.world_size, "rank 0" if info.rank == 0 else "rank")
    started = time.monotonic()
    store = Store(master, port, info.rank, info.world_size, cfg.timeout, secret=secret,
                  all_local=all_local, torch_store=cls.torch_store)
    if store.add(f"cb/claim/{info.rank}", 1) != 1:  # two processes launched with one RANK
        raise UsageError(f"another process already runs as rank {info.rank} of this run "
                         f"(at {master}:{port}): each rank needs its own RANK")
    same_world.post(store, info)
    store.joined = same_world.explained(store, info, lambda: join(store, started))
    if source == "derived" and info.rank == 0 and not all_local:
        print(f"comm-bench: note: the store's messages are sealed with a key derived from the launch "
              f"environment, not a secret: set {SECRET_FILE_ENV} (docs/reliability.md)", file=sys.stderr)
    me = {"rank": info.rank, "host": socket.gethostname(), "local_rank": info.local_rank,
          "pid": os.getpid(), "addr": own_address(master, cfg.addr)}
    table = same_world.explained(store, info, lambda: store.all_gather("cb/ranks", me))
    run = (cfg.runner or _RankRun)(cfg, info, cls, store, table)
    return run.execute()


class _RankRun:
    def __init__(self, cfg, info, cls, store, table):
        self.cfg, self.info, self.store, self.table = cfg, info, store, table
        self.rank, self.n = info.rank, info.world_size
        self.transport = cls()
        self.writer = None
        self.kept = []               # rank 0: the earlier attempt's records (--resume)
        self.done = set()            # every rank: resume.record_key of what is measured already
        self.wrong_found = []        # rank 0: data_error.entry of each record with wrong values
        self.lock = threading.Lock()
        self.elem = ops_mod.dtype_size(cfg.dtype)
        self.watchdog = Watchdog(store, self.rank, self.n, [t["host"] for t in table], cfg.timeout,
                                 on_abort=self._record_failure)

    # -- lifecycle --------------------------------------------------------------
    def execute(self) -> int:
        with _signals_end_the_run():
            rc = self._execute()
        if self.rank == 0 and self.writer is not None and self.cfg.verdict:
            self._say_verdict()
        return rc

    def _say_verdict(self) -> None:
        """Rank 0, after every rank has left: `comm-bench validate` of the document just
        written, in one line (validate.said): the sweep and validate say the same thing."""
        from ..validate.said import closing_line

        try:
            line = closing_line(self.writer.path, self.cfg.rules)
        except CommBenchError as exc:       # the run's figures are written; the verdict is validate's to give
            line = f"# verdict: not given ({exc}); run comm-bench validate {self.writer.path}"
        from ..views.table import prose
        print(prose(line), flush=True)      # 80 columns on a terminal, as every line of prose

    def _execute(self) -> int:
        self.watchdog.start()
        completed = False
        try:
            self._setup()
            if self.cfg.resume:
                self.done = self._share_done()
            self._sweep()
            self._record_health()
            # every rank learns whether the data was wrong: each exits 1 then, as nccl-tests does
            wrong = self.store.broadcast(0, "cb/data_error", data_error.summary(self.wrong_found)
                                         if self.rank == 0 else None)
            self.watchdog.finished()
            self.store.barrier("cb/end")
            # every rank is done: from here on rank 0 (the store's host) leaving is no failure
            self.watchdog.stop()
            if self.writer:
                self.progress.close()
                with self.lock:
                    self._note_rejected()
                    self.writer.close("ok")   # the measurement completed: its status says so
            completed = True
            return self._data_error_exit(wrong)
        except (CommBenchError, Interrupted) as exc:
            prior = self.watchdog.posted_failure()
            if prior:  # another rank failed first: this error is its consequence
                self.watchdog.stop_for(prior, linger=1.5 if self.rank == 0 else 0.0)
            msg = str(exc)
            self.watchdog.post_abort(f"failed: {msg}")
            self._record_failure({"rank": self.rank, "host": self.table[self.rank]["host"],
                                  "reason": msg})
            if self.rank == 0:
                time.sleep(1.5)  # keep the store up long enough for the others to read the abort
            raise
        finally:
            try:
                self.transport.teardown()
            finally:
                self.watchdog.stop()
                if completed:
                    self._leave_together()

    def _data_error_exit(self, wrong) -> int:
        """1 when the check found wrong values, the last line saying how many and where. Ranks of
        this machine's spawner exit 0: the spawner reads the document and says it last."""
        if not wrong:
            return 0
        if os.environ.get("COMM_BENCH_LAUNCHER") == "spawn":
            return 0
        if self.rank == 0:
            print(data_error.line(wrong, self.cfg.output), file=sys.stderr, flush=True)
        return 1

    def _record_health(self):
        """Every rank's after-sweep health reading into rank 0's document, beside its
        before-reading (every rank takes part in the gather, reading or not)."""
        after = self.health.after() if getattr(self, "health", None) else None
        got = self.store.gather_to(0, "cb/health", after)
        if self.rank != 0 or self.writer is None:
            return
        with self.lock:
            for entry in self.writer.meta.get("ranks") or []:
                i = entry.get("rank")
                if isinstance(i, int) and 0 <= i < len(got) and got[i] is not None:
                    before = {k: (v or {}).get("before") for k, v in (entry.get("health") or {}).items()}
                    entry.update(_health_field(before, got[i]))

    def _leave_together(self):
        """Rank 0 hosts the store and leaves last: a rank still tearing down must not find
        the store gone (ranks leave at once, without interpreter shutdown)."""
        try:
            if self.rank != 0:
                self.store.add("cb/left", 1)
                return
            deadline = time.monotonic() + min(10.0, self.cfg.timeout)
            while self.store.add("cb/left", 0) < self.n - 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        except Exception:  # noqa: BLE001 - the run is complete; leaving is all that is left
            pass

    def _note_rejected(self) -> None:
        """Values that failed authentication (forged, or replayed from another run) never
        reach the document; how many keys held one does."""
        if "rendezvous" in self.writer.meta:
            self.writer.meta["rendezvous"]["rejected_values"] = len(self.store.rejected)
        if self.store.rejected:
            print(f"comm-bench: rank 0 rejected values under {len(self.store.rejected)} store key(s) "
                  "that were not sealed in this run (forged or replayed; docs/reliability.md)",
                  file=sys.stderr, flush=True)

    def _record_failure(self, failure: dict) -> None:
        if self.writer:
            with self.lock:
                self._note_rejected()
                self.progress.close()
                self.writer.close("failed", failure)
                self.writer = None

    def _setup(self):
        cfg, info = self.cfg, self.info
        ctx = RankContext(rank=self.rank, world_size=self.n, local_rank=info.local_rank,
                          local_world_size=info.local_world_size, host=self.table[self.rank]["host"],
                          addr=self.table[self.rank]["addr"], store=self.store, timeout=cfg.timeout,
                          options=dict(cfg.options), max_bytes=max(cfg.sizes), ops=tuple(cfg.ops),
                          redop=cfg.redop, root=cfg.root)
        self.transport.setup(ctx)
        devices = self.transport.describe()
        # read after setup (the GPU or port is chosen), before the first measurement
        self.health = RankHealth(devices) if os.environ.get(HEALTH_ENV, "1") != "0" else None
        described = self.store.gather_to(0, "cb/describe", {
            "devices": devices, "health": self.health.before() if self.health else None,
            "topology": _topology_snapshot() if info.local_rank == 0 else None})
        self.rounds = self._schedule()
        if self.rank != 0:
            return
        ranks = [dict(t, devices=d["devices"], **_health_field(d.get("health"), None))
                 for t, d in zip(self.table, described)]
        self.devices = [d["devices"] for d in described]
        hosts = {}
        for t, d in zip(self.table, described):
            h = hosts.setdefault(t["host"], {"host": t["host"], "ranks": [], "topology": None})
            h["ranks"].append(t["rank"])
            h["topology"] = h["topology"] or d["topology"]
        doc = new_document(transport=cfg.transport, world_size=self.n, pattern=cfg.pattern,
                           options=document_options(cfg), ranks=ranks, hosts=list(hosts.values()),
                           link_kind=self.transport.link_kind)
        if cfg.pattern in COST:
            doc["schedule"] = {"pattern": cfg.pattern, "rounds": len(self.rounds), "cost": COST[cfg.pattern],
                               "pairs": sum(len(r) for r in self.rounds), "all_pairs": self.n * (self.n - 1)}
        if self.fabric:
            doc["fabric"] = self.fabric
        if self.store.joined:
            doc["rendezvous"] = dict(self.store.joined, rejected_values=0)
        previous = resume.previous(cfg.output, doc) if cfg.resume else None
        if previous:
            self.kept = resume.renumbered(previous, doc, cfg.output)
            doc = resume.continued(previous, doc, self.kept)
            self.wrong_found = [data_error.entry(r) for r in self.kept if data_error.has_wrong(r)]
        doc["data_error"] = data_error.summary(self.wrong_found)
        writer = ResultsWriter
        if cfg.records == "jsonl":
            from ..results.document import StreamingWriter as writer
        # (rank 0 alone names the file: the other ranks never write it)
        self.writer = writer(cfg.output, doc, force=cfg.force, records=self.kept, keep=not cfg.resume)
        say_kept(cfg, self.writer.path)
        cfg.output, cfg.wrote = self.writer.path, True
        self.writer.meta["options"] = dict(doc["options"], output=cfg.output)
        self.nhosts = len(hosts)
        self.progress = Progress(self._work(), enabled=cfg.progress)

    def _schedule(self) -> list:
        """This run's rounds, the same on every rank (the topology pattern's groups file is
        read by rank 0 and broadcast). Sets self.fabric (the groups, for the document, with
        any pair pattern: validate names a bad switch uplink from it)."""
        cfg, self.fabric = self.cfg, None
        if cfg.pattern == "collective":
            return []
        groups = None
        if cfg.groups:      # the topology pattern pairs by it; every pattern records it
            from .groups import fabric_description, parse_groups, rank_groups
            mapping = parse_groups(cfg.groups) if self.rank == 0 else None
            mapping = {h: list(g) for h, g in (self.store.broadcast(0, "cb/groups", mapping) or {}).items()}
            groups = rank_groups([t["host"] for t in self.table], mapping)
            self.fabric = fabric_description(mapping)
        return schedule(cfg.pattern, self.n, k=cfg.matchings, seed=cfg.seed,
                        groups=groups if cfg.pattern == "topology" else None)

    def _share_done(self) -> set:
        """Rank 0's list of what the earlier attempt measured, on every rank."""
        keys = None
        if self.rank == 0 and self.kept:
            keys = [resume.record_key(r) for r in self.kept]
            self.progress.line(f"# resumed: {len(keys)} record(s) of the earlier attempt kept, "
                               "not measured again")
        return {tuple(k) for k in self.store.broadcast(0, "cb/done", keys) or ()}

    def _skip(self, keys, description) -> bool:
        """True if every key was measured by an earlier attempt (the same on every rank)."""
        if not all(k in self.done for k in keys):
            return False
        if self.rank == 0:
            self.progress.advance(description, len(keys))
        return True

    def _work(self) -> int:
        """The records the first pass writes (one per pair of a round, per size): the bar's
        total, which the confirm phase grows by its own measurements when it plans them."""
        per_size = 1 if self.cfg.pattern == "collective" else sum(len(pairs) for pairs in self.rounds)
        return sum(len(self.sizes(op)) for op in self.cfg.ops) * per_size

    def sizes(self, op):
        """(S, requested sizes) for op: collectives round for all ranks, pair ops for two."""
        n = self.n if self.cfg.pattern == "collective" else 2
        return ops_mod.get(op).plan_sizes(self.cfg.sizes, n, self.elem)

    # -- what the confirm phase uses (pair_runner.PairRunner) ---------------------
    def document(self, op=None):
        return dict(self.writer.meta, results=[r for r in map(json.loads, self.writer.records)
                                               if op is None or r.get("op") == op])

    def share(self, key, value):
        return self.store.broadcast(0, key, value)

    def step_done(self, key):
        self.store.barrier(key)

    def still_working(self):
        self.store.progressing()

    def say(self, line):
        self.progress.line(line)

    def add_work(self, steps):
        self.progress.grow(steps)

    # -- the loops --------------------------------------------------------------
    def _sweep(self):
        if self.rank == 0:
            for w in self.cfg.waived:
                self.progress.line(f"# waived: {w['op']}: {w['reason']}")
        for op in self.cfg.ops:
            if self.rank == 0:
                for size, asked in self.sizes(op):
                    if asked != [size]:
                        self.progress.line(f"# {' and '.join(f'{a} B' for a in asked)} measured as {size} B "
                                           f"(whole elements on every rank)")
            self._table_head(op)
            if self.cfg.pattern == "collective":
                for size, asked in self.sizes(op):
                    self._collective(op, size, asked)
            else:
                for idx, pairs in enumerate(self.rounds):
                    for size, asked in self.sizes(op):
                        self.measure_pairs(op, size, idx, pairs, asked)
                if self.cfg.confirm:
                    from .confirm_phase import run_phase
                    run_phase(self, op, first_round=len(self.rounds))
            if self.rank == 0:
                for line in footer(self._printed, self.cfg.mode) + matrix(self._printed, self.n, self.cfg.mode,
                                                                           self.cfg.wide):
                    self.progress.line(line)

    def _table_head(self, op):
        """Rank 0 prints op's title and header (the columns of the pattern the run has now),
        and, once per run, what the table leaves out for lack of samples."""
        self._printed = []      # (busbw, wrong) of this op's rows, for the footer
        if self.rank != 0:
            return
        cfg = self.cfg
        self.layout = Layout(cfg.mode, cfg.iters, pairs=cfg.pattern != "collective", wide=cfg.wide)
        self.progress.line(title(op, cfg.transport, cfg.pattern, cfg.mode, self.n, self.nhosts))
        for line in (self.layout.about(op, cfg.dtype, cfg.redop, cfg.root),
                     None if getattr(self, "_noted", False) else self.layout.note(), *self.layout.header()):
            if line:
                self.progress.line(line)
        self._noted = True

    def _run(self, op, size, peer=None, role=None, iters=None):
        cfg = self.cfg
        return self.transport.run(op, size, iters or cfg.iters, cfg.warmup, dtype=cfg.dtype, check=cfg.check,
                                  mode=cfg.mode, peer=peer, role=role)

    def _collective(self, op, size, asked):
        if self._skip([(op, size, None, None)], f"{op} {size} B"):
            return
        res = self._run(op, size)
        got = self.store.gather_to(0, "cb/res", _measured(res))
        if self.rank == 0:
            samples = slowest_per_iteration([g["samples"] for g in got])
            means = [g["mean_us"] for g in got if g["mean_us"] is not None]
            self._emit(make_record(
                transport=self.cfg.transport, op=op, mode=self.cfg.mode, pattern="collective",
                size=size, dtype=self.cfg.dtype, iters=self.cfg.iters, warmup=self.cfg.warmup,
                n=self.n, samples_us=samples, wrong=self._wrong(g["wrong"] for g in got),
                extra=got[0]["extra"], elem=self.elem, round_trip=got[0]["round_trip"],
                mean_us=_ranks_time(op, means, got[0]["extra"].get("average")), both_directions=got[0]["both_directions"],
                redop=self.cfg.redop, root=self.cfg.root),
                f"{op} {size} B", asked, ranks={i: g["wrong"] for i, g in enumerate(got)})

    def _wrong(self, counts):
        """The record's wrong values: the ranks' counts added up, or None when unchecked."""
        return sum(counts) if self.cfg.check else None

    def measure_pairs(self, op, size, round_idx, pairs, asked, tag=None, iters=None):
        # (confirm-phase re-measurements, tagged, are never an earlier attempt's records)
        if tag is None and self._skip([(op, size, s, d) for s, d in pairs], f"{op} {size} B round {round_idx}"):
            return
        peer, role = my_pair(pairs, self.rank)
        res = self._run(op, size, peer, role, iters) if peer is not None else None
        got = self.store.gather_to(0, "cb/res", None if res is None else _measured(res))
        if self.rank != 0:
            return
        for src, dst in pairs:
            if tag is None and (op, size, src, dst) in self.done:   # kept from an earlier attempt's partial round
                continue
            s, d = got[src], got[dst]
            rec = make_record(
                transport=self.cfg.transport, op=op, mode=self.cfg.mode, pattern=self.cfg.pattern,
                size=size, dtype=self.cfg.dtype, iters=iters or self.cfg.iters, warmup=self.cfg.warmup,
                n=2, samples_us=s["samples"], wrong=self._wrong((s["wrong"], d["wrong"])), extra=s["extra"],
                elem=self.elem, round_trip=s["round_trip"], mean_us=s["mean_us"],
                reverse_mean_us=d["mean_us"] if d["extra"].get("direction") == "dst->src" else None,
                both_directions=s["both_directions"], peak_gbps=s["peak_gbps"])
            if d["extra"]:
                rec["extra"]["dst"] = d["extra"]
            rec.update(src=src, dst=dst, src_host=self.table[src]["host"], dst_host=self.table[dst]["host"],
                       src_device=self.devices[src].get("device"), dst_device=self.devices[dst].get("device"),
                       round=round_idx)
            rec.update(tag or {})
            self._emit(rec, f"{op} {size} B {src}->{dst}", asked)

    def _emit(self, record, description, asked, ranks=None):
        if asked != [record["size"]]:
            record["requested_sizes"] = asked   # the sizes asked for that round to this one
        with self.lock:
            if self.writer is None:
                return
            if data_error.has_wrong(record):   # in the document with the record that shows it
                self.wrong_found.append(data_error.entry(record, ranks))
                self.writer.meta["data_error"] = data_error.summary(self.wrong_found)
            # a SIGTERM (from the local parent) waits until the record is whole
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
            try:
                self.writer.append(record)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        self.store.progressing()    # the others' wait for rank 0's next broadcast goes on while it writes
        self.progress.line(self.layout.row(record))
        self._printed.append({k: record.get(k) for k in ("busbw", "wrong", "src", "dst", "size", "latency_us")})
        self.progress.advance(description)


@contextlib.contextmanager
def _signals_end_the_run():
    """Under a launcher (srun, torchrun, mpirun) SIGTERM/SIGHUP reach the ranks directly:
    they end the run like a failure (the document marked failed with what it holds, the
    other ranks told). Ranks this machine's spawner started leave that to the spawner."""
    if os.environ.get(OUTPUT_CLAIMED_ENV) or threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, _frame):
        raise Interrupted(signum)
    old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _ranks_time(op, means, average=None):
    """One time from the ranks' batch times (in rank order): a collective's is their average,
    as nccl-tests reports it; local copies running on every GPU at once take as long as the
    slowest. `average`: nccl-tests' -a where the transport offers it (0 rank 0's time,
    1 the mean, 2 the fastest rank's, 3 the slowest rank's)."""
    if not means:
        return None
    if average is not None:
        return [means[0], sum(means) / len(means), min(means), max(means)][int(average)]
    return sum(means) / len(means) if op in ops_mod.OPS else max(means)


def _measured(res) -> dict:
    """One rank's RunResult as it travels to rank 0 through the store."""
    return {"samples": res.samples_us, "wrong": res.wrong, "extra": res.extra,
            "round_trip": res.round_trip, "mean_us": res.mean_us,
            "both_directions": res.both_directions, "peak_gbps": res.peak_gbps}


def _health_field(before, after) -> dict:
    """{"health": block} for a rank entry, or {} (no GPU or RDMA port read: no key at all)."""
    b = block(before, after)
    return {"health": b} if b else {}


def _topology_snapshot():
    """This host's topology for the results, if the topology package can read it."""
    try:
        from ..topology import snapshot
    except ImportError:
        return None
    try:
        return snapshot()
    except Exception as exc:  # noqa: BLE001 - topology is context, never a reason to fail a sweep
        print(f"comm-bench: topology not recorded: {exc}", file=sys.stderr)
        return None
