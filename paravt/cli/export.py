"""``paravt export openrlhf``: a dataset as OpenRLHF prompt rows (question + the sample as JSON label)."""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text, description=help_text)
    which = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    o = which.add_parser("openrlhf", help="JSONL rows for openrlhf.cli.train_ppo_ray (--data.input_key prompt --data.label_key label)")
    o.add_argument("--data", required=True, help="samples file or directory (anything load_samples reads)")
    o.add_argument("--video-root", default=None)
    o.add_argument("--out", required=True, help="output JSONL")
    o.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from paravt.learners.adapters.openrlhf.launcher import export_prompts
    from paravt_env import load_samples

    samples = load_samples(args.data, video_root=args.video_root)
    path = export_prompts(samples, args.out)
    print(f"wrote {len(samples)} prompts to {path}")
    return 0
