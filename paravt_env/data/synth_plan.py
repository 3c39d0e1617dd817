"""Plans of the synthetic videos: what can be drawn (the palette, the shapes), what can be asked (the question
kinds), the dataset's settings (``SynthConfig``) and everything about one video drawn from its seed before any
pixel exists (``plan_video``). ``synth_drawing`` renders plans, ``synth_questions`` asks about them and
``synthetic`` writes datasets of them."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .sample import Event

PALETTE: dict[str, tuple[int, int, int]] = {
    # Hues 60 degrees apart at high saturation: they stay distinct after 4:2:0 chroma subsampling, h264 at a
    # high crf and resizing to ~100 px, and every one is far from the grey of the background.
    "red": (230, 30, 30),
    "yellow": (235, 225, 30),
    "green": (30, 200, 40),
    "cyan": (30, 215, 225),
    "blue": (40, 60, 235),
    "magenta": (225, 40, 215),
}
SHAPES = ("circle", "square", "triangle", "star", "cross")

QUESTION_KINDS = ("mcq_colour", "mcq_shape", "mcq_order", "mcq_count", "oe_colour", "oe_shape", "tvg")
"""The default question kinds; ``SynthConfig.question_kinds`` draws from its tuple uniformly (repeat a kind to
weight it)."""

MULTI_EVENT_KINDS = ("oe_colours",)
"""Kinds outside the default draw (adding them to ``QUESTION_KINDS`` would change every default dataset's
questions): ``oe_colours`` asks the colour of every needle of the video, in order of appearance, so its answer
needs every needle's window."""

KNOWN_KINDS = QUESTION_KINDS + MULTI_EVENT_KINDS


@dataclass(frozen=True)
class Task:
    """A family of synthetic questions (``paravt synth --task``): the question kinds it asks and how many needles
    each of its videos holds (None: the generator's setting)."""

    question_kinds: tuple[str, ...]
    min_events: int | None = None
    max_events: int | None = None
    doc: str = ""

    def settings(self) -> dict[str, object]:
        """The ``SynthConfig`` fields this task sets."""
        out: dict[str, object] = {"question_kinds": self.question_kinds}
        if self.min_events is not None:
            out.update(min_events=self.min_events, max_events=self.max_events)
        return out


TASKS: dict[str, Task] = {
    "needle": Task(QUESTION_KINDS, doc="one needle a question: 2-4 needles a video, each question about one of them "
                                       "(or their order or count); one window answers most questions"),
    "two_colours": Task(("oe_colours",), 2, 2,
                        doc="two needles a video, the question asks both colours: two distinct windows are needed, "
                            "and finding one scores about half (token F1)"),
    "count": Task(("mcq_count",), 1, 4, doc="1-4 needles a video, the question asks how many: every needle must be "
                                            "found, so the whole video must be searched"),
}
"""The task families; ``needle`` (the generator's defaults) is the default. A multi-event family needs two or more
distinct windows per answer, so at a matched crop budget the protocols no longer answer the same questions by
construction, and a turn budget shows what parallel calling buys."""


def task_settings(name: str) -> dict[str, object]:
    """The ``SynthConfig`` fields of task ``name`` (``ValueError`` naming the known tasks)."""
    try:
        return TASKS[name].settings()
    except KeyError:
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}") from None

COUNTERFACTUALS = ("", "colour", "shape")
"""``SynthConfig.counterfactual``: none, every needle recoloured, every needle reshaped."""

GENERATOR_VERSION = 2
"""Bump when the pixels or questions a config produces change: it is part of every video's file name."""


MAX_DURATION_S = 86400.0
"""The longest synthetic video: a day (a duration beyond any video the plan can place events in and encode)."""


@dataclass
class SynthConfig:
    """Settings of a synthetic dataset. The same settings and seed give identical samples and video bytes."""

    n: int = 16
    """Number of videos."""
    seed: int = 0
    """Master seed; video i draws from the stream (seed, i), so changing ``n`` keeps the first videos as they are."""
    min_duration: float = 60.0
    """Shortest video, seconds."""
    max_duration: float = 600.0
    """Longest video, seconds."""
    fps: int = 2
    """Frames per second of the encoded videos."""
    size: int = 224
    """Frame side in pixels (square frames; even, for 4:2:0 chroma)."""
    min_events: int = 2
    """Fewest needles per video."""
    max_events: int = 4
    """Most needles per video (at most the number of shapes, 5; fewer in videos too short to hold them)."""
    min_event_seconds: float = 2.0
    """Shortest time a needle stays on screen."""
    max_event_seconds: float = 6.0
    """Longest time a needle stays on screen."""
    distractors: int = 3
    """Soft grey blobs wandering over each video (never saturated, so never mistaken for a needle)."""
    event_scale_min: float = 0.25
    """Smallest needle, as its side over the frame side. The tiny CPU policy needs large needles (0.6-0.85):
    its vision tower sees a 64 x 64 frame as 2 x 2 merged tokens."""
    event_scale_max: float = 0.38
    """Largest needle, as its side over the frame side (at most 1)."""
    question_kinds: tuple[str, ...] = QUESTION_KINDS
    """Question kinds to draw from, uniformly; repeat a kind to weight it."""
    questions_per_video: int = 1
    """Questions asked about each video (each one is a sample; they share the video)."""
    crf: int = 33
    """x264 constant rate factor: higher gives smaller files (colours stay within ~8 levels at 33)."""
    gop_seconds: float = 2.0
    """Keyframe interval, seconds (keyframes are strictly periodic: no scene-cut keyframes at events)."""
    preset: str = "veryfast"
    """x264 preset."""
    needles_visible: bool = True
    """False renders every video without its needles (background and distractors only), the samples (questions,
    answers, event times) unchanged: the control that shows whether a policy answers from the pixels (its
    accuracy there should fall to what guessing gets)."""
    counterfactual: str = ""
    """"colour" or "shape" renders every video with each needle's colour (or shape) changed to another one, its
    time, place and size and everything else kept (``counterfactual_needles``); the questions and answers are
    asked of the changed video, so a colour question reads the same and its answer changes. The check that a
    policy's answer follows the pixels: on the counterfactual copy of a split it must give the new answer, not
    the one it may have memorised or guessed from the text."""

    def __post_init__(self) -> None:
        if self.counterfactual not in COUNTERFACTUALS:
            raise ValueError(f"SynthConfig.counterfactual must be one of {COUNTERFACTUALS}, got {self.counterfactual!r}")
        self.question_kinds = tuple(self.question_kinds)
        if self.n < 0:
            raise ValueError(f"SynthConfig.n must be >= 0, got {self.n}")
        if not (math.isfinite(self.min_duration) and math.isfinite(self.max_duration)) or self.max_duration > MAX_DURATION_S:
            raise ValueError(f"SynthConfig durations must be finite seconds up to {MAX_DURATION_S:g} (a day), got "
                             f"min_duration={self.min_duration}, max_duration={self.max_duration}")  # fmt: skip
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"SynthConfig.seed must be a non-negative integer, got {self.seed!r}")
        if not 0 < self.min_duration <= self.max_duration:
            raise ValueError(
                "SynthConfig needs 0 < min_duration <= max_duration, "
                f"got min_duration={self.min_duration}, max_duration={self.max_duration}"
            )
        if self.fps < 1 or int(self.fps) != self.fps:
            raise ValueError(f"SynthConfig.fps must be a positive integer, got {self.fps}")
        if self.size < 32 or self.size % 2:
            raise ValueError(f"SynthConfig.size must be an even number >= 32, got {self.size}")
        if not 1 <= self.min_events <= self.max_events <= len(SHAPES):
            raise ValueError(
                f"SynthConfig needs 1 <= min_events <= max_events <= {len(SHAPES)}, "
                f"got min_events={self.min_events}, max_events={self.max_events}"
            )
        if not 1.0 / self.fps <= self.min_event_seconds <= self.max_event_seconds:
            raise ValueError(
                "SynthConfig needs 1/fps <= min_event_seconds <= max_event_seconds, "
                f"got min_event_seconds={self.min_event_seconds}, max_event_seconds={self.max_event_seconds}"
            )
        # Each event gets its own slot of the video with a second of margin on either side; shorter videos
        # get fewer events (never fewer than min_events).
        needed = self.min_events * (self.max_event_seconds + 2.0)
        if self.min_duration < needed:
            raise ValueError(
                f"SynthConfig.min_duration={self.min_duration} s cannot hold min_events={self.min_events} "
                f"events of up to max_event_seconds={self.max_event_seconds} s (needs >= {needed} s)"
            )
        unknown = sorted(set(self.question_kinds) - set(KNOWN_KINDS))
        if unknown or not self.question_kinds:
            raise ValueError(
                f"SynthConfig.question_kinds: unknown {unknown or '(empty)'}; known: {KNOWN_KINDS}"
            )
        if self.questions_per_video < 1:
            raise ValueError(f"SynthConfig.questions_per_video must be >= 1, got {self.questions_per_video}")
        if not 0 < self.event_scale_min <= self.event_scale_max <= 1:
            raise ValueError(
                "SynthConfig needs 0 < event_scale_min <= event_scale_max <= 1, "
                f"got event_scale_min={self.event_scale_min}, event_scale_max={self.event_scale_max}"
            )
        if self.distractors < 0:
            raise ValueError(f"SynthConfig.distractors must be >= 0, got {self.distractors}")
        if not 0 <= self.crf <= 51:
            raise ValueError(f"SynthConfig.crf must be in [0, 51], got {self.crf}")
        if self.gop_seconds <= 0:
            raise ValueError(f"SynthConfig.gop_seconds must be > 0, got {self.gop_seconds}")

    @property
    def gop(self) -> int:
        """Keyframe interval in frames."""
        return max(1, int(round(self.gop_seconds * self.fps)))

    def video_key(self) -> str:
        """Hash of everything that shapes a video's bytes (not ``n``, nor the question settings)."""
        pixels = {
            k: v for k, v in asdict(self).items() if k not in ("n", "question_kinds", "questions_per_video")
        }
        # Needle scale joined the settings later: at its old values it leaves the key (and the cached files
        # of every earlier dataset) as they were.
        for name, old in (("event_scale_min", 0.25), ("event_scale_max", 0.38), ("needles_visible", True),
                          ("counterfactual", "")):
            if pixels[name] == old:
                del pixels[name]
        blob = json.dumps({"v": GENERATOR_VERSION, **pixels}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:8]


# --- plans: everything about a video, drawn from its seed, before any pixel exists ----------------------------
@dataclass(frozen=True)
class Needle:
    """One event: a solid ``colour`` ``shape`` in the box (x, y, size) on screen during [start, end)."""

    colour: str
    shape: str
    start: float
    end: float
    x: int
    y: int
    size: int

    @property
    def label(self) -> str:
        return f"{self.colour} {self.shape}"

    def to_event(self) -> Event:
        return Event(
            start=self.start,
            end=self.end,
            label=self.label,
            attributes={
                "colour": self.colour,
                "shape": self.shape,
                "x": self.x,
                "y": self.y,
                "size": self.size,
            },
        )


@dataclass(frozen=True)
class _Blob:
    x0: float
    y0: float
    vx: float
    vy: float
    sigma: float
    amp: float


@dataclass
class VideoPlan:
    """What video ``index`` of a dataset shows: its length, its needles (in time order) and its distractors."""

    index: int
    name: str
    duration: float
    n_frames: int
    needles: list[Needle]
    blobs: list[_Blob] = field(repr=False)
    phase: tuple[float, float] = field(repr=False)


def counterfactual_needles(needles: list[Needle], what: str, rng: np.random.Generator) -> list[Needle]:
    """``needles`` with every one's colour (``what`` "colour") or shape ("shape") changed: each gets a value other
    than its own, and they stay unique within the video (the questions name a needle by its colour or shape)."""
    from dataclasses import replace

    attr, pool = ("colour", list(PALETTE)) if what == "colour" else ("shape", list(SHAPES))
    old = [getattr(n, attr) for n in needles]
    while True:  # a random derangement: at most 5 needles over 5-6 values, so a draw succeeds about 1 time in 3
        new = [str(v) for v in rng.choice(pool, size=len(old), replace=False)]
        if all(a != b for a, b in zip(old, new, strict=True)):
            return [replace(n, **{attr: v}) for n, v in zip(needles, new, strict=True)]


def plan_video(index: int, cfg: SynthConfig) -> VideoPlan:
    """Draw video ``index``: duration, needles and distractors. Pure: no file is touched."""
    rng = np.random.default_rng([cfg.seed, index, 0])
    n_frames = int(round(rng.uniform(cfg.min_duration, cfg.max_duration) * cfg.fps))
    duration = n_frames / cfg.fps
    fits = int(duration // (cfg.max_event_seconds + 2.0))
    n = min(int(rng.integers(cfg.min_events, cfg.max_events + 1)), max(fits, cfg.min_events))
    colours = [str(c) for c in rng.choice(list(PALETTE), size=n, replace=False)]
    shapes = [str(s) for s in rng.choice(SHAPES, size=n, replace=False)]
    # One event in each equal slot of the video, a second from the slot's edges: events never overlap and are
    # spread over the whole video, so no small overview window holds several of them.
    slot = duration / n
    needles = []
    for i in range(n):
        length = float(rng.uniform(cfg.min_event_seconds, cfg.max_event_seconds))
        frames = max(1, int(round(length * cfg.fps)))
        lo, hi = i * slot + 1.0, (i + 1) * slot - 1.0 - frames / cfg.fps
        first = int(math.ceil(float(rng.uniform(lo, max(lo, hi))) * cfg.fps))
        first = min(first, n_frames - frames)
        # Boxes on even pixels with an even side, so the shape's chroma lines up with the 2x2 chroma grid.
        side = 2 * int(cfg.size * rng.uniform(cfg.event_scale_min, cfg.event_scale_max) / 2)
        x = 2 * int(rng.integers(0, (cfg.size - side) // 2 + 1))
        y = 2 * int(rng.integers(0, (cfg.size - side) // 2 + 1))
        needles.append(Needle(colours[i], shapes[i], first / cfg.fps, (first + frames) / cfg.fps, x, y, side))
    if cfg.counterfactual:  # its own stream: the plan's other draws (distractors, phase) stay as they were
        needles = counterfactual_needles(needles, cfg.counterfactual, np.random.default_rng([cfg.seed, index, 1]))
    size = cfg.size
    blobs = [
        _Blob(
            x0=float(rng.uniform(0, size)),
            y0=float(rng.uniform(0, size)),
            vx=float(rng.uniform(-0.04, 0.04) * size),  # pixels per second: a slow drift
            vy=float(rng.uniform(-0.04, 0.04) * size),
            sigma=float(rng.uniform(0.06, 0.12) * size),
            amp=float(rng.choice([-1.0, 1.0]) * rng.uniform(35, 70)),
        )
        for _ in range(cfg.distractors)
    ]
    phase = (float(rng.uniform(0, 2 * np.pi)), float(rng.uniform(0, 2 * np.pi)))
    name = f"synth_s{cfg.seed}_{index:05d}_{cfg.video_key()}.mp4"
    return VideoPlan(index, name, duration, n_frames, needles, blobs, phase)
