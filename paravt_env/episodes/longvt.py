"""``protocol="longvt"``: LongVT's evaluation dialogue (``paravt_env.protocol.longvt`` holds its texts), so that a
LongVT checkpoint sees what it was evaluated on and a ParaVT one can be put beside it on the same videos:

- opening: the tool block as the system message (what LongVT's chat template writes for a request with tools and
  no system prompt), then one user message: the overview frames, the question with LongVT's instruction, the
  driver's path line;
- each turn: a reply without a readable ``<tool_call>`` is final (the server's Hermes parser returns it as text);
  otherwise its first call runs (one call a turn, as LongVT's SFT traces call; the lmms-eval driver would run every
  call of the turn one after another, and the rest are recorded here as rejected) and its frames, or the MCP
  server's error, come back in one ``<tool_response>``;
- the episode ends at ``max_turns`` turns (the driver has no cap but tokens), or at the matched budgets of
  ``EnvConfig.crop_budget`` / ``turn_budget``; a call past the crop budget is refused with a tool error.

Known differences from the driver, by design: every earlier tool response stays in the conversation (the driver
sends only the latest turn's), and the messages are rendered by the policy's own chat template (LongVT serves
with ``tool_call_qwen2_5_vl.jinja``, which writes no newline after ``<|im_end|>`` and none after a tool
response's ``user``).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..protocol.longvt import (
    CROP_SPEC,
    OVERVIEW_SPEC,
    crop_problem,
    longvt_answer,
    path_line,
    question_text,
    tool_error,
    tools_system_text,
)
from ..protocol.markers import IMAGE_PLACEHOLDER
from ..protocol.release import hermes_calls
from ..records import crop_entry
from ..timing import StepTiming
from ..video import Frames, VideoDecodeError, VideoReader
from ..video.qwen_frames import qwen_frames
from .base import Episode, EpisodeConfig, Opening, Turn, message

ONE_CALL = "LongVT runs one call a turn: only the turn's first call ran"
OVER_BUDGET = "crop budget spent ({budget} crops)"


class LongVTEpisode(Episode):
    """LongVT's dialogue for one sample: one ``crop_video`` call a turn, each answered by its own tool response."""

    name = "longvt"
    calls_per_turn = 1

    def __init__(self, sample: Any, reader: VideoReader, config: EpisodeConfig) -> None:
        super().__init__(sample, reader, config)
        self.crops_spent = 0
        self.video_path = os.path.abspath(sample.video_path)

    @classmethod
    def check(cls, config: EpisodeConfig) -> None:
        super().check(config)
        if config.video_channel != "image_url":
            raise ValueError(f'EnvConfig.video_channel="{config.video_channel}" is a release-protocol option: '
                             'protocol="longvt" sends frames')  # fmt: skip
        if config.tool_result != "frames":
            raise ValueError('protocol="longvt" returns a crop\'s frames: EnvConfig.tool_result must be "frames"')

    @classmethod
    def max_pixels(cls, config: EpisodeConfig) -> int:
        return max(config.max_pixels, OVERVIEW_SPEC["max_pixels"], CROP_SPEC["max_pixels"])

    @classmethod
    def overview(cls, reader: VideoReader, k: int, config: EpisodeConfig) -> tuple[Frames, int]:
        try:  # 1 frame a second, at most k (the driver's max_frames), at least qwen-vl-utils' 4
            return qwen_frames(reader, fps=OVERVIEW_SPEC["fps"], max_frames=k, min_pixels=OVERVIEW_SPEC["min_pixels"],
                               max_pixels=OVERVIEW_SPEC["max_pixels"]), k  # fmt: skip
        except ValueError as exc:  # too short for qwen-vl-utils: the driver's decoding fails too
            raise VideoDecodeError(reader.path, f"qwen-vl-utils cannot sample this video: {exc}") from None

    @classmethod
    def extract_prediction(cls, text: str) -> str:
        return longvt_answer(text)

    def call_arguments(self) -> dict[str, Any]:
        return {"video_path": self.video_path}  # the model copies it from the path line

    def opening(self, overview: Frames) -> Opening:
        system = tools_system_text()
        user = IMAGE_PLACEHOLDER * len(overview) + question_text(self.sample.question_with_options()) + path_line(self.video_path)
        return Opening(system, user, [message("system", system), message("user", user, len(overview), parts=True)])

    def step(self, text: str, turn: int, notes: list[str], pool: ThreadPoolExecutor) -> Turn:
        calls = hermes_calls(text)
        out = Turn(action_truncated=bool(notes))
        out.tool_calls["requested"] = len(calls)
        if not calls:
            out.terminated = True
            return out
        out.crops = [crop_entry(i, c.start_time, c.end_time, "rejected", (), ONE_CALL) for i, c in enumerate(calls)]
        out.tool_calls["rejected"] = len(calls) - 1
        cfg = self.config
        if turn >= cfg.turn_limit:  # no turn is left to read the crop
            out.truncated = True
            out.tool_calls["rejected"] = len(calls)
            out.crops[0]["error"] = "no turn left to read it"
            return out
        call = calls[0]
        t0 = time.perf_counter()
        problem = crop_problem(call.arguments, self.video_path, self.reader.duration) if call.name == "crop_video" else \
            f"Unknown tool: {call.name}"  # fmt: skip
        if problem is None and cfg.crop_budget is not None and self.crops_spent >= cfg.crop_budget:
            problem = OVER_BUDGET.format(budget=cfg.crop_budget)
        frames = Frames.empty()
        start, end = call.start_time, call.end_time
        if problem is None:
            # the tool reads numbers as pydantic does ("10" is 10.0): crop_problem passed them, so they convert
            start, end = float(call.arguments["start_time"]), float(call.arguments["end_time"])
            try:
                frames = qwen_frames(self.reader, start=start, end=end, **CROP_SPEC)
            except (ValueError, VideoDecodeError) as exc:
                problem = f"Failed to process video {call.arguments.get('video_path')}: {exc}"
        if problem is None or not problem.startswith("crop budget"):
            self.crops_spent += 1  # a call that reached the tool, run or refused by it (as the paravt protocol counts)
        decode_s = time.perf_counter() - t0
        if problem is None:
            body = IMAGE_PLACEHOLDER * len(frames)
            out.crops[0] = crop_entry(0, start, end, "executed", frames.timestamps)
            out.tool_calls["executed"] = 1
        else:
            body = tool_error(problem)
            rejected = problem.startswith("crop budget")
            out.crops[0] = crop_entry(0, start, end, "rejected" if rejected else "failed", (), problem)
            out.tool_calls["rejected" if rejected else "failed"] += 1
        out.messages = [message("user", f"<tool_response>\n{body}</tool_response>", len(frames), parts=len(frames) > 0)]
        out.frames = frames
        out.timing = StepTiming(decode_s=decode_s, tool_wall_s=time.perf_counter() - t0)
        return out
