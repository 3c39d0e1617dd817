"""Synthetic needle-in-a-haystack long videos: the Tool Necessity Gap, measurable on a CPU.

Each video is long (60-600 s by default), cheap to decode (224 x 224, 2 fps, h264) and dull: a dim, slowly
drifting grey gradient with soft grey blobs wandering over it as distractors. A few short **events** (a solid,
saturated, coloured shape, visible for 2-6 s at one place) are the needles. A 4-8 frame overview usually
misses them; crops placed on the right seconds find them. Every sample records its event windows so an oracle
knows where to look, and a pixel detector can find them too: nothing but an event is ever saturated.

Colours and shapes are unique within a video, so every question has exactly one right answer: multiple
choice (colour, shape, order of appearance, count), open-ended (colour, shape) and temporal grounding.

Frames are rendered straight into YUV 4:2:0 planes with numpy, a chunk of frames at a time, and handed to
x264 as they are: no colour conversion inside the encoder (PyAV's implicit RGB->YUV step made x264's first
GOPs differ from run to run), one encoder thread and periodic keyframes only, so the same seed gives the
same bytes on any machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from ..storage import write_text_atomic
from .sample import Event, VideoQASample

logger = logging.getLogger(__name__)

GENERATOR_VERSION = 2
"""Bump when the pixels or questions a config produces change: it is part of every video's file name."""

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
"""Question kinds; ``SynthConfig.question_kinds`` draws from its tuple uniformly (repeat a kind to weight it)."""

_KIND_TYPE = {"mcq": "mcq", "oe": "oe", "tvg": "tvg"}


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

    def __post_init__(self) -> None:
        self.question_kinds = tuple(self.question_kinds)
        if self.n < 0:
            raise ValueError(f"SynthConfig.n must be >= 0, got {self.n}")
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
        unknown = sorted(set(self.question_kinds) - set(QUESTION_KINDS))
        if unknown or not self.question_kinds:
            raise ValueError(
                f"SynthConfig.question_kinds: unknown {unknown or '(empty)'}; known: {QUESTION_KINDS}"
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
        for name, old in (("event_scale_min", 0.25), ("event_scale_max", 0.38), ("needles_visible", True)):
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


# --- drawing ------------------------------------------------------------------------------------------------
def shape_mask(shape: str, side: int) -> np.ndarray:
    """A boolean ``side`` x ``side`` mask of one shape, filling most of its box."""
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float64)
    u, v = (xx + 0.5) / side * 2 - 1, (yy + 0.5) / side * 2 - 1  # [-1, 1], v downwards
    if shape == "circle":
        return u**2 + v**2 <= 0.95**2
    if shape == "square":
        return (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85)
    if shape == "triangle":  # apex up
        return (v <= 0.85) & (v >= -0.9 + 2.0 * np.abs(u))
    if shape == "cross":
        return ((np.abs(u) <= 0.3) & (np.abs(v) <= 0.95)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 0.95))
    if shape == "star":  # five points
        angle = np.arctan2(u, -v)
        radius = np.hypot(u, v)
        k = (np.cos(5 * angle) + 1) / 2
        return radius <= 0.42 + 0.53 * k**3
    raise ValueError(f"unknown shape {shape!r}; known: {SHAPES}")


def rgb_to_ycbcr(rgb: Sequence[float]) -> tuple[float, float, float]:
    """BT.601 limited-range Y'CbCr of an 8-bit RGB colour: what decoders assume for untagged SD video."""
    r, g, b = (float(c) for c in rgb)
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    cb = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    cr = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    return y, cb, cr


def render_yuv(plan: VideoPlan, cfg: SynthConfig, start: int, stop: int) -> np.ndarray:
    """Frames ``start`` to ``stop`` of a plan as yuv420p buffers: uint8 (T, 3*size/2, size), Y then U then V.

    Vectorised over the chunk: the background and every blob are separable (a row profile times a column
    profile), so a frame costs a few broadcasts, and a 600 s video renders in a fraction of a second.
    """
    size, fps = cfg.size, cfg.fps
    f32 = np.float32
    # Transcendentals run in float64 on the small (T, W) profiles and are cast once: numpy's SIMD sin/exp
    # differ between CPUs in the last float32 bits, which could flip a rounded pixel from one machine to the
    # next. The large (T, H, W) arithmetic after that is exactly rounded IEEE float32, the same everywhere.
    t = np.arange(start, stop, dtype=np.float64) / fps
    x = np.arange(size, dtype=np.float64)
    # A dim grey gradient that drifts slowly sideways (x264 codes it almost for free).
    across = (14 * np.sin(x[None, :] / size * 3.0 + 0.04 * t[:, None] + plan.phase[0])).astype(f32)  # (T, W)
    down = (55 + 10 * np.cos(x / size * 2.0 + plan.phase[1])).astype(f32)  # (H,)
    grey = across[:, None, :] + down[None, :, None]  # (T, H, W)
    for b in plan.blobs:
        # Blobs drift across and wrap around off-screen (a margin of 3 sigma), so they never jump.
        span = size + 6 * b.sigma
        cx = (b.x0 + b.vx * t) % span - 3 * b.sigma
        cy = (b.y0 + b.vy * t) % span - 3 * b.sigma
        gx = np.exp(-((x[None, :] - cx[:, None]) ** 2) / (2 * b.sigma**2)).astype(f32)
        gy = (b.amp * np.exp(-((x[None, :] - cy[:, None]) ** 2) / (2 * b.sigma**2))).astype(f32)
        grey += gy[:, :, None] * gx[:, None, :]
    luma = 16 + 219 / 255 * np.clip(grey, 0, 255)
    half = size // 2
    cb = np.full((len(t), half, half), 129.0, dtype=np.float32)  # a faint blue cast, far from saturated
    cr = np.full((len(t), half, half), 127.0, dtype=np.float32)
    for nd in plan.needles if cfg.needles_visible else ():
        f0, f1 = int(round(nd.start * fps)), int(round(nd.end * fps))
        lo, hi = max(f0, start), min(f1, stop)
        if lo >= hi:
            continue
        mask = shape_mask(nd.shape, nd.size)
        y_c, cb_c, cr_c = rgb_to_ycbcr(PALETTE[nd.colour])
        frames = slice(lo - start, hi - start)
        box = luma[frames, nd.y : nd.y + nd.size, nd.x : nd.x + nd.size]
        box[:, mask] = y_c
        # Chroma is stored at half resolution: blend by the shape's coverage of each 2 x 2 block.
        cover = mask.reshape(nd.size // 2, 2, nd.size // 2, 2).mean(axis=(1, 3)).astype(np.float32)
        cy0, cx0, cs = nd.y // 2, nd.x // 2, nd.size // 2
        for plane, value in ((cb, cb_c), (cr, cr_c)):
            region = plane[frames, cy0 : cy0 + cs, cx0 : cx0 + cs]
            region *= 1 - cover
            region += value * cover
    n = len(t)
    planes = [luma.reshape(n, -1), cb.reshape(n, -1), cr.reshape(n, -1)]
    # yuv420p as PyAV takes it: one (3*size/2, size) array per frame, the Y, U and V planes back to back.
    out = np.clip(np.rint(np.concatenate(planes, axis=1)), 0, 255).astype(np.uint8)
    out = out.reshape(n, size * 3 // 2, size)
    return out


def _chunks(n: int, step: int) -> Iterator[tuple[int, int]]:
    for a in range(0, n, step):
        yield a, min(n, a + step)


def render_video(plan: VideoPlan, cfg: SynthConfig, path: str | os.PathLike) -> Path:
    """Encode a plan to ``path`` (h264, yuv420p, mp4). Written to ``path.part`` and renamed when complete."""
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    try:
        with av.open(str(tmp), "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=cfg.fps)
            stream.width = stream.height = cfg.size
            stream.pix_fmt = "yuv420p"
            stream.codec_context.gop_size = cfg.gop
            stream.codec_context.thread_count = 1
            stream.codec_context.thread_type = "NONE"
            # - one thread: x264's output depends on its thread count, so bytes would differ between machines;
            # - mbtree off: with it, x264 codes the first GOP differently from run to run (measured: 3-6
            #   variants in 25 runs of the same frames); without it, byte-identical every time;
            # - keyframes strictly every `gop` frames: a scene-cut keyframe at each event's first frame would
            #   let a keyframe-seeking overview land on events far more often than chance.
            params = (
                f"keyint={cfg.gop}:min-keyint={cfg.gop}:scenecut=0:mbtree=0:threads=1:lookahead-threads=1"
            )
            stream.options = {"preset": cfg.preset, "crf": str(cfg.crf), "x264-params": params}
            for a, b in _chunks(plan.n_frames, 64):
                for i, buf in enumerate(render_yuv(plan, cfg, a, b)):
                    frame = av.VideoFrame.from_ndarray(buf, format="yuv420p")
                    frame.pts = a + i  # explicit timestamps: frame i is on screen from i / fps
                    for packet in stream.encode(frame):
                        container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        # Atomic: an interrupted run never leaves a half-written video under the real name.
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# --- questions ----------------------------------------------------------------------------------------------
@dataclass
class _Question:
    kind: str
    question: str
    answer: str
    options: list[str]
    about: list[int]  # indices of the needles needed to answer


def _shuffled_options(rng: np.random.Generator, correct: str, others: list[str]) -> tuple[list[str], str]:
    picks = [*others[:3], correct]
    options = [picks[i] for i in rng.permutation(len(picks))]
    return options, "ABCD"[options.index(correct)]


def _ask(rng: np.random.Generator, kind: str, needles: list[Needle]) -> _Question:
    i = int(rng.integers(len(needles)))
    nd = needles[i]
    if kind == "mcq_colour":
        others = [str(c) for c in rng.permutation([c for c in PALETTE if c != nd.colour])]
        options, letter = _shuffled_options(rng, nd.colour, others)
        return _Question(
            kind, f"A {nd.shape} briefly appears in the video. What colour is it?", letter, options, [i]
        )
    if kind == "mcq_shape":
        others = [str(s) for s in rng.permutation([s for s in SHAPES if s != nd.shape])]
        options, letter = _shuffled_options(rng, nd.shape, others)
        return _Question(
            kind, f"A {nd.colour} shape briefly appears in the video. What shape is it?", letter, options, [i]
        )
    if kind == "mcq_order" and len(needles) >= 2:
        labels = [n.label for n in needles]
        if rng.random() < 0.5 or i == len(needles) - 1:
            # Which of (up to 4 of) the shown shapes comes first; absent shapes pad the options to four.
            shown = sorted(int(k) for k in rng.choice(len(needles), size=min(len(needles), 4), replace=False))
            absent = [f"{c} {s}" for c in PALETTE for s in SHAPES if f"{c} {s}" not in labels]
            pad = [str(a) for a in rng.choice(absent, size=4 - len(shown), replace=False)]
            options, letter = _shuffled_options(rng, labels[shown[0]], [labels[k] for k in shown[1:]] + pad)
            return _Question(
                kind, "Which of these coloured shapes appears first in the video?", letter, options, shown
            )
        # Which shape comes right after needle i: the others (and absent ones) are the distractors.
        after = labels[i + 1]
        others = [labels[k] for k in rng.permutation(len(needles)) if k != i + 1]
        absent = [f"{c} {s}" for c in PALETTE for s in SHAPES if f"{c} {s}" not in labels]
        others += [str(a) for a in rng.choice(absent, size=3, replace=False)]
        options, letter = _shuffled_options(rng, after, others[:3])
        return _Question(
            kind,
            f"Which coloured shape appears next in the video after the {nd.label}?",
            letter,
            options,
            [i, i + 1],
        )
    if kind == "mcq_count":
        count = len(needles)
        lo = int(rng.integers(max(1, count - 3), count + 1))
        options = [str(v) for v in range(lo, lo + 4)]
        return _Question(
            kind,
            "How many coloured shapes appear in the video (each one briefly)?",
            "ABCD"[options.index(str(count))],
            options,
            list(range(len(needles))),
        )
    if kind == "oe_colour":
        return _Question(
            kind, f"What colour is the {nd.shape} that briefly appears in the video? Answer with one word.",
            nd.colour, [], [i],
        )  # fmt: skip
    if kind == "oe_shape":
        return _Question(
            kind, f"What shape is the {nd.colour} object that briefly appears in the video? Answer with one word.",
            nd.shape, [], [i],
        )  # fmt: skip
    # tvg (also what mcq_order falls back to when a video has a single needle)
    return _Question(
        "tvg",
        f"When does the {nd.label} appear in the video? Answer with [start, end] in seconds.",
        f"[{nd.start:.1f}, {nd.end:.1f}]",
        [],
        [i],
    )


def _question_type(kind: str) -> str:
    return _KIND_TYPE[kind.split("_", 1)[0]]


def make_samples(plan: VideoPlan, cfg: SynthConfig) -> list[VideoQASample]:
    """The questions about one planned video (``video_path`` = the file name, relative to the dataset dir)."""
    rng = np.random.default_rng([cfg.seed, plan.index, 1])
    events = [nd.to_event() for nd in plan.needles]
    samples = []
    for j in range(cfg.questions_per_video):
        kind = str(cfg.question_kinds[int(rng.integers(len(cfg.question_kinds)))])
        q = _ask(rng, kind, plan.needles)
        suffix = "" if cfg.questions_per_video == 1 else f"-q{j}"
        samples.append(
            VideoQASample(
                id=f"synth-{cfg.seed}-{plan.index:05d}{suffix}",
                video_path=plan.name,
                question=q.question,
                answer=q.answer,
                question_type=_question_type(q.kind),
                options=q.options,
                duration=plan.duration,
                events=[Event(e.start, e.end, e.label, dict(e.attributes)) for e in events],
                extra={
                    "kind": q.kind,
                    "relevant_events": [plan.needles[k].label for k in q.about],
                    "synth": {"seed": cfg.seed, "index": plan.index, "fps": cfg.fps, "size": cfg.size},
                },
            )
        )
    return samples


# --- datasets -----------------------------------------------------------------------------------------------
def make_video(index: int, out_dir: str | os.PathLike, cfg: SynthConfig) -> tuple[VideoPlan, bool]:
    """Plan video ``index`` and write it under ``out_dir`` unless it is already there; (plan, written)."""
    plan = plan_video(index, cfg)
    path = Path(out_dir) / plan.name
    if path.is_file():
        # The name holds a hash of every setting that shapes the bytes, and files appear only complete
        # (renamed from .part), so an existing file already has the right content.
        return plan, False
    render_video(plan, cfg, path)
    return plan, True


def _make_video_job(args: tuple[int, str, SynthConfig]) -> tuple[VideoPlan, bool]:
    return make_video(*args)


def generate_dataset(
    out_dir: str | os.PathLike,
    config: SynthConfig | None = None,
    progress: bool = True,
    workers: int = 1,
) -> list[VideoQASample]:
    """Write ``config.n`` videos, ``samples.jsonl`` and ``synth_config.json`` into ``out_dir``.

    ``samples.jsonl`` holds video paths relative to ``out_dir`` (``load_samples(out_dir)`` resolves them).
    Idempotent and resumable: videos already present are kept, since a video's file name is a function of
    the settings that shape its bytes. ``workers`` > 1 encodes videos in that many processes (each encoder
    stays single-threaded, so the bytes do not depend on it). Returns the samples with absolute video paths.
    """
    cfg = config or SynthConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(i, str(out), cfg) for i in range(cfg.n)]
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=cfg.n, desc="synth videos", unit="video")
        except ImportError:  # tqdm is optional for the library; no bar then
            bar = None
    plans: list[VideoPlan] = []
    written = 0
    try:
        if workers > 1 and cfg.n > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=workers) as pool:
                for plan, new in pool.map(_make_video_job, jobs):
                    plans.append(plan)
                    written += new
                    if bar is not None:
                        bar.update(1)
        else:
            for job in jobs:
                plan, new = _make_video_job(job)
                plans.append(plan)
                written += new
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    samples = [s for plan in plans for s in make_samples(plan, cfg)]
    write_text_atomic(
        out / "samples.jsonl", "".join(json.dumps(s.to_dict(), sort_keys=True) + "\n" for s in samples)
    )
    config_json = {"generator_version": GENERATOR_VERSION, **asdict(cfg)}
    write_text_atomic(out / "synth_config.json", json.dumps(config_json, indent=2, sort_keys=True) + "\n")
    logger.info("synth: %d videos in %s (%d new)", len(plans), out, written)
    return [_with_absolute_path(s, out) for s in samples]


def _with_absolute_path(sample: VideoQASample, root: Path) -> VideoQASample:
    d = sample.to_dict()
    d["video_path"] = str((root / sample.video_path).resolve())
    return VideoQASample.from_dict(d)


# --- index videos (exact-seek tests) ------------------------------------------------------------------------
INDEX_GRID = 4
"""Index videos carry their frame number as a 4 x 4 grid of black/white blocks: 16 bits, LSB top-left."""


def index_image(i: int, height: int, width: int) -> np.ndarray:
    """The RGB image of frame ``i`` of an index video: bit b of ``i`` is block b (row-major), white = 1."""
    if not 0 <= i < 1 << (INDEX_GRID * INDEX_GRID):
        raise ValueError(f"index video frames are numbered 0..{(1 << INDEX_GRID * INDEX_GRID) - 1}, got {i}")
    bits = np.array([(i >> b) & 1 for b in range(INDEX_GRID * INDEX_GRID)], dtype=np.uint8)
    cells = np.kron(
        bits.reshape(INDEX_GRID, INDEX_GRID) * 255,
        np.ones((-(-height // INDEX_GRID), -(-width // INDEX_GRID)), dtype=np.uint8),
    )
    return np.repeat(cells[:height, :width, None], 3, axis=2)


def decode_index(image: np.ndarray) -> int:
    """Read the frame number back from a frame of an index video, at any size down to ~16 x 16 pixels.

    Each block is read from the mean of its central half, which compression and resizing leave intact.
    Raises ``ValueError`` when a block is neither clearly black nor clearly white: the frame is not an
    index-video frame as encoded (e.g. two frames blended together).
    """
    if image.ndim != 3 or image.shape[0] < INDEX_GRID or image.shape[1] < INDEX_GRID:
        raise ValueError(f"decode_index needs an H x W x C image of at least 4 x 4, got shape {image.shape}")
    h, w = image.shape[:2]
    gray = image.astype(np.float32).mean(axis=2)
    value = 0
    for b in range(INDEX_GRID * INDEX_GRID):
        r, c = divmod(b, INDEX_GRID)
        y0, x0 = int((r + 0.25) * h / INDEX_GRID), int((c + 0.25) * w / INDEX_GRID)
        y1 = max(int((r + 0.75) * h / INDEX_GRID), y0 + 1)
        x1 = max(int((c + 0.75) * w / INDEX_GRID), x0 + 1)
        level = float(gray[y0:y1, x0:x1].mean())
        if 64 < level < 192:
            raise ValueError(f"decode_index: block {b} has grey level {level:.0f}; not a clean index frame")
        if level >= 128:
            value |= 1 << b
    return value


def make_index_video(
    path: str | os.PathLike,
    n_frames: int,
    fps: float = 10,
    size: tuple[int, int] = (96, 128),
    gop: int = 12,
    bframes: int = 2,
    codec: str = "libx264",
    rotation: int = 0,
    open_gop: bool = False,
) -> Path:
    """A video whose frame i shows the number i (read it with ``decode_index``): for testing exact seeking.

    ``size`` is (height, width). B-frames are on by default so that decode order differs from presentation
    order, the hard case for seeking. The container follows the suffix (``.ts`` gives MPEG-TS);
    ``rotation`` (degrees counterclockwise) is written as a display matrix, as phones do; ``open_gop``
    (x264) makes later keyframes non-IDR recovery points that B-frames before them refer across.
    """
    path = Path(path)
    height, width = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = bframes
        if rotation:
            stream.set_display_rotation(rotation)
        if codec == "libx264":
            # scenecut off: every frame differs wildly, and x264 would otherwise insert keyframes at will.
            stream.options = {
                "preset": "veryfast",
                "crf": "18",
                "bf": str(bframes),
                "threads": "1",
                "x264-params": "scenecut=0" + (":open-gop=1" if open_gop else ""),
            }
        for i in range(n_frames):
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(index_image(i, height, width), format="rgb24")
            ):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


__all__ = [
    "GENERATOR_VERSION",
    "INDEX_GRID",
    "PALETTE",
    "QUESTION_KINDS",
    "SHAPES",
    "Needle",
    "SynthConfig",
    "VideoPlan",
    "decode_index",
    "generate_dataset",
    "index_image",
    "make_index_video",
    "make_samples",
    "make_video",
    "plan_video",
    "render_video",
    "render_yuv",
    "rgb_to_ycbcr",
    "shape_mask",
]
