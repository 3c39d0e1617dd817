"""The frozen reference's forward passes on a second core, ahead of the update that reads them.

With the KL in the loss, the update needs the reference's log-probs of each micro-batch before that micro-batch's
loss, and on one core the step ran them one after the other: on ``repro_cpu`` the reference took 0.9 s of a 7 s step
while the second core of a 2-core machine idled (the process used 1.0 core on average). ``ReferenceAhead`` runs the
reference's passes, micro-batch by micro-batch in the update's order, in a thread of its own while the update
forwards and backwards the policy; the update takes each micro-batch's log-probs as it reaches it. torch releases the
interpreter's lock inside its kernels, so the two threads compute at once. Each pass is the same computation on the
same inputs with the same intra-op thread count, so the log-probs, and so the step, are bit for bit what the
sequential order gives (``tests/paravt/learners/test_reference_ahead.py``).

It runs only on a CPU with a core to spare for it (``beside``): where two threads of torch's count do not fit in the
cores this process may use, they would wait on each other, and on a GPU the two streams of work share one device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from paravt.learners.threads import available_cpus


def beside(device: torch.device) -> bool:
    """Whether the reference runs beside the update: a CPU device with room for two threads of torch's count."""
    return device.type == "cpu" and 2 * torch.get_num_threads() <= available_cpus()


class ReferenceAhead:
    """``compute(chunk)`` of every chunk, in order, on a thread of its own (under ``torch.no_grad``, with the
    caller's intra-op thread count); ``get(k)`` waits for chunk k's. ``close`` stops what has not begun and waits
    for what has (an interrupted update leaves no thread computing behind it)."""

    def __init__(self, compute: Callable[[Sequence[Any]], list[torch.Tensor]], chunks: Sequence[Sequence[Any]]) -> None:
        self._stop = threading.Event()
        threads = torch.get_num_threads()

        def run(chunk: Sequence[Any]) -> list[torch.Tensor] | None:
            if self._stop.is_set():
                return None
            torch.set_num_threads(threads)
            with torch.no_grad():
                return compute(chunk)

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="paravt-reference")
        self._futures: list[Future] = [self._pool.submit(run, c) for c in chunks]

    def get(self, k: int) -> list[torch.Tensor]:
        return self._futures[k].result()

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ReferenceAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
