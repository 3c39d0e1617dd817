"""The two ways an agent sees a video: an overview of the whole of it, and the frames of one crop."""

from __future__ import annotations

import math

import numpy as np

from .cache import OverviewCache, default_overview_cache
from .frames import Frames
from .reader import DEFAULT_MAX_PIXELS, DEFAULT_MIN_PIXELS, VideoReader


def overview_times(duration: float, k: int) -> np.ndarray:
    """Centres of ``k`` equal segments of the video: uniform, and never the very first or last instant."""
    if k < 1:
        raise ValueError(f"overview needs k >= 1 frames, got {k}")
    return (np.arange(k, dtype=np.float64) + 0.5) * (duration / k)


def sample_overview(
    reader: VideoReader,
    k: int,
    tolerance: float | None = None,
    min_pixels: int | None = DEFAULT_MIN_PIXELS,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    cache: OverviewCache | None | bool = True,
) -> Frames:
    """``k`` frames spread uniformly over the video.

    ``tolerance`` defaults to half the sampling interval: each frame may be any frame of its own segment,
    so the reader picks the cheapest (keyframes first). Pass ``0`` for exact segment centres. Results are
    cached by (file, k, tolerance, pixel budget) so the rollouts of one GRPO group decode a video once; pass
    ``cache=False`` to bypass, or an ``OverviewCache`` of your own.
    """
    if tolerance is None:
        tolerance = reader.duration / (2 * k) if k >= 1 else 0.0

    def decode() -> Frames:
        return reader.frames_at(overview_times(reader.duration, k), tolerance, min_pixels, max_pixels)

    if cache is False or cache is None:
        return decode()
    store = default_overview_cache() if cache is True else cache
    key = (reader.backend, k, round(float(tolerance), 6), min_pixels, max_pixels)
    return store.get_or_compute(reader.path, key, decode)


def window_count(start: float, end: float, fps: float, max_frames: int, min_frames: int) -> int:
    """How many frames a crop of [start, end] gets: ``fps`` frames a second, within [min, max]."""
    return int(min(max(math.floor((end - start) * fps + 1e-9), min_frames), max_frames))


def sample_window(
    reader: VideoReader,
    start: float,
    end: float,
    fps: float = 1.0,
    max_frames: int = 16,
    min_frames: int = 1,
    min_pixels: int | None = DEFAULT_MIN_PIXELS,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
) -> Frames:
    """The frames of one crop: exact frames whose timestamps lie inside [start, end].

    ``start``/``end`` are clamped to the video and swapped if reversed. The crop gets ``fps`` frames per
    second of window, between ``min_frames`` and ``max_frames``, spread uniformly over the frames that the
    window holds (never more frames than it holds). A window too short to hold any frame returns the
    frame displayed at its middle.
    """
    if not (fps > 0 and math.isfinite(fps)):
        raise ValueError(f"crop fps must be a positive number, got {fps}")
    if max_frames < 1 or min_frames < 1 or min_frames > max_frames:
        raise ValueError(f"crop frame counts need 1 <= min_frames <= max_frames, got {min_frames}, {max_frames}")
    values = np.nan_to_num(np.array([start, end], dtype=np.float64), nan=0.0, posinf=reader.duration)
    start, end = np.clip(np.sort(values), 0.0, reader.duration)
    inside = reader.index.in_window(start, end)
    if inside.size == 0:
        indices = reader.index.displayed_at(np.array([(start + end) / 2]))
    else:
        n = min(window_count(start, end, fps, max_frames, min_frames), inside.size)
        # Centres of n equal slices of the window's frames: uniform in time for a constant frame rate.
        picks = np.floor((np.arange(n) + 0.5) * inside.size / n).astype(np.int64)
        indices = inside[picks]
    return reader.frames_by_index(indices, min_pixels, max_pixels)
