"""``VideoToolEnv``: a video LMM answers a question about a long video, cropping it with parallel tool calls.

One episode = one question. ``reset`` shows the system prompt, the question and K overview frames; each
``step`` takes the agent's whole turn as text. Tool calls in the turn are executed (concurrently in
"parallel" dispatch) and their results come back as the next observation; an answer, or a turn with no tool
call, ends the episode, which is then scored with ``compute_reward``. No action string can make ``step``
raise: malformed output becomes feedback and is scored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import EnvConfig
from .contact_sheet import contact_sheet
from .data import VideoQASample, load_samples
from .episodes import Episode, episode_of
from .gating import gated_frame_budget
from .memory import release_free_memory
from .rewards import compute_reward
from .spaces import AnyText, FrameBatch, Timestamps
from .timing import StepTiming
from .video import Frames, VideoDecodeError, VideoReader, open_video
from .video.errors import UnusableVideo
from .video.resize import target_size

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 1 << 22
"""Upper bound of an observation's text (a question with full subtitles fits)."""

RESET_OPTIONS = frozenset({"index", "sample", "epoch", "frame_budget"})

TRIM_EVERY = 100
"""Resets between two ``release_free_memory`` calls."""


def _as_samples(samples: Any, video_root: str | None) -> list[VideoQASample]:
    if isinstance(samples, (str, os.PathLike)):
        return load_samples(samples, video_root=video_root)
    if isinstance(samples, VideoQASample):
        return [samples]
    if isinstance(samples, Sequence):
        return [s if isinstance(s, VideoQASample) else VideoQASample.from_dict(dict(s)) for s in samples]
    raise TypeError(f"samples must be a path, a VideoQASample or a list of them, got {type(samples).__name__}")


class VideoToolEnv(gym.Env[dict, str]):
    """Agentic long-video QA with a ``crop_video`` tool that can be called several times in one turn.

    Observation (``dict``): ``text`` (str: what the agent reads next; each frame appears in it as
    ``<t seconds><image>``), ``frames`` (uint8 N x H x W x 3, in the order of the placeholders) and
    ``timestamps`` (float64 N, each frame's true time in seconds).

    Action (``str``): the agent's whole turn, e.g. ``<think>...</think>`` followed by one or more
    ``<tool_call>{"name": "crop_video", "arguments": {"start_time": 10, "end_time": 20}}</tool_call>``
    blocks, or an ``<answer>...</answer>``.

    Reward: 0 until the episode ends, then ``compute_reward`` over everything the agent wrote, with
    ``info["reward_breakdown"]`` = {accuracy, format, tool, total}.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        samples: Any,
        config: EnvConfig | None = None,
        *,
        render_mode: str | None = None,
        video_root: str | None = None,
        **options: Any,
    ) -> None:
        if config is not None and options:
            raise TypeError(f"pass options either in config or as keywords, not both (got {sorted(options)})")
        self.config = config if config is not None else EnvConfig.from_kwargs(**options)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.samples = _as_samples(samples, video_root)
        if not self.samples:
            raise ValueError("VideoToolEnv needs at least one sample")
        cfg = self.config
        max_k = max(cfg.frame_budget, *cfg.gating_choices)
        max_frames = max(max_k, cfg.max_parallel * cfg.crop_max_frames)
        # The message protocol is picked once: everything it decides is the episode's (paravt_env.episodes).
        self._episode_class = episode_of(cfg)
        max_pixels = self._episode_class.max_pixels(cfg)
        self.observation_space = spaces.Dict(
            {
                "text": AnyText(MAX_TEXT_CHARS),
                "frames": FrameBatch(max_frames, max_pixels),
                "timestamps": Timestamps(max_frames),
            }
        )
        self.action_space = AnyText(MAX_TEXT_CHARS)
        self.skipped_samples = 0
        self._pool: ThreadPoolExecutor | None = None
        self._readers: dict[str, VideoReader] = {}
        self._resets = 0
        self._sample: VideoQASample | None = None
        self._reader: VideoReader | None = None
        self._turn_texts: list[str] = []
        self._seen: list[Frames] = []
        self._done = True
        self.frame_budget = cfg.frame_budget
        self._executed_calls = 0
        self._episode: Episode | None = None

    def set_subagent(self, subagent: Any) -> None:
        """Give "subagent" mode the sub-agent each crop goes to (a callable ``SubAgentRequest -> str`` or an
        object with ``batch``), from the next ``reset`` on. For a caller that builds the env before the
        sub-agent exists (a recipe's config holds ``PENDING_SUBAGENT``; the trainer attaches the policy itself,
        one recorder per episode). The env gets a new, validated config; the one it was built with is left
        alone, since other envs may share it."""
        self.config = dataclasses.replace(self.config, subagent=subagent)

    # --- episode ----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        t0 = time.perf_counter()
        options = dict(options or {})
        unknown = sorted(set(options) - RESET_OPTIONS)
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; known: {sorted(RESET_OPTIONS)}")
        epoch = int(options.get("epoch", 0))
        self._resets += 1
        if self._resets % TRIM_EVERY == 0:
            release_free_memory()
        sample, reader, k, overview, decode_s = self._pick(options, epoch)
        cfg = self.config

        if self._reader is not None and self._reader is not reader:
            self._reader.unpin()
        reader.pin()  # the episode's crops read the file its overview came from, even if the path is replaced
        self._sample, self._reader, self.frame_budget, self.epoch = sample, reader, k, epoch
        self._turn_texts, self._seen, self._done = [], [overview], False
        self._executed_calls = 0
        self._episode = self._episode_class(sample, reader, cfg)
        opening = self._episode.opening(overview)
        obs = self._obs(opening.text, overview)
        info = {
            "turn": 0,
            "frame_budget": k,
            "epoch": epoch,
            "sample_id": sample.id,
            "question_type": sample.question_type,
            "duration": reader.duration,
            "protocol": self._episode_class.name,
            "system_prompt": opening.system,
            "user_prompt": opening.user,
            "messages": opening.messages,
            "limits": {
                "max_turns": cfg.turn_limit,
                "crop_budget": cfg.crop_budget,
                "max_parallel": cfg.max_parallel,
                "dispatch": cfg.dispatch,
                "crop_fps": cfg.crop_fps,
                "crop_max_frames": cfg.crop_max_frames,
                "tool_result": cfg.tool_result,
                "calls_per_turn": self._episode_class.calls_per_turn,
            },
            "call_arguments": self._episode.call_arguments(),
            "timing": StepTiming(decode_s=decode_s, total_s=time.perf_counter() - t0),
        }
        return obs, info

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        if self._done:
            raise RuntimeError("the episode is over (or never began): call reset() before step()")
        t0 = time.perf_counter()
        text, notes = self._coerce(action)
        self._turn_texts.append(text)
        turn = len(self._turn_texts)
        out = self._episode.step(text, turn, notes, self._executor())
        self._executed_calls += out.tool_calls["executed"]
        self._seen.append(out.frames)
        info: dict[str, Any] = {
            "turn": turn,
            "frame_budget": self.frame_budget,
            "tool_calls": out.tool_calls,
            "crops": out.crops,
            "parse_problems": out.parse_problems,
            "action_truncated": out.action_truncated,
            "messages": out.messages,
        }
        if out.max_new_tokens is not None:
            info["max_new_tokens"] = out.max_new_tokens
        reward = 0.0
        if out.done:
            self._done = True
            breakdown = self._score()
            reward = float(breakdown.total)
            info["reward_breakdown"] = breakdown.as_dict()
            info["prediction"] = self._episode_class.extract_prediction(self.agent_text)
            if out.final is not None:
                info["final_response"] = out.final
            info["ground_truth"] = self._sample.answer
            info["executed_tool_calls"] = self._executed_calls
            if out.error:
                info["error"] = out.error
        info["timing"] = StepTiming(decode_s=out.timing.decode_s, subagent_s=out.timing.subagent_s,
                                    tool_wall_s=out.timing.tool_wall_s, total_s=time.perf_counter() - t0)  # fmt: skip
        return self._obs(out.text, out.frames), reward, out.terminated, out.truncated, info

    # --- pieces -----------------------------------------------------------------------------------------
    def _pick(self, options: dict[str, Any], epoch: int) -> tuple[VideoQASample, VideoReader, int, Frames, float]:
        """The episode's sample, an open reader for it, its frame budget, its overview and the decode time.

        A sample the caller named must open and decode, or reset raises. A sample the env picked at random is
        skipped with a warning if its video is missing or corrupt, at open time or while its overview decodes
        (counted in ``skipped_samples``).
        """
        if "sample" in options:
            sample = options["sample"]
            if isinstance(sample, dict):
                sample = VideoQASample.from_dict(sample)
            if not isinstance(sample, VideoQASample):
                raise TypeError(f"reset option 'sample' must be a VideoQASample, got {type(sample).__name__}")
            return (sample, *self._start(sample, options, epoch))
        if "index" in options:
            i = int(options["index"])
            if not 0 <= i < len(self.samples):
                raise IndexError(f"reset option index={i} is outside the {len(self.samples)} samples")
            return (self.samples[i], *self._start(self.samples[i], options, epoch))
        start = int(self.np_random.integers(len(self.samples)))
        for offset in range(len(self.samples)):
            sample = self.samples[(start + offset) % len(self.samples)]
            try:
                return (sample, *self._start(sample, options, epoch))
            except (FileNotFoundError, VideoDecodeError) as exc:
                self.skipped_samples += 1
                warnings.warn(f"skipping sample {sample.id!r}: {exc} ({self.skipped_samples} skipped so far)", stacklevel=3)
        raise VideoDecodeError(str(self.samples[start].video_path), "no sample of this env has a readable video")

    def _start(self, sample: VideoQASample, options: dict[str, Any], epoch: int) -> tuple[VideoReader, int, Frames, float]:
        """Open ``sample``'s video, choose K and decode the overview; a reader that fails to decode is dropped."""
        cfg = self.config
        if options.get("frame_budget") is not None:
            k = int(options["frame_budget"])
            most = self.observation_space["frames"].max_frames
            if not 1 <= k <= most:  # more frames than the observation space admits would break its contract
                raise ValueError(f"reset option frame_budget must be in [1, {most}], got {k}")
        elif cfg.nframes_gating:
            k = gated_frame_budget(sample.id, epoch, cfg.seed, cfg.gating_choices)
        else:
            k = cfg.frame_budget
        reader = self._open(sample)
        try:  # a frame shape Qwen-VL cannot take (an aspect ratio above 200, say) makes the video unusable
            target_size(reader.height, reader.width, cfg.min_pixels, cfg.max_pixels)
        except ValueError as exc:
            self._readers.pop(sample.video_path, None)
            reader.close()
            raise UnusableVideo(sample.video_path, f"{reader.width}x{reader.height} pixels ({exc}; Qwen-VL's processors "
                                                   "refuse them too): crop or pad the video to a ratio under 200:1") from None  # fmt: skip
        t_dec = time.perf_counter()
        try:
            overview, k = self._episode_class.overview(reader, k, cfg)
        except VideoDecodeError:
            self._readers.pop(sample.video_path, None)
            reader.close()
            raise
        return reader, k, overview, time.perf_counter() - t_dec

    def _open(self, sample: VideoQASample) -> VideoReader:
        reader = self._readers.get(sample.video_path)
        if reader is not None and reader.changed():  # replaced on disk since: index and decode the new file
            self._readers.pop(sample.video_path).close()
            reader = None
        if reader is None:
            reader = open_video(sample.video_path, backend=self.config.backend)
            if len(self._readers) >= 16:  # keep a few readers (GRPO groups revisit videos), not all of them
                self._readers.pop(next(iter(self._readers))).close()
            self._readers[sample.video_path] = reader
        # Readers of other videos are kept for their index (a revisit skips the scan), not their decoders:
        # 16 envs x 16 readers x a handle per parallel crop held 0.5-1 GB in a 60-step RL run.
        for other in self._readers.values():
            if other is not reader:
                other.release_handles()
        return reader

    def _coerce(self, action: Any) -> tuple[str, list[str]]:
        """Any action becomes a bounded string; what was changed is told to the agent."""
        notes = []
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        elif not isinstance(action, str):
            action = str(action)
        limit = self.config.max_action_chars
        if len(action) > limit:
            notes.append(f"note: your turn was {len(action)} characters long; only the first {limit} were read.")
            action = action[:limit]
        return action, notes

    def generated_text(self) -> str:
        """What the policy generated this episode: every turn without the forced ``response_prefix``."""
        prefix = self.config.response_prefix
        return "".join(t[len(prefix) :] if prefix and t.startswith(prefix) else t for t in self._turn_texts)

    def _score(self):
        # The release scores the concatenation of the generated tokens of every turn (no separator); a prefix
        # the prompt forced is prompt, not policy output.
        completion = self.agent_text if self.config.reward.score_forced_prefix else self.generated_text()
        return compute_reward(
            completion,
            self._sample.answer,
            self._sample.question_type,
            self.config.reward,
            executed_tool_calls=self._executed_calls,
            question=self._sample.question,
        )

    def _obs(self, text: str, frames: Frames) -> dict[str, Any]:
        # Fresh arrays every call: users keep observations, and cached overviews are shared and read-only.
        return {
            "text": text[:MAX_TEXT_CHARS],
            "frames": np.array(frames.images, dtype=np.uint8, copy=True),
            "timestamps": np.array(frames.timestamps, dtype=np.float64, copy=True),
        }

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.config.max_parallel, thread_name_prefix="crop")
        return self._pool

    # --- gymnasium API ----------------------------------------------------------------------------------
    @property
    def sample(self) -> VideoQASample | None:
        """The current episode's sample."""
        return self._sample

    @property
    def agent_text(self) -> str:
        """Everything the agent's turns held this episode, forced prefixes included (the reward scores
        ``generated_text()``)."""
        return "".join(self._turn_texts)

    def render(self) -> np.ndarray | None:
        """RGB contact sheet of every frame the agent has seen this episode, captioned with its time."""
        if self.render_mode != "rgb_array":
            return None
        images, captions = [], []
        for part, batch in enumerate(self._seen):
            for img, t in zip(batch.images, batch.timestamps, strict=True):
                images.append(img)
                captions.append(f"{t:.1f}s" if part == 0 else f"#{part} {t:.1f}s")
        if not images:
            return np.zeros((64, 64, 3), dtype=np.uint8)
        return contact_sheet(images, captions)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        super().close()

