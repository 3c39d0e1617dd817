"""One episode interface: what a message protocol decides, behind the env's Gymnasium plumbing.

``VideoToolEnv`` opens the sample's video, picks K and scores the end; everything a protocol decides (which
frames open the episode, what the opening and each reply say, which calls run and when the dialogue ends) is
an ``Episode``. Every episode lists its messages, at the opening and after every turn, as ``message`` dicts:
``info["messages"]`` carries them whatever the protocol, and ``paravt_env.messages`` is the one place that
turns them into chat messages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ..data.sample import VideoQASample
from ..timing import StepTiming
from ..video import Frames, VideoReader


class EpisodeConfig(Protocol):
    """The options an episode reads: ``paravt_env.EnvConfig`` has them all (and checks them with the episode's
    ``check``: a protocol, not an import, so the config and the episodes do not import each other)."""

    protocol: str
    tool_result: str
    prompt_mode: str
    dispatch: str
    max_turns: int
    crop_budget: int | None
    turn_budget: int | None
    turn_limit: int
    max_parallel: int
    crop_fps: float
    crop_max_frames: int
    min_pixels: int
    max_pixels: int
    overview_tolerance: float | None
    subtitles: bool
    force_final_answer: bool
    video_channel: str
    release_overview_fps: float | None
    subagent: Any
    subagent_timeout: float | None


def message(role: str, text: str, n_frames: int = 0, *, parts: bool = False, video_url: str | None = None) -> dict[str, Any]:
    """A message of ``info["messages"]``: ``text`` holds ``n_frames`` ``<image>`` placeholders (the frames, in
    order, are the next ``n_frames`` of the observation); ``parts``: send the content as a list of parts;
    ``video_url``: a video part (a ``file://`` URL) before the text."""
    out = {"role": role, "text": text, "frames": n_frames, "parts": parts or n_frames > 0 or video_url is not None}
    if video_url is not None:
        out["video_url"] = video_url
    return out


@dataclass
class Opening:
    """What an episode shows at reset: the system prompt, the user's text (one ``<image>`` per overview frame
    when the frames are shown) and the messages they make."""

    system: str
    user: str
    messages: list[dict[str, Any]]

    @property
    def text(self) -> str:
        """The observation's text: everything the agent reads first."""
        return f"{self.system}\n\n{self.user}"


@dataclass
class Turn:
    """What one step produced."""

    terminated: bool = False
    truncated: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The env's reply, one or several messages; their frames, in order, are ``frames``."""
    frames: Frames = field(default_factory=Frames.empty)
    tool_calls: dict[str, int] = field(default_factory=lambda: {"requested": 0, "executed": 0, "rejected": 0, "failed": 0})
    crops: list[dict[str, Any]] = field(default_factory=list)
    """Per call: window, status, frame count and times (``paravt_env.records.crop_entry``)."""
    parse_problems: list[str] = field(default_factory=list)
    action_truncated: bool = False
    final: str | None = None
    """The release's final response (what its scorer reads), when the protocol has one."""
    error: str | None = None
    max_new_tokens: int | None = None
    """The cap of the next generation, when the protocol sets one (the release's forced final answer)."""
    timing: StepTiming = field(default_factory=StepTiming)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def text(self) -> str:
        """The observation's text: the messages' texts, one per line."""
        return "\n".join(m["text"] for m in self.messages)


class Episode(ABC):
    """One sample's dialogue under one message protocol. Subclasses register by ``name`` in
    ``paravt_env.episodes.EPISODES``; ``VideoToolEnv`` picks one at reset from ``EnvConfig.protocol``."""

    name: ClassVar[str]
    release: ClassVar[bool] = False
    """Whether it renders the release's own messages (what a released checkpoint was trained or evaluated on):
    its answers are scored as the release scores them, and servers get its frames as the release sends them."""
    calls_per_turn: ClassVar[int | None] = None
    """The most calls one turn runs, when the protocol sets it (else ``EnvConfig.max_parallel`` and dispatch do)."""
    grounding_prompt_mode: ClassVar[str | None] = None
    """The prompt mode of its temporal-grounding runs (Charades-STA), when the protocol has its own."""

    def __init__(self, sample: VideoQASample, reader: VideoReader, config: EpisodeConfig) -> None:
        self.sample, self.reader, self.config = sample, reader, config

    # --- what the protocol asks of the config and of the video, before any episode ------------------------
    @classmethod
    def check(cls, config: EpisodeConfig) -> None:
        """Raise ``ValueError`` naming an option this protocol cannot take (called by ``EnvConfig``)."""
        for name in ("crop_budget", "turn_budget"):
            if cls.release and getattr(config, name) is not None:
                raise ValueError(f"EnvConfig.{name} is a paravt-protocol option: protocol={config.protocol!r} runs "
                                 "the release's own turn rules")  # fmt: skip

    @classmethod
    def prompt_mode_name(cls, mode: str) -> str:
        """The name under which this protocol runs prompt mode ``mode`` (what a config should record)."""
        return mode

    @classmethod
    def max_pixels(cls, config: EpisodeConfig) -> int:
        """The largest frame (pixels) an observation can carry under this protocol."""
        return config.max_pixels

    @classmethod
    @abstractmethod
    def overview(cls, reader: VideoReader, k: int, config: EpisodeConfig) -> tuple[Frames, int]:
        """The opening's frames for frame budget ``k``, and the budget the info reports. Raises
        ``VideoDecodeError`` when the video cannot give them."""

    @classmethod
    def extract_prediction(cls, text: str) -> str:
        """The answer this protocol's scorer reads from everything the agent wrote (``info["prediction"]``)."""
        from ..rewards import extract_answer

        return extract_answer(text)

    # --- the dialogue ---------------------------------------------------------------------------------------
    def call_arguments(self) -> dict[str, Any]:
        """Arguments a call must carry beside its window under this protocol (``info["call_arguments"]``)."""
        return {}

    @abstractmethod
    def opening(self, overview: Frames) -> Opening:
        """The messages that open the episode, with ``overview`` at the user's placeholders."""

    @abstractmethod
    def step(self, text: str, turn: int, notes: list[str], pool: ThreadPoolExecutor) -> Turn:
        """The agent's ``turn``-th whole turn (``text``, already bounded; ``notes`` say what bounding changed)."""
