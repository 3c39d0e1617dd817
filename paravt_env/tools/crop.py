"""``crop_video``: turn a parsed tool call into a safe crop of the current sample's video, and run it.

Security rule (docs/reference.md#the-crop-security-rule): a crop only ever reads the current sample's own video.
Whatever path the model writes into the call is never opened; it is only mentioned in the feedback when it differs.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..protocol.tool_schema import TOOL_NAME
from ..video import Frames, VideoReader, sample_window

MIN_CROP_SECONDS = 0.5
"""A crop shorter than this (after clamping) is rejected: it would hold at most a frame or two."""


class ToolCallLike(Protocol):
    """What the tools layer reads from a parsed call (``paravt_env.protocol.ToolCall`` satisfies it)."""

    name: str
    arguments: dict[str, Any]
    start_time: float | None
    end_time: float | None


@dataclass(frozen=True)
class CropRequest:
    """A validated crop: a window inside the video, with notes on what was adjusted."""

    start: float
    end: float
    notes: tuple[str, ...] = ()


@dataclass
class CropResult:
    """The outcome of one call: frames on success, or an error that says what was wrong."""

    call_index: int
    request: CropRequest | None
    frames: Frames = field(default_factory=Frames.empty)
    error: str | None = None
    status: str = "executed"  # executed | rejected (invalid, over the limit) | failed (decoding)
    decode_s: float = 0.0
    summary: str | None = None  # the sub-agent's answer in "subagent" mode
    subagent_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "executed"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return x


def validate_crop(call: ToolCallLike, duration: float, video_path: str) -> CropRequest | str:
    """Check one call against the video; return the request to run, or the reason it cannot run.

    Times outside the video are clamped (and the clamp is noted); NaN, missing or reversed times, and
    windows too short to hold frames are rejected with a reason.
    """
    error = getattr(call, "error", None)
    if error:
        return str(error)
    if call.name != TOOL_NAME:
        return f"unknown tool {call.name!r}; the only tool is {TOOL_NAME}(start_time, end_time)"
    start, end = _finite(call.start_time), _finite(call.end_time)
    if start is None or end is None:
        missing = [n for n, v in (("start_time", start), ("end_time", end)) if v is None]
        return f"missing or non-numeric argument(s) {', '.join(missing)} (seconds expected)"
    if math.isnan(start) or math.isnan(end):
        return "start_time and end_time must be numbers of seconds, got NaN"
    if start >= end:
        return f"start_time ({start:g}) must be smaller than end_time ({end:g})"
    notes = []
    requested = call.arguments.get("video_path") if isinstance(call.arguments, dict) else None
    if isinstance(requested, str) and requested and os.path.basename(requested) != os.path.basename(video_path):
        notes.append(f"video_path {requested[:80]!r} ignored: crops always read the current video")
    lo, hi = max(start, 0.0), min(end, duration)
    if (lo, hi) != (start, end):
        notes.append(f"window clamped to the video: [{lo:.1f}, {hi:.1f}] s (duration {duration:.1f} s)")
    if hi - lo < MIN_CROP_SECONDS:
        return f"window [{start:g}, {end:g}] s leaves less than {MIN_CROP_SECONDS} s inside the {duration:.1f} s video"
    return CropRequest(start=lo, end=hi, notes=tuple(notes))


@dataclass(frozen=True)
class CropSettings:
    """How a crop is sampled (ParaVT: 1 fps, at most 16 frames, Qwen-VL pixel budget)."""

    fps: float = 1.0
    max_frames: int = 16
    min_frames: int = 1
    min_pixels: int | None = 784
    max_pixels: int | None = 50176


def execute_crop(reader: VideoReader, request: CropRequest, settings: CropSettings) -> tuple[Frames, float]:
    """Decode the crop's frames; return them with the wall time it took."""
    t0 = time.perf_counter()
    frames = sample_window(
        reader,
        request.start,
        request.end,
        fps=settings.fps,
        max_frames=settings.max_frames,
        min_frames=settings.min_frames,
        min_pixels=settings.min_pixels,
        max_pixels=settings.max_pixels,
    )
    return frames, time.perf_counter() - t0
