"""Means over seeds with their 95 % confidence intervals (Student's t), the one rule every experiment reports by."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086}  # fmt: skip
"""Two-sided 95 % Student t quantiles by degrees of freedom (values - 1); past 20, t at 20 (slightly wide)."""


def mean_ci(values: Sequence[float]) -> dict[str, float | None]:
    """Mean and the half-width of its 95 % confidence interval (None for a single value)."""
    values = list(values)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "ci95": None}
    t = T95.get(len(values) - 1, T95[20])
    return {"mean": mean, "ci95": t * statistics.stdev(values) / len(values) ** 0.5}


def finite(values) -> list[float]:
    """The values that are numbers (None and NaN left out)."""
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
