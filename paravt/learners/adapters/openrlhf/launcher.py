"""From a recipe to an OpenRLHF run: the prompt file and the ``train_ppo_ray`` command.

    paravt export openrlhf --recipe paragrpo_qwen3vl_8b --data runs/train_data --out runs/prompts.jsonl
    paravt train --backend openrlhf --recipe paragrpo_qwen3vl_8b --out runs/paragrpo [--gpus 8] [--dry-run]

The env's options travel in every prompt row's label (``label.py``), not in the command's environment: the
rollout actors OpenRLHF starts on a Ray cluster do not inherit the driver's variables. The command is complete
for one node of ``--gpus`` GPUs (actor, reference and vLLM engines colocated, one engine per GPU); on several
nodes set ``--actor.num_nodes`` / ``--ref.num_nodes`` and the engine count to match.

Reward scale and bias are not passed: with ``group_norm`` they cancel inside every group.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from paravt.learners.adapters.budget import passes_for_steps, recipe_budget
from paravt.learners.adapters.openrlhf.label import make_label
from paravt.learners.adapters.openrlhf.pixels import check_checkpoint_budget
from paravt.learners.adapters.recipe_env import env_options, processor_pixels
from paravt.learners.config import TrainConfig
from paravt.learners.selection import selects
from paravt_env import VideoQASample

AGENT_FUNC = Path(__file__).with_name("agent_func.py")


def export_prompts(samples: list[VideoQASample], out: str | Path, cfg: TrainConfig, epoch: int = 0) -> Path:
    """One JSONL row per sample in the layout OpenRLHF's prompt dataset reads: ``prompt`` (the question, for
    logs) and ``label`` (the sample, its files by absolute paths, with the recipe's env options and the pixel budget
    of the local trainer's image processor: the executor rebuilds the env from it)."""
    options = env_options(cfg, "openrlhf")
    budget = processor_pixels(cfg)  # the local trainer's image-processor budget: the executor shows frames at it
    pixels = (budget["min_pixels"], budget["max_pixels"])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            label = make_label(s, options, epoch, processor_pixels=pixels)
            f.write(json.dumps({"prompt": s.question_with_options(), "label": label}) + "\n")
    os.replace(tmp, out)
    return out


def max_images(cfg: TrainConfig) -> int:
    """Overview frames (the largest gated K) plus every crop frame the main agent can receive."""
    return recipe_budget(cfg).max_images


def model_path(path: str) -> str:
    """A checkpoint directory that exists here, absolute; anything else (a hub id) as given."""
    return str(Path(path).absolute()) if Path(path).exists() else str(path)


def schedule(cfg: TrainConfig, n_samples: int) -> dict[str, int]:
    """OpenRLHF's passes for the recipe's ``steps``: it runs whole passes (``--train.num_episodes``) over the prompts,
    ``rollout.prompts_per_step`` a step, and trains a smaller step on a pass's remainder. The prompts are capped at
    whole steps (``--data.max_samples``), so every step has the recipe's size, and the passes are sized to reach
    ``steps`` (``total``: the steps they make, ``steps`` rounded up to whole passes). A split smaller than one step
    is refused: it would train nothing the recipe describes."""
    per_pass, passes = passes_for_steps(cfg, n_samples, "not one step of the recipe's size")
    return {"max_samples": per_pass * cfg.rollout.prompts_per_step, "num_episodes": passes, "total": passes * per_pass}


def openrlhf_command(cfg: TrainConfig, prompts: str | Path, out: str | Path, gpus: int = 8,
                     n_samples: int | None = None) -> list[str]:  # fmt: skip
    """``python -m openrlhf.cli.train_ppo_ray ...`` for a recipe on one node of ``gpus`` GPUs: actor, reference
    and ``gpus`` vLLM engines (tensor parallel 1) colocated, the lengths and image limit from ``recipe_budget``, one
    PPO update a step over the step's whole batch (the local trainer's), and, given the prompts' count
    ``n_samples``, the passes that make the recipe's steps (``schedule``). Every path in it is absolute: OpenRLHF
    reads the prompts, the checkpoint and the output directory inside Ray actors, which run in their node's
    directory, not the one the command was given in."""
    if not cfg.model.path:
        raise ValueError("the OpenRLHF backend needs model.path (a checkpoint or hub id)")
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    if cfg.rollout.include_subagents:  # refused by name, never dropped: OpenRLHF trains the main agent's sample only
        raise ValueError("rollout.include_subagents=true cannot run under OpenRLHF: its executor returns the main "
                         "agent's trajectory only (the sub-agent's turns are not trained there); set it to false, or "
                         "train with the local backend")  # fmt: skip
    g, r, o = cfg.grpo, cfg.rollout, cfg.optim
    budget = recipe_budget(cfg)
    cmd = [
        sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
        "--actor.model_name_or_path", model_path(cfg.model.path),
        "--data.prompt_dataset", str(Path(prompts).absolute()), "--data.input_key", "prompt", "--data.label_key", "label",
        "--data.max_images_per_prompt", str(budget.max_images), "--data.max_len", str(budget.total),
        "--train.agent_func_path", str(AGENT_FUNC),
        "--rollout.n_samples_per_prompt", str(r.group_size), "--rollout.batch_size", str(r.prompts_per_step),
        "--rollout.temperature", str(r.temperature), "--rollout.max_new_tokens", str(r.max_new_tokens),
        "--train.batch_size", str(r.prompts_per_step * r.group_size),  # OpenRLHF's default 128 would split a step
        "--algo.advantage.estimator", "group_norm" if g.std_normalize else "dr_grpo",
        "--algo.kl.init_coef", str(g.kl_coef), "--algo.kl.estimator", "k1" if g.kl_in_reward else g.kl_estimator,
        "--actor.loss_agg_mode", "token-mean" if g.loss_aggregation == "token_mean" else "seq-mean-token-mean",
        "--actor.eps_clip", str(g.eps_clip),
        "--actor.adam.lr", str(o.lr), "--actor.adam.weight_decay", str(o.weight_decay), "--actor.max_norm", str(o.grad_clip),
        "--ds.param_dtype", "bf16" if cfg.model.dtype == "bf16" else "fp16",
        "--train.seed", str(cfg.seed), "--ckpt.output_dir", str(Path(out).absolute()), "--ckpt.save_steps", str(cfg.save_every),
        # one node: the vLLM engines the agent executor runs in (without them OpenRLHF never loads it)
        "--actor.num_nodes", "1", "--actor.num_gpus_per_node", str(gpus), "--ref.num_nodes", "1",
        "--ref.num_gpus_per_node", str(gpus), "--vllm.num_engines", str(gpus), "--vllm.tensor_parallel_size", "1",
        "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
    ]  # fmt: skip
    if n_samples is not None:
        plan = schedule(cfg, n_samples)
        cmd += ["--train.num_episodes", str(plan["num_episodes"]), "--data.max_samples", str(plan["max_samples"])]
    if not g.kl_in_reward:  # OpenRLHF's default is the release's form: k1 KL in the reward (GAE, γ = λ = 1)
        cmd.append("--algo.kl.use_loss")
    # The agent function returns raw rewards (no scale, no bias: OpenRLHF's group_norm is invariant to both), so
    # the clip on scaled rewards becomes the same clip in raw units; without one, OpenRLHF's default ±10 holds.
    if g.reward_clip is not None:
        lo, hi = ((c - g.reward_bias) / g.reward_scale for c in (-g.reward_clip, g.reward_clip))
        cmd += ["--reward.clip_range", f"{lo:g}", f"{hi:g}"]
    if cfg.model.gradient_checkpointing:
        cmd.append("--actor.gradient_checkpointing_enable")
    return cmd


NOT_EXPRESSIBLE = ("grpo.std_unbiased", "grpo.adv_eps", "grpo.batch_norm_weighting", "grpo.batch_adv_norm",
                   "grpo.reward_scale / reward_bias under dr_grpo", "grpo.is_cap")  # fmt: skip
"""Settings the OpenRLHF command cannot carry (OpenRLHF's own advantage normalisation applies instead)."""


def launch(cfg: TrainConfig, samples: list[VideoQASample] | None, out: str | Path, dry_run: bool = False,
           gpus: int = 8) -> int:  # fmt: skip
    """Export ``samples`` as ``OUT/openrlhf_prompts.jsonl`` (labels with the recipe's env) and run OpenRLHF on
    them; with ``dry_run`` only print the command (``samples`` may then be None: nothing is read or written)."""
    out = Path(out)
    prompts = out / "openrlhf_prompts.jsonl"
    cmd = openrlhf_command(cfg, prompts, out / "openrlhf", gpus=gpus, n_samples=None if samples is None else len(samples))
    env_options(cfg, "openrlhf")  # refuse what OpenRLHF cannot train before anything is written
    budget = processor_pixels(cfg)
    check_checkpoint_budget(cfg.model.path, (budget["min_pixels"], budget["max_pixels"]))
    if not dry_run:
        if samples is None:
            raise ValueError("launch needs the samples to export (only a dry run goes without)")
        export_prompts(samples, prompts, cfg)
    if selects(cfg):  # said, not dropped without a word: OpenRLHF keeps its own checkpoints, the last one is the run's
        print(f"note: the recipe's select.every={cfg.select.every} (a checkpoint chosen on a validation split) is the local "
              "trainer's; this OpenRLHF run reports its last checkpoint", file=sys.stderr)  # fmt: skip
    if samples is None:
        print(f"note: a dry run reads no data; at launch the command also gets --train.num_episodes and "
              f"--data.max_samples, sized from the prompts to make the recipe's {cfg.steps} steps", file=sys.stderr)  # fmt: skip
    else:
        plan = schedule(cfg, len(samples))
        if plan["total"] != cfg.steps:
            print(f"note: OpenRLHF runs whole passes: {plan['num_episodes']} of {plan['total'] // plan['num_episodes']} "
                  f"steps, {plan['total']} steps for the recipe's {cfg.steps}", file=sys.stderr)  # fmt: skip
    print(" ".join(shlex.quote(c) for c in cmd))
    if dry_run:
        return 0
    return subprocess.call(cmd)
