"""Means with their 95 % confidence intervals (Student's t), the one rule every experiment and benchmark reports
by: over seeds (the experiments), over samples (``paravt bench dispatch``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086,
       25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980, 1000: 1.962}  # fmt: skip
"""Two-sided 95 % Student t quantiles by degrees of freedom (values - 1); between two listed, the one of the
fewer degrees (slightly wide); past 1000, 1.962."""


def t95(df: int) -> float:
    return T95[max(k for k in T95 if k <= df)]


def mean_ci(values: Sequence[float]) -> dict[str, float | None]:
    """Mean and the half-width of its 95 % confidence interval (None for a single value)."""
    values = list(values)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "ci95": None}
    t = t95(len(values) - 1)
    return {"mean": mean, "ci95": t * statistics.stdev(values) / len(values) ** 0.5}


def finite(values) -> list[float]:
    """The values that are numbers (None and NaN left out)."""
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


# --- intervals that respect [0, 1], and how many seeds resolve an effect ---------------------------------------
def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion ``k / n``: the proportions whose binomial
    tails leave ``(1 - level) / 2`` on either side of ``k``; always within [0, 1] (for a count of collapsed runs
    out of ``n`` seeds). Found by bisection on the binomial distribution: no dependency beyond the standard
    library."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"clopper_pearson needs 0 <= k <= n and n >= 1, got k={k}, n={n}")
    tail = (1 - level) / 2

    def cdf(p: float, upto: int) -> float:  # P(X <= upto) for X ~ Binomial(n, p)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(upto + 1))

    def solve(f, target: float) -> float:  # f increasing in p on [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: 1 - cdf(p, k - 1), tail)  # P(X >= k) rises with p
    upper = 1.0 if k == n else solve(lambda p: 1 - cdf(p, k), 1 - tail)  # P(X <= k) falls with p
    return lower, upper


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = 10_000, seed: int = 0) -> dict[str, float | None]:
    """The mean of ``values`` (one per seed) and the percentile bootstrap interval of it over seeds (resampled with
    replacement, ``seed`` fixed so the figure recomputes exactly). It lies within the values' range, so a mean of
    proportions keeps [0, 1], where a Student t interval over a few bimodal seeds (0 and 1) runs past both ends.
    With one value: no interval."""
    import numpy as np

    xs = np.asarray(list(values), dtype=float)
    if xs.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if xs.size < 2:
        return {"mean": float(xs.mean()), "low": None, "high": None}
    draws = np.random.default_rng(seed).integers(0, xs.size, size=(resamples, xs.size))
    means = xs[draws].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"mean": float(xs.mean()), "low": float(lo), "high": float(hi)}


Z = {0.025: 1.959964, 0.05: 1.644854, 0.8: 0.841621, 0.9: 1.281552}
"""Standard normal quantiles: one-sided tail 2.5 % and 5 %, power 80 % and 90 %."""


def pairs_for_power(effect: float, sd: float, *, alpha: float = 0.025, power: float = 0.8) -> int:
    """Paired replicates (seeds) a one-sided test at ``alpha`` needs to detect a mean difference ``effect`` with
    probability ``power``, where the differences spread with standard deviation ``sd``: n = ((z_α + z_β) sd /
    effect)², then + 1 for the t test's heavier tails at few seeds (a common correction; at least 2)."""
    if effect <= 0 or sd < 0:
        raise ValueError(f"pairs_for_power needs effect > 0 and sd >= 0, got effect={effect}, sd={sd}")
    n = ((Z[alpha] + Z[power]) * sd / effect) ** 2
    return max(2, math.ceil(n) + 1)


def minimum_detectable(n: int, sd: float, *, alpha: float = 0.025, power: float = 0.8) -> float:
    """The smallest mean difference ``n`` paired replicates resolve (one-sided at ``alpha``, ``power``) at spread
    ``sd``: (z_α + z_β) sd / √(n - 1), the inverse of ``pairs_for_power``."""
    if n < 2:
        raise ValueError(f"minimum_detectable needs n >= 2 replicates, got {n}")
    return (Z[alpha] + Z[power]) * sd / math.sqrt(n - 1)


def fisher_one_sided(a: int, n_a: int, b: int, n_b: int) -> float:
    """Fisher's exact test, one-sided: the probability, with the margins fixed, of a count in group A at least ``a``
    (``a`` of ``n_a`` against ``b`` of ``n_b``): whether A has the higher rate, e.g. runs that collapsed."""
    total, k = n_a + n_b, a + b
    denom = math.comb(total, k)
    return sum(math.comb(n_a, i) * math.comb(n_b, k - i) for i in range(a, min(n_a, k) + 1)) / denom


def fisher_power(p_a: float, p_b: float, n: int, alpha: float = 0.025) -> float:
    """The chance that ``fisher_one_sided`` at ``alpha`` finds A's rate above B's with ``n`` runs in each, when their
    true rates are ``p_a`` and ``p_b``: summed exactly over every pair of outcomes."""
    def pmf(p: float, i: int) -> float:
        return math.comb(n, i) * p**i * (1 - p) ** (n - i)

    return sum(pmf(p_a, i) * pmf(p_b, j) for i in range(n + 1) for j in range(n + 1)
               if fisher_one_sided(i, n, j, n) <= alpha)  # fmt: skip
