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

    def split(self, rollout_s: float, train_tokens: int) -> dict[str, float]:
        """The step's timing row: rollout / reference / update seconds, training tokens per second of update,
        the wall time, and the peak memory (CUDA: the step's peak allocation; CPU: the process's peak RSS).
        ``reference_s`` is the reference's passes' own time; where the update is pipelined
        (``paravt.learners.pipelined_update``) they run beside the policy's, so ``update_s``, the rest of the wall
        time, is what the update cost beyond them."""
        wall = self._now() - self.start
        update = max(wall - rollout_s - self.reference_s, 0.0)
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {"rollout_s": rollout_s, "reference_s": self.reference_s, "update_s": update,
                "train_tokens": train_tokens, "train_tokens_per_s": train_tokens / max(update, 1e-9),
                "peak_memory_mb": peak, "wall_s": wall}  # fmt: skip
