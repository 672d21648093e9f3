"""Validation: which links, ranks, devices or hosts are bad, and how sure that is.

    checks.py         `comm-bench validate`: a document against the rules, findings out
    rules.py          the rules (defaults in comm_bench/data/rules.yaml)
    finding_kinds.py  the kinds of findings and the exit status they give
    findings.py       findings extended by diagnosis, confirmed, with a confidence
    suspects.py       suspects of a first pass (rank 0 of a sweep, validate)
    pair_obs.py       first-pass pair figures as numpy columns (a streamed document's too)
    confirm.py        the confirm rounds a sweep runs (`sweep --confirm K`)
    verdicts.py       what the confirm records say about each suspect
    latency.py        the latency checks; latency_confirm.py: their confirm phase
    stats.py          the statistics the verdicts rest on
    trained_links.py  links trained below their peers, from the topology snapshots
    fabric.py         findings placed on the fabric (switch ports, named ends)
    output.py         the report as text (the console) and as JUnit XML (CI)
    drain.py          the bad nodes for the scheduler: drain list, scontrol, per-host verdicts
    said.py           what a sweep says of its results: validate's verdict, in one line
    baseline.py, compare.py   a run against a baseline; two runs side by side

May import results/ and the vocabulary; never run/, control/ or views/.
docs/validate-rules.md explains the method.
"""
