"""``paravt export verl``: a recipe's rollouts in verl's own layout, sized from the recipe.

Writes three files into ``OUT``:

- ``train.parquet`` (``--split``): one row per sample as verl's ``RLHFDataset`` reads it: ``prompt`` (the
  question as a chat, for verl's length filter and logs: the agent loop builds the real prompt, system prompt
  and K overview frames, from the env), ``agent_name: paravt`` (verl's worker picks the loop by this column),
  ``data_source``, ``reward_model`` (the answer, for verl's logs: the reward is the env's) and ``extra_info``
  (``index`` and ``sample_id``, the env's reset keys);
- ``agent_loops.yaml``: verl's agent-loop registry entry, ``ParaVTAgentLoop`` with the recipe's env options
  (nFrames Gating, tool mode, think prefix, released reward) and where the samples are (the samples file, or
  ``env_url``: a ``paravt serve-env`` every rollout worker reaches);
- ``paravt_verl.yaml``: a Hydra config on top of verl's ``ppo_trainer`` with the lengths and the image limit
  computed from the recipe (``budget.recipe_budget``), the pixel budget (``data.mm_processor_kwargs``), the group
  size, the recipe's GRPO settings in verl's keys (``algorithm_config``), its steps, checkpoint interval and seed
  (``schedule``), micro-batch sizes verl requires, the agent-loop settings, and a value for every key whose verl
  default names verl's own example (``data.val_files``, the run's names) or stops a plain machine before its GPU
  check (wandb logging, eight TransferQueue storage units). Run ``launch_command(OUT)`` (its first line says it; the config path must be absolute),
  with verl's GPU settings as usual.

Supported verl: 0.9.1, its latest release (2026-11). The agent loop uses verl's Continuous Token builder
(``ct_build_initial_tokens`` / ``ct_merge_*``), which older releases do not have.

nFrames Gating draws K from the sample id, the epoch and the seed; verl's rows carry no epoch, so a sample keeps
its K across the epochs of one verl run (every rollout of a group shares it, as gating requires).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from paravt.learners.adapters.budget import passes_for_steps, recipe_budget
from paravt.learners.adapters.recipe_env import env_options, processor_pixels

AGENT_LOOP = "paravt.learners.adapters.verl.agent_loop.ParaVTAgentLoop"
SUPPORTED_VERL = ("0.9.1",)


def verl_rows(samples: list[Any], split: str = "train") -> list[dict[str, Any]]:
    """The parquet's rows (see the module docstring)."""
    rows = []
    for i, s in enumerate(samples):
        rows.append({"data_source": "paravt", "agent_name": "paravt",
                     "prompt": [{"role": "user", "content": s.question_with_options()}],
                     "reward_model": {"style": "env", "ground_truth": s.answer},
                     "extra_info": {"index": i, "sample_id": s.id, "split": split}})  # fmt: skip
    return rows


NOT_EXPRESSIBLE = ("grpo.reward_scale / reward_bias / reward_clip", "grpo.batch_adv_norm", "grpo.batch_norm_weighting",
                   "grpo.std_unbiased", "grpo.adv_eps", "grpo.is_cap")  # fmt: skip
"""Recipe settings verl's GRPO has no key for (its group normalisation applies as it is; none changes the sign of an
advantage). The exported config names them in its header."""

KL_TYPES = {"k1": "kl", "k3": "low_var_kl"}
LOSS_AGGREGATION = {"token_mean": "token-mean", "sequence_mean": "seq-mean-token-mean"}


def algorithm_config(cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``algorithm``, ``actor_rollout_ref.actor``) of verl for the recipe's GRPO settings: group-normalised
    advantages, the clipped loss, the KL to the reference (in the loss or in the reward), the optimiser."""
    g = cfg.grpo
    in_reward = g.kl_in_reward and g.kl_coef > 0
    algorithm = {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": g.std_normalize, "use_kl_in_reward": in_reward}
    if in_reward:  # k1 per token in the reward, as the release's AReaL
        algorithm.update({"kl_penalty": "kl", "kl_ctrl": {"type": "fixed", "kl_coef": g.kl_coef}})
    actor = {
        "clip_ratio_low": g.eps_clip, "clip_ratio_high": g.eps_clip if g.eps_clip_high is None else g.eps_clip_high,
        "loss_agg_mode": LOSS_AGGREGATION[g.loss_aggregation],
        "use_kl_loss": g.kl_coef > 0 and not in_reward, "kl_loss_coef": g.kl_coef, "kl_loss_type": KL_TYPES[g.kl_estimator],
        "optim": {"lr": cfg.optim.lr, "weight_decay": cfg.optim.weight_decay},
        "grad_clip": cfg.optim.grad_clip,
    }  # fmt: skip
    return algorithm, actor


def schedule(cfg: Any, n_samples: int) -> dict[str, Any]:
    """verl's step count for the recipe's: ``steps`` RL steps of ``rollout.prompts_per_step`` prompts, a checkpoint
    every ``save_every``. verl stops at whichever of ``total_training_steps`` and ``total_epochs`` comes first and
    drops an epoch's last incomplete batch, so the epochs are sized to reach the steps; a split smaller than one
    step's prompts would train nothing and is refused."""
    _, epochs = passes_for_steps(cfg, n_samples, "verl drops an epoch's last incomplete batch and would train 0 steps")
    return {"total_training_steps": int(cfg.steps), "total_epochs": epochs, "save_freq": int(cfg.save_every)}


def trainer_config(cfg: Any, samples: list[Any], out: Path, split: str) -> dict[str, Any]:
    """``paravt_verl.yaml``: verl's ``ppo_trainer`` with what the recipe decides."""
    budget = recipe_budget(cfg, samples)
    r = cfg.rollout
    algorithm, actor = algorithm_config(cfg)
    return {
        "hydra": {"searchpath": ["pkg://verl.trainer.config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "algorithm": algorithm,
        # verl's main_ppo builds a validation set from data.val_files whether or not it validates, and its default
        # names its GSM8K example (~/data/rlhf/gsm8k/test.parquet): set here to this export's parquet, with verl's
        # validation off, so the printed command never reads another dataset; the held-out figures are paravt
        # eval's (evaluate the checkpoints on the recipe's held-out split).
        "trainer": {"val_before_train": False, "test_freq": -1, **schedule(cfg, len(samples)),
                    # verl's defaults name its GSM8K example (project verl_examples, experiment gsm8k) and log to
                    # wandb, which stops a machine without a wandb login: console only; add wandb where it is set up
                    "project_name": "paravt", "experiment_name": out.name, "logger": ["console"],
                    "default_local_dir": str(out / "checkpoints")},
        # verl's default trainer (v1) keeps rollouts in TransferQueue, whose SimpleStorage holds one CPU per storage
        # unit (verl's default 8, in one placement group): on a machine with fewer free CPUs than that Ray waits for
        # them forever, before any GPU is asked for. One unit holds a step's trajectories (paravt's are ids and
        # images, not raw video); raise it on a node with CPUs to spare.
        "transfer_queue": {"backend": {"SimpleStorage": {"num_data_storage_units": 1}}},
        "data": {
            "train_files": str(out / f"{split}.parquet"),
            "val_files": str(out / f"{split}.parquet"),
            "max_prompt_length": budget.prompt,  # system prompt, question, the largest gated K of overview frames
            "max_response_length": budget.response,  # every turn and every tool response between them
            "train_batch_size": r.prompts_per_step,
            "return_raw_chat": True,
            "filter_overlong_prompts": False,  # the prompt column is the question alone; the loop checks the real one
            # the local trainer's pixel budget, for verl's processor (prompt pads, multimodal inputs) and, through
            # the agent loop's generate calls, the inference server's: the same image tokens per frame everywhere
            "mm_processor_kwargs": processor_pixels(cfg),
            "seed": int(cfg.seed),  # verl's shuffle of the prompts (its default: unseeded)
        },
        "actor_rollout_ref": {
            "model": {"path": str(cfg.model.path) if cfg.model.path else "???"},
            # verl refuses a config without micro-batch sizes. One sequence per GPU per forward: an episode is up to
            # budget.total tokens with dozens of images, and the local trainer's one PPO update per step is one
            # mini-batch of the whole step. Raise them (or set use_dynamic_bsz) where memory allows.
            "actor": {**actor, "ppo_mini_batch_size": r.prompts_per_step, "ppo_micro_batch_size_per_gpu": 1},
            "ref": {"log_prob_micro_batch_size_per_gpu": 1},
            "rollout": {
                "log_prob_micro_batch_size_per_gpu": 1,
                "name": "vllm", "mode": "async", "n": r.group_size, "temperature": r.temperature,
                "calculate_log_probs": True,
                "limit_images": budget.max_images,  # vLLM's limit_mm_per_prompt: overview + every crop frame back
                "agent": {"agent_loop_config_path": str(out / "agent_loops.yaml"), "default_agent_loop": "paravt"},
            },
        },
    }  # fmt: skip


def launch_command(out: str | Path) -> str:
    """verl's training command for an export in ``out``. Hydra reads a relative ``--config-path`` against verl's own
    package, not the working directory: the path is absolute."""
    return f"python -m verl.trainer.main_ppo --config-path {Path(out).resolve()} --config-name paravt_verl"


def export_verl(cfg: Any, samples: list[Any], out: str | Path, *, data: str | Path | None = None,
                env_url: str | None = None, split: str = "train") -> dict[str, Path]:  # fmt: skip
    """Write the three files (module docstring); returns their paths by kind. ``data``: the samples file the
    rollout workers read (ignored with ``env_url``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (env_url is None) == (data is None):
        raise ValueError("export_verl needs exactly one of data (a samples file every worker reads) or env_url")
    if cfg.rollout.include_subagents:  # refused by name, never dropped: verl trains the trajectory the loop returns
        raise ValueError("rollout.include_subagents=true cannot be exported to verl: its agent loop returns the main "
                         "agent's trajectory only (the sub-agent's turns are not trained there); set it to false, or "
                         "train with the local backend")  # fmt: skip
    schedule(cfg, len(samples))  # refuses a split that would train 0 steps, before anything is written
    options = env_options(cfg, "verl")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parquet = out / f"{split}.parquet"
    tmp = parquet.with_suffix(".parquet.tmp")
    pq.write_table(pa.Table.from_pylist(verl_rows(samples, split)), tmp)
    tmp.replace(parquet)
    where = {"env_url": env_url} if env_url else {"data": str(Path(data).resolve())}
    loops = out / "agent_loops.yaml"
    # the recipe's per-turn cap (each main-agent turn and each sub-agent summary), as the local trainer caps them
    loops.write_text(yaml.safe_dump([{"name": "paravt", "_target_": AGENT_LOOP, **where, "env_options": options,
                                      "max_new_tokens": int(cfg.rollout.max_new_tokens)}], sort_keys=False))  # fmt: skip
    config = out / "paravt_verl.yaml"
    header = (f"# verl {', '.join(SUPPORTED_VERL)}: {launch_command(out)}\n"
              "#   then verl's GPU settings as usual: trainer.n_gpus_per_node, trainer.nnodes, and (where memory allows)\n"
              "#   larger actor_rollout_ref.*micro_batch_size_per_gpu or actor_rollout_ref.actor.use_dynamic_bsz=True;\n"
              "#   on a node with CPUs to spare, transfer_queue.backend.SimpleStorage.num_data_storage_units=8 (verl's\n"
              "#   default; each unit holds a CPU) and trainer.logger=[console,wandb] where wandb is set up\n"
              "# Lengths and image limit from the recipe (paravt.learners.adapters.budget): "
              f"{recipe_budget(cfg, samples).as_dict()}\n"
              f"# Recipe settings verl has no key for (its own GRPO normalisation applies): {', '.join(NOT_EXPRESSIBLE)}\n")  # fmt: skip
    config.write_text(header + yaml.safe_dump(trainer_config(cfg, samples, out.resolve(), split), sort_keys=False))
    return {"dataset": parquet, "agent loops": loops, "config": config}
