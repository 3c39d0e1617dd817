"""Turns of concurrent episodes gathered into one generation batch.

``paravt eval`` plays episodes in threads (``--concurrency``), each through ``play_episode``, which asks its
agent for one turn at a time. A model in process generates one batch at a time, so without gathering the
threads' turns run one after another, each a batch of one. ``TurnGather`` makes one batch of the turns of every
episode in flight: the first thread with a turn, when no batch is running, leads one at once and hands ``run`` the
batch's turns as they come (an iterator), so the engine prefills each while the other episodes still step their
envs; the batch closes when every episode in flight has a turn in it or has finished (the leader runs it for
everyone). An episode counts as in flight inside ``with gather.episode():``; outside any episode (a single
``play_episode``) a turn runs at once, alone. A batch never waits longer than ``max_wait_s`` for the others (an
episode stuck in a slow env step does not hold the rest). A batch's turns share their generation settings; a turn
with others waits for the next batch.
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
    """Gathers ``Turn``s of the episodes in flight and runs each batch with ``run(turns)``: ``turns`` yields the
    batch's turns as they come, and ``run`` fills each one's ``results`` (or ``error``)."""

    def __init__(self, run: Callable[[Iterator[Turn]], None], max_wait_s: float = 2.0) -> None:
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
                if self._running:
                    self._cond.wait()  # the leader takes this turn, or leaves it for the next batch
                else:
                    self._lead(deadline)
        if turn.error is not None:
            raise turn.error
        return turn.results  # type: ignore[return-value]

    def _lead(self, deadline: float) -> None:
        """Run a batch from this thread (called, and returning, with the condition's lock held)."""
        taken: list[Turn] = []
        self._running = True
        self._cond.release()
        try:
            try:
                self._run(self._arrivals(taken, deadline))
            except BaseException as exc:  # every turn of the batch gets the error, not only the leader's
                for t in taken:
                    if t.results is None:
                        t.error = exc
        finally:
            self._cond.acquire()
            for t in taken:
                if t.results is None and t.error is None:  # ``run`` never answered it
                    t.error = RuntimeError("the generation ended without this turn's results")
                t.done = True
            self.batches.append(len(taken))
            self._running = False
            self._cond.notify_all()

    def _arrivals(self, taken: list[Turn], deadline: float) -> Iterator[Turn]:
        """The batch's turns as they come: queued turns with the first one's settings, until every episode in flight
        has a turn in the batch (or one of other settings waiting for the next) or has finished, or ``deadline``
        passes."""
        settings = None
        while True:
            with self._cond:
                while True:
                    pick = next((t for t in self._queue if settings is None or t.settings == settings), None)
                    if pick is not None:
                        break
                    others = sum(1 for t in self._queue if t.settings != settings)
                    if len(taken) + others >= self._active or time.monotonic() >= deadline:
                        return
                    self._cond.wait(timeout=max(0.0, deadline - time.monotonic()))
                self._queue.remove(pick)
                settings = pick.settings
                taken.append(pick)
            yield pick
