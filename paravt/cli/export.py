"""``paravt export openrlhf|verl``: a dataset, played as a recipe trains it, in the layout another engine reads.

    paravt export openrlhf --recipe paragrpo_qwen3vl_8b --data DIR --out prompts.jsonl
    paravt export verl --recipe paragrpo_qwen3vl_8b --data DIR --out runs/verl   (train.parquet + paravt_verl.yaml)

The recipe decides the env every rollout plays (nFrames Gating, tool mode, think prefix, reward): it travels with
the data (OpenRLHF: each row's label; verl: the agent-loop config), and the engine's lengths and image limits
are sized from it.
"""

from __future__ import annotations

import argparse


def add_parser(sub, name: str, help_text: str) -> None:
    from paravt.learners.adapters.engines import exporters

    p = sub.add_parser(name, help=help_text, description=help_text)
    which = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    targets = {target: which.add_parser(target, help=what) for target, what in exporters().items()}  # the engine table's
    o, v = targets["openrlhf"], targets["verl"]
    for q, out_help in ((o, "output JSONL"), (v, "output directory (train.parquet, agent_loops.yaml, paravt_verl.yaml)")):
        q.add_argument("--recipe", required=True, metavar="NAME|YAML",
                       help="the recipe whose env the rollouts play (e.g. paragrpo_qwen3vl_8b)")
        q.add_argument("--data", required=True, help="samples file or directory (anything load_samples reads)")
        q.add_argument("--video-root", default=None)
        q.add_argument("--out", required=True, help=out_help)
        q.add_argument("overrides", nargs="*", metavar="key=value", help="recipe overrides, e.g. env.frame_budget=16")
        q.set_defaults(func=run)
    v.add_argument("--env-url", default=None,
                   help="a `paravt serve-env` every rollout worker reaches (default: the samples file, read by each worker)")
    v.add_argument("--split", default="train", help="the parquet's name (train.parquet, val.parquet, ...)")


def run(args: argparse.Namespace) -> int:
    from paravt.learners.config import load_recipe
    from paravt_env import load_samples

    cfg = load_recipe(args.recipe, args.overrides)
    samples = load_samples(args.data, video_root=args.video_root)
    if not samples:
        raise ValueError(f"{args.data}: no samples to export")
    if args.target == "openrlhf":
        from paravt.learners.adapters.openrlhf.launcher import export_prompts

        path = export_prompts(samples, args.out, cfg)
        # the labels name the videos by absolute paths: the rollout actors run in their Ray node's directory
        print(f"wrote {len(samples)} prompts to {path} (labels carry {args.recipe}'s env and the videos' absolute paths)")
        return 0
    from paravt.learners.adapters.verl.export import export_verl, launch_command

    # --data is read either way (the parquet's rows, the lengths); with --env-url the workers reset a serve-env of the
    # same samples instead of reading the file
    written = export_verl(cfg, samples, args.out, data=None if args.env_url else args.data, env_url=args.env_url,
                          split=args.split)  # fmt: skip
    for kind, path in written.items():
        print(f"{kind}: {path}")
    print(f"train with: {launch_command(args.out)} (plus verl's GPU settings: trainer.n_gpus_per_node, ...)")
    return 0
