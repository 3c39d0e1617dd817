"""One episode under ``protocol="release"``: what the released eval driver sends and when it stops.

The env keeps its contract (actions are whole turns as text; observations carry text and frames); this class
decides the content, rule for rule with ``paravt/eval/driver.py::eval_one``:

- opening: the release system prompt, then one user message of K overview frames (qwen-vl-utils' indices
  and default video pixel budget, no timestamps) followed by the question text;
- each turn: in ``direct``/``reasoning`` mode the first reply is final; in the agentic modes a reply
  without a readable call is final, otherwise its first ``max_parallel`` calls run (calls beside an answer
  too) and each crop comes back as its own user message;
- after ``max_turns`` rounds of calls, a forced final-answer message is appended and the next reply, with its
  own token cap (64 or 128), is final whatever it says.

Because several messages come back at once, ``info["messages"]`` lists them (role, text with one
``<image>`` per frame, how many of the observation's frames they take, and whether their content is a list of
parts, as the release sends it, or a plain string); ``info["max_new_tokens"]`` is the cap of the forced
final generation (other turns use the policy's own cap: the release's ``--max_tokens`` is 2048).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .data.release_questions import release_fields, release_question
from .data.sample import VideoQASample
from .protocol.markers import IMAGE_PLACEHOLDER
from .protocol.release import (
    FORCED_FINAL,
    ReleaseCallError,
    crop_error,
    is_agentic,
    release_calls,
    release_system_prompt,
    tool_response,
    user_question,
)
from .video import Frames, VideoReader
from .video.qwen_frames import release_crop


def message(role: str, text: str, n_frames: int = 0, *, parts: bool = False) -> dict[str, Any]:
    """A message of ``info["messages"]``: ``text`` holds ``n_frames`` ``<image>`` placeholders (the frames, in
    order, are the next ``n_frames`` of the observation); ``parts``: send the content as a list of parts."""
    return {"role": role, "text": text, "frames": n_frames, "parts": parts or n_frames > 0}


@dataclass
class ReleaseTurn:
    """What one step under the release protocol produced."""

    done: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    frames: Frames = field(default_factory=Frames.empty)
    requested: int = 0
    executed: int = 0
    failed: int = 0
    final: str | None = None
    error: str | None = None
    max_new_tokens: int | None = None
    decode_s: float = 0.0
    wall_s: float = 0.0


class ReleaseEpisode:
    """The release driver's dialogue for one sample."""

    def __init__(self, sample: VideoQASample, reader: VideoReader, *, mode: str, max_turns: int, max_parallel: int,
                 subtitles: bool = False) -> None:  # fmt: skip
        self.sample, self.reader, self.mode = sample, reader, mode
        self.max_turns, self.max_parallel = max_turns, max_parallel
        self.subtitles = subtitles
        self.is_mcq = bool(release_fields(sample)["is_mcq"])
        self.rounds = 0
        self.forced = False

    def opening(self, overview: Frames) -> tuple[str, str, list[dict[str, Any]]]:
        """(system prompt, user text with one placeholder per overview frame, the two messages)."""
        system = release_system_prompt(self.mode)
        question = release_question(self.sample, self.mode, subtitles=self.subtitles)
        user = IMAGE_PLACEHOLDER * len(overview) + user_question(question, self.sample.video_path, self.mode)
        return system, user, [message("system", system), message("user", user, len(overview), parts=True)]

    def step(self, text: str, pool: ThreadPoolExecutor) -> ReleaseTurn:
        if self.forced or not is_agentic(self.mode):
            return ReleaseTurn(done=True, final=text)
        try:
            calls = release_calls(text, self.max_parallel)
        except ReleaseCallError as exc:  # the driver fails such a sample as a whole
            return ReleaseTurn(done=True, final="", error=f"release driver error: {exc}")
        if not calls:
            return ReleaseTurn(done=True, final=text)
        t0 = time.perf_counter()
        crops = list(pool.map(lambda c: release_crop(self.reader, c.start, c.end), calls))
        turn = ReleaseTurn(done=False, requested=len(calls), executed=len(calls), decode_s=time.perf_counter() - t0)
        for call, frames in zip(calls, crops, strict=True):
            if len(frames):
                body = IMAGE_PLACEHOLDER * len(frames) + tool_response(len(frames), call.start, call.end)
                turn.messages.append(message("user", body, len(frames), parts=True))
            else:
                turn.failed += 1
                turn.messages.append(message("user", crop_error(call.start, call.end)))
        turn.frames = Frames.concatenate([f for f in crops if len(f)])
        self.rounds += 1
        if self.rounds >= self.max_turns:
            force, cap = FORCED_FINAL[self.is_mcq]
            turn.messages.append(message("user", force))
            turn.max_new_tokens = cap
            self.forced = True
        turn.wall_s = time.perf_counter() - t0
        return turn


__all__ = ["ReleaseEpisode", "ReleaseTurn", "message"]
