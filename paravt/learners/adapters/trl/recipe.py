"""GRPO with TRL on ParaVT episodes: the dataset rows, the env factory and the trainer, in one call.

    from paravt.learners.adapters.trl import grpo_trainer
    trainer = grpo_trainer("Qwen/Qwen3-VL-8B-Instruct", env=lambda: VideoToolEnv(samples, frame_budget=16),
                           n_samples=len(samples), output_dir="runs/trl", max_steps=100, num_generations=8)
    trainer.train()

``env`` builds one env per rollout (TRL pools and reuses them): a ``VideoToolEnv`` in process, or a
``RemoteVideoToolEnv`` of a ``paravt serve-env`` (``lambda: RemoteVideoToolEnv(url, frame_budget=16)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paravt.learners.adapters.trl.environment import ParaVTEnvironment, make_reward
from paravt_env.protocol import system_prompt


def dataset_rows(n_samples: int, *, epochs: int = 1, prompt_mode: str = "agentic", seed: int | None = None) -> list[dict[str, Any]]:
    """One row per (epoch, sample): the system prompt as the row's conversation (TRL appends the env's
    reset content as the user turn) and the reset arguments. ``epoch`` feeds nFrames Gating: every rollout
    of a row (a GRPO group) gets the same K."""
    system = [{"role": "system", "content": system_prompt(prompt_mode)}, {"role": "user", "content": ""}]
    return [{"prompt": system, "index": i, "epoch": e, "seed": seed} for e in range(epochs) for i in range(n_samples)]


def grpo_trainer(model: str | Any, *, env: Callable[[], Any], n_samples: int, processor: Any = None,
                 epochs: int = 1, prompt_mode: str = "agentic", **grpo_args: Any):  # fmt: skip
    """A ``trl.GRPOTrainer`` whose rollouts are ParaVT episodes and whose reward is the env's.

    ``model``: a checkpoint path or a loaded Qwen-VL model (with ``processor`` then); ``grpo_args``:
    ``trl.GRPOConfig`` fields (``output_dir`` required). ``max_tool_calling_iterations`` defaults to the env's
    ``max_turns - 1`` (the last turn answers)."""
    from datasets import Dataset

    from paravt.learners.adapters.trl.processor import load_processor
    from trl import GRPOConfig, GRPOTrainer

    probe = env()
    max_turns = probe.unwrapped.config.max_turns
    probe.close()
    if processor is None:
        if not isinstance(model, str):
            raise ValueError("grpo_trainer: pass processor= with a loaded model")
        processor = load_processor(model)
    if isinstance(model, str):
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(model)
    grpo_args.setdefault("max_tool_calling_iterations", max_turns - 1)
    config = GRPOConfig(**grpo_args)
    return GRPOTrainer(
        model=model,
        reward_funcs=[make_reward(processor.tokenizer)],
        args=config,
        train_dataset=Dataset.from_list(dataset_rows(n_samples, epochs=epochs, prompt_mode=prompt_mode)),
        processing_class=processor,
        environment_factory=lambda: ParaVTEnvironment(env()),
    )
