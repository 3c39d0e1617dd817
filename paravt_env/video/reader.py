"""``open_video`` and ``VideoReader``: one object per video, safe to share between threads."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from . import decord_backend, pyav_backend
from .errors import VideoDecodeError
from .frames import Frames
from .index import FrameIndex
from .resize import target_size

BACKENDS = ("pyav", "decord")
AUTO_BACKEND = "pyav"
"""What ``backend="auto"`` picks: PyAV is the faster backend in benchmarks/perf/test_bench_video.py (docs/env.md, "Speed")."""

DEFAULT_MIN_PIXELS = 784
DEFAULT_MAX_PIXELS = 50176
_MAX_IDLE_HANDLES = 8


class _Handle(Protocol):
    def decode(self, wanted: np.ndarray, height: int, width: int) -> dict[int, np.ndarray]: ...

    def close(self) -> None: ...


_MODULES = {"pyav": pyav_backend, "decord": decord_backend}
_HANDLES = {"pyav": pyav_backend.PyAVHandle, "decord": decord_backend.DecordHandle}

# Indexing scans the whole file; keep the result for files seen recently (a GRPO group reopens one video
# many times). Keyed by the file's identity so an overwritten file is indexed anew.
_INDEX_CACHE: OrderedDict[tuple, tuple[FrameIndex, dict]] = OrderedDict()
_INDEX_CACHE_SIZE = 256
_INDEX_LOCK = threading.Lock()


def _stat_key(st: os.stat_result) -> tuple:
    """Device and inode (a file replaced by rename), size and modification time (one overwritten in place)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def file_identity(path: str) -> tuple:
    """What tells one file from another at ``path``: the resolved path, then ``_stat_key``. None where the file is
    gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), *_stat_key(st))


def _indexed(path: str, backend: str, identity: tuple, stream: int | None) -> tuple[FrameIndex, dict]:
    key = (identity, backend, stream)
    with _INDEX_LOCK:
        if key in _INDEX_CACHE:
            _INDEX_CACHE.move_to_end(key)
            return _INDEX_CACHE[key]
    result = _MODULES[backend].build_index(path, stream)
    with _INDEX_LOCK:
        _INDEX_CACHE[key] = result
        while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
            _INDEX_CACHE.popitem(last=False)
    return result


def resolve_backend(backend: str) -> str:
    if backend == "auto":
        return AUTO_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"unknown video backend {backend!r}; choose one of {('auto', *BACKENDS)}")
    return backend


class VideoReader:
    """Random access to the frames of one video, by time.

    Thread-safe: each concurrent call borrows its own decoder handle, so the crops of one turn decode in
    parallel (FFmpeg releases the GIL while decoding).
    """

    def __init__(self, path: str | os.PathLike, backend: str = "auto", stream: int | None = None) -> None:
        self.path = os.fspath(path)
        self.backend = resolve_backend(backend)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"video file not found: {self.path!r}")
        self.identity = file_identity(self.path)
        """The file this reader indexed (``file_identity``): frames are only ever decoded from it."""
        self.index, props = _indexed(self.path, self.backend, self.identity, stream)
        if file_identity(self.path) != self.identity:
            raise VideoDecodeError(self.path, "the file changed on disk while it was being indexed")
        self.width: int = props["width"]
        self.height: int = props["height"]
        self.fps: float = props["fps"]
        self.stream: int | None = props.get("stream")
        """Container index of the video stream read: the one a player shows (``pyav_backend.pick_stream``)
        unless ``stream`` named another."""
        self.rotation: int = int(props.get("rotation", 0))
        """Degrees counterclockwise a player turns the stored picture; frames come back turned."""
        self._idle: list[_Handle] = []
        self._lock = threading.Lock()
        self._closed = False
        self._fd: int | None = None
        self._source = self.path  # what new decoder handles open: the path, or the pinned file

    def changed(self) -> bool:
        """The file at ``path`` is no longer the one this reader indexed (replaced, rewritten or removed)."""
        return file_identity(self.path) != self.identity

    def pin(self) -> None:
        """Keep reading the file this reader indexed even if its path is replaced (a new file renamed over it,
        the old one deleted): decoder handles open it through a descriptor held from now on (Linux's
        /proc/self/fd), not by path. The env pins the video of the episode it plays, so that a video replaced
        between reset and step does not fail the episode's crops; the next reset opens the new file. A file
        rewritten in place (same inode, other bytes) cannot be kept: it is refused, naming it."""
        if self._fd is not None or not os.path.isdir("/proc/self/fd") or self.identity is None:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:  # gone already: nothing to hold; a decode then refuses the changed file by name
            return
        if _stat_key(os.fstat(fd)) != self.identity[1:]:
            os.close(fd)  # already another file at the path: nothing of the indexed one to keep
            return
        with self._lock:
            self._fd, self._source = fd, f"/proc/self/fd/{fd}"

    def unpin(self) -> None:
        """Stop holding the indexed file open (handles open it by path again)."""
        with self._lock:
            fd, self._fd, self._source = self._fd, None, self.path
        if fd is not None:
            os.close(fd)

    def _source_changed(self) -> bool:
        """The file new handles would read is not the indexed one (pinned: that file rewritten in place)."""
        if self._fd is None:
            return self.changed()
        try:
            return _stat_key(os.fstat(self._fd)) != self.identity[1:]
        except OSError:
            return True

    # --- properties -------------------------------------------------------------------------------------
    @property
    def duration(self) -> float:
        """Length in seconds."""
        return self.index.duration

    @property
    def num_frames(self) -> int:
        return self.index.num_frames

    def __repr__(self) -> str:
        return (
            f"VideoReader({self.path!r}, backend={self.backend!r}, duration={self.duration:.2f}s, "
            f"fps={self.fps:.3f}, frames={self.num_frames}, size={self.width}x{self.height})"
        )

    # --- frames -----------------------------------------------------------------------------------------
    def frames_at(
        self,
        times: Sequence[float] | np.ndarray,
        tolerance: float = 0.0,
        min_pixels: int | None = DEFAULT_MIN_PIXELS,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
    ) -> Frames:
        """The frames shown at ``times`` (seconds; clamped to the video), resized by Qwen-VL's rule.

        ``tolerance=0`` returns exactly the frame displayed at each time. A positive tolerance lets the
        reader return the cheapest frame within +-tolerance (a keyframe, say); ``Frames.timestamps`` always
        holds the true time of each returned frame. ``min_pixels=max_pixels=None`` keeps the native size.
        """
        times = np.atleast_1d(np.asarray(times, dtype=np.float64))
        if tolerance < 0 or not np.isfinite(tolerance):
            raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance}")
        return self.frames_by_index(self.index.select(times, tolerance), min_pixels, max_pixels)

    def frames_by_index(
        self,
        indices: Sequence[int] | np.ndarray,
        min_pixels: int | None = DEFAULT_MIN_PIXELS,
        max_pixels: int | None = DEFAULT_MAX_PIXELS,
    ) -> Frames:
        """Frames by their number in presentation order (repeats allowed, order kept)."""
        indices = np.clip(np.asarray(indices, dtype=np.int64).reshape(-1), 0, self.num_frames - 1)
        height, width = target_size(self.height, self.width, min_pixels, max_pixels)
        if indices.size == 0:
            return Frames.empty(height, width)
        wanted = np.unique(indices)
        # Frames of another file under this reader's index would be silently wrong (other times, other
        # content): refuse them, naming the file. The env reopens a changed file at the next reset.
        if self._source_changed():
            raise VideoDecodeError(self.path, "the file changed on disk since it was opened (replaced, rewritten "
                                              "or removed); open it again")  # fmt: skip
        handle = self._borrow()
        try:
            decoded = handle.decode(wanted, height, width)
        except BaseException:
            # A handle that failed mid-decode may be in any state: do not reuse it.
            handle.close()
            raise
        self._give_back(handle)
        images = np.stack([decoded[int(i)] for i in indices])
        return Frames(images=images, timestamps=self.index.times[indices].copy(), indices=indices)

    # --- handles ----------------------------------------------------------------------------------------
    def _borrow(self) -> _Handle:
        if self._closed:
            raise ValueError(f"I/O on a closed VideoReader ({self.path!r})")
        with self._lock:
            if self._idle:
                return self._idle.pop()
        if self.backend == "pyav":
            return pyav_backend.PyAVHandle(self._source, self.index, self.rotation, self.stream, name=self.path)
        return _HANDLES[self.backend](self._source, self.index, name=self.path)

    def _give_back(self, handle: _Handle) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE_HANDLES:
                self._idle.append(handle)
                return
        handle.close()

    def release_handles(self) -> None:
        """Close the idle decoder handles (about 1 MB each) and keep the index: the reader stays usable and
        opens a handle again when it next decodes. For readers kept between episodes that are not in use."""
        with self._lock:
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()
        self.unpin()

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_video(path: str | os.PathLike, backend: str = "auto", stream: int | None = None) -> VideoReader:
    """Open a video for random access by time.

    Raises ``FileNotFoundError`` naming a missing file and ``VideoDecodeError`` naming a file that is not a
    decodable video. ``backend`` is "pyav", "decord" or "auto" (the faster one, measured: PyAV). ``stream``
    picks a video stream by its container index (default: the one a player shows, never a thumbnail track).
    """
    return VideoReader(path, backend=backend, stream=stream)


__all__ = ["VideoReader", "open_video", "file_identity", "VideoDecodeError", "BACKENDS", "resolve_backend"]
