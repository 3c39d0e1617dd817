"""``StepClock``: where an RL step's time and memory go (rollout, the frozen reference, the update), as the
trainer records them in ``RUN/metrics.jsonl`` and ``benchmarks.gpu.gpu_step`` reports them at real model size."""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Iterator

import torch


class StepClock:
    """Wall time of one RL step split into rollout, the frozen reference's forward passes and the update (the
    rest), and the step's peak memory. On CUDA each reading synchronises first: kernels run asynchronously, so an
    unsynchronised clock charges a phase's work to whichever phase waits for it."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
        self.device = device
        self.start = self.last = self._now()
        self.reference_s = 0.0
        self.waited_s: float | None = None  # set when the reference runs beside the update (``waiting``)

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def lap(self) -> float:
        """Seconds since the last lap (or the start)."""
        now = self._now()
        elapsed, self.last = now - self.last, now
        return elapsed

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """Charge the enclosed work (the reference model's forward passes) to ``reference_s``."""
        t0 = self._now()
        try:
            yield
        finally:
            self.reference_s += self._now() - t0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Charge the enclosed wait for reference passes that run beside the update (``ReferenceAhead``) to
        ``reference_wait_s``: the part of the step's wall time the reference costs it."""
        t0 = self._now()
        try:
            yield
        finally:
            self.waited_s = (self.waited_s or 0.0) + self._now() - t0

    def split(self, rollout_s: float, train_tokens: int) -> dict[str, float]:
        """The step's timing row: rollout / reference / update seconds, training tokens per second of update,
        the wall time, and the peak memory (CUDA: the step's peak allocation; CPU: the process's peak RSS).
        ``reference_s`` is the reference's passes' own time wherever they ran; ``reference_wait_s`` the part of
        the wall time they cost (all of it where they ran in the update's thread); the update is the rest."""
        wall = self._now() - self.start
        waited = self.reference_s if self.waited_s is None else self.waited_s
        update = max(wall - rollout_s - waited, 0.0)
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {"rollout_s": rollout_s, "reference_s": self.reference_s, "reference_wait_s": waited, "update_s": update,
                "train_tokens": train_tokens, "train_tokens_per_s": train_tokens / max(update, 1e-9),
                "peak_memory_mb": peak, "wall_s": wall}  # fmt: skip
