"""Where every frame of a video sits in time, and which frames are cheap to decode.

Backends fill a ``FrameIndex`` once per file (a scan of packet headers, no decoding); frame selection then
works on it without touching the file. Frames are numbered in presentation order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-6
"""Seconds. Times are compared with this slack so that asking for ``i / fps`` returns frame ``i`` even when
``pts * time_base`` rounds a hair above it in floating point; it is far below any real frame interval."""


@dataclass(frozen=True)
class FrameIndex:
    """Per-frame facts of one video stream, in presentation order.

    Attributes:
        times: presentation time of each frame in seconds, relative to the first frame, ascending.
        pts: the stream's raw presentation timestamps (backend units), same order.
        keyframe: whether each frame can be decoded on its own.
        cost: how many frames must be decoded, starting at the preceding keyframe in decode order, to get
            this one (0 for a keyframe). This is what a positive tolerance minimises.
        duration: length of the video in seconds (last frame time + its display duration).
    """

    times: np.ndarray
    pts: np.ndarray
    keyframe: np.ndarray
    cost: np.ndarray
    duration: float

    @property
    def num_frames(self) -> int:
        return int(self.times.shape[0])

    @property
    def fps(self) -> float:
        return self.num_frames / self.duration if self.duration > 0 else 0.0

    @classmethod
    def from_decode_order(
        cls, pts: list[int] | np.ndarray, keyframe: list[bool] | np.ndarray, time_base: float, end_pts: int | None
    ) -> FrameIndex:
        """Build the index from packets listed in decode order (how demuxers deliver them)."""
        pts_d = np.asarray(pts, dtype=np.int64)
        key_d = np.asarray(keyframe, dtype=bool)
        if pts_d.size == 0:
            raise ValueError("no frames")
        # Decode cost: packets since the last keyframe in decode order. The very first packet is where any
        # decode starts, so it costs 0 even if the container did not flag it.
        positions = np.arange(pts_d.size)
        key_pos = np.where(key_d | (positions == 0), positions, 0)
        cost_d = positions - np.maximum.accumulate(key_pos)
        order = np.argsort(pts_d, kind="stable")
        pts_p = pts_d[order]
        first = int(pts_p[0])
        times = (pts_p - first).astype(np.float64) * time_base
        # A frame is shown until the next one; the last one for the median frame interval.
        step = float(np.median(np.diff(times))) if times.size > 1 else 0.0
        if end_pts is not None and end_pts > pts_p[-1]:
            duration = (end_pts - first) * time_base
        else:
            duration = float(times[-1]) + step
        return cls(times=times, pts=pts_p, keyframe=key_d[order], cost=cost_d[order], duration=float(duration))

    def displayed_at(self, t: np.ndarray) -> np.ndarray:
        """Index of the frame on screen at each time: the last frame whose time is <= t (clamped)."""
        t = np.clip(np.nan_to_num(np.asarray(t, dtype=np.float64), nan=0.0), 0.0, self.duration)
        idx = np.searchsorted(self.times, t + EPS, side="right") - 1
        return np.clip(idx, 0, self.num_frames - 1)

    def select(self, t: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
        """Frame index for each requested time.

        ``tolerance == 0``: exactly the frame displayed at ``t``. ``tolerance > 0``: among frames whose
        time is within ``t +- tolerance``, the cheapest to decode (ties go to the one nearest ``t``) that no
        earlier request took, so adjacent windows never return the same frame twice; the displayed frame when
        no frame lies that close.
        """
        exact = self.displayed_at(t)
        if tolerance <= 0 or self.num_frames == 1:
            return exact
        t = np.clip(np.nan_to_num(np.asarray(t, dtype=np.float64), nan=0.0), 0.0, self.duration)
        lo = np.searchsorted(self.times, t - tolerance - EPS, side="left")
        hi = np.searchsorted(self.times, t + tolerance + EPS, side="right")
        chosen = exact.copy()
        used: set[int] = set()
        for i in range(t.shape[0]):
            if hi[i] <= lo[i]:
                used.add(int(chosen[i]))
                continue
            window = np.arange(lo[i], hi[i])
            # Lexicographic (cost, distance): cost dominates, distance breaks ties. Neighbouring windows share
            # their boundary, so a keyframe there would be picked twice: take the best frame not yet taken.
            dist = np.abs(self.times[window] - t[i])
            order = window[np.lexsort((dist, self.cost[window]))]
            pick = next((int(j) for j in order if int(j) not in used), int(exact[i]))
            chosen[i] = pick
            used.add(pick)
        return chosen

    def in_window(self, start: float, end: float) -> np.ndarray:
        """Indices of the frames whose time lies in [start, end]."""
        lo = np.searchsorted(self.times, start - EPS, side="left")
        hi = np.searchsorted(self.times, end + EPS, side="right")
        return np.arange(lo, hi)
