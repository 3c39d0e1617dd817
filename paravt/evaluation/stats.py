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
