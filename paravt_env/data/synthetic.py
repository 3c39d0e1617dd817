"""Synthetic needle-in-a-haystack long videos: the Tool Necessity Gap, measurable on a CPU.

Each video is long (60-600 s by default), cheap to decode (224 x 224, 2 fps, h264) and dull: a dark drifting
gradient with grey moving blobs as distractors. A few short **events** (a saturated coloured shape, visible
for 2-6 s at some place) are the needles. A 4-8 frame overview usually misses them; well-placed crops find
them. Every sample records its event windows so an oracle knows where to look.

Colours and shapes are unique within a video, so every question has one right answer:
multiple choice (colour, shape, order of appearance, count), open-ended (colour), temporal grounding.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import av
import numpy as np

from .sample import Event, VideoQASample

logger = logging.getLogger(__name__)

PALETTE: dict[str, tuple[int, int, int]] = {
    # 60 degrees of hue apart at full saturation: distinct after 4:2:0 chroma subsampling and resizing.
    "red": (230, 30, 30),
    "yellow": (235, 225, 30),
    "green": (30, 200, 40),
    "cyan": (30, 215, 225),
    "blue": (40, 60, 235),
    "magenta": (225, 40, 215),
}
SHAPES = ("circle", "square", "triangle", "star", "cross")
QUESTION_KINDS = ("mcq_colour", "mcq_shape", "mcq_order", "mcq_count", "oe_colour", "tvg")


@dataclass
class SynthConfig:
    """Settings of a synthetic dataset. Same settings and seed give identical samples and pixels."""

    n: int = 16
    """Number of videos (one question each)."""
    seed: int = 0
    """Master seed; video i uses the stream (seed, i), so changing n keeps the first videos unchanged."""
    min_duration: float = 60.0
    """Shortest video, seconds."""
    max_duration: float = 600.0
    """Longest video, seconds."""
    fps: int = 2
    """Frames per second of the encoded videos."""
    size: int = 224
    """Frame side in pixels (square frames)."""
    min_events: int = 2
    """Fewest needles per video."""
    max_events: int = 4
    """Most needles per video (at most the number of shapes)."""
    min_event_seconds: float = 2.0
    """Shortest time a needle stays visible."""
    max_event_seconds: float = 6.0
    """Longest time a needle stays visible."""
    distractors: int = 3
    """Grey moving blobs per video (never saturated, so they never look like needles)."""
    question_kinds: tuple[str, ...] = QUESTION_KINDS
    """Which question kinds to draw from, uniformly."""
    crf: int = 30
    """x264 quality (higher = smaller files)."""
    gop_seconds: float = 2.0
    """Keyframe interval, seconds."""

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"SynthConfig.n must be >= 0, got {self.n}")
        if not 0 < self.min_duration <= self.max_duration:
            raise ValueError(
                f"SynthConfig needs 0 < min_duration <= max_duration, got {self.min_duration}, {self.max_duration}"
            )
        if not 1 <= self.min_events <= self.max_events <= len(SHAPES):
            raise ValueError(f"SynthConfig needs 1 <= min_events <= max_events <= {len(SHAPES)}")
        if not 0 < self.min_event_seconds <= self.max_event_seconds:
            raise ValueError("SynthConfig needs 0 < min_event_seconds <= max_event_seconds")
        needed = self.max_events * (self.max_event_seconds + 2.0)
        if self.min_duration < needed:
            raise ValueError(
                f"SynthConfig.min_duration {self.min_duration} s cannot hold {self.max_events} events"
            )
        unknown = set(self.question_kinds) - set(QUESTION_KINDS)
        if unknown or not self.question_kinds:
            raise ValueError(
                f"SynthConfig.question_kinds: unknown {sorted(unknown)}; known: {QUESTION_KINDS}"
            )
        if self.size < 32 or self.fps < 1:
            raise ValueError("SynthConfig needs size >= 32 and fps >= 1")


# --- drawing ------------------------------------------------------------------------------------------------
def shape_mask(shape: str, side: int) -> np.ndarray:
    """A boolean side x side mask of one shape, filling most of its box."""
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


@dataclass
class _Needle:
    colour: str
    shape: str
    start: float
    end: float
    x: int
    y: int
    side: int


def _plan_events(rng: np.random.Generator, cfg: SynthConfig, duration: float) -> list[_Needle]:
    n = int(rng.integers(cfg.min_events, cfg.max_events + 1))
    colours = rng.choice(list(PALETTE), size=n, replace=False)
    shapes = rng.choice(SHAPES, size=n, replace=False)
    # One event per equal slot of the video (1 s margins), so events never overlap and spread out.
    slot = duration / n
    needles = []
    for i in range(n):
        length = float(rng.uniform(cfg.min_event_seconds, cfg.max_event_seconds))
        lo, hi = i * slot + 1.0, (i + 1) * slot - 1.0 - length
        start = float(rng.uniform(lo, max(lo, hi)))
        # Event times on the frame grid, so "visible from s to e" is exact in frames.
        start = round(start * cfg.fps) / cfg.fps
        end = start + max(round(length * cfg.fps), 1) / cfg.fps
        side = int(cfg.size * rng.uniform(0.28, 0.38))
        x = int(rng.integers(0, cfg.size - side))
        y = int(rng.integers(0, cfg.size - side))
        needles.append(_Needle(str(colours[i]), str(shapes[i]), start, end, x, y, side))
    return needles


def _render_video(
    path: Path, rng: np.random.Generator, cfg: SynthConfig, duration: float, needles: list[_Needle]
) -> None:
    size, fps = cfg.size, cfg.fps
    n_frames = int(round(duration * fps))
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    base_phase = rng.uniform(0, 2 * np.pi, size=3)
    blobs = rng.uniform(0, size, size=(cfg.distractors, 2))
    velocity = rng.uniform(-3, 3, size=(cfg.distractors, 2))
    radius = rng.uniform(size * 0.06, size * 0.12, size=cfg.distractors)
    shade = rng.uniform(90, 170, size=cfg.distractors)
    masks = {id(nd): shape_mask(nd.shape, nd.side) for nd in needles}
    tmp = path.with_name(path.name + ".part")
    with av.open(str(tmp), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size = max(1, int(round(cfg.gop_seconds * fps)))
        # Deterministic encoder output: fixed settings, no wall-clock metadata.
        stream.options = {"preset": "veryfast", "crf": str(cfg.crf), "threads": "1"}
        stream.codec_context.thread_count = 1
        stream.codec_context.thread_type = "NONE"
        container.metadata.clear()
        for f in range(n_frames):
            t = f / fps
            # A dim, slowly drifting, nearly grey gradient: low saturation everywhere.
            g = (
                40
                + 18 * np.sin(xx / size * 3.0 + t * 0.05 + base_phase[0])
                + 12 * np.cos(yy / size * 2.0 + base_phase[1])
            )
            frame = np.repeat(g[..., None], 3, axis=2)
            frame[..., 2] += 6  # a faint blue cast, still far from saturated
            for b in range(cfg.distractors):
                cx, cy = (blobs[b] + velocity[b] * t) % size
                disk = (xx - cx) ** 2 + (yy - cy) ** 2 <= radius[b] ** 2
                frame[disk] = shade[b]
            for nd in needles:
                if nd.start <= t < nd.end:
                    region = frame[nd.y : nd.y + nd.side, nd.x : nd.x + nd.side]
                    region[masks[id(nd)]] = PALETTE[nd.colour]
            image = av.VideoFrame.from_ndarray(np.clip(frame, 0, 255).astype(np.uint8), format="rgb24")
            image.pts = f  # explicit timestamps: the encoder's output must not depend on how it guesses them
            for packet in stream.encode(image):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    os.replace(tmp, path)  # atomic: an interrupted run never leaves a half-written video under the real name


# --- questions ----------------------------------------------------------------------------------------------
def _options(rng: np.random.Generator, correct: str, pool: list[str]) -> tuple[list[str], str]:
    others = [p for p in pool if p != correct]
    picks = list(rng.choice(others, size=3, replace=False)) + [correct]
    order = rng.permutation(4)
    options = [str(picks[i]) for i in order]
    return options, "ABCD"[options.index(correct)]


def _question(
    rng: np.random.Generator, kind: str, needles: list[_Needle]
) -> tuple[str, list[str], str, str, list[_Needle]]:
    """(question, options, answer, question_type, the needles the question is about)."""
    target = needles[int(rng.integers(len(needles)))]
    if kind == "mcq_colour":
        options, answer = _options(rng, target.colour, list(PALETTE))
        return (
            f"What colour is the {target.shape} that appears briefly in the video?",
            options,
            answer,
            "mcq",
            [target],
        )
    if kind == "mcq_shape":
        options, answer = _options(rng, target.shape, list(SHAPES))
        return (
            f"What shape is the {target.colour} object that appears briefly in the video?",
            options,
            answer,
            "mcq",
            [target],
        )
    if kind == "mcq_order" and len(needles) >= 2:
        present = [f"{nd.colour} {nd.shape}" for nd in needles]
        absent_pool = [f"{c} {s}" for c in PALETTE for s in SHAPES if f"{c} {s}" not in present]
        shown = list(rng.choice(len(needles), size=min(len(needles), 3), replace=False))
        labels = [present[i] for i in shown]
        labels += list(rng.choice(absent_pool, size=4 - len(labels), replace=False))
        order = rng.permutation(4)
        options = [str(labels[i]) for i in order]
        first = min(shown)  # needles are in time order
        answer = "ABCD"[options.index(present[first])]
        return (
            "Which of these coloured shapes appears first in the video?",
            options,
            answer,
            "mcq",
            [needles[i] for i in sorted(shown)],
        )
    if kind == "mcq_count":
        count = len(needles)
        lo = int(rng.integers(max(1, count - 3), count + 1))
        options = [str(v) for v in range(lo, lo + 4)]
        return (
            "How many coloured shapes appear in the video?",
            options,
            "ABCD"[options.index(str(count))],
            "mcq",
            list(needles),
        )
    if kind == "oe_colour":
        return (
            f"What colour is the {target.shape} that appears in the video? Answer with one word.",
            [],
            target.colour,
            "oe",
            [target],
        )
    # tvg (also the fallback of mcq_order with a single needle)
    return (
        f"When does the {target.colour} {target.shape} appear in the video? Give the start and end time in seconds.",
        [],
        f"[{target.start:.1f}, {target.end:.1f}]",
        "tvg",
        [target],
    )


# --- dataset ------------------------------------------------------------------------------------------------
def make_sample(index: int, out_dir: Path, cfg: SynthConfig, write_video: bool = True) -> VideoQASample:
    """Plan (and by default render) video ``index`` of the dataset."""
    rng = np.random.default_rng([cfg.seed, index])
    steps = int(round(rng.uniform(cfg.min_duration, cfg.max_duration) * cfg.fps))
    duration = steps / cfg.fps
    needles = _plan_events(rng, cfg, duration)
    kind = str(cfg.question_kinds[int(rng.integers(len(cfg.question_kinds)))])
    question, options, answer, qtype, about = _question(rng, kind, needles)
    name = f"synth_{cfg.seed}_{index:05d}.mp4"
    if write_video:
        _render_video(out_dir / name, rng, cfg, duration, needles)
    events = [
        Event(start=nd.start, end=nd.end, label=f"{nd.colour} {nd.shape}",
              attributes={"colour": nd.colour, "shape": nd.shape, "x": nd.x, "y": nd.y, "size": nd.side})
        for nd in needles
    ]  # fmt: skip
    return VideoQASample(
        id=f"synth-{cfg.seed}-{index:05d}",
        video_path=name,
        question=question,
        answer=answer,
        question_type=qtype,
        options=options,
        duration=duration,
        events=events,
        extra={
            "kind": kind,
            "relevant_events": [events[needles.index(nd)].label for nd in about],
            # JSON-normalised (tuples become lists) so a sample equals itself read back from samples.jsonl.
            "generator": json.loads(json.dumps(asdict(cfg))),
        },
    )


def generate_dataset(
    out_dir: str | os.PathLike, config: SynthConfig | None = None, progress: bool = True
) -> list[VideoQASample]:
    """Write ``config.n`` videos and ``samples.jsonl`` (video paths relative to ``out_dir``).

    Idempotent: videos already present are kept (their content is a function of the config and seed), so an
    interrupted run resumes where it stopped. Returns samples with absolute video paths.
    """
    cfg = config or SynthConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    indices = range(cfg.n)
    if progress:
        from tqdm import tqdm

        indices = tqdm(indices, desc="synth videos", unit="video")
    samples = []
    for i in indices:
        plan = make_sample(i, out, cfg, write_video=False)
        if not (out / plan.video_path).exists():
            plan = make_sample(i, out, cfg, write_video=True)
        samples.append(plan)
    tmp = out / "samples.jsonl.part"
    with open(tmp, "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, out / "samples.jsonl")
    return [_absolute(s, out) for s in samples]


def _absolute(sample: VideoQASample, root: Path) -> VideoQASample:
    d = sample.to_dict()
    d["video_path"] = str((root / sample.video_path).resolve())
    return VideoQASample.from_dict(d)


# --- index videos (exact-seek tests) ------------------------------------------------------------------------
INDEX_GRID = 4
"""Index videos carry their frame number as a 4 x 4 grid of black/white blocks (16 bits)."""


def index_image(i: int, height: int, width: int) -> np.ndarray:
    bits = np.array([(i >> b) & 1 for b in range(INDEX_GRID * INDEX_GRID)], dtype=np.uint8).reshape(
        INDEX_GRID, INDEX_GRID
    )
    cells = np.kron(bits * 255, np.ones((-(-height // INDEX_GRID), -(-width // INDEX_GRID)), dtype=np.uint8))
    return np.repeat(cells[:height, :width, None], 3, axis=2)


def decode_index(image: np.ndarray) -> int:
    """Read the frame number back from an index-video frame (any size down to ~16 x 16 pixels)."""
    h, w = image.shape[:2]
    gray = image.astype(np.float32).mean(axis=2)
    value = 0
    for b in range(INDEX_GRID * INDEX_GRID):
        r, c = divmod(b, INDEX_GRID)
        cy, cx = int((r + 0.5) * h / INDEX_GRID), int((c + 0.5) * w / INDEX_GRID)
        if gray[cy, cx] > 127:
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
) -> Path:
    """A video whose frame i shows the number i (see ``decode_index``): for testing exact seeking.

    B-frames are on by default so that decode order differs from presentation order, the hard case.
    """
    from fractions import Fraction

    path = Path(path)
    height, width = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = bframes
        if codec == "libx264":
            # scenecut off: every frame differs wildly, and x264 would otherwise insert keyframes at will.
            stream.options = {
                "preset": "veryfast",
                "crf": "18",
                "bf": str(bframes),
                "threads": "1",
                "x264-params": "scenecut=0",
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
    "PALETTE",
    "QUESTION_KINDS",
    "SHAPES",
    "SynthConfig",
    "decode_index",
    "generate_dataset",
    "make_index_video",
    "make_sample",
    "shape_mask",
]
