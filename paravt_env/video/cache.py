"""A bounded, thread-safe cache of decoded overviews.

The G rollouts of one GRPO prompt see the same overview; decoding it G times is waste. Concurrent requests
for the same key wait for the first one instead of decoding in parallel ("single flight").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future

from .frames import Frames


class OverviewCache:
    """LRU cache of ``Frames`` bounded by total image bytes."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, Frames] = OrderedDict()
        self._inflight: dict[Hashable, Future] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, path: str, key: Hashable) -> Hashable:
        from .reader import file_identity

        # The file's identity is part of the key: a replaced or overwritten video is never served stale frames.
        identity = file_identity(path)
        if identity is None:
            raise FileNotFoundError(f"video file not found: {path!r}")
        return (identity, key)

    def get_or_compute(self, path: str, key: Hashable, compute: Callable[[], Frames]) -> Frames:
        full_key = self._key(path, key)
        with self._lock:
            if full_key in self._entries:
                self._entries.move_to_end(full_key)
                self.hits += 1
                return self._entries[full_key]
            future = self._inflight.get(full_key)
            owner = future is None
            if owner:
                future = self._inflight[full_key] = Future()
                self.misses += 1
            else:
                self.hits += 1
        if not owner:
            return future.result()
        try:
            frames = compute()
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(full_key, None)
            future.set_exception(exc)
            raise
        # Frames are shared between callers: make them read-only so no caller can corrupt another's view.
        frames.images.setflags(write=False)
        with self._lock:
            self._inflight.pop(full_key, None)
            size = frames.images.nbytes
            if size <= self.max_bytes:
                self._entries[full_key] = frames
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, old = self._entries.popitem(last=False)
                    self._bytes -= old.images.nbytes
        future.set_result(frames)
        return frames

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


_DEFAULT: OverviewCache | None = None
_DEFAULT_LOCK = threading.Lock()


def default_overview_cache() -> OverviewCache:
    """The process-wide cache ``sample_overview`` uses unless told otherwise."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = OverviewCache()
        return _DEFAULT
