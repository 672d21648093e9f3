"""Diagnosis beyond one pass of thresholds: suspects from a sweep's first pass, a confirm
phase that re-measures them alternating with known-good pairs, instability, topology
findings, and how sure each finding is.

    suspects.find(doc, rules)        -> suspects of a first pass (rank 0 of a sweep, validate)
    confirm.plan(...) / run_phase()  -> the confirm rounds a sweep runs (`sweep --confirm K`)
    verdicts.judge(doc, rules)       -> what the confirm records say about each suspect
    topology.findings(doc)           -> links trained below their peers (before any traffic)
    findings.extend(...)             -> validate's findings, confirmed, with a confidence

docs/validate-rules.md explains the method.
"""
