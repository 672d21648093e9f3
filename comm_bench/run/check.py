"""`comm-bench check`: the collective first, then localize.

Every rank runs the quick collective test (all_reduce over the given sizes). Rank 0
compares its busbw at the largest size with the expectation (--expect-busbw, else the
expected minimum of the slowest link its ring crosses, from validate's rules) and tells
every rank whether to localize: n-1 rounds of disjoint pairs, each in both directions
(pattern pairwise-concurrent, largest size only), then the confirm phase on the suspects.
One results document holds it all; `validate` (run by `check` itself) names the link,
host or GPU.
"""
from __future__ import annotations

from ..schedule import schedule
from .sweep import _RankRun
from ..views.table import prose
from .confirm_phase import run_phase

PAIR_PATTERN = "pairwise-concurrent"


class CheckRun(_RankRun):
    """The sweep's rank life cycle with check's plan (cfg.ops = [collective op, pair op])."""

    def _work(self) -> int:
        """The collective's sizes; the pair rounds, when check decides on them, grow the bar."""
        return len(self.sizes(self.cfg.ops[0]))

    def _sweep(self):
        cfg = self.cfg
        coll, pair = cfg.ops
        cfg.pattern = "collective"
        self._table_head(coll)
        for size, asked in self.sizes(coll):
            self._collective(coll, size, asked)
        decision = self._decide(coll) if self.rank == 0 else None
        decision = self.store.broadcast(0, "cb/check/decision", decision)
        cfg.pattern = PAIR_PATTERN
        if not decision["localize"]:
            return
        rounds = schedule(PAIR_PATTERN, self.n)
        if self.rank == 0:
            self.progress.grow(sum(len(pairs) for pairs in rounds))
        self._table_head(pair)
        size, asked = self.sizes(pair)[-1]
        for idx, pairs in enumerate(rounds):
            self.measure_pairs(pair, size, idx, pairs, asked)
        if cfg.confirm:
            run_phase(self, pair, first_round=len(rounds))

    def _decide(self, op):
        """Rank 0: {"localize": bool, "why": text}."""
        from ..results.records import measured_gbs
        from ..topology.linkmap import LinkMap
        from ..validate.checks import collective_checks
        from ..validate.rules import load_rules

        doc = self.document()
        recs = [r for r in doc["results"] if r.get("op") == op and r.get("pattern") == "collective"]
        got = measured_gbs(max(recs, key=lambda r: r["size"])) if recs else None
        expect = self.cfg.expect_busbw
        if expect is None:
            checked = collective_checks(doc, LinkMap(doc), load_rules(self.cfg.rules), self.cfg.transport)["checked"]
            expect = next((c["expected_gbs"] for c in checked if c["op"] == op), None)
        mode = self.cfg.localize
        if got is None:
            why, below = "the collective gave no bandwidth", True
        elif expect is None:
            why, below = f"busbw {got:.3g} GB/s, no expectation known (give --expect-busbw)", True
        else:
            below = got < expect
            why = f"busbw {got:.3g} GB/s is {'below' if below else 'at or above'} the expected {expect:.3g} GB/s"
        localize = mode == "always" or (mode == "auto" and below)
        # prose: wrapped on a terminal, one whole line into a pipe or file (for grep)
        self.progress.line(prose(f"# check: {op} {why}: "
                                 f"{'localizing with ' + PAIR_PATTERN + ' rounds' if localize else 'not localizing'}"))
        return {"localize": localize, "why": why}
