"""Synthetic needle-in-a-haystack long videos: the Tool Necessity Gap, measurable on a CPU.

Each video is long (60-600 s by default), cheap to decode (224 x 224, 2 fps, h264) and dull: a dim, slowly
drifting grey gradient with soft grey blobs wandering over it as distractors. A few short **events** (a solid,
saturated, coloured shape, visible for 2-6 s at one place) are the needles. A 4-8 frame overview usually
misses them; crops placed on the right seconds find them. Every sample records its event windows so an oracle
knows where to look, and a pixel detector can find them too: nothing but an event is ever saturated.

Colours and shapes are unique within a video, so every question has exactly one right answer: multiple
choice (colour, shape, order of appearance, count), open-ended (colour, shape) and temporal grounding.

This module writes datasets; ``synth_plan`` plans the videos (everything drawn from a seed before any pixel
exists), ``synth_drawing`` renders and encodes the plans, ``synth_questions`` asks the questions, ``index_video``
makes the exact-seek test videos. Frames are rendered straight into YUV 4:2:0 planes with numpy, a chunk of frames at
a time, and handed to x264 as they are: no colour conversion inside the encoder (PyAV's implicit RGB->YUV step
made x264's first GOPs differ from run to run), one encoder thread and periodic keyframes only, so the same seed
gives the same bytes on any machine.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from ..storage import write_text_atomic
from .sample import VideoQASample
from .synth_drawing import render_video
from .synth_plan import GENERATOR_VERSION, SynthConfig, VideoPlan, plan_video
from .synth_questions import make_samples

logger = logging.getLogger(__name__)

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


__all__ = ["generate_dataset", "make_video"]
