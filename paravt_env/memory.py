"""Giving freed heap pages back to the operating system.

glibc keeps the pages of freed buffers for reuse, and a process that frees and reallocates many buffers of
every size (decoded frames, compressed frames, per-step tensors) keeps a fragmented heap whose RSS only grows.
Measured: the env's RSS crept up ~30 KB per episode over 1,000 episodes while the Python heap (tracemalloc) stayed
flat, and one trim returned ~60 MB; on ``tiny_cpu`` the RSS after the cold start stayed ~1 GB above what the RL
steps need, and the main job peaked at 2.25 GB until the trainer trimmed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import sys


def release_free_memory(*, collect: bool = False) -> None:
    """``malloc_trim(0)`` (glibc; a no-op elsewhere), after a garbage collection when ``collect``."""
    if collect:
        gc.collect()
    if not sys.platform.startswith("linux"):
        return
    name = ctypes.util.find_library("c") or "libc.so.6"
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl): nothing to trim
        ctypes.CDLL(name).malloc_trim(0)
