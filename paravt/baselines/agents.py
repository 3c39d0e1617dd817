"""Scripted agents that really look at the frames the env gives them.

- ``detector``: reads the needles in every frame it is shown; when the overview does not settle the
  question it spreads crops over what it has not seen well — all of a turn's crops at once under parallel
  dispatch, one per turn under sequential dispatch, never more than the episode's crop budget — and answers as
  soon as the evidence suffices.
- ``no_tool``: answers from the overview alone.
- ``uniform``: one turn of fixed crops tiling the video, whatever it saw, then answers.
- ``oracle``: crops the recorded event windows (it reads ``sample.events``): an upper bound on cropping.

All of them answer from pixels with the same reader (``paravt.baselines.vision``) and write protocol text
(``<think>``, ``<tool_call>``, ``<answer>``) that the env parses like a model's.
"""

from __future__ import annotations

from typing import Any

from paravt.baselines.planning import SEARCH_SPACING, gaps_in, plan_points, uniform_windows, windows_for
from paravt.baselines.questions import Evidence, Query, answer, boundary_gaps, parse_query
from paravt.baselines.vision import detect_all
from paravt_env.data import VideoQASample
from paravt_env.protocol import format_tool_call

BOUNDARY_SPACING = 1.0
"""Seconds of uncertainty left at each end of a needle before a grounding answer is given."""


class ScriptedAgent:
    """Base class: keeps the evidence of one episode and writes answers and tool calls.

    Use: ``agent.reset(obs, info, sample)`` after ``env.reset``, then ``action = agent.act(obs)`` with the
    latest observation before every ``env.step``.
    """

    name = "scripted"

    def reset(self, obs: dict[str, Any], info: dict[str, Any], sample: VideoQASample | None = None) -> None:
        limits = info.get("limits", {})
        self.max_turns = int(limits.get("max_turns", 3))
        # It plans as many windows as one parallel turn runs (``n_crops``) and issues them ``per_turn`` at a time:
        # all at once under parallel dispatch, one a turn under sequential dispatch (the rest wait in ``_queue``
        # and go out in the next turns), so the two modes differ only in how the same calls are dispatched.
        self.n_crops = int(limits.get("max_parallel", 5))
        self.per_turn = 1 if limits.get("dispatch", "parallel") == "sequential" else self.n_crops
        if limits.get("calls_per_turn"):  # the protocol's own rule (LongVT: one call a turn)
            self.per_turn = min(self.per_turn, int(limits["calls_per_turn"]))
        self.call_arguments = dict(info.get("call_arguments") or {})
        budget = limits.get("crop_budget")
        self.crops_left = None if budget is None else int(budget)  # the episode's crop budget, where it has one
        if self.crops_left is not None:
            self.n_crops = min(self.n_crops, self.crops_left)
        self._queue: list[tuple[float, float]] = []
        self.max_frames = int(limits.get("crop_max_frames", 16))
        self.query: Query = parse_query(obs["text"], info.get("duration"))
        self.duration = self.query.duration
        self.sample = sample
        self.evidence = Evidence()
        self.turn = 0

    def act(self, obs: dict[str, Any]) -> str:
        self.evidence.add(obs["timestamps"], detect_all(obs["frames"], obs["timestamps"]))
        turn, self.turn = self.turn, self.turn + 1
        spent = self.crops_left is not None and self.crops_left <= 0
        windows = [] if turn >= self.max_turns - 1 or spent else self._next_windows(turn)
        if self.crops_left is not None:
            windows = windows[: self.crops_left]
            self.crops_left -= len(windows)
        if not windows:
            return self.final_answer()
        return self.tool_turn(windows)

    def _next_windows(self, turn: int) -> list[tuple[float, float]]:
        """This turn's calls: the queued windows of the last plan first (sequential dispatch), else a new plan."""
        if not self._queue:
            self._queue = list(self.plan(turn))
        windows, self._queue = self._queue[: self.per_turn], self._queue[self.per_turn :]
        return windows

    def plan(self, turn: int) -> list[tuple[float, float]]:  # pragma: no cover - overridden
        return []

    # --- text -------------------------------------------------------------------------------------------
    def final_answer(self) -> str:
        text, reason = answer(self.query, self.evidence)
        return (
            f"<think>I have seen {len(self.evidence.seen)} frames; {reason}.</think>\n<answer>{text}</answer>"
        )

    def tool_turn(self, windows: list[tuple[float, float]]) -> str:
        found = sorted(self.evidence.first_seen().items(), key=lambda kv: kv[1])
        seen = ", ".join(f"{label} at {t:.1f} s" for label, t in found) or "no coloured shape yet"
        where = ", ".join(f"[{a:.1f}, {b:.1f}]" for a, b in windows)
        think = f"<think>I have seen {len(self.evidence.seen)} frames: {seen}. I need a closer look at {where}.</think>"
        return think + "\n" + "\n".join(format_tool_call(a, b, self.call_arguments) for a, b in windows)


class NoToolAgent(ScriptedAgent):
    """Answers from the overview frames only."""

    name = "no_tool"


class UniformAgent(ScriptedAgent):
    """One turn of crops tiling the whole video (as many as one turn allows), then the answer."""

    name = "uniform"

    def plan(self, turn: int) -> list[tuple[float, float]]:
        return uniform_windows(self.duration, self.n_crops) if turn == 0 else []


class DetectorAgent(ScriptedAgent):
    """Searches for what the question needs, cropping only where it has not looked closely enough."""

    name = "detector"

    def plan(self, turn: int) -> list[tuple[float, float]]:
        q, ev, d = self.query, self.evidence, self.duration
        first = ev.first_seen()
        target = SEARCH_SPACING
        if q.kind in ("colour_of", "shape_of"):
            hits = ev.with_(shape=q.subject) if q.kind == "colour_of" else ev.with_(colour=q.subject)
            gaps = [] if hits else gaps_in(ev.seen, 0.0, d)
        elif q.kind == "when":
            if q.subject in first:
                gaps, target = boundary_gaps(ev, q.subject, d), BOUNDARY_SPACING
            else:
                gaps = gaps_in(ev.seen, 0.0, d)
        elif q.kind == "first":
            shown = [first[lab] for lab in first if lab.lower() in {o.lower() for o in q.options.values()}]
            gaps = gaps_in(ev.seen, 0.0, min(shown) if shown else d)
        elif q.kind == "next":
            if q.subject in first:
                t0 = first[q.subject]
                later = [t for lab, t in first.items() if t > t0 and lab != q.subject]
                gaps = gaps_in(ev.seen, t0, min(later) if later else d)
            else:
                gaps = gaps_in(ev.seen, 0.0, d)
        elif q.kind == "count":
            gaps = gaps_in(ev.seen, 0.0, d)
        elif q.kind == "colours":  # the question says how many needles there are: search until all are found
            gaps = [] if len(first) >= max(q.needles, 1) else gaps_in(ev.seen, 0.0, d)
        else:
            gaps = []
        points = plan_points(gaps, self.n_crops * self.max_frames, target)
        return windows_for(points, self.n_crops, self.max_frames, d)


class OracleAgent(ScriptedAgent):
    """Crops the sample's recorded event windows (the question's own events first), then reads them."""

    name = "oracle"

    def reset(self, obs: dict[str, Any], info: dict[str, Any], sample: VideoQASample | None = None) -> None:
        if sample is None:
            raise ValueError("the oracle agent needs the episode's sample (its recorded events)")
        super().reset(obs, info, sample)
        relevant = set((sample.extra or {}).get("relevant_events", []))
        events = sorted(sample.events, key=lambda e: (e.label not in relevant, e.start))
        self._todo = [(max(0.0, e.start - 1.0), min(self.duration, e.end + 1.0)) for e in events]

    def plan(self, turn: int) -> list[tuple[float, float]]:
        windows, self._todo = self._todo[: self.n_crops], self._todo[self.n_crops :]
        return windows


BASELINES: dict[str, type[ScriptedAgent]] = {
    "detector": DetectorAgent,
    "no_tool": NoToolAgent,
    "uniform": UniformAgent,
    "oracle": OracleAgent,
}


def make_baseline(name: str) -> ScriptedAgent:
    """A fresh scripted agent by name (one of ``BASELINES``)."""
    try:
        return BASELINES[name]()
    except KeyError:
        raise ValueError(f"unknown baseline {name!r}; known: {sorted(BASELINES)}") from None
