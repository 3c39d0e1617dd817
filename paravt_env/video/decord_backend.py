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


def build_index(path: str, stream: int | None = None) -> tuple[FrameIndex, dict]:
    """Index from the container's packet timestamps (exact integers) rather than decord's float32 seconds.

    decord numbers frames in presentation order, as ``FrameIndex`` does, so both backends agree on every
    frame's number and timestamp. The frame counts are checked against each other.
    """
    index, props = pyav_backend.build_index(path, stream)
    # decord reads the stream FFmpeg's av_find_best_stream picks and cannot be told another one.
    if props.get("video_streams", 1) > 1 or stream is not None:
        raise VideoDecodeError(path, f"decord cannot choose among its {props.get('video_streams')} video streams; use backend='pyav'")
    # decord seeks by itself and returns whatever frame it lands on, silently: measured 0/50 exact on
    # MPEG-TS, wrong frames on open-GOP and B-frame streams, and it ignores the display rotation. Files where
    # it cannot be trusted are refused with the reason; the PyAV backend reads them exactly.
    if props.get("format") in REFUSED_FORMATS:
        raise VideoDecodeError(path, f"decord does not seek {props['format']} exactly; use backend='pyav'")
    if props.get("rotation"):
        raise VideoDecodeError(path, f"decord ignores the display rotation ({props['rotation']} degrees); use backend='pyav'")
    if props.get("open_gop"):
        raise VideoDecodeError(path, "decord misplaces frames in open GOPs (keyframes that are not IDR); use backend='pyav'")
    if props.get("reordered") and props.get("codec") not in EXACT_REORDERING_CODECS:
        raise VideoDecodeError(path, f"decord misplaces reordered ({props.get('codec')}) frames (B-frames); use backend='pyav'")
    vr = _open(path)
    if len(vr) != index.num_frames:
        raise VideoDecodeError(
            path, f"decord sees {len(vr)} frames where the container index has {index.num_frames}"
        )
    verify(path, index, vr, props)
    props = dict(props, fps=float(vr.get_avg_fps()) or props["fps"])
    return index, props


REFUSED_FORMATS = frozenset({"mpegts", "mpeg", "mpegvideo"})
"""Containers decord seeks by byte position without exact timestamps (MPEG-TS / PS)."""

EXACT_REORDERING_CODECS = frozenset({"h264", "hevc"})
"""Codecs whose B-frames decord places right in closed GOPs (the index-video tests check H.264); measured
wrong on MPEG-4 part 2 with B-frames."""

VERIFY_TOLERANCE = 3.0
"""Mean absolute RGB difference below which two decodes of a frame are the same frame (codec rounding)."""


def check_indices(index: FrameIndex) -> list[int]:
    """The frames checked at open: inside the first GOP, just before and after a later keyframe (where a
    seek lands), the middle and the last frame."""
    n = index.num_frames
    picks = {1, 2, n // 2, n // 2 + 1, n - 1}
    keys = np.flatnonzero(index.keyframe)
    later = keys[keys > 0]
    if later.size:
        k = int(later[min(len(later) - 1, len(later) // 2)])
        picks |= {k - 1, k + 1}
    return sorted(i for i in picks if 0 <= i < n)


def verify(path: str, index: FrameIndex, vr, props: dict) -> None:
    """Decode a few frames with decord (each with its own seek, as crops ask) and with the exact PyAV
    backend; any difference refuses the file, naming the first frame that differs."""
    picks = check_indices(index)
    exact = pyav_backend.PyAVHandle(path, index)
    try:
        h, w = props["height"], props["width"]
        truth = exact.decode(np.asarray(picks), h, w)
    finally:
        exact.close()
    wrong = []
    for i in picks:
        try:
            got = vr.get_batch([i]).asnumpy()[0]
        except Exception as exc:
            raise VideoDecodeError(path, f"decord failed to decode frame {i}: {exc}") from exc
        if got.shape != truth[i].shape or np.abs(got.astype(np.int16) - truth[i].astype(np.int16)).mean() > VERIFY_TOLERANCE:
            wrong.append(i)
    if wrong:
        raise VideoDecodeError(path, f"decord returns frames other than those asked for in this file ({len(wrong)} "
                                     f"of {len(picks)} checked differ, first: frame {wrong[0]}); use backend='pyav'")  # fmt: skip


class DecordHandle:
    """One decord reader. Not thread-safe: the reader gives each thread its own handle."""

    def __init__(self, path: str, index: FrameIndex, name: str | None = None) -> None:
        self.path = path  # what is opened: the video's path, or a descriptor the reader pinned (/proc/self/fd/N)
        self.name = name or path  # what errors call it
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
                raise VideoDecodeError(self.name, f"decoding frames failed: {exc}") from exc
        return {int(i): resize_rgb(img, height, width) for i, img in zip(wanted, batch, strict=True)}
