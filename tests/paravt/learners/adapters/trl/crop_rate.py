"""Crops per episode of one checkpoint under the local trainer's rollout and under TRL's ``GRPOTrainer``, on the
same prompts (samples, epoch 0, so the same K) at the same temperature: does a checkpoint that crops under the
local trainer crop under TRL at the same rate?

    PARAVT_ENGINE=trl OMP_NUM_THREADS=1 .nox/engine-name-trl/bin/python tests/paravt/learners/adapters/trl/crop_rate.py \\
        [--videos 8] [--group 8] [--checkpoint results/repro/repro_cpu/coldstart/coldstart/model] [--out rates.json]

The env is the repro recipe's (``repro_cpu``: nFrames Gating over {4, ..., 64}, 5 parallel crops of 16 frames,
784-12,544 pixels, the think prefix, temperature 0.7), on ``--videos`` repro videos of a seed no stage trained
on. Local: ``run_group`` of ``--group`` rollouts per video (``Trajectory.tool_calls``: crops the env ran). TRL:
``grpo_trainer`` from the checkpoint's path, learning rate 0 (the checkpoint itself is measured, not a trained
copy), one video a step with ``--group`` generations, ``paravt/crops_per_episode`` of each step (the env's
crops of the replayed completion). ``test_crop_rate.py`` runs it at a smaller size.

Measured (16 videos x 8 rollouts, 2 shared cores, 1 thread; local 133 s, TRL 532 s): crops per episode 4.54
(SE 0.71 over the videos) under the local trainer, 4.59 (SE 0.65) under TRL, paired difference +0.05 (SE 0.44).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[5]
COLDSTART = REPO / "results/repro/repro_cpu/coldstart/coldstart/model"


def repro_samples(cfg: Any, out: Path, n: int, seed: int = 4242) -> list[Any]:
    """``n`` videos of the repro recipe's distribution, of a seed none of its stages drew from."""
    from paravt_env.data.synthetic import generate_dataset

    return generate_dataset(out, cfg.data.synth_config(n=n, seed=seed), progress=False, workers=1)


def local_crops(checkpoint: Path, cfg: Any, samples: list[Any], group: int, seed: int) -> list[int]:
    """Crops per episode under the local trainer's rollout (its policy as ``trainer.py`` builds it)."""
    import torch

    from paravt.learners.rollout import run_group
    from paravt.learners.run_setup import env_config
    from paravt.policies.hf import HFPolicy
    from paravt_env import VideoToolEnv

    low, high = cfg.model.processor_pixels(cfg.env.min_pixels, cfg.env.max_pixels)
    policy = HFPolicy.from_pretrained(checkpoint, think_prefix=cfg.think_prefix, min_pixels=low, max_pixels=high,
                                      temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                                      batch_tokens=cfg.rollout.batch_tokens)  # fmt: skip
    torch.manual_seed(seed)
    envs = [VideoToolEnv(samples, env_config(cfg)) for _ in range(group)]
    crops = []
    for index in range(len(samples)):
        crops += [t.tool_calls for t in run_group(envs, policy, options={"index": index, "epoch": 0})]
    return crops


def trl_crops(checkpoint: Path, cfg: Any, samples: list[Any], group: int, seed: int, max_completion_length: int) -> list[float]:
    """Mean crops per episode of each video under TRL (one video a step, ``group`` generations), in video order,
    the checkpoint unchanged."""
    import torch
    from transformers import TrainerCallback

    from paravt.learners.adapters.trl import grpo_trainer, recipe_env

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(seed)
    order: list[int] = []  # the video of each step (TRL's sampler shuffles them)

    class VideoOfStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN003
            indices = {env._reset_args["options"]["index"] for env in trainer.environments}
            assert len(indices) == 1, indices
            order.append(indices.pop())

    with tempfile.TemporaryDirectory() as out:
        trainer = grpo_trainer(str(checkpoint), env=recipe_env(cfg, samples), n_samples=len(samples), output_dir=out,
                               max_steps=len(samples), per_device_train_batch_size=group, num_generations=group,
                               learning_rate=0.0, temperature=cfg.rollout.temperature, use_cpu=True, report_to=[],
                               logging_steps=1, save_strategy="no", seed=seed,
                               max_completion_length=max_completion_length)  # fmt: skip
        trainer.add_callback(VideoOfStep())
        trainer.train()
    steps = [h["paravt/crops_per_episode"] for h in trainer.state.log_history if "paravt/crops_per_episode" in h]
    if sorted(order) != list(range(len(samples))):
        raise RuntimeError(f"TRL's steps did not cover each video once: {order}")
    return [steps[order.index(i)] for i in range(len(samples))]


def summary(values: list[float], episodes: int) -> dict[str, float]:
    """Mean crops per episode and its standard error over the groups (one value per video's group)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"episodes": episodes, "mean": mean, "se": sd / math.sqrt(n), "groups": values}


def measure(checkpoint: Path = COLDSTART, videos: int = 8, group: int = 8, seed: int = 0, workdir: Path | None = None,
            max_completion_length: int = 8192, overrides: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """Crops per episode under both engines, per video group and overall, with the wall time of each
    (``overrides``: of the repro recipe, e.g. smaller K and crops for a quick run)."""
    from paravt.learners.config import load_recipe

    cfg = load_recipe("repro_cpu", list(overrides))
    with tempfile.TemporaryDirectory() as tmp:
        samples = repro_samples(cfg, Path(workdir or tmp) / "videos", videos)
        t0 = time.perf_counter()
        local = local_crops(checkpoint, cfg, samples, group, seed)
        t1 = time.perf_counter()
        trl = trl_crops(checkpoint, cfg, samples, group, seed, max_completion_length)
        t2 = time.perf_counter()
    by_group = [sum(local[i * group : (i + 1) * group]) / group for i in range(videos)]
    out = {"checkpoint": str(checkpoint), "videos": videos, "group": group, "local": summary(by_group, len(local)),
           "trl": summary(trl, videos * group), "wall_s": {"local": round(t1 - t0, 1), "trl": round(t2 - t1, 1)},
           "local_episodes": local}  # fmt: skip
    # the videos differ more than the engines should: a paired difference over the same videos
    diffs = [b - a for a, b in zip(by_group, trl, strict=True)]
    out["trl_minus_local"] = summary(diffs, videos)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=COLDSTART)
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = measure(args.checkpoint, args.videos, args.group, args.seed)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
