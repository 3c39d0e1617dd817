"""From a recipe to an OpenRLHF run: the prompt file, the ``train_ppo_ray`` command and its environment.

    paravt export openrlhf --data runs/train_data --out runs/prompts.jsonl
    paravt train --backend openrlhf --recipe paragrpo_qwen3vl_8b --out runs/paragrpo [--dry-run]

Reward scale and bias are not passed: with ``group_norm`` they cancel inside every group.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from paravt.learners.config import TrainConfig
from paravt.learners.run_setup import env_config
from paravt_env import VideoQASample

AGENT_FUNC = Path(__file__).with_name("agent_func.py")


def export_prompts(samples: list[VideoQASample], out: str | Path) -> Path:
    """One JSONL row per sample in the layout OpenRLHF's prompt dataset reads: ``prompt`` (the question, for
    logs) and ``label`` (the whole sample as JSON: the executor rebuilds the env from it)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps({"prompt": s.question_with_options(), "label": s.to_json()}) + "\n")
    os.replace(tmp, out)
    return out


def env_options(cfg: TrainConfig) -> dict[str, Any]:
    """The ``EnvConfig`` the executor builds (passed as ``PARAVT_ENV_OPTIONS``): the local trainer's own
    (``run_setup.env_config``) as JSON, without the sub-agent (the executor makes one on its engine). PARA-GRPO's
    forced ``<think>\\n`` travels as ``response_prefix``: the executor puts it in the prompt, the env scores what
    follows it."""
    if cfg.settings().token_anchoring:
        raise ValueError("token-granularity anchoring is local-only (OpenRLHF takes one scalar reward per sample)")
    env = env_config(cfg)
    options = {f.name: getattr(env, f.name) for f in dataclasses.fields(env) if f.name != "subagent"}
    options["gating_choices"] = list(env.gating_choices)
    options["reward"] = env.reward.as_dict()
    return options


def max_images(cfg: TrainConfig) -> int:
    """Overview frames (the largest gated K) plus every crop frame the main agent can receive."""
    e = cfg.env
    gating = cfg.settings().nframes_gating
    k = max([e.frame_budget, *(cfg.para.gating_choices if gating else ())])
    crops = 0 if e.tool_result == "subagent" else e.max_parallel * e.crop_max_frames * max(e.max_turns - 1, 0)
    return k + crops


def openrlhf_command(cfg: TrainConfig, prompts: str | Path, out: str | Path) -> list[str]:
    """``python -m openrlhf.cli.train_ppo_ray ...`` for a recipe."""
    if not cfg.model.path:
        raise ValueError("the OpenRLHF backend needs model.path (a checkpoint or hub id)")
    g, r, o = cfg.grpo, cfg.rollout, cfg.optim
    cmd = [
        sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
        "--actor.model_name_or_path", str(cfg.model.path),
        "--data.prompt_dataset", str(prompts), "--data.input_key", "prompt", "--data.label_key", "label",
        "--data.max_images_per_prompt", str(max_images(cfg)), "--data.max_len", "32768",
        "--train.agent_func_path", str(AGENT_FUNC),
        "--rollout.n_samples_per_prompt", str(r.group_size), "--rollout.batch_size", str(r.prompts_per_step),
        "--rollout.temperature", str(r.temperature), "--rollout.max_new_tokens", str(r.max_new_tokens),
        "--algo.advantage.estimator", "group_norm" if g.std_normalize else "dr_grpo",
        "--algo.kl.init_coef", str(g.kl_coef), "--algo.kl.estimator", "k1" if g.kl_in_reward else g.kl_estimator,
        "--actor.loss_agg_mode", "token-mean" if g.loss_aggregation == "token_mean" else "seq-mean-token-mean",
        "--actor.eps_clip", str(g.eps_clip),
        "--actor.adam.lr", str(o.lr), "--actor.adam.weight_decay", str(o.weight_decay), "--actor.max_norm", str(o.grad_clip),
        "--ds.param_dtype", "bf16" if cfg.model.dtype == "bf16" else "fp16",
        "--train.seed", str(cfg.seed), "--ckpt.output_dir", str(out), "--ckpt.save_steps", str(cfg.save_every),
    ]  # fmt: skip
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


def launch(cfg: TrainConfig, samples: list[VideoQASample] | None, out: str | Path, dry_run: bool = False) -> int:
    """Export ``samples`` as ``OUT/openrlhf_prompts.jsonl`` and run OpenRLHF on them; with ``dry_run`` only
    print the command (``samples`` may then be None: nothing is read or written)."""
    out = Path(out)
    prompts = out / "openrlhf_prompts.jsonl"
    if not dry_run:
        if samples is None:
            raise ValueError("launch needs the samples to export (only a dry run goes without)")
        export_prompts(samples, prompts)
    cmd = openrlhf_command(cfg, prompts, out / "openrlhf")
    env = {"PARAVT_ENV_OPTIONS": json.dumps(env_options(cfg))}
    print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + " ".join(shlex.quote(c) for c in cmd))
    if dry_run:
        return 0
    return subprocess.call(cmd, env={**os.environ, **env})
