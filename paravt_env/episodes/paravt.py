"""``protocol="paravt"``: our messages. Time-tagged overview frames after a duration line; every crop of a
turn runs (concurrently under "parallel" dispatch) and the turn's tool responses come back in one user
message; ``max_turns`` counts the agent's turns, the last of which must answer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..data.release_questions import parse_srt
from ..protocol import ANSWER_FORMATS, parse_response, system_prompt
from ..protocol.markers import frames_block
from ..records import crop_entry
from ..timing import StepTiming
from ..tools import CropSettings, render_tool_responses, run_tool_calls
from ..video import Frames, VideoReader, sample_overview
from .base import Episode, EpisodeConfig, Opening, Turn, message


class ParaVTEpisode(Episode):
    """Our dialogue: one user message per turn holding every tool response and its frames."""

    name = "paravt"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crops_spent = 0  # crops run so far (``EnvConfig.crop_budget``)

    @classmethod
    def check(cls, config: EpisodeConfig) -> None:
        super().check(config)
        if config.video_channel != "image_url":
            raise ValueError(f'EnvConfig.video_channel="{config.video_channel}" is a release-protocol option (protocol="release")')

    @classmethod
    def overview(cls, reader: VideoReader, k: int, config: EpisodeConfig) -> tuple[Frames, int]:
        frames = sample_overview(reader, k, tolerance=config.overview_tolerance, min_pixels=config.min_pixels,
                                 max_pixels=config.max_pixels)  # fmt: skip
        return frames, k

    def opening(self, overview: Frames) -> Opening:
        system = system_prompt(self.config.prompt_mode)
        user = self._user_prompt(overview)
        return Opening(system, user, [message("system", system), message("user", user, len(overview))])

    def step(self, text: str, turn: int, notes: list[str], pool: ThreadPoolExecutor) -> Turn:
        cfg = self.config
        parsed = parse_response(text)
        calls = list(parsed.tool_calls)
        out = Turn(parse_problems=list(parsed.problems), action_truncated=bool(notes))
        out.tool_calls["requested"] = len(calls)
        out.crops = [crop_entry(i, c.start_time, c.end_time, "rejected", (), "calls beside an answer or on the last turn never run")
                     for i, c in enumerate(calls)]  # fmt: skip
        if parsed.answer is not None or not calls:
            out.terminated = True
            out.tool_calls["rejected"] = len(calls)  # an answer ends the episode; calls beside it never run
            return out
        if turn >= cfg.turn_limit:
            out.truncated = True
            out.tool_calls["rejected"] = len(calls)
            return out
        report = run_tool_calls(
            calls,
            reader=self.reader,
            video_path=self.sample.video_path,
            settings=CropSettings(fps=cfg.crop_fps, max_frames=cfg.crop_max_frames, min_pixels=cfg.min_pixels,
                                  max_pixels=cfg.max_pixels),  # fmt: skip
            pool=pool,
            mode=cfg.dispatch,
            max_parallel=cfg.max_parallel,
            tool_result=cfg.tool_result,
            subagent=cfg.subagent,
            question=self.sample.question_with_options(),
            subagent_timeout=cfg.subagent_timeout,
            budget=None if cfg.crop_budget is None else (cfg.crop_budget, self.crops_spent),
        )
        self.crops_spent += report.count("executed") + report.count("failed")
        for status in ("executed", "rejected", "failed"):
            out.tool_calls[status] = report.count(status)
        out.crops = [_crop_record(r, calls[r.call_index]) for r in report.results]
        feedback, out.frames = render_tool_responses(report, cfg.tool_result)
        feedback = "\n".join([*notes, feedback, self._turn_prompt(turn)])
        out.messages = [message("user", feedback, len(out.frames))]
        out.timing = StepTiming(decode_s=report.decode_s, subagent_s=report.subagent_s, tool_wall_s=report.wall_s)
        return out

    def _user_prompt(self, overview: Frames) -> str:
        cfg, sample = self.config, self.sample
        lines = [
            f"The video lasts {self.reader.duration:.1f} seconds. Here are {len(overview)} frames sampled uniformly "
            "from it, each tagged with its time:",
            frames_block(overview.timestamps),
            f"Question: {sample.question_with_options()}",
        ]
        if cfg.subtitles:
            subtitles = parse_srt(sample.extra.get("subtitle_path"))
            if subtitles:
                lines.insert(2, f"The video's subtitles:\n{subtitles}")
        if cfg.prompt_mode.startswith("agentic") and cfg.crop_budget is not None:
            per_turn = "one call a turn" if cfg.dispatch == "sequential" else f"up to {cfg.max_parallel} calls in one turn"
            lines.append(f"You may call crop_video to look closer: at most {cfg.crop_budget} crops in all, {per_turn}, "
                         f"{cfg.turn_limit} turns in all.")  # fmt: skip
        elif cfg.prompt_mode.startswith("agentic"):
            lines.append(
                f"You may call crop_video to look closer, several times in one turn (up to {cfg.max_parallel} "
                f"calls, {cfg.turn_limit} turns in all)."
            )
        lines.append(ANSWER_FORMATS[sample.question_type])
        return "\n".join(lines)

    def _turn_prompt(self, turn: int) -> str:
        cfg = self.config
        remaining = cfg.turn_limit - turn
        if remaining <= 1 and cfg.force_final_answer:
            return "This is your last turn: no more tool calls. " + ANSWER_FORMATS[self.sample.question_type]
        if cfg.crop_budget is not None:
            left = cfg.crop_budget - self.crops_spent
            if left <= 0:
                return f"Your crop budget is spent ({cfg.crop_budget} crops): give your final answer. " + ANSWER_FORMATS[self.sample.question_type]
            return f"You have {remaining} turns and {left} crops left. Call crop_video again or give your final answer."
        return f"You have {remaining} turns left. Call crop_video again or give your final answer."


def _crop_record(result: Any, call: Any) -> dict[str, Any]:
    """One entry of ``info["crops"]``: the window as run (clamped) or as asked, its outcome and frame times."""
    window = (result.request.start, result.request.end) if result.request is not None else (call.start_time, call.end_time)
    return crop_entry(result.call_index, *window, result.status, result.frames.timestamps, result.error)
