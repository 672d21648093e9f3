"""Small exact tests: how sure a finding is (no scipy)."""
from __future__ import annotations

import math
import statistics

import numpy as np

MAD_SCALE = 1.4826   # MAD x this estimates the standard deviation of normal noise
EXACT_MAX = 25      # exact signed-rank distribution up to this many values (2^25 sums is cheap as a DP)


def signed_rank_p(diffs):
    """One-sided Wilcoxon signed-rank p-value that the diffs are centred below 0 (exact,
    ties and zeros by the average-rank / drop-zeros convention). 1.0 with no data."""
    d = [x for x in diffs if x != 0 and math.isfinite(x)]
    n = len(d)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    i = 0
    while i < n:                     # average ranks over ties of |d|
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    w_pos = sum(r for r, x in zip(ranks, d) if x > 0)     # small W+ = evidence for "below"
    if n <= EXACT_MAX:
        # doubled ranks are integers (ties give halves): count sign assignments with W+ <= w_pos
        ints = [int(round(2 * r)) for r in ranks]
        total = sum(ints)
        counts = [0] * (total + 1)
        counts[0] = 1
        for r in ints:
            for s in range(total, r - 1, -1):
                counts[s] += counts[s - r]
        limit = int(round(2 * w_pos))
        return sum(counts[:limit + 1]) / float(2 ** n)
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return 0.5 * math.erfc(-((w_pos + 0.5 - mean) / sd) / math.sqrt(2))


def confidence(p):
    """A finding's confidence: 1 - p of its test, rounded for reading."""
    return round(max(0.0, min(1.0, 1.0 - p)), 4)


def log_ratios(values, reference):
    return [math.log(v / reference) for v in values if v > 0 and reference > 0]


def gmean(values):
    vals = [v for v in values if v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None


def robust_z(values):
    """Robust z of each value (median / MAD); inf where MAD is 0 and the value differs.
    numpy: a group of a full 1,024-rank run holds a million pairs."""
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    mad = MAD_SCALE * float(np.median(np.abs(x - med)))
    zs = (x - med) / mad if mad > 0 else np.where(x == med, 0.0, np.copysign(np.inf, x - med))
    return zs.tolist(), med


def robust_low(values, z, ratio):
    """Indices of low outliers among positive values: robust z of log(value) (median /
    MAD; bandwidth noise is multiplicative) > z, and value < ratio x median.
    Returns (indices, median, MAD of the logs)."""
    x = np.asarray(values, dtype=float)
    if not len(x):
        return [], None, None
    med = float(np.median(x))
    logs = np.log(np.maximum(x, 1e-12))
    lmed = float(np.median(logs))
    mad = float(np.median(np.abs(logs - lmed)))
    if med <= 0:
        return [], med, mad
    low = x < ratio * med
    if mad != 0:
        low &= (lmed - logs) / (MAD_SCALE * mad) > z
    return np.flatnonzero(low).tolist(), med, mad
