"""The overall view of a long job (``paravt train``'s main job): its stages, the one running, the time elapsed and
an estimate of the time left, shown on every stage's bar (``[3/7] perception stage ... job=12:04 in, ~31 min left``) or,
without bars (``--no-progress``), as one line when a stage begins.

The stages' loops do not know about the job: they ask ``stage_bar`` for a bar by their stage's key ("perception",
"sft", "train", "eval", ...) as they always asked ``tqdm`` for one, and the job that ``job_progress`` made active
counts their units. Outside a job ``stage_bar`` is a plain tqdm bar (or None when progress is off), as before.

It lives here, in ``paravt.evaluation``, because it is the lowest layer both the trainer (``paravt.learners``) and
the held-out evaluation (``paravt.evaluation.heldout``) reach (``docs/reference.md#layout``). It only counts and
prints: nothing it does changes what a stage computes or draws.

The estimate: each stage has a reference cost per unit (seconds on the 2-core development machine, measured on
the main job); the work done so far in this process says how much faster or slower this machine runs (its
measured time over the reference cost of the same units), and the units left are charged at the reference cost
times that factor; the running stage, once it has run a few units, at its own measured rate.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Stage:
    """One stage of a job: ``units`` of work (steps, episodes, videos) at ``cost_s`` reference seconds each;
    ``done`` units were finished before this process started (a resumed run)."""

    key: str
    label: str
    units: int
    unit: str = "step"
    cost_s: float = 1.0
    done: int = 0
    calibrates: bool = True
    """Whether this stage's speed says anything about the machine's (building cached videos takes no time)."""
    parts: bool = False
    """Whether several loops share the stage, each reporting its own units done before (``JobProgress.skip``)."""
    ran: int = field(default=0, init=False)
    seconds: float = field(default=0.0, init=False)


def clock_text(seconds: float) -> str:
    """``m:ss`` under an hour, ``h:mm:ss`` above."""
    s = int(max(0.0, seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def left_text(seconds: float | None) -> str:
    """The estimate in words: ``~31 min left``, ``~2 h 05 min left``, ``under a minute left``."""
    if seconds is None:
        return "time left unknown"
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute left"
    if minutes < 60:
        return f"~{minutes} min left"
    return f"~{minutes // 60} h {minutes % 60:02d} min left"


class JobProgress:
    """The stages of one job, the one running, and the estimate of what is left (see the module docstring).
    ``bars``: stages show tqdm bars (the job's figures in their description and postfix); otherwise one line per
    stage begun is written to ``stream``."""

    MIN_OWN_RATE_UNITS = 3
    """Units a stage runs before its own rate replaces the reference one in the estimate."""

    def __init__(self, stages: Sequence[Stage], *, bars: bool, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.stages = list(stages)
        self.bars, self.stream, self.clock = bars, stream, clock
        self.started = clock()
        self.current: int | None = None
        self._entered_at = self.started

    def index(self, key: str) -> int | None:
        return next((i for i, s in enumerate(self.stages) if s.key == key), None)

    def enter(self, key: str, done_before: int = 0) -> Stage | None:
        """Make ``key`` the running stage (every stage before it is finished: a stage a resumed run skips, or one
        whose loop found its work saved, ran no unit here), ``done_before`` of its units found done (``skip``);
        prints its line without bars. None for a key the job does not have."""
        i = self.index(key)
        if i is None:
            return None
        if done_before:
            stage = self.stages[i]
            stage.done = min(stage.units, stage.done + done_before if stage.parts else max(stage.done, done_before))
        if self.current != i:
            self._charge()
            for earlier in self.stages[:i]:
                earlier.done = max(earlier.done, earlier.units - earlier.ran)
            self.current = i
            self._entered_at = self.clock()
            if not self.bars:
                self.write(self.line())
        return self.stages[i]

    def skip(self, key: str, n: int) -> None:
        """``n`` units of ``key`` were done before (found on disk): they cost nothing now and say nothing of speed.
        A stage of several parts (``Stage.parts``: the held-out evaluation's four evaluations) adds each part's;
        a stage of one loop knows its position (a resumed loop's first step), which the plan may already hold."""
        self.enter(key, done_before=n)

    def advance(self, key: str, n: int = 1) -> None:
        """``n`` units of ``key`` ran now."""
        stage = self.enter(key)
        if stage is None:
            return
        now = self.clock()
        stage.seconds += now - self._entered_at
        self._entered_at = now
        stage.ran += n

    def _charge(self) -> None:
        """Time since the last count belongs to the running stage (a stage's tail after its last unit)."""
        if self.current is not None:
            now = self.clock()
            self.stages[self.current].seconds += now - self._entered_at
            self._entered_at = now

    def elapsed(self) -> float:
        return self.clock() - self.started

    def speed(self) -> float:
        """This machine's seconds per reference second, from the units run so far (1 before any)."""
        spent = sum(s.seconds for s in self.stages if s.calibrates and s.ran)
        reference = sum(s.ran * s.cost_s for s in self.stages if s.calibrates and s.ran)
        return spent / reference if reference > 0 and spent > 0 else 1.0

    def remaining(self) -> float | None:
        """Seconds left for the whole job, estimated; None for a job without stages."""
        if not self.stages:
            return None
        factor, total = self.speed(), 0.0
        for i, s in enumerate(self.stages):
            left = max(0, s.units - s.done - s.ran)
            if left == 0:
                continue
            if i == self.current and s.ran >= self.MIN_OWN_RATE_UNITS and s.seconds > 0:
                total += left * s.seconds / s.ran
            else:
                total += left * s.cost_s * (factor if s.calibrates else 1.0)
        return total

    def prefix(self, key: str) -> str:
        """``[k/n]`` of ``key`` ("" for a key the job does not have)."""
        i = self.index(key)
        return "" if i is None else f"[{i + 1}/{len(self.stages)}]"

    def status(self) -> str:
        """``12:04 in, ~31 min left``: the whole job, shown on a stage's bar (as ``job=...``) beside its own figures."""
        return f"{clock_text(self.elapsed())} in, {left_text(self.remaining())}"

    def line(self) -> str:
        """``[3/7] perception: 600 steps | 12:04 elapsed | ~31 min left`` for the running stage."""
        if self.current is None:
            return f"job: {len(self.stages)} stages | {left_text(self.remaining())}"
        s = self.stages[self.current]
        todo = max(0, s.units - s.done)
        already = f" ({s.done} done before)" if s.done else ""
        return (f"{self.prefix(s.key)} {s.label}: {todo} {s.unit}{'s' if todo != 1 else ''}{already} | "
                f"{clock_text(self.elapsed())} elapsed | {left_text(self.remaining())}")  # fmt: skip

    def finish(self) -> str:
        """The closing line: the job's time and each stage's, for the stages that ran here."""
        self._charge()
        ran = ", ".join(f"{s.label.split(' (')[0]} {clock_text(s.seconds)}" for s in self.stages if s.seconds >= 0.5)
        return f"job done in {clock_text(self.elapsed())}" + (f" ({ran})" if ran else "")

    def write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        print(text, file=stream, flush=True)


_ACTIVE: ContextVar[JobProgress | None] = ContextVar("paravt_job_progress", default=None)


def active_job() -> JobProgress | None:
    """The job ``job_progress`` made active in this context, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def job_progress(job: JobProgress) -> Iterator[JobProgress]:
    """Make ``job`` the one ``stage_bar`` and ``stage_label`` report to, for the ``with`` block."""
    token = _ACTIVE.set(job)
    try:
        yield job
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def outside_job() -> Iterator[None]:
    """No active job for the ``with`` block: work done inside another stage (a validation during RL) neither enters
    the job's stages of the same name nor counts toward them."""
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def stage_label(key: str, text: str) -> str:
    """``text`` with the active job's ``[k/n]`` before it (unchanged outside a job)."""
    job = active_job()
    prefix = job.prefix(key) if job is not None else ""
    return f"{prefix} {text}" if prefix else text


class StageBar:
    """A stage's bar inside a job: it counts the stage's units for the job and, when bars are on, draws a tqdm
    bar whose postfix carries the job's elapsed time and estimate. Used as the tqdm bar it replaces
    (``update``, ``set_postfix``, ``close``)."""

    def __init__(self, job: JobProgress, key: str, total: int, *, initial: int, detail: str, unit: str,
                 enabled: bool) -> None:  # fmt: skip
        self.job, self.key = job, key
        stage = job.enter(key, done_before=initial)
        self.bar = None
        self._postfix: dict[str, Any] = {}
        if enabled and job.bars and stage is not None:
            from tqdm import tqdm

            desc = stage_label(key, stage.label + (f": {detail}" if detail else ""))
            self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit)
            self.bar.set_postfix(job=job.status())

    def update(self, n: int = 1) -> None:
        self.job.advance(self.key, n)
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix({**self._postfix, "job": self.job.status()})

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        self._postfix = {**(args[0] if args else {}), **kwargs}
        if self.bar is not None:
            self.bar.set_postfix({**self._postfix, "job": self.job.status()})

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def stage_bar(key: str, total: int, *, enabled: bool, initial: int = 0, unit: str = "step", detail: str = "") -> Any:
    """A bar for stage ``key``: inside an active job that has the stage, a ``StageBar`` named by the stage's label
    and ``detail`` (counted whether or not bars are drawn); else a tqdm bar named ``key`` when ``enabled``, or
    None."""
    job = active_job()
    if job is not None and job.index(key) is not None:
        return StageBar(job, key, total, initial=initial, detail=detail, unit=unit, enabled=enabled)
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=key, unit=unit)


def enter_stage(key: str) -> None:
    """Stage ``key`` of the active job begins (its line is printed without bars); nothing outside a job."""
    job = active_job()
    if job is not None:
        job.enter(key)


def count_units(key: str, n: int) -> None:
    """``n`` units of stage ``key`` ran now, for work that draws no bar of its own through ``stage_bar``."""
    job = active_job()
    if job is not None:
        job.advance(key, n)
