"""Index videos: frame i shows the number i as a grid of black and white blocks, for testing exact seeking
(B-frames, open GOPs, rotation, containers) against what a decoder returns."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

INDEX_GRID = 4
"""Index videos carry their frame number as a 4 x 4 grid of black/white blocks: 16 bits, LSB top-left."""


def index_image(i: int, height: int, width: int) -> np.ndarray:
    """The RGB image of frame ``i`` of an index video: bit b of ``i`` is block b (row-major), white = 1."""
    if not 0 <= i < 1 << (INDEX_GRID * INDEX_GRID):
        raise ValueError(f"index video frames are numbered 0..{(1 << INDEX_GRID * INDEX_GRID) - 1}, got {i}")
    bits = np.array([(i >> b) & 1 for b in range(INDEX_GRID * INDEX_GRID)], dtype=np.uint8)
    cells = np.kron(
        bits.reshape(INDEX_GRID, INDEX_GRID) * 255,
        np.ones((-(-height // INDEX_GRID), -(-width // INDEX_GRID)), dtype=np.uint8),
    )
    return np.repeat(cells[:height, :width, None], 3, axis=2)


def decode_index(image: np.ndarray) -> int:
    """Read the frame number back from a frame of an index video, at any size down to ~16 x 16 pixels.

    Each block is read from the mean of its central half, which compression and resizing leave intact.
    Raises ``ValueError`` when a block is neither clearly black nor clearly white: the frame is not an
    index-video frame as encoded (e.g. two frames blended together).
    """
    if image.ndim != 3 or image.shape[0] < INDEX_GRID or image.shape[1] < INDEX_GRID:
        raise ValueError(f"decode_index needs an H x W x C image of at least 4 x 4, got shape {image.shape}")
    h, w = image.shape[:2]
    gray = image.astype(np.float32).mean(axis=2)
    value = 0
    for b in range(INDEX_GRID * INDEX_GRID):
        r, c = divmod(b, INDEX_GRID)
        y0, x0 = int((r + 0.25) * h / INDEX_GRID), int((c + 0.25) * w / INDEX_GRID)
        y1 = max(int((r + 0.75) * h / INDEX_GRID), y0 + 1)
        x1 = max(int((c + 0.75) * w / INDEX_GRID), x0 + 1)
        level = float(gray[y0:y1, x0:x1].mean())
        if 64 < level < 192:
            raise ValueError(f"decode_index: block {b} has grey level {level:.0f}; not a clean index frame")
        if level >= 128:
            value |= 1 << b
    return value


def make_index_video(
    path: str | os.PathLike,
    n_frames: int,
    fps: float = 10,
    size: tuple[int, int] = (96, 128),
    gop: int = 12,
    bframes: int = 2,
    codec: str = "libx264",
    rotation: int = 0,
    open_gop: bool = False,
) -> Path:
    """A video whose frame i shows the number i (read it with ``decode_index``): for testing exact seeking.

    ``size`` is (height, width). B-frames are on by default so that decode order differs from presentation
    order, the hard case for seeking. The container follows the suffix (``.ts`` gives MPEG-TS);
    ``rotation`` (degrees counterclockwise) is written as a display matrix, as phones do; ``open_gop``
    (x264) makes later keyframes non-IDR recovery points that B-frames before them refer across.
    """
    path = Path(path)
    height, width = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = bframes
        if rotation:
            stream.set_display_rotation(rotation)
        if codec == "libx264":
            # scenecut off: every frame differs wildly, and x264 would otherwise insert keyframes at will.
            stream.options = {
                "preset": "veryfast",
                "crf": "18",
                "bf": str(bframes),
                "threads": "1",
                "x264-params": "scenecut=0" + (":open-gop=1" if open_gop else ""),
            }
        for i in range(n_frames):
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(index_image(i, height, width), format="rgb24")
            ):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
