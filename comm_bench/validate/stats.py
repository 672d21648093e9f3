"""Small exact tests: how sure a finding is (no scipy)."""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

import numpy as np

MAD_SCALE = 1.4826   # MAD x this estimates the standard deviation of normal noise
EXACT_MAX = 25      # exact signed-rank distribution up to this many values (2^25 sums is cheap as a DP)


def signed_rank_p(diffs: Sequence[float]) -> float:
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


def confidence(p: float) -> float:
    """A finding's confidence: 1 - p of its test, rounded for reading."""
    return round(max(0.0, min(1.0, 1.0 - p)), 4)


def log_ratios(values: Iterable[float], reference: float) -> list[float]:
    return [math.log(v / reference) for v in values if v > 0 and reference > 0]


def gmean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None


def robust_z(values: Sequence[float]) -> tuple[list[float], float]:
    """Robust z of each value (median / MAD); inf where MAD is 0 and the value differs.
    numpy: a group of a full 1,024-rank run holds a million pairs."""
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    mad = MAD_SCALE * float(np.median(np.abs(x - med)))
    zs = (x - med) / mad if mad > 0 else np.where(x == med, 0.0, np.copysign(np.inf, x - med))
    return zs.tolist(), med


def robust_low(values: Sequence[float], z: float, ratio: float) -> tuple[list[int], float | None, float | None]:
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


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (regularized incomplete beta;
    the normal curve beyond 1,000 df, where they agree to 3 decimals)."""
    if not math.isfinite(t):
        return 0.0 if t < 0 else 1.0
    if df > 1000:
        return 0.5 * math.erfc(-t / math.sqrt(2))
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))     # P(T > |t|)
    return tail if t < 0 else 1.0 - tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by Lentz's continued fraction (Numerical Recipes)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):                   # the fraction converges fast on this side only
        return 1.0 - _betainc(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return front * f


def welch_below_p(mean_a: float, se_a: float, df_a: float, mean_b: float, se_b: float,
                  df_b: float) -> float | None:
    """One-sided Welch t-test p-value that b's true mean is below a's, from each side's
    mean, standard error and degrees of freedom (Welch-Satterthwaite df). None where no
    spread is known (a standard error of 0 on both sides)."""
    va, vb = se_a * se_a, se_b * se_b
    if va + vb <= 0:
        return None
    df = (va + vb) ** 2 / ((va * va / df_a if df_a > 0 else 0) + (vb * vb / df_b if df_b > 0 else 0) or 1e-300)
    return t_cdf((mean_b - mean_a) / math.sqrt(va + vb), max(df, 1.0))


def rank_sum_p(a: Sequence[float], b: Sequence[float], exact_max: int = 40) -> float:
    """One-sided Wilcoxon rank-sum (Mann-Whitney) p-value that b's values lie below a's
    (ties by average ranks; exact up to exact_max values in all, normal beyond)."""
    a = [x for x in a if math.isfinite(x)]
    b = [x for x in b if math.isfinite(x)]
    m, n = len(b), len(a)
    if not m or not n:
        return 1.0
    allv = np.asarray(b + a, dtype=float)
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty(len(allv))
    sv = allv[order]
    i = 0
    while i < len(sv):                # average ranks over ties
        j = i
        while j + 1 < len(sv) and sv[j + 1] == sv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    w = float(ranks[:m].sum())        # small W (b's rank sum) = evidence for "below"
    if m + n <= exact_max:
        # doubled ranks are integers: count m-subsets by doubled rank sum
        ints = [int(round(2 * r)) for r in ranks]
        total = sum(ints)
        counts = [[0] * (total + 1) for _ in range(m + 1)]
        counts[0][0] = 1
        for r in ints:
            for k in range(m, 0, -1):
                row, prev = counts[k], counts[k - 1]
                for s in range(total, r - 1, -1):
                    if prev[s - r]:
                        row[s] += prev[s - r]
        return sum(counts[m][:int(round(2 * w)) + 1]) / float(math.comb(m + n, m))
    big = m + n
    _, tie_counts = np.unique(allv, return_counts=True)
    var = m * n / 12 * ((big + 1) - float((tie_counts ** 3 - tie_counts).sum()) / (big * (big - 1)))
    if var <= 0:
        return 1.0
    return 0.5 * math.erfc(-((w + 0.5 - m * (big + 1) / 2) / math.sqrt(var)) / math.sqrt(2))
