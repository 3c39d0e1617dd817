"""``EnvConfig``: every option of ``VideoToolEnv``, with the ParaVT defaults."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from typing import Any

from .episodes import episode_of
from .gating import FRAME_BUDGETS
from .protocol import PROMPT_MODES
from .rewards import RewardConfig
from .tools import DISPATCH_MODES, TOOL_RESULT_MODES, BatchSubAgent
from .video import BACKENDS


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass
class EnvConfig:
    """Options of ``VideoToolEnv`` (names as accepted by ``gymnasium.make("ParaVT/VideoTool-v0", ...)``)."""

    dispatch: str = "parallel"
    """"parallel": all crops of a turn run concurrently (ParaVT); "sequential": one crop per turn."""
    max_parallel: int = 5
    """Most crops executed in one turn (ParaVT: 5); extra calls are rejected with feedback."""
    max_turns: int = 3
    """Most agent turns per episode (ParaVT: 3); the last one must answer. With a ``crop_budget`` the episode
    has ``crop_budget + 1`` turns instead (``turn_limit``)."""
    crop_budget: int | None = None
    """Most crops one episode may run, the same for both dispatch modes: the setting under which sequential and
    parallel dispatch differ only in how the calls are dispatched. The episode then has ``crop_budget + 1``
    turns whatever ``max_turns`` says (sequential dispatch can spend the budget one crop a turn and still
    answer; parallel dispatch may use as few turns as it likes), and a call past the budget is refused with
    feedback that says so, in both modes alike. Only crops that run count (a call refused for its window does
    not). None: no total budget (``max_parallel`` a turn, ``max_turns`` turns)."""
    turn_budget: int | None = None
    """Most agent turns one episode may take, the last of which must answer, the same for both dispatch modes:
    the setting under which turns, not crops, are scarce (what parallel calling is for: one turn of several
    crops where sequential dispatch spends a turn a crop). It overrides ``max_turns`` and, beside a
    ``crop_budget``, the ``crop_budget + 1`` turns that budget would give (``turn_limit``). None: no turn budget."""
    frame_budget: int = 64
    """Overview frames K when gating is off (ParaVT eval: 64)."""
    nframes_gating: bool = False
    """PARA-GRPO's nFrames Gating: draw K per (sample, epoch, seed) from ``gating_choices``."""
    gating_choices: tuple[int, ...] = FRAME_BUDGETS
    """The budgets gating draws from uniformly (paper: {4, 8, 16, 32, 64})."""
    seed: int = 0
    """The env's seed in the gating hash; rollouts of one group must share it (``reset(seed=...)`` does not
    change K, it only seeds the env's own random choices)."""
    tool_result: str = "frames"
    """"frames": crop frames go back to the main agent (released eval driver); "subagent": each crop goes
    to ``subagent`` and its text summary comes back (released RL workflow)."""
    subagent: Any = None
    """Callable ``SubAgentRequest -> str`` (or an object with ``batch``) for "subagent" mode."""
    subagent_timeout: float | None = 300.0
    """Seconds a sub-agent may take for one turn's summaries; past it the crops report failure and the
    episode goes on (None: wait forever)."""
    crop_fps: float = 1.0
    """Frames per second of crop window (ParaVT: 1.0)."""
    crop_max_frames: int = 16
    """Most frames one crop returns (ParaVT: 16)."""
    min_pixels: int = 784
    """Pixel budget of every frame, lower bound (Qwen-VL rule; ParaVT: 784 = 28 x 28)."""
    max_pixels: int = 50176
    """Pixel budget of every frame, upper bound (ParaVT: 50176 = 64 visual tokens)."""
    prompt_mode: str = "agentic"
    """System prompt: "agentic" (alias "agentic_general"), "agentic_minimal", "reasoning" (think -> answer) or
    "direct"."""
    protocol: str = "paravt"
    """"paravt": our messages (time-tagged frames, a duration line, one tool-response message per turn,
    ``max_turns`` counts turns). "release": the released eval driver's, rule for rule (its prompts and
    question texts, qwen-vl-utils frames, one message per crop, ``max_turns`` counts rounds of tool calls
    followed by a forced final answer; see ``paravt_env.episodes``), so that a released checkpoint
    sees what it was evaluated on. ``crop_fps``, ``crop_max_frames`` and the pixel budgets are the release's
    own there. "release_rl": the released RL workflow's (the parquet's prompt messages, crops summarised by
    sub-agents; needs ``tool_result="subagent"``, and ``"release"`` with ``tool_result="subagent"`` means it
    too). One ``Episode`` class per protocol (``paravt_env.episodes``)."""
    video_channel: str = "image_url"
    """Release protocol, eval driver: how the video reaches the model. "image_url": the overview frames
    (the release's default); "video_url": a ``file://`` URL of the video for the server to sample (the
    release's Charades-STA runs: vLLM decodes it with its own sampling; only OpenAI-compatible servers
    that read local files can take it). Crops are images either way."""
    release_overview_fps: float | None = 1.0
    """Release protocol, RL workflow (``tool_result="subagent"``): the overview's frame rate, 1 as in the
    release's base RL config, where it silently overrides the frame budget and so turns nFrames Gating off
    (up to 64 frames at 1 fps). None: K frames, the budget gating chose (what PARA-GRPO describes)."""
    subtitles: bool = False
    """Show the video's subtitles (``sample.extra["subtitle_path"]``, an ``.srt`` the loader found) before
    the question: Video-MME "w/ subs"."""
    reward: RewardConfig = field(default_factory=RewardConfig.paravt)
    """Reward preset; default reproduces the released PARA-GRPO reward."""
    backend: str = "auto"
    """Video decoder: "pyav", "decord" or "auto"."""
    overview_tolerance: float | None = None
    """Seconds an overview frame may stray from its segment centre (None: half the interval)."""
    max_action_chars: int = 32768
    """Longer turns are truncated before parsing (and the truncation is reported in feedback)."""
    force_final_answer: bool = True
    """On the last turn, the feedback asks for the final answer in the question type's format."""
    response_prefix: str = ""
    """Text the agent's prompt forces at the start of each of its turns (PARA-GRPO's think prefix,
    ``"<think>\\n"``). Actions stay whole turns, prefix included, and are parsed as such; the reward scores
    only what follows the prefix, the text the policy generated, as the release does (its reward decodes the
    loss-masked tokens only)."""

    @property
    def turn_limit(self) -> int:
        """The episode's most turns: ``turn_budget`` where set, else ``crop_budget + 1`` under a crop budget, else
        ``max_turns``."""
        if self.turn_budget is not None:
            return self.turn_budget
        return self.max_turns if self.crop_budget is None else self.crop_budget + 1

    def __post_init__(self) -> None:
        if self.subagent_timeout is not None and not self.subagent_timeout > 0:
            raise ValueError(f"EnvConfig.subagent_timeout must be positive seconds or None, got {self.subagent_timeout!r}")
        if self.dispatch not in DISPATCH_MODES:
            raise ValueError(f"EnvConfig.dispatch must be one of {DISPATCH_MODES}, got {self.dispatch!r}")
        if self.tool_result not in TOOL_RESULT_MODES:
            raise ValueError(f"EnvConfig.tool_result must be one of {TOOL_RESULT_MODES}, got {self.tool_result!r}")
        if self.prompt_mode not in PROMPT_MODES:
            raise ValueError(f"EnvConfig.prompt_mode must be one of {PROMPT_MODES}, got {self.prompt_mode!r}")
        if self.video_channel not in ("image_url", "video_url"):
            raise ValueError(f"EnvConfig.video_channel must be 'image_url' or 'video_url', got {self.video_channel!r}")
        episode_of(self).check(self)  # what the protocol cannot take
        for name in ("max_parallel", "max_turns", "frame_budget", "crop_max_frames", "max_action_chars"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"EnvConfig.{name} must be an integer >= 1, got {value!r}")
        for name in ("crop_budget", "turn_budget"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ValueError(f"EnvConfig.{name} must be None or an integer >= 1, got {value!r}")
        if not _is_int(self.seed):
            raise ValueError(f"EnvConfig.seed must be an integer, got {self.seed!r}")
        self.gating_choices = tuple(self.gating_choices) if isinstance(self.gating_choices, (list, tuple)) else self.gating_choices
        if not self.gating_choices or any(not _is_int(k) or k < 1 for k in self.gating_choices):
            raise ValueError(f"EnvConfig.gating_choices must be positive integer budgets, got {self.gating_choices!r}")
        if not (isinstance(self.crop_fps, numbers.Real) and 0 < self.crop_fps < math.inf):
            raise ValueError(f"EnvConfig.crop_fps must be a finite number > 0, got {self.crop_fps!r}")
        # Below one 28 x 28 patch the Qwen-VL resize rule has no size to give (frames would be 0 pixels wide).
        if not (_is_int(self.min_pixels) and _is_int(self.max_pixels)) or self.min_pixels < 0 or self.max_pixels < 784:
            raise ValueError(
                f"EnvConfig.min_pixels/max_pixels must be integers, 0 <= min_pixels and max_pixels >= 784, "
                f"got {self.min_pixels!r}, {self.max_pixels!r}"
            )
        if self.min_pixels > self.max_pixels:
            raise ValueError(f"EnvConfig.min_pixels ({self.min_pixels}) exceeds max_pixels ({self.max_pixels})")
        if self.backend not in ("auto", *BACKENDS):
            raise ValueError(f"EnvConfig.backend must be one of {('auto', *BACKENDS)}, got {self.backend!r}")
        tol = self.overview_tolerance
        if tol is not None and not (isinstance(tol, numbers.Real) and 0 <= tol < math.inf):
            raise ValueError(f"EnvConfig.overview_tolerance must be None or a finite number >= 0, got {tol!r}")
        if not isinstance(self.response_prefix, str):
            raise ValueError(f"EnvConfig.response_prefix must be a string, got {self.response_prefix!r}")
        if isinstance(self.reward, dict):  # a recipe's reward block (YAML maps 1:1 onto RewardConfig)
            self.reward = RewardConfig.from_dict(self.reward)
        if not isinstance(self.reward, RewardConfig):
            raise ValueError(f"EnvConfig.reward must be a RewardConfig (or a dict of its fields), got {self.reward!r}")
        if self.tool_result == "subagent" and self.subagent is None:
            raise ValueError('EnvConfig.tool_result="subagent" needs EnvConfig.subagent (a callable)')
        if self.subagent is not None and not (callable(self.subagent) or isinstance(self.subagent, BatchSubAgent)):
            raise ValueError(
                f"EnvConfig.subagent must be a callable or have batch(requests), got {type(self.subagent).__name__}"
            )

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> EnvConfig:
        """Build from keyword options; an unknown option is an error that names it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown VideoToolEnv option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)


def flatten_dotted(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested settings dict as ``{"section.key": value}`` (the dotted paths of recipe overrides), so two
    configurations (a run's ``config.json``, an evaluation's fingerprint) compare key by key."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten_dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
