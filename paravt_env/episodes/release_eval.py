"""``protocol="release"``: what the released eval driver sends and when it stops, rule for rule with
``paravt/eval/driver.py::eval_one``, so that a released checkpoint sees what it was evaluated on:

- opening: the release system prompt, then one user message of K overview frames (qwen-vl-utils' indices
  and default video pixel budget, no timestamps) followed by the question text;
- each turn: in ``direct``/``reasoning`` mode the first reply is final; in the agentic modes a reply
  without a readable call is final, otherwise its first ``max_parallel`` calls run (calls beside an answer
  too) and each crop comes back as its own user message;
- after ``max_turns`` rounds of calls, a forced final-answer message is appended and the next reply, with its
  own token cap (64 or 128), is final whatever it says (``Turn.max_new_tokens``; other turns use the policy's
  own cap: the release's ``--max_tokens`` is 2048).

Several messages come back at once: each lists its role, its text with one ``<image>`` per frame, how many of
the observation's frames it takes, and whether its content is a list of parts, as the release sends it, or a
plain string.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..data.release_questions import release_fields, release_question
from ..data.sample import VideoQASample
from ..protocol.markers import IMAGE_PLACEHOLDER
from ..protocol.release import (
    FORCED_FINAL,
    ReleaseCallError,
    crop_error,
    is_agentic,
    release_calls,
    release_mode,
    release_system_prompt,
    tool_response,
    user_question,
)
from ..records import crop_entry
from ..timing import StepTiming
from ..video import Frames, VideoReader
from ..video.qwen_frames import VIDEO_MAX_PIXELS, release_crop, release_overview
from .base import Episode, EpisodeConfig, Opening, Turn, message


def crop_outcome(index: int, start: Any, end: Any, frames: Frames, error: str) -> dict[str, Any]:
    """``info["crops"]`` entry of a release crop: executed when it returned frames, else failed with ``error``."""
    ok = len(frames) > 0
    return crop_entry(index, start, end, "executed" if ok else "failed", frames.timestamps, None if ok else error)


def release_turn(messages: list[dict[str, Any]], frames: Frames, crops: list[dict[str, Any]], requested: int,
                 executed: int, decode_s: float, wall_s: float) -> Turn:  # fmt: skip
    """A release turn that ran calls: every dispatched call counts as executed, as the release's ``tool_calls``
    does; crops that yielded no frame are also counted in ``failed``."""
    failed = sum(c["status"] == "failed" for c in crops)
    return Turn(messages=messages, frames=frames, crops=crops, timing=StepTiming(decode_s=decode_s, tool_wall_s=wall_s),
                tool_calls={"requested": requested, "executed": executed, "rejected": 0, "failed": failed})  # fmt: skip


class ReleaseDialogue(Episode):
    """What the release's two dialogues share: its prompt modes (by its own names) and its video pixel budget."""

    release = True

    @classmethod
    def check(cls, config: EpisodeConfig) -> None:
        super().check(config)
        release_mode(config.prompt_mode)  # raises, naming the modes the release has

    @classmethod
    def prompt_mode_name(cls, mode: str) -> str:
        return release_mode(mode)

    @classmethod
    def max_pixels(cls, config: EpisodeConfig) -> int:
        # The release shows overview frames at qwen-vl-utils' default video budget (up to 768 tokens).
        return max(config.max_pixels, VIDEO_MAX_PIXELS)


class ReleaseEvalEpisode(ReleaseDialogue):
    """The release driver's dialogue for one sample."""

    name = "release"
    grounding_prompt_mode = "agentic_minimal"  # the release's Charades-STA runs

    def __init__(self, sample: VideoQASample, reader: VideoReader, config: EpisodeConfig) -> None:
        super().__init__(sample, reader, config)
        self.mode = config.prompt_mode
        self.is_mcq = bool(release_fields(sample)["is_mcq"])
        self.rounds = 0
        self.forced = False

    @classmethod
    def overview(cls, reader: VideoReader, k: int, config: EpisodeConfig) -> tuple[Frames, int]:
        if config.video_channel == "video_url":  # the server samples the video
            return Frames.empty(), k
        return release_overview(reader, k), k  # never fails: the release sends the question alone then

    def opening(self, overview: Frames) -> Opening:
        system = release_system_prompt(self.mode)
        question = release_question(self.sample, self.mode, subtitles=self.config.subtitles)
        text = user_question(question, self.sample.video_path, self.mode)
        if self.config.video_channel == "video_url":  # the server samples the video itself
            url = Path(os.path.abspath(self.sample.video_path)).as_uri()  # percent-encoded: '#', '?', spaces
            return Opening(system, text, [message("system", system), message("user", text, video_url=url)])
        user = IMAGE_PLACEHOLDER * len(overview) + text
        return Opening(system, user, [message("system", system), message("user", user, len(overview), parts=True)])

    def step(self, text: str, turn: int, notes: list[str], pool: ThreadPoolExecutor) -> Turn:
        # The release reads the turn as the model wrote it: what bounding changed (``notes``) is not told.
        if self.forced or not is_agentic(self.mode):
            return Turn(terminated=True, final=text)
        try:
            calls = release_calls(text, self.config.max_parallel)
        except ReleaseCallError as exc:  # the driver fails such a sample as a whole
            return Turn(terminated=True, final="", error=f"release driver error: {exc}")
        if not calls:
            return Turn(terminated=True, final=text)
        t0 = time.perf_counter()
        crops = list(pool.map(lambda c: release_crop(self.reader, c.start, c.end), calls))
        decode_s = time.perf_counter() - t0
        messages = []
        for call, frames in zip(calls, crops, strict=True):
            if len(frames):
                body = IMAGE_PLACEHOLDER * len(frames) + tool_response(len(frames), call.start, call.end)
                messages.append(message("user", body, len(frames), parts=True))
            else:
                messages.append(message("user", crop_error(call.start, call.end)))
        records = [crop_outcome(i, c.start, c.end, f, "no frame in the window") for i, (c, f) in enumerate(zip(calls, crops, strict=True))]
        self.rounds += 1
        cap = None
        if self.rounds >= self.config.max_turns:
            force, cap = FORCED_FINAL[self.is_mcq]
            messages.append(message("user", force))
            self.forced = True
        out = release_turn(messages, Frames.concatenate([f for f in crops if len(f)]), records, len(calls), len(calls),
                           decode_s, time.perf_counter() - t0)  # fmt: skip
        out.max_new_tokens = cap
        return out
