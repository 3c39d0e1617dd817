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
import re
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


def missing_videos(out_dir: str | os.PathLike, config: SynthConfig) -> int:
    """How many of ``config``'s videos ``out_dir`` does not hold yet (what ``generate_dataset`` would encode):
    planned from the seed, no pixel drawn."""
    out = Path(out_dir)
    return sum(1 for i in range(config.n) if not (out / plan_video(i, config).name).is_file())


SYNTH_FILE = re.compile(r"(samples\.jsonl|synth_config\.json|synth_s\d+_\d+_[0-9a-f]+\.mp4)(\.[0-9]+-[0-9a-f]+\.part)?")
"""The names ``generate_dataset`` writes (and their half-written ``storage.part_path`` copies)."""


def config_record(config: SynthConfig) -> dict:
    """What ``synth_config.json`` holds for ``config`` (as JSON reads it back: tuples are lists)."""
    return json.loads(json.dumps({"generator_version": GENERATOR_VERSION, **asdict(config)}))


def claim_directory(out_dir: str | os.PathLike, config: SynthConfig, *, replace: bool = False) -> list[Path]:
    """Make ``out_dir`` ready for ``config``'s dataset before ``generate_dataset`` writes it, so that a directory
    never ends up with one dataset's ``samples.jsonl`` beside another's videos. Returns the files removed.

    - absent or empty: nothing to do;
    - holding this dataset (its ``synth_config.json``, or only some of its videos: an interrupted run): kept, the
      videos there are reused;
    - holding another synthetic dataset: ``FileExistsError`` naming the settings that differ, unless ``replace``;
      with it, every file of the old dataset this one does not reuse is deleted (a video with the same name has
      the same bytes), so the directory ends as a fresh one would;
    - holding anything ``paravt synth`` does not write: ``FileExistsError`` naming it, ``replace`` or not (it
      deletes only what it wrote)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file, not a directory: choose another output directory")
    entries = sorted(out.iterdir()) if out.is_dir() else []
    if not entries:
        return []
    foreign = [p.name for p in entries if not (p.is_file() and SYNTH_FILE.fullmatch(p.name))]
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise FileExistsError(f"{out} is not empty and holds files paravt synth did not write ({listed}): choose "
                              "another output directory, or empty it yourself")  # fmt: skip
    wanted = {plan_video(i, config).name for i in range(config.n)}
    videos = {p.name for p in entries if p.suffix == ".mp4"}
    recorded = _read_config(out / "synth_config.json")
    same = recorded == config_record(config) if recorded is not None else videos <= wanted
    if same:
        return []
    if not replace:
        raise FileExistsError(f"{out} holds another synthetic dataset ({_difference(recorded, config, videos)}): pass "
                              "--replace to replace it whole (its videos and samples.jsonl go), or choose another "
                              "output directory")  # fmt: skip
    removed = [p for p in entries if p.name not in wanted]
    for p in removed:
        p.unlink()
    return removed


def _read_config(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _difference(recorded: dict | None, config: SynthConfig, videos: set[str]) -> str:
    """The settings that differ between the dataset on disk and ``config``, in words."""
    if recorded is None:
        return f"{len(videos)} videos of other settings, no synth_config.json"
    new = config_record(config)
    keys = [k for k in sorted(recorded.keys() | new.keys()) if recorded.get(k) != new.get(k)]
    return "; ".join(f"{k}: {recorded.get(k)!r} there, {new.get(k)!r} now" for k in keys[:4])


def generate_dataset(
    out_dir: str | os.PathLike,
    config: SynthConfig | None = None,
    progress: bool = True,
    workers: int = 1,
    desc: str = "synth videos",
) -> list[VideoQASample]:
    """Write ``config.n`` videos, ``samples.jsonl`` and ``synth_config.json`` into ``out_dir``.

    ``samples.jsonl`` holds video paths relative to ``out_dir`` (``load_samples(out_dir)`` resolves them).
    Idempotent and resumable: videos already present are kept, since a video's file name is a function of
    the settings that shape its bytes. ``workers`` > 1 encodes videos in that many processes (each encoder
    stays single-threaded, so the bytes do not depend on it). ``desc`` names the progress bar. Returns the
    samples with absolute video paths. Writing another dataset into a used directory: ``claim_directory`` first.
    """
    cfg = config or SynthConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(i, str(out), cfg) for i in range(cfg.n)]
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=cfg.n, desc=desc, unit="video")
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
    write_text_atomic(out / "synth_config.json", json.dumps(config_record(cfg), indent=2, sort_keys=True) + "\n")
    logger.info("synth: %d videos in %s (%d new)", len(plans), out, written)
    return [_with_absolute_path(s, out) for s in samples]


def _with_absolute_path(sample: VideoQASample, root: Path) -> VideoQASample:
    d = sample.to_dict()
    d["video_path"] = str((root / sample.video_path).resolve())
    return VideoQASample.from_dict(d)


__all__ = ["claim_directory", "generate_dataset", "make_video", "missing_videos"]
