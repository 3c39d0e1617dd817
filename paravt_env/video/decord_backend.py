"""decord backend (what the released ParaVT and qwen-vl-utils decode with).

decord keeps its own frame index in presentation order and seeks by itself; we only choose which frames
to ask for (from the same packet index as the PyAV backend) and resize them with the same swscale filter as the PyAV backend, so both backends hand back the
same frames for the same request.
"""

from __future__ import annotations

import threading

import numpy as np

from . import pyav_backend
from .errors import VideoDecodeError
from .index import FrameIndex
from .resize import resize_rgb


def _decord():
    try:
        import decord
    except ImportError as exc:  # pragma: no cover - decord is a core dependency on x86_64
        raise ImportError("the decord backend needs `pip install decord` (x86_64 only)") from exc
    return decord


def _open(path: str):
    decord = _decord()
    try:
        # One decoder thread per handle: concurrency comes from several handles, one per crop.
        return decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
    except Exception as exc:  # decord raises DECORDError (a RuntimeError) or plain RuntimeErrors
        raise VideoDecodeError(path, str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)) from exc


def build_index(path: str) -> tuple[FrameIndex, dict]:
    """Index from the container's packet timestamps (exact integers) rather than decord's float32 seconds.

    decord numbers frames in presentation order, as ``FrameIndex`` does, so both backends agree on every
    frame's number and timestamp. The frame counts are checked against each other.
    """
    index, props = pyav_backend.build_index(path)
    vr = _open(path)
    if len(vr) != index.num_frames:
        raise VideoDecodeError(
            path, f"decord sees {len(vr)} frames where the container index has {index.num_frames}"
        )
    props = dict(props, fps=float(vr.get_avg_fps()) or props["fps"])
    return index, props


class DecordHandle:
    """One decord reader. Not thread-safe: the reader gives each thread its own handle."""

    def __init__(self, path: str, index: FrameIndex) -> None:
        self.path = path
        self.index = index
        self._vr = _open(path)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._vr = None

    def decode(self, wanted: np.ndarray, height: int, width: int) -> dict[int, np.ndarray]:
        with self._lock:
            try:
                batch = self._vr.get_batch([int(i) for i in wanted]).asnumpy()
            except Exception as exc:
                raise VideoDecodeError(self.path, f"decoding frames failed: {exc}") from exc
        return {int(i): resize_rgb(img, height, width) for i, img in zip(wanted, batch, strict=True)}
