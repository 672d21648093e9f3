"""The confirm phase, run: after the first pass of a pair op, rank 0 finds the suspects
and plans their rounds (validate.confirm's pure functions), every rank re-measures them
one pair a round, and rank 0 says what validate makes of them (validate.said). It drives
the run only through the PairRunner interface (pair_runner.py)."""
from __future__ import annotations

from typing import Any

from .pair_runner import PairRunner


def run_phase(run: PairRunner, op: str, first_round: int = 0) -> None:
    """Every rank, after the first pass of pair op (rounds 0 .. first_round - 1)."""
    from ..topology.linkmap import LinkMap
    from ..validate.confirm import plan, span_iters, suspects_of
    from ..validate.rules import load_rules
    from ..views.table import prose       # 80 columns on a terminal, whole lines into a pipe

    rounds: list[Any] | None = None
    sus: list[dict[str, Any]] = []      # rank 0's: the others get the rounds alone
    good: list[int] = []
    rules: dict[str, Any] = {}
    mode = run.cfg.mode
    if run.rank == 0:
        rules = load_rules(run.cfg.rules)
        # a beat before finding the suspects of a large first pass (a long step of its own):
        # the others then wait at least one more --timeout for the plan
        run.still_working()
        doc = run.document()
        sus, good, times = suspects_of(doc, rules, mode, op)
        for s, t_us in zip(sus, times):
            s["iters"] = span_iters(run.cfg.iters, t_us)
        rounds = plan(sus, good, run.cfg.confirm, LinkMap(doc))
        if sus:
            names = ", ".join(f"rank {s['rank']}" if s["kind"] == "rank" else f"pair {s['src']}->{s['dst']}"
                              for s in sus)
            run.say(prose(f"# confirm: re-measuring {names} against known-good pairs ({len(rounds)} measurements)"))
            run.add_work(len(rounds))      # the bar's total counts them too
    rounds, at = run.share(f"cb/confirm/{op}", (rounds, [s.get("size") for s in sus]) if run.rank == 0 else None)
    # bandwidth: the largest size (the figure a link is judged by); latency: the smallest,
    # or the size validate quotes a pair at
    sizes = run.sizes(op)
    asked_at = dict(sizes)
    default = sizes[0 if mode == "lat" else -1][0]
    for idx, (src, dst, tag, iters) in enumerate(rounds):
        size = at[tag["id"]] if at[tag["id"]] in asked_at else default
        run.measure_pairs(op, size, first_round + idx, [(src, dst)], asked_at[size], tag={"confirm": tag}, iters=iters)
        # one pair a round: the other ranks wait here for each one, not for the whole phase at
        # the run's end (a phase of slow pairs can outlast --timeout; one of its rounds cannot)
        run.step_done(f"cb/confirm/{op}/round")
    if run.rank == 0:
        from ..validate.said import confirm_line

        run.say(prose(confirm_line(sus, good, run.document(op), rules, mode)))
