"""``protocol="release_rl"``: the released RL workflow's dialogue (``paravt/rl/workflow.py``), for training as
the release trains (``tool_result="subagent"``):

- the prompt is the sample's own parquet messages (system + the RL tool block; the user's ``<video>``
  becomes the overview frames, each after ``<t seconds>`` with t = frame index / fps);
- every ``crop_video`` call of a turn runs (no per-turn cap); a call without both times, with start >= end
  or starting past the video fails, an end past it is clamped; the crop's frames go to the sub-agent with
  the release's prompt (the window only) and its reply comes back as ``<tool_response>\\n{summary}\\n
  </tool_response>`` in a user message of its own;
- calls are read as the release's Hermes parser reads them, all or nothing (``hermes_calls``): one
  malformed ``<tool_call>`` and the turn has no call, which ends the episode;
- up to ``max_turns + 1`` generations, no forced final message: a turn without a call ends the episode; the
  calls of the last generation still run (their sub-agent generations happen), then the episode ends
  without an answer, so its task reward is that of no answer.

The release appends a failed call's ``[Error: crop_video failed]`` to the token stream outside any message;
here it is a user message of that text (a chat conversation cannot hold tokens outside a message).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..data.sample import VideoQASample
from ..protocol.markers import IMAGE_PLACEHOLDER
from ..protocol.release import RL_CROP_FAILED, RL_TOOLS_SYSTEM, hermes_calls, rl_tool_response
from ..tools.dispatch import subagent_replies
from ..tools.subagent import SubAgentRequest
from ..video import Frames, VideoReader
from ..video.qwen_frames import release_crop, release_rl_overview
from .base import EpisodeConfig, Opening, Turn, message
from .release_eval import ReleaseDialogue, crop_outcome, release_turn


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


class ReleaseRLEpisode(ReleaseDialogue):
    """The released RL workflow's dialogue: crops go to the sub-agent, one summary message per call."""

    name = "release_rl"

    def __init__(self, sample: VideoQASample, reader: VideoReader, config: EpisodeConfig) -> None:
        super().__init__(sample, reader, config)
        self.turns = 0

    @classmethod
    def check(cls, config: EpisodeConfig) -> None:
        super().check(config)
        if config.tool_result != "subagent":
            raise ValueError('protocol="release_rl" sends every crop to a sub-agent: it needs tool_result="subagent"')
        if config.video_channel != "image_url":
            raise ValueError('EnvConfig.video_channel="video_url" is the release eval driver\'s option (protocol="release")')

    @classmethod
    def overview(cls, reader: VideoReader, k: int, config: EpisodeConfig) -> tuple[Frames, int]:
        frames = release_rl_overview(reader, k, config.release_overview_fps)
        return frames, len(frames) if config.release_overview_fps else k

    def opening(self, overview: Frames) -> Opening:
        tags = "".join(f"<{i / self.reader.fps:.1f} seconds>{IMAGE_PLACEHOLDER}" for i in overview.indices)
        messages = []
        for m in rl_opening_messages(self.sample):
            text = (tags + m["text"]) if m["video"] else m["text"]
            messages.append(message(m["role"], text, len(overview) if m["video"] else 0, parts=True))
        system = messages[0]["text"]
        user = next((m["text"] for m in messages if m["role"] == "user"), "")
        return Opening(system, user, messages)

    def step(self, text: str, turn: int, notes: list[str], pool: ThreadPoolExecutor) -> Turn:
        self.turns += 1
        calls = hermes_calls(text)
        if not calls:
            return Turn(terminated=True, final=text)
        last = self.turns > self.config.max_turns  # the workflow runs these calls, then its loop ends
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
        records = [crop_outcome(i, w[0] if w else c.start_time, w[1] if w else c.end_time, f if texts[i] != RL_CROP_FAILED else Frames.empty(),
                                "invalid window" if not w else "the sub-agent failed")
                   for i, (c, w, f) in enumerate(zip(calls, windows, crops, strict=True))]  # fmt: skip
        out = release_turn([message("user", t, parts=True) for t in texts], Frames.empty(), records, len(calls),
                           sum(t != RL_CROP_FAILED for t in texts), decode_s, time.perf_counter() - t0)  # fmt: skip
        if last:
            out.terminated, out.final = True, text
        return out

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
        replies = subagent_replies(self.config.subagent, requests, self.config.subagent_timeout,
                                   convert=lambda reply: reply if isinstance(reply, str) else None)  # fmt: skip
        return [reply if error is None else None for reply, error, _ in replies]
