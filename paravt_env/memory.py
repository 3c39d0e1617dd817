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


def freeze_survivors() -> None:
    """Collect, then move every object alive now into the collector's permanent generation (``gc.freeze``): a
    long run's modules, model and envs are never scanned again, and each later ``gc.collect`` costs what was
    allocated since. Measured: a collection in a training process (torch, transformers, matplotlib imported)
    took 0.19 s, once a step; after the freeze, microseconds. Cycles among the frozen objects are not collected
    until ``thaw_survivors``, so call it once the set-up's garbage is gone, and thaw when the loop ends (a process
    that trains several runs, a test session, then collects each run's leftovers)."""
    gc.collect()
    gc.freeze()


def thaw_survivors() -> None:
    """Undo ``freeze_survivors``: the frozen objects are scanned by collections again."""
    gc.unfreeze()

