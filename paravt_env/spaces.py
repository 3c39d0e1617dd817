"""Observation and action spaces for text-and-frames episodes.

Frames come at the video's own aspect ratio under a pixel budget, and a turn brings any number of them, so
their shape is not fixed: ``FrameBatch`` describes "N x H x W x 3 uint8 with H * W within the budget".
Actions are free text: ``AnyText`` admits every character a model can emit (sampling draws from printable
ASCII plus the protocol's tags, which is what a random agent needs).
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

_SAMPLE_CHARSET = string.printable
SAMPLE_MAX_CHARS = 200


class AnyText(spaces.Text):
    """Any ``str`` up to ``max_length`` characters, whatever its characters."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        # Random printable text (short: the space admits megabytes, a random agent needs a sentence),
        # sometimes wrapped in protocol tags so that random agents exercise the parser and the tools.
        hi = max(self.min_length, min(self.max_length, SAMPLE_MAX_CHARS))
        n = int(self.np_random.integers(self.min_length, hi + 1))
        text = "".join(self.np_random.choice(list(_SAMPLE_CHARSET), size=n))
        choice = int(self.np_random.integers(4))
        if choice == 1:
            text = f"<think>{text}</think><answer>{text[:8]}</answer>"
        elif choice == 2:
            start = float(self.np_random.uniform(-10, 200))
            call = f'{{"name": "crop_video", "arguments": {{"start_time": {start:.1f}, "end_time": {start + 10:.1f}}}}}'
            text = f"<think>{text}</think><tool_call>{call}</tool_call>"
        return text[: self.max_length]

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class FrameBatch(spaces.Space[np.ndarray]):
    """uint8 arrays of shape N x H x W x 3 with N <= max_frames and H * W <= max_pixels."""

    def __init__(self, max_frames: int, max_pixels: int, factor: int = 28, seed: int | None = None):
        super().__init__(shape=None, dtype=np.uint8, seed=seed)
        self.max_frames = max_frames
        self.max_pixels = max_pixels
        self.factor = factor

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, np.ndarray)
            and x.dtype == np.uint8
            and x.ndim == 4
            and x.shape[3] == 3
            and x.shape[0] <= self.max_frames
            and x.shape[1] * x.shape[2] <= self.max_pixels
        )

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        n = int(self.np_random.integers(0, min(self.max_frames, 8) + 1))
        side = max(self.factor, int(np.sqrt(self.max_pixels)) // self.factor * self.factor // 2)
        return self.np_random.integers(0, 256, size=(n, side, side, 3), dtype=np.uint8)

    def __repr__(self) -> str:
        return f"FrameBatch(max_frames={self.max_frames}, max_pixels={self.max_pixels})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FrameBatch)
            and other.max_frames == self.max_frames
            and other.max_pixels == self.max_pixels
        )


class Timestamps(spaces.Space[np.ndarray]):
    """float64 arrays of shape N (seconds, >= 0), N <= max_frames."""

    def __init__(self, max_frames: int, seed: int | None = None):
        super().__init__(shape=None, dtype=np.float64, seed=seed)
        self.max_frames = max_frames

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, np.ndarray)
            and x.dtype == np.float64
            and x.ndim == 1
            and x.shape[0] <= self.max_frames
            and bool(np.all(np.isfinite(x)) and np.all(x >= 0))
        )

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        n = int(self.np_random.integers(0, min(self.max_frames, 8) + 1))
        return np.sort(self.np_random.uniform(0, 600, size=n))

    def __repr__(self) -> str:
        return f"Timestamps(max_frames={self.max_frames})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamps) and other.max_frames == self.max_frames
