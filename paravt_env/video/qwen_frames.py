"""Which frames, at which size, qwen-vl-utils' ``fetch_video`` returns (0.0.14: what the released eval driver
samples with), computed on our own index and decoded by our own readers.

The release samples the 64-frame overview with ``{"nframes": 64}`` and the default video pixel budget (128 to
768 visual tokens of 28 x 28 per frame, so a 320 x 240 video gives 392 x 280 frames), and each crop with
``{"fps": 1, "min_frames": 1, "max_frames": 16, "min_pixels": 784, "max_pixels": 50176, "video_start": st,
"video_end": et}``. The rules, reproduced here:

- range: ``start_frame = ceil(clamp(st) * fps)``, ``end_frame = min(floor(clamp(et) * fps), total - 1)``;
  ``start_frame >= end_frame`` is an error (the crop fails);
- count: ``nframes`` rounded to even; or ``frames_in_range / fps * target_fps`` clamped to
  [ceil_even(min_frames), floor_even(max_frames)] and to the frames in range, floored to even; fewer than 2
  (or more than the range holds) is an error (a video with fewer frames than the overview asks for gets no
  overview at all in the release: its driver swallows the error);
- indices: ``torch.linspace(start_frame, end_frame, n)`` in float32, rounded half to even;
- size: ``smart_resize`` with ``min_pixels`` (default 128 tokens) and ``max_pixels = min(given,
  max(min(768 tokens, total_pixels / n * 2), int(min_pixels * 1.05)))``.

``fps`` is the stream's average frame rate and ``total`` its frame count (decord's ``get_avg_fps`` and
``len``); for constant-frame-rate files every backend of qwen-vl-utils agrees on both.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .errors import VideoDecodeError
from .frames import Frames
from .reader import VideoReader

FACTOR = 28
FRAME_FACTOR = 2
VIDEO_MIN_PIXELS = 128 * FACTOR * FACTOR
VIDEO_MAX_PIXELS = 768 * FACTOR * FACTOR
MODEL_SEQ_LEN = int(float(os.environ.get("MODEL_SEQ_LEN", 128000)))
"""qwen-vl-utils reads the same environment variable for its default ``total_pixels``."""
TOTAL_PIXELS = MODEL_SEQ_LEN * FACTOR * FACTOR * 0.9

CROP_SPEC = {"fps": 1.0, "min_frames": 1, "max_frames": 16, "min_pixels": 784, "max_pixels": 50176}
"""The release driver's crop request (``paravt/eval/utils.py::crop_frames``), also its RL sub-agent's."""
RL_OVERVIEW_SPEC = {"max_frames": 64, "min_pixels": 784, "max_pixels": 50176}
"""The release's RL overview (``paravt/rl/configs/_base.yaml``: ``fps: 1``, ``max_frames: 64``, pixels
784-50176). With ``fps`` set its workflow drops ``nframes``, so nFrames Gating never reaches the frames."""


class QwenSamplingError(ValueError):
    """qwen-vl-utils refuses the request (a range without two frames, fewer frames than asked for)."""


def _even_round(x: float) -> int:
    return round(x / FRAME_FACTOR) * FRAME_FACTOR


def frame_range(total: int, fps: float, start: float | None = None, end: float | None = None) -> tuple[int, int, int]:
    """``(start_frame, end_frame, count)`` of a time range (``calculate_video_frame_range``)."""
    if fps <= 0 or total <= 0:
        raise QwenSamplingError(f"video needs a positive frame rate and frame count, got {fps} fps, {total} frames")
    if start is None and end is None:
        return 0, total - 1, total
    longest = total / fps
    first = math.ceil(max(0.0, min(start, longest)) * fps) if start is not None else 0
    last = min(math.floor(max(0.0, min(end, longest)) * fps), total - 1) if end is not None else total - 1
    if first >= last:
        raise QwenSamplingError(f"invalid time range: start frame {first} is not before end frame {last}")
    return first, last, last - first + 1


def frame_count(count: int, fps: float, *, nframes: int | None = None, target_fps: float | None = None,
                min_frames: int | None = None, max_frames: int | None = None) -> int:  # fmt: skip
    """How many frames of a range of ``count`` frames are sampled (``smart_nframes``)."""
    if nframes is not None:
        n = _even_round(nframes)
    else:
        lo = math.ceil((min_frames if min_frames is not None else 4) / FRAME_FACTOR) * FRAME_FACTOR
        hi = math.floor((max_frames if max_frames is not None else min(768, count)) / FRAME_FACTOR) * FRAME_FACTOR
        n = count / fps * (target_fps if target_fps is not None else 2.0)
        n = math.floor(min(min(max(n, lo), hi), count) / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= n <= count:
        raise QwenSamplingError(f"nframes should be in [{FRAME_FACTOR}, {count}], got {n}")
    return int(n)


def linspace_indices(first: int, last: int, n: int) -> np.ndarray:
    """``torch.linspace(first, last, n).round().long()``: float32 steps from both ends, half to even."""
    if n == 1:
        values = np.array([first], dtype=np.float32)
    else:
        start, end = np.float32(first), np.float32(last)
        step = np.float32((end - start) / np.float32(n - 1))
        i = np.arange(n)
        half = n // 2
        values = np.where(
            i < half,
            start + step * i.astype(np.float32),
            end - step * (n - i - 1).astype(np.float32),
        ).astype(np.float32)
    return np.round(values).astype(np.int64)


def pixel_budget(n: int, min_pixels: int | None = None, max_pixels: int | None = None) -> tuple[int, float]:
    """``(min_pixels, max_pixels)`` fetch_video resizes ``n`` frames to."""
    lo = VIDEO_MIN_PIXELS if min_pixels is None else min_pixels
    hi = max(min(VIDEO_MAX_PIXELS, TOTAL_PIXELS / n * FRAME_FACTOR), int(lo * 1.05))
    if max_pixels is not None:
        hi = min(max_pixels, hi)
    return lo, hi


def qwen_frames(reader: VideoReader, *, nframes: int | None = None, fps: float | None = None,
                min_frames: int | None = None, max_frames: int | None = None, min_pixels: int | None = None,
                max_pixels: int | None = None, start: float | None = None, end: float | None = None) -> Frames:  # fmt: skip
    """The frames ``fetch_video`` returns for this request, decoded exactly by ``reader``. Raises
    ``QwenSamplingError`` where qwen-vl-utils raises."""
    first, last, count = frame_range(reader.num_frames, reader.fps, start, end)
    n = frame_count(count, reader.fps, nframes=nframes, target_fps=fps, min_frames=min_frames, max_frames=max_frames)
    lo, hi = pixel_budget(n, min_pixels, max_pixels)
    return reader.frames_by_index(linspace_indices(first, last, n), lo, hi)  # hi may be a float, as there


def release_overview(reader: VideoReader, nframes: int = 64) -> Frames:
    """The release driver's overview: ``nframes`` frames at the default video budget, or no frame at all
    where qwen-vl-utils fails (the driver then sends the question alone)."""
    try:
        return qwen_frames(reader, nframes=nframes)
    except (ValueError, VideoDecodeError):  # QwenSamplingError, or a frame shape smart_resize refuses
        return Frames.empty()


def release_rl_overview(reader: VideoReader, nframes: int, fps: float | None = 1.0) -> Frames:
    """The release RL workflow's overview (784-50176 pixels): 1 frame a second up to 64 with ``fps`` (its
    base config, which drops ``nframes`` and with it nFrames Gating), else ``nframes`` frames. Raises
    ``VideoDecodeError`` where qwen-vl-utils fails (the workflow does not catch it)."""
    try:
        spec = RL_OVERVIEW_SPEC
        if fps:
            return qwen_frames(reader, fps=fps, **spec)
        return qwen_frames(reader, nframes=nframes, min_pixels=spec["min_pixels"], max_pixels=spec["max_pixels"])
    except ValueError as exc:  # QwenSamplingError, or a frame shape smart_resize refuses
        raise VideoDecodeError(reader.path, f"qwen-vl-utils cannot sample this video: {exc}") from None


def release_crop(reader: VideoReader, start: float, end: float) -> Frames:
    """The release driver's crop of [start, end]: 1 fps, 2 to 16 frames, 784 to 50176 pixels; no frame where
    qwen-vl-utils fails (the driver then reports an error cropping)."""
    spec = CROP_SPEC  # inf clamps to the end and nan to 0, as min/max do there
    try:
        return qwen_frames(reader, fps=spec["fps"], min_frames=spec["min_frames"], max_frames=spec["max_frames"],
                           min_pixels=spec["min_pixels"], max_pixels=spec["max_pixels"], start=start, end=end)  # fmt: skip
    except (ValueError, VideoDecodeError):  # QwenSamplingError, or a frame shape smart_resize refuses
        return Frames.empty()


__all__ = ["CROP_SPEC", "RL_OVERVIEW_SPEC", "QwenSamplingError", "frame_count", "frame_range", "linspace_indices", "pixel_budget",
           "qwen_frames", "release_crop", "release_overview", "release_rl_overview"]  # fmt: skip
