"""A whole simulated run: the schedule's rounds, then the confirm phase (the sweep's own
run.confirm_phase.run_phase, driven through SimRun), written as a results document whose
records stream to a JSON Lines file beside it."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from .. import ops as ops_mod, registry
from ..validate.confirm import DEFAULT_ALTERNATIONS
from ..results.document import new_document, now_iso
from ..results.stream import RecordStream
from ..schedule import COST, distances, rounds_count, schedule
from .measure import run_round


@dataclass
class SimConfig:
    pattern: str = "matchings"
    k: int = 4
    sizes: tuple = (64 << 20,)
    iters: int = 20
    warmup: int = 5
    confirm: int = DEFAULT_ALTERNATIONS
    rules: str | None = None
    mode: str = "bw"
    seed: int = 0
    transport: str = "rdma"
    op: str = "write"
    dtype: str = "float32"


class SimRun:
    """A one-process run on the simulated fabric, as the confirm phase sees a sweep
    (run.pair_runner.PairRunner): rank 0 is every rank, so sharing returns the value and
    nobody waits at a step; measure_pairs measures on the fabric instead of a transport."""

    rank = 0

    def __init__(self, fabric, cfg: SimConfig, meta, stream, echo):
        self.fabric, self.cfg, self.meta, self.stream, self.say = fabric, cfg, meta, stream, echo
        self.records: list[str] = []       # JSON lines, as the sweep's writers keep them
        self.rng = np.random.default_rng(cfg.seed)
        self.elem = ops_mod.dtype_size(cfg.dtype)
        self.clock = 0.0            # simulated seconds since the start
        self.rounds = 0
        self.pairs_measured = 0

    def sizes(self, op):
        return [(s, [s]) for s in self.cfg.sizes]

    def measure_pairs(self, op, size, round_idx, pairs, asked, tag=None, iters=None):
        meta = {"transport": self.cfg.transport, "op": op, "pattern": self.meta["pattern"],
                "dtype": self.cfg.dtype, "elem": self.elem, "round": round_idx, "tag": tag}
        recs, seconds = run_round(self.fabric, self.rng, pairs, size, iters or self.cfg.iters,
                                  self.cfg.warmup, self.clock, meta)
        self.clock += seconds
        self.rounds += 1
        self.pairs_measured += len(pairs)
        self.stream.append(recs)
        # kept as JSON lines, as the sweep's writers keep them: a record is ~0.5 kB so, ~4 kB as a
        # dict, and a large pairwise-concurrent first pass holds millions
        self.records += [json.dumps(r, separators=(",", ":")) for r in recs]

    def document(self, op=None):
        return dict(self.meta, results=[r for r in map(json.loads, self.records) if op is None or r.get("op") == op])

    def share(self, _key, value):
        return value

    def step_done(self, _key):
        """Nobody else to wait for."""

    def still_working(self):
        """Nobody waits on rank 0's progress."""

    def add_work(self, _steps):
        """No bar here."""


def simulate(fabric, cfg: SimConfig, out: str, force: bool = False, echo=print) -> dict:
    """Run it, write `out` (+ out.records.jsonl); returns the document (records excluded)."""
    from ..run.confirm_phase import run_phase
    from ..results.document import claim_output

    n = fabric.nodes
    groups = fabric.groups()
    ranks = [{"rank": r, "host": fabric.host(r), "local_rank": 0, "pid": 0, "addr": None,
              "devices": {"device": "mlx5_0"}} for r in range(n)]
    hosts = [{"host": fabric.host(r), "ranks": [r], "topology": None} for r in range(n)]
    options = {"sizes": list(cfg.sizes), "iters": cfg.iters, "warmup": cfg.warmup, "k": cfg.k,
               "seed": cfg.seed, "confirm": cfg.confirm}
    doc = new_document(transport=cfg.transport, world_size=n, pattern=cfg.pattern, options=options,
                       ranks=ranks, hosts=hosts, link_kind=registry.get(cfg.transport).link_kind)
    target = claim_output(out, force)      # checked and locked, as the sweep's -o
    try:
        stream = RecordStream(out, force=force)
    except BaseException:
        target.close()
        raise
    try:
        doc.update(simulated=True, fabric=fabric.describe(), records_file=stream.name,
                   simulation={"faults": [f.describe() for f in fabric.faults]}, results=[])
        target.replace(json.dumps(doc, indent=1).encode())
        run = SimRun(fabric, cfg, doc, stream, echo)
        t0 = time.monotonic()
        rounds = schedule(cfg.pattern, n, k=cfg.k, seed=cfg.seed, groups=groups)
        for idx, pairs in enumerate(rounds):
            for size, asked in run.sizes(cfg.op):
                run.measure_pairs(cfg.op, size, idx, pairs, asked)
        per_round = run.clock / max(1, run.rounds)   # a first-pass round's mean time
        first = {"rounds": run.rounds, "pairs": run.pairs_measured, "predicted_s": round(run.clock, 3)}
        if cfg.confirm:
            run_phase(run, cfg.op, first_round=len(rounds))
        levels = len(distances(groups)) if cfg.pattern == "topology" else 1
        doc["simulation"].update(
            cost=COST.get(cfg.pattern), first_pass=first,
            confirm={"rounds": run.rounds - first["rounds"], "pairs": run.pairs_measured - first["pairs"],
                     "predicted_s": round(run.clock - first["predicted_s"], 3)},
            rounds=run.rounds, predicted_wall_s=round(run.clock, 3), all_pairs=n * (n - 1),
            # the same rounds' mean time, for the patterns that measure every pair
            pairwise_concurrent_predicted_s=round(per_round * rounds_count("pairwise-concurrent", n) * len(cfg.sizes), 1),
            pairwise_predicted_s=round(per_round * rounds_count("pairwise", n) * len(cfg.sizes), 1),
            pairwise_concurrent_rounds=rounds_count("pairwise-concurrent", n) * len(cfg.sizes),
            schedule_rounds=rounds_count(cfg.pattern, n, cfg.k, levels) * len(cfg.sizes),
            simulated_in_s=round(time.monotonic() - t0, 2))
        doc.update(status="ok", finished=now_iso())
        stream.close()
        target.replace(json.dumps(doc, indent=1).encode(), sync=True)
    finally:
        stream.close()
        target.close()
    return doc
