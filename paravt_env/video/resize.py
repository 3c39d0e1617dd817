"""Qwen-VL's pixel-budget resize rule, and the resize itself.

``smart_resize`` reproduces qwen-vl-utils' function exactly (the reference ParaVT preprocessing): both sides
become multiples of ``factor`` (28 = patch 14 x spatial merge 2), the area lands in [min_pixels, max_pixels],
and the aspect ratio is kept as well as those constraints allow.
"""

from __future__ import annotations

import math

import av
import numpy as np
from av.video.reformatter import VideoReformatter

MAX_RATIO = 200
"""qwen-vl-utils refuses frames more elongated than this; so do we, with the same error."""


def _round_by_factor(number: float, factor: int) -> int:
    return round(number / factor) * factor


def _ceil_by_factor(number: float, factor: int) -> int:
    return math.ceil(number / factor) * factor


def _floor_by_factor(number: float, factor: int) -> int:
    return math.floor(number / factor) * factor


def smart_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = 784, max_pixels: int = 50176
) -> tuple[int, int]:
    """Return ``(new_height, new_width)`` exactly as qwen-vl-utils' ``smart_resize`` does.

    The default budget (784 to 50176 pixels, i.e. 1 to 64 visual tokens of 28x28) is ParaVT's frame budget.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"smart_resize: height and width must be positive, got {height}x{width}")
    if max_pixels < min_pixels:
        raise ValueError(f"smart_resize: max_pixels ({max_pixels}) must be >= min_pixels ({min_pixels})")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_RATIO}, got {max(height, width) / min(height, width)}"
        )
    h_bar = max(factor, _round_by_factor(height, factor))
    w_bar = max(factor, _round_by_factor(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = _floor_by_factor(height / beta, factor)
        w_bar = _floor_by_factor(width / beta, factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by_factor(height * beta, factor)
        w_bar = _ceil_by_factor(width * beta, factor)
    return h_bar, w_bar


def target_size(height: int, width: int, min_pixels: int | None, max_pixels: int | None) -> tuple[int, int]:
    """The size frames are delivered at: Qwen-VL's rule, or the native size when no budget is given."""
    if min_pixels is None and max_pixels is None:
        return height, width
    h, w = smart_resize(height, width, min_pixels=min_pixels or 0, max_pixels=max_pixels or height * width * 4)
    if h <= 0 or w <= 0:
        # qwen-vl-utils floors to 0 for extreme aspect ratios under a small budget; a 0-sized frame is useless.
        raise ValueError(
            f"pixel budget [{min_pixels}, {max_pixels}] leaves no pixels for a {width}x{height} frame"
        )
    return h, w


def resize_frame(frame: av.VideoFrame, height: int, width: int, reformatter: VideoReformatter | None = None) -> np.ndarray:
    """Convert a decoded frame to RGB24 at ``height`` x ``width`` in a single swscale pass.

    Converting and scaling together is much cheaper than converting at full size and resizing after.
    swscale's bicubic filter widens when it downsamples, so the result is antialiased like torchvision's.
    ``reformatter``: a kept one (a decoding handle's), which rebuilds its scaler context only when the source or
    target changes; without one PyAV builds a new context for the frame (3.7 ms a 112 px frame against 0.2 ms).
    Either way the same bytes.
    """
    if reformatter is None:
        return frame.reformat(width=width, height=height, format="rgb24", interpolation="BICUBIC").to_ndarray()
    return reformatter.reformat(frame, width=width, height=height, format="rgb24", interpolation="BICUBIC").to_ndarray()


def resize_rgb(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize an H x W x 3 uint8 RGB array (the decord backend's output) with the same filter."""
    if image.shape[0] == height and image.shape[1] == width:
        return image
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    return resize_frame(frame, height, width)
