"""A SIMULATED fabric, for tests and planning at scale (`comm-bench simulate`).

It is never a stand-in for a real transport: its documents say "simulated": true and
its records carry extra.simulated. It drives the same schedule (comm_bench.schedule),
record builder (metrics.make_record), confirm phase (run/confirm_phase.py, through the
declared run/pair_runner.py interface), validate and
heatmap code that real ranks' documents go through, so 1,024-4,096 nodes run in seconds.

    fabric.Fabric     a two- or three-tier fat-tree, per-link rates, oversubscription,
                      noise, and injected faults (slow host, slow link, flapping link,
                      bad switch port)
    measure.py        one round of pairs on it: per-iteration times on a simulated clock
    run.py            the whole run: first pass, confirm phase, the results document

May import run/ (the confirm phase), results/, validate/ (the routing its documents name)
and the vocabulary; only commands/simulate.py imports it.
"""
