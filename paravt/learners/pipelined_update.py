"""An update's chunks on two cores: one chunk's backward pass beside the next chunk's forward passes.

The update forwards and backwards the step's trajectories one chunk at a time (a prompt's rollouts together), and
the frozen reference forwards each chunk for the KL. On one core that is forward, reference, backward, forward,
... in turn: on ``repro_cpu`` 4.1 s of a 7 s step, while the second core of a 2-core machine idled (the process
averaged 1.0 core). ``pipelined_gradients`` runs the chunks on two threads: while one thread backwards chunk k,
the other forwards chunk k + 1. torch releases the interpreter's lock inside its kernels and runs a CPU backward
pass on the thread that asks for it, so the two compute at once.

Two rules keep the step's floats those of the one-thread order (``tests/paravt/learners/test_pipelined_update.py``
checks the loss, the statistics and the weights after several steps, bit for bit):

* Each chunk's gradients are taken apart (``torch.autograd.grad``) and added into ``.grad`` in chunk order, as
  one ``backward`` after another accumulates them.
* One forward pass of a model at a time (``OneForwardAtATime``, which the chunk's loss takes around each pass):
  the policy's forward of one chunk may run beside the reference's of another and beside a backward pass, never
  beside another of the policy's. Two forward passes of one model at once gave other gradients: a 6-step run of
  ``repro_cpu`` matched the one-thread run for 4 steps and differed in the last bits of the fifth step's loss,
  and not with those passes serialised (where in transformers' forward the two interfere was not found).

It runs only on a CPU with a core to spare (``pipelines``): where two threads of torch's count do not fit in the
cores this process may use, they would wait on each other, and on a GPU the passes share one device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from paravt.learners.threads import available_cpus

WORKERS = 2
"""Threads: one backwarding while the other forwards."""


def pipelines(device: torch.device) -> bool:
    """Whether the update pipelines its chunks: a CPU device with room for two threads of torch's count."""
    return device.type == "cpu" and WORKERS * torch.get_num_threads() <= available_cpus()


class OneForwardAtATime:
    """A lock per model: ``with forwards.of(model):`` around a forward pass waits for any other pass of that model
    to end (passes of different models run at once)."""

    def __init__(self) -> None:
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def of(self, model: Any) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(id(model), threading.Lock())


def pipelined_gradients(chunk_loss: Callable[[int], tuple[torch.Tensor, Any]], n_chunks: int,
                        params: Sequence[torch.Tensor]) -> list[Any]:  # fmt: skip
    """Run ``chunk_loss(k)`` (a chunk's forward passes, each inside ``OneForwardAtATime``: its loss and whatever
    else it returns) for k in ``range(n_chunks)`` on ``WORKERS`` threads, and differentiate each loss as its
    forward passes end; add each chunk's gradients into ``params``' ``.grad`` in chunk order. Returns the chunks'
    other results, in order. An error in any chunk is raised here once the chunks already started have ended."""
    threads = torch.get_num_threads()

    def run(k: int) -> tuple[tuple[torch.Tensor | None, ...], Any]:
        torch.set_num_threads(threads)  # the caller's count, in this thread too: the same kernels, the same floats
        loss, rest = chunk_loss(k)
        return torch.autograd.grad(loss, params, allow_unused=True), rest

    results = []
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="paravt-update") as pool:
        futures = [pool.submit(run, k) for k in range(n_chunks)]
        try:
            for future in futures:
                grads, rest = future.result()
                for p, g in zip(params, grads, strict=True):
                    if g is None:
                        continue
                    if p.grad is None:
                        p.grad = g
                    else:
                        p.grad.add_(g)
                results.append(rest)
        finally:
            for future in futures:
                future.cancel()
    return results
