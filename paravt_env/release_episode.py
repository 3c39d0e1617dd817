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

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data.release_questions import release_fields, release_question
from .data.sample import VideoQASample
from .protocol.markers import IMAGE_PLACEHOLDER
from .protocol.release import (
    FORCED_FINAL,
    RL_CROP_FAILED,
    RL_TOOLS_SYSTEM,
    ReleaseCallError,
    crop_error,
    hermes_calls,
    is_agentic,
    release_calls,
    release_system_prompt,
    rl_tool_response,
    tool_response,
    user_question,
)
from .records import crop_entry
from .tools.dispatch import subagent_replies
from .tools.subagent import SubAgentRequest
from .video import Frames, VideoReader
from .video.qwen_frames import release_crop


def message(role: str, text: str, n_frames: int = 0, *, parts: bool = False, video_url: str | None = None) -> dict[str, Any]:
    """A message of ``info["messages"]``: ``text`` holds ``n_frames`` ``<image>`` placeholders (the frames, in
    order, are the next ``n_frames`` of the observation); ``parts``: send the content as a list of parts;
    ``video_url``: a video part (a ``file://`` URL) before the text."""
    out = {"role": role, "text": text, "frames": n_frames, "parts": parts or n_frames > 0 or video_url is not None}
    if video_url is not None:
        out["video_url"] = video_url
    return out


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
    crops: list[dict[str, Any]] = field(default_factory=list)
    """Per call, as ``info["crops"]`` of the paravt protocol: window, status, frame count and times."""


def _crop_outcome(index: int, start: Any, end: Any, frames: Frames, error: str) -> dict[str, Any]:
    """``info["crops"]`` entry of a release crop: executed when it returned frames, else failed with ``error``."""
    ok = len(frames) > 0
    return crop_entry(index, start, end, "executed" if ok else "failed", frames.timestamps, None if ok else error)


class ReleaseEpisode:
    """The release driver's dialogue for one sample."""

    def __init__(self, sample: VideoQASample, reader: VideoReader, *, mode: str, max_turns: int, max_parallel: int,
                 subtitles: bool = False, video_channel: str = "image_url") -> None:  # fmt: skip
        self.sample, self.reader, self.mode = sample, reader, mode
        self.video_channel = video_channel
        self.max_turns, self.max_parallel = max_turns, max_parallel
        self.subtitles = subtitles
        self.is_mcq = bool(release_fields(sample)["is_mcq"])
        self.rounds = 0
        self.forced = False

    def opening(self, overview: Frames) -> tuple[str, str, list[dict[str, Any]]]:
        """(system prompt, user text with one placeholder per overview frame, the two messages)."""
        system = release_system_prompt(self.mode)
        question = release_question(self.sample, self.mode, subtitles=self.subtitles)
        text = user_question(question, self.sample.video_path, self.mode)
        if self.video_channel == "video_url":  # the server samples the video itself
            url = Path(os.path.abspath(self.sample.video_path)).as_uri()  # percent-encoded: '#', '?', spaces
            return system, text, [message("system", system), message("user", text, video_url=url)]
        user = IMAGE_PLACEHOLDER * len(overview) + text
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
        turn.crops = [_crop_outcome(i, c.start, c.end, f, "no frame in the window") for i, (c, f) in enumerate(zip(calls, crops, strict=True))]
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


def rl_opening_messages(sample: VideoQASample) -> list[dict[str, Any]]:
    """The prompt messages an RL episode starts from: the parquet's own (``extra["prompt_messages"]``, its
    ``<video>`` placeholder marking where the frames go), or a system prompt and the question for samples from
    elsewhere. Each message is ``{"role", "text", "video"}`` (``video``: the frames go before its text)."""
    listed = sample.extra.get("prompt_messages")
    if not listed:
        listed = [{"role": "user", "content": "<video>" + sample.question_with_options()}]
    out = []
    for m in listed:
        text = str(m.get("content", ""))
        out.append({"role": m["role"], "text": text.replace("<video>", ""), "video": "<video>" in text})
    if out and out[0]["role"] == "system":
        if "<tools>" not in out[0]["text"]:  # the SFT-aligned parquets carry their own tool block
            out[0]["text"] = out[0]["text"] + "\n\n" + RL_TOOLS_SYSTEM
    else:
        out.insert(0, {"role": "system", "text": RL_TOOLS_SYSTEM, "video": False})
    return out


class ReleaseRLEpisode:
    """The released RL workflow's dialogue (``paravt/rl/workflow.py``), for training under the release protocol
    with ``tool_result="subagent"``:

    - the prompt is the sample's own parquet messages (system + the RL tool block; the user's ``<video>``
      becomes the overview frames, each after ``<t seconds>`` with t = frame index / fps);
    - every ``crop_video`` call of a turn runs (no per-turn cap); a call without both times, with start >= end
      or starting past the video fails, an end past it is clamped; the crop's frames go to the sub-agent with
      the release's prompt (the window only) and its reply comes back as ``<tool_response>\n{summary}\n
      </tool_response>`` in a user message of its own;
    - calls are read as the release's Hermes parser reads them, all or nothing (``hermes_calls``): one
      malformed ``<tool_call>`` and the turn has no call, which ends the episode;
    - up to ``max_turns + 1`` generations, no forced final message: a turn without a call ends the episode; the
      calls of the last generation still run (their sub-agent generations happen), then the episode ends
      without an answer, so its task reward is that of no answer.

    The release appends a failed call's ``[Error: crop_video failed]`` to the token stream outside any message;
    here it is a user message of that text (a chat conversation cannot hold tokens outside a message).
    """

    def __init__(self, sample: VideoQASample, reader: VideoReader, *, max_turns: int, subagent: Any,
                 timeout: float | None) -> None:  # fmt: skip
        self.sample, self.reader = sample, reader
        self.max_turns, self.subagent, self.timeout = max_turns, subagent, timeout
        self.turns = 0

    def opening(self, overview: Frames) -> tuple[str, str, list[dict[str, Any]]]:
        tags = "".join(f"<{i / self.reader.fps:.1f} seconds>{IMAGE_PLACEHOLDER}" for i in overview.indices)
        messages = []
        for m in rl_opening_messages(self.sample):
            text = (tags + m["text"]) if m["video"] else m["text"]
            messages.append(message(m["role"], text, len(overview) if m["video"] else 0, parts=True))
        system = messages[0]["text"]
        user = next((m["text"] for m in messages if m["role"] == "user"), "")
        return system, user, messages

    def step(self, text: str, pool: ThreadPoolExecutor) -> ReleaseTurn:
        self.turns += 1
        calls = hermes_calls(text)
        if not calls:
            return ReleaseTurn(done=True, final=text)
        last = self.turns > self.max_turns  # the workflow runs these calls, then its loop ends
        t0 = time.perf_counter()
        windows = [self._window(c) for c in calls]
        crops = list(pool.map(lambda w: release_crop(self.reader, *w) if w else Frames.empty(), windows))
        jobs = [(i, SubAgentRequest(self.sample.question_with_options(), w[0], w[1], f, style="release"))
                for i, (w, f) in enumerate(zip(windows, crops, strict=True)) if w and len(f)]  # fmt: skip
        decode_s = time.perf_counter() - t0
        summaries = self._summaries([r for _, r in jobs])
        texts = [RL_CROP_FAILED] * len(calls)
        for (i, _), summary in zip(jobs, summaries, strict=True):
            if summary is not None:
                texts[i] = rl_tool_response(summary)
        turn = ReleaseTurn(done=False, requested=len(calls), executed=sum(t != RL_CROP_FAILED for t in texts),
                           decode_s=decode_s)  # fmt: skip
        turn.crops = [_crop_outcome(i, w[0] if w else c.start_time, w[1] if w else c.end_time, f if texts[i] != RL_CROP_FAILED else Frames.empty(),
                                 "invalid window" if not w else "the sub-agent failed")
                      for i, (c, w, f) in enumerate(zip(calls, windows, crops, strict=True))]  # fmt: skip
        turn.failed = len(calls) - turn.executed
        turn.messages = [message("user", t, parts=True) for t in texts]
        turn.wall_s = time.perf_counter() - t0
        if last:
            turn.done, turn.final = True, text
        return turn

    def _window(self, call) -> tuple[float, float] | None:
        """The release sub-agent's checks: both times, start < end, start inside the video; end clamped."""
        start, end = call.start_time, call.end_time
        if call.name != "crop_video" or start is None or end is None or not start < end:
            return None
        if start >= self.reader.duration:
            return None
        return start, min(end, self.reader.duration)

    def _summaries(self, requests: list[SubAgentRequest]) -> list[str | None]:
        """The sub-agent's whole reply per crop, generated concurrently as the release's ``asyncio.gather``
        does (None where it failed, timed out or was not text: a failing sub-agent fails its crops only)."""
        replies = subagent_replies(self.subagent, requests, self.timeout,
                                   convert=lambda reply: reply if isinstance(reply, str) else None)  # fmt: skip
        return [reply if error is None else None for reply, error, _ in replies]


__all__ = ["ReleaseEpisode", "ReleaseRLEpisode", "ReleaseTurn", "message", "rl_opening_messages"]
