"""``paravt synth``: write a synthetic needle-video QA set (videos + samples.jsonl)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--out", required=True, help="output directory (created if absent; existing videos are reused)")
    p.add_argument("--n", type=int, default=16, help="number of videos / questions (default 16)")
    p.add_argument("--seed", type=int, default=0, help="master seed: same seed, same bytes (default 0)")
    p.add_argument("--min-duration", type=float, default=60.0, help="shortest video in seconds (default 60)")
    p.add_argument("--max-duration", type=float, default=600.0, help="longest video in seconds (default 600)")
    p.add_argument("--fps", type=int, default=2, help="frames per second (default 2)")
    p.add_argument("--size", type=int, default=224, help="frame side in pixels (default 224)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt_env.data.synthetic import SynthConfig, generate_dataset

    config = SynthConfig(
        n=args.n,
        seed=args.seed,
        min_duration=args.min_duration,
        max_duration=args.max_duration,
        fps=args.fps,
        size=args.size,
    )
    samples = generate_dataset(args.out, config, progress=not args.no_progress)
    kinds: dict[str, int] = {}
    for s in samples:
        kinds[s.question_type] = kinds.get(s.question_type, 0) + 1
    total = sum(s.duration or 0 for s in samples)
    print(
        f"wrote {len(samples)} videos ({total / 60:.1f} min in all) and {args.out}/samples.jsonl "
        f"(question types: {', '.join(f'{k}={v}' for k, v in sorted(kinds.items()))})",
        file=sys.stdout,
    )
    return 0
