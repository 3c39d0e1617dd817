"""Where to crop next: spread a turn's frame budget over the parts of the video the agent has not seen well.

The search is a covering problem. Needles last at least 2 s, so a region where consecutive seen frames are
at most ``SEARCH_SPACING`` apart cannot hide one. Each turn has ``n_crops`` crops of at most ``max_frames``
frames: choose the finest spacing the budget affords over the uncovered gaps, place new frame times inside
each gap, and group them into at most ``n_crops`` windows whose evenly spread frames land on those times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SEARCH_SPACING = 2.0
"""Seconds between seen frames below which no needle (>= 2 s long) can hide."""
MIN_WINDOW = 1.0
"""The shortest window worth a crop (the env rejects windows under 0.5 s)."""


def gaps_in(seen: Sequence[float], lo: float, hi: float) -> list[tuple[float, float]]:
    """Intervals of [lo, hi] between consecutive seen times (the region's ends count as seen)."""
    points = [lo, *(t for t in seen if lo < t < hi), hi]
    return [(a, b) for a, b in zip(points, points[1:], strict=False) if b > a]


def _points(gaps: Sequence[tuple[float, float]], spacing: float) -> list[float]:
    out = []
    for a, b in gaps:
        k = math.ceil((b - a) / spacing - 1e-9) - 1
        out += [a + (b - a) * (i + 1) / (k + 1) for i in range(max(k, 0))]
    return out


def plan_points(
    gaps: Sequence[tuple[float, float]], budget: int, target: float = SEARCH_SPACING
) -> list[float]:
    """New frame times that bring every gap to the finest spacing (>= ``target``) that ``budget`` frames allow."""
    if budget <= 0 or not gaps or max(b - a for a, b in gaps) <= target:
        return []
    lo, hi = target, max(b - a for a, b in gaps)
    if len(_points(gaps, lo)) <= budget:
        return _points(gaps, lo)
    for _ in range(40):  # bisection on the spacing
        mid = (lo + hi) / 2
        if len(_points(gaps, mid)) <= budget:
            hi = mid
        else:
            lo = mid
    return _points(gaps, hi)


def windows_for(
    points: Sequence[float], n_crops: int, max_frames: int, duration: float
) -> list[tuple[float, float]]:
    """At most ``n_crops`` windows whose uniformly spread frames (at most ``max_frames`` each) cover ``points``.

    Consecutive points are grouped: first cut where the points jump by much more than their usual spacing
    (a window should not span a stretch that is already covered), then the turn's crops are shared among
    the groups in proportion to their points and each group is split evenly.
    """
    pts = sorted(points)
    if not pts or n_crops < 1:
        return []
    steps = [b - a for a, b in zip(pts, pts[1:], strict=False)]
    groups = [pts]
    if steps:
        typical = sorted(steps)[len(steps) // 2]
        jumps = sorted(
            (i for i, d in enumerate(steps) if d > 2 * max(typical, MIN_WINDOW)), key=lambda i: -steps[i]
        )
        cuts = sorted(jumps[: n_crops - 1])
        groups, start = [], 0
        for c in cuts:
            groups.append(pts[start : c + 1])
            start = c + 1
        groups.append(pts[start:])
    # Share the turn's crops among the groups: each group needs ceil(points / max_frames) crops; crops to
    # spare go where points per crop are highest. A crop spreads its frames evenly over its window, so a
    # group split into full crops of exactly max_frames points gets frames on the planned points; a crop
    # with fewer points gets more frames than points (denser, never sparser).
    shares = [max(1, math.ceil(len(g) / max_frames)) for g in groups]
    while sum(shares) < n_crops:
        i = max(range(len(groups)), key=lambda k: len(groups[k]) / shares[k])
        if len(groups[i]) <= shares[i]:
            break
        shares[i] += 1
    chunks = []
    for g, k in zip(groups, shares, strict=True):
        if k == math.ceil(len(g) / max_frames):
            bounds = [min(len(g), j * max_frames) for j in range(k + 1)]
        else:
            bounds = [round(len(g) * j / k) for j in range(k + 1)]
        chunks += [g[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    groups = chunks[:n_crops] if len(chunks) <= n_crops else _merge(chunks, n_crops)
    windows = []
    for g in groups:
        step = (g[-1] - g[0]) / (len(g) - 1) if len(g) > 1 else MIN_WINDOW
        a, b = g[0] - step / 2, g[-1] + step / 2
        if b - a < MIN_WINDOW:
            mid = (a + b) / 2
            a, b = mid - MIN_WINDOW / 2, mid + MIN_WINDOW / 2
        a, b = max(0.0, a), min(duration, b)
        if b - a >= 0.5:
            windows.append((round(a, 2), round(b, 2)))
    return windows


def _merge(chunks: list[list[float]], n: int) -> list[list[float]]:
    """Too many chunks for the turn: merge neighbours (smallest combined first) down to ``n``."""
    chunks = [list(c) for c in chunks]
    while len(chunks) > n:
        i = min(range(len(chunks) - 1), key=lambda k: len(chunks[k]) + len(chunks[k + 1]))
        chunks[i : i + 2] = [chunks[i] + chunks[i + 1]]
    return chunks


def uniform_windows(duration: float, n: int) -> list[tuple[float, float]]:
    """``n`` equal windows tiling the whole video."""
    return [(round(duration * i / n, 2), round(duration * (i + 1) / n, 2)) for i in range(n)]
