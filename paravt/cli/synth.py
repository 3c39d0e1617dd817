"""``paravt synth``: write a synthetic needle-video QA set (h264 videos + samples.jsonl), deterministic in --seed."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument(
        "--out", required=True,
        help="output directory: new, empty, or holding this same dataset (its videos are reused); another "
             "dataset there is refused unless --replace",
    )
    p.add_argument("--replace", action="store_true",
                   help="--out holds another synthetic dataset: replace it whole (its videos and samples.jsonl go)")
    p.add_argument("--n", type=counted(1), default=16, help="number of videos (default 16)")
    p.add_argument("--seed", type=counted(0), default=0, help="master seed, >= 0: same seed, same bytes (default 0)")
    p.add_argument("--min-duration", type=seconds, default=60.0, help="shortest video in seconds (default 60)")
    p.add_argument("--max-duration", type=seconds, default=600.0, help="longest video in seconds (default 600)")
    p.add_argument("--fps", type=counted(1), default=2, help="frames per second (default 2)")
    p.add_argument("--size", type=counted(32), default=224, help="frame side in pixels, even, >= 32 (default 224)")
    p.add_argument("--task", default="needle", choices=TASK_NAMES,
                   help="the task family: needle (one needle a question, default), two_colours (both colours of two "
                        "needles: two windows needed), count (how many of 1-4 needles: the whole video searched)")
    p.add_argument("--questions-per-video", type=counted(1), default=1, help="questions per video (default 1)")
    p.add_argument("--crf", type=counted(0, 51), default=None, help="x264 quality 0-51, higher = smaller (default 33)")
    p.add_argument("--workers", type=counted(1), default=1, help="videos encoded in parallel processes (default 1)")
    p.add_argument("--no-needles", action="store_true",
                   help="render the videos without their needles, questions and answers unchanged (a blind control)")
    p.add_argument("--counterfactual", choices=("colour", "shape"), default=None,
                   help="render every needle with another colour (or shape), all else kept; questions are asked of "
                        "the changed video, so an open-ended colour question reads the same and its answer changes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


TASK_NAMES = ("needle", "two_colours", "count")
"""``paravt_env.data.synth_plan.TASKS``' names, spelt here so ``paravt --help`` imports nothing heavy (a test
checks they agree)."""


def counted(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high]; anything else is refused by argparse, naming the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {'in [' + str(low) + ', ' + str(high) + ']' if high is not None else '>= ' + str(low)}, got {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (``inf`` and ``nan`` parse as floats and are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from paravt_env.data.synth_plan import SynthConfig, task_settings
    from paravt_env.data.synthetic import claim_directory, generate_dataset, missing_videos

    extra = {} if args.crf is None else {"crf": args.crf}
    config = SynthConfig(
        n=args.n,
        seed=args.seed,
        min_duration=args.min_duration,
        max_duration=args.max_duration,
        fps=args.fps,
        size=args.size,
        questions_per_video=args.questions_per_video,
        needles_visible=not args.no_needles,
        counterfactual=args.counterfactual or "",
        **task_settings(args.task),
        **extra,
    )
    removed = claim_directory(args.out, config, replace=args.replace)  # before a byte is written: no orphans
    if removed:
        print(f"{args.out}: replaced the dataset there ({len(removed)} files of it removed)")
    new = missing_videos(args.out, config)
    samples = generate_dataset(args.out, config, progress=not args.no_progress, workers=args.workers)
    kinds: dict[str, int] = {}
    for s in samples:
        kinds[s.question_type] = kinds.get(s.question_type, 0) + 1
    videos = {s.video_path: s.duration or 0.0 for s in samples}
    size_mb = sum(Path(p).stat().st_size for p in videos) / 1e6
    print(
        f"wrote {len(videos)} videos ({sum(videos.values()) / 60:.1f} min, {size_mb:.1f} MB"
        f"{'' if new == len(videos) else f'; {new} new, {len(videos) - new} already there'}) and "
        f"{len(samples)} questions ({args.task}) to {Path(args.out) / 'samples.jsonl'} "
        f"({', '.join(f'{k}={v}' for k, v in sorted(kinds.items()))})",
        file=sys.stdout,
    )
    return 0
