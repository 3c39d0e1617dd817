"""Turns of concurrent episodes gathered into one generation batch.

``paravt eval`` plays episodes in threads (``--concurrency``), each through ``play_episode``, which asks its
agent for one turn at a time. A model in process generates one batch at a time, so without gathering the
threads' turns run one after another, each a batch of one. ``TurnGather`` holds each turn until every episode
in flight is either waiting for its own turn or finished, then generates all of them together (the first thread
to see the batch complete runs it for everyone). An episode counts as in flight inside ``with gather.episode():``;
outside any episode (the trainer's rollouts, a single ``play_episode``) a turn runs at once, alone. A turn never
waits longer than ``max_wait_s`` for the others (an episode stuck in a slow env step does not hold the rest).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    """One thread's request: its prompts and generation settings, and, once run, its results or error."""

    prompts: Sequence[Any]
    settings: dict[str, Any]
    results: list[Any] | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class TurnGather:
    """Gathers ``Turn``s of the episodes in flight and runs them with ``run(turns)``, which fills each turn's
    ``results`` (or ``error``)."""

    def __init__(self, run: Callable[[list[Turn]], None], max_wait_s: float = 2.0) -> None:
        self._run = run
        self.max_wait_s = float(max_wait_s)
        self._cond = threading.Condition()
        self._queue: list[Turn] = []
        self._active = 0
        self._running = False
        self.batches: list[int] = []
        """Turns per batch run, in order (what a test or a benchmark reads)."""

    @contextmanager
    def episode(self) -> Iterator[None]:
        """An episode in flight: its turns wait for the others' (leaving wakes the waiting ones)."""
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def submit(self, turn: Turn) -> list[Any]:
        deadline = time.monotonic() + self.max_wait_s
        with self._cond:
            self._queue.append(turn)
            self._cond.notify_all()
            while not turn.done:
                ready = len(self._queue) >= self._active or time.monotonic() >= deadline
                if self._running or not self._queue or not ready:
                    self._cond.wait(timeout=max(0.0, deadline - time.monotonic()) if not self._running else None)
                    continue
                batch, self._queue = self._queue, []
                self._running = True
                self._cond.release()
                try:
                    try:
                        self._run(batch)
                    except BaseException as exc:  # every turn of the batch gets the error, not only the leader's
                        for t in batch:
                            if t.results is None:
                                t.error = exc
                finally:
                    self._cond.acquire()
                    for t in batch:
                        t.done = True
                    self.batches.append(len(batch))
                    self._running = False
                    self._cond.notify_all()
        if turn.error is not None:
            raise turn.error
        return turn.results  # type: ignore[return-value]
