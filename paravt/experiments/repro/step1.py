"""Does every repro arm start RL with tool calls? One step-1 rollout batch per arm and seed from a saved cold start.

    python -m paravt.experiments.repro.step1 --coldstart runs/repro/coldstart/coldstart/model --seeds 3-12 --out step1.jsonl

A lighter check than ``paravt repro --steps 1`` (no evaluation, nothing saved but one JSON line per arm and seed:
κ = crops per rollout and format compliance of the step's rollouts, measured before its update). Arms that
differ only in their reward (``para_grpo`` / ``para_grpo_scored``) sample the same step-1 rollouts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from paravt.experiments.repro.arms import ARMS, ReproConfig, arm_config


def seed_range(text: str) -> list[int]:
    """``3-12`` or ``0,5,7`` (an argparse type: a malformed list is a usage error naming it)."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            seeds = list(range(lo, hi + 1))
        else:
            seeds = [int(x) for x in text.split(",") if x]
    except ValueError:
        seeds = []
    if not seeds:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: expected a range like 3-12 or a list like 0,5,7")
    return seeds


def step1(coldstart: Path, arm: str, seed: int, recipe: str | ReproConfig) -> dict[str, float]:
    """The arm's step-1 rollouts (``Trainer.collect``, what ``rl_step`` trains on) and their metrics, as the step's
    row reports them; no update is run, since nothing after the rollouts enters the figures. ``recipe``: a
    recipe name, or a whole ``ReproConfig`` (its overrides apply too)."""
    cfg = recipe if isinstance(recipe, ReproConfig) else ReproConfig(recipe=recipe)
    from paravt.learners.metrics import rollout_metrics
    from paravt.learners.trainer import Trainer

    run = Path(tempfile.mkdtemp(prefix="paravt_step1_"))
    try:
        trainer = Trainer(arm_config(cfg, arm, seed, coldstart), run, progress=False)
        try:
            metrics = rollout_metrics([t for group in trainer.collect() for t in group])
        finally:
            trainer.close()
    finally:
        shutil.rmtree(run, ignore_errors=True)
    return {"arm": arm, "seed": seed, "kappa": metrics["tool_calls_per_rollout"],
            "compliance": metrics["format_compliance"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--coldstart", required=True, help="the shared cold start (OUT/coldstart/coldstart/model)"
    )
    parser.add_argument("--seeds", type=seed_range, default="3-12", help="RL seeds: 3-12 or 0,5,7")
    parser.add_argument("--recipe", default="repro_cpu")
    parser.add_argument("--out", help="append one JSON line per arm and seed here")
    args = parser.parse_args(argv)
    coldstart = Path(args.coldstart)
    if not (coldstart / "paravt.json").is_file():
        print(f"error: {coldstart} is not a saved cold start (no paravt.json)", file=sys.stderr)
        return 1
    rows = []
    for seed in args.seeds:
        for arm in ARMS:
            row = step1(coldstart, arm, seed, args.recipe)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(row) + "\n")
    no_calls = [f"{r['arm']} seed {r['seed']}" for r in rows if r["kappa"] == 0]
    print(f"{len(rows) - len(no_calls)}/{len(rows)} arm-seeds called the tool at step 1"
          + (f"; none in: {', '.join(no_calls)}" if no_calls else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
