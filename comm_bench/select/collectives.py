"""Collective cost models (Thakur, Rabenseifner & Gropp 2005; Hockney alpha-beta).

S is the size column (docs/internal-contracts.md): bytes per rank for all_reduce and p2p, bytes
x n (the whole gathered / scattered buffer) for all_gather and reduce_scatter.
alpha in seconds per step, beta in bytes/s per link (the bus bandwidth). One step:

    ring all_reduce            2(n-1) (alpha + S/(n beta))
    ring all_gather / r_s      (n-1) (alpha + S/(n beta))
    pairwise alltoall          (n-1) (alpha + S/(n beta))   (S: a rank's whole send buffer)
    p2p                        alpha + S/beta
    binomial tree all_reduce   2 ceil(log2 n) (alpha + S/beta)   (reduce + broadcast)

NCCL picks the faster algorithm, so predictions take the smaller of ring and tree.
k_beta is the op's bus factor (comm_bench.ops, nccl-tests'); k_alpha the ring's steps.
"""
from __future__ import annotations

import math

from .. import ops as O

RING_STEPS = {"all_reduce": lambda n: 2.0 * (n - 1), "all_gather": lambda n: float(n - 1),
              "reduce_scatter": lambda n: float(n - 1), "alltoall": lambda n: float(n - 1)}
OPS = tuple(RING_STEPS) + ("p2p",)
# the measured ops that time one message one way between two ranks (a pipeline send):
# not the copy-engine peer copies or the bidirectional runs, whose figures mean other things
ONE_WAY_MESSAGES = ("sendrecv", "send", "write", "write_imm", "read", "p2p")


def model_op(name):
    """The cost-model op of a measured record's op: a collective with a ring model, "p2p"
    for a one-way message, else None (not fitted)."""
    if name in RING_STEPS:
        return name
    return "p2p" if name in ONE_WAY_MESSAGES else None


def terms(op, n):
    """(k_alpha, k_beta): ring time = k_alpha alpha + k_beta S/beta."""
    if op == "p2p":
        return 1.0, 1.0
    if n <= 1:
        return 0.0, 0.0
    if op not in RING_STEPS:
        raise ValueError(f"no cost model for op {op!r}")
    return RING_STEPS[op](n), O.OPS[op].bus_factor(n)


def ring(op, S, n, alpha, beta):
    ka, kb = terms(op, n)
    return ka * alpha + kb * S / beta


def tree_all_reduce(S, n, alpha, beta):
    if n <= 1:
        return 0.0
    return 2.0 * math.ceil(math.log2(n)) * (alpha + S / beta)


def flat(op, S, n, alpha, beta):
    """The faster of ring and (for all_reduce) tree, as NCCL chooses."""
    t = ring(op, S, n, alpha, beta)
    if op == "all_reduce":
        t = min(t, tree_all_reduce(S, n, alpha, beta))
    return t


def hierarchical_stages(op, S, n_intra, n_inter):
    """[(op, S, n, scope)] of a collective over n_intra GPUs on each of n_inter nodes:
    all_reduce = intra reduce_scatter + inter all_reduce on S/n_intra + intra all_gather;
    all_gather = inter all_gather of S/n_intra + intra all_gather of S;
    reduce_scatter = intra reduce_scatter of S + inter reduce_scatter of S/n_intra;
    alltoall = inter alltoall of S over n_inter (the (n_inter - 1)/n_inter of S that leaves the
    node crosses the network; the node's own share goes over NVLink at the same time)."""
    if op == "alltoall":
        return [("alltoall", S, n_inter, "inter-node")]
    if op == "all_reduce":
        return [("reduce_scatter", S, n_intra, "intra-node"), ("all_reduce", S / n_intra, n_inter, "inter-node"),
                ("all_gather", S, n_intra, "intra-node")]
    if op == "all_gather":
        return [("all_gather", S / n_intra, n_inter, "inter-node"), ("all_gather", S, n_intra, "intra-node")]
    if op == "reduce_scatter":
        return [("reduce_scatter", S, n_intra, "intra-node"), ("reduce_scatter", S / n_intra, n_inter, "inter-node")]
    return [(op, S, 2, "inter-node")]


def busbw_gbs(op, S, n, t):
    """nccl-tests bus bandwidth (GB/s) of one op of size S taking t seconds."""
    if t <= 0:
        return float("inf")
    ka, kb = terms(op, n)
    return S / t * (kb if op != "p2p" else 1.0) / 1e9
