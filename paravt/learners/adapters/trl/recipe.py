"""GRPO with TRL on ParaVT episodes: the dataset rows, the env factory and the trainer, in one call.

    from paravt.learners.adapters.trl import grpo_trainer
    trainer = grpo_trainer("Qwen/Qwen3-VL-8B-Instruct", env=lambda: VideoToolEnv(samples, frame_budget=16),
                           n_samples=len(samples), output_dir="runs/trl", max_steps=100, num_generations=8)
    trainer.train()

``env`` builds one env per rollout (TRL pools and reuses them): a ``VideoToolEnv`` in process, or a
``RemoteVideoToolEnv`` of a ``paravt serve-env`` (``lambda: RemoteVideoToolEnv(url, frame_budget=16)``);
``recipe_env(cfg, samples)`` builds the env a recipe's rollouts play (gating, think prefix, released reward).

Nothing silent: TRL rolls back, without a word, the tool responses that would push a completion past
``max_completion_length``, images and all. ``grpo_trainer`` refuses a ``max_completion_length`` that cannot hold
one turn of the env's parallel crops (``completion_budget``), warns when it cannot hold a whole episode, and
the reward logs ``paravt/rolled_back_tool_responses``.

PARA-GRPO's forced ``<think>\n`` (the env's ``response_prefix``): TRL builds every turn's generation prompt from
the chat template, so ``grpo_trainer`` appends the prefix to the template's generation prompt (Qwen3-VL's
template, the one TRL parses tool calls from); the prefix tokens are then prompt / tool-suffix tokens, outside
the loss, and the reward scores only the generated text, as in the local trainer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from paravt.learners.adapters.budget import CALL_TEXT_TOKENS, TokenBudget, token_budget
from paravt.learners.adapters.trl.environment import ParaVTEnvironment, make_reward
from paravt_env.protocol import system_prompt

logger = logging.getLogger(__name__)
QWEN3_VL_GENERATION_PROMPT = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}"


def dataset_rows(n_samples: int, *, epochs: int = 1, prompt_mode: str = "agentic", seed: int | None = None) -> list[dict[str, Any]]:
    """One row per (epoch, sample): the system prompt as the row's conversation (TRL appends the env's
    reset content as the user turn) and the reset arguments. ``epoch`` feeds nFrames Gating: every rollout
    of a row (a GRPO group) gets the same K."""
    system = [{"role": "system", "content": system_prompt(prompt_mode)}, {"role": "user", "content": ""}]
    return [{"prompt": system, "index": i, "epoch": e, "seed": seed} for e in range(epochs) for i in range(n_samples)]


def recipe_env(cfg: Any, samples: Any) -> Callable[[], Any]:
    """A factory of the env a recipe's rollouts play (``recipe_env.env_options``: the local trainer's env), for
    ``grpo_trainer(env=...)``; ``samples``: a list or anything ``VideoToolEnv`` loads."""
    from paravt.learners.adapters.recipe_env import env_options
    from paravt_env import VideoToolEnv

    options = env_options(cfg, "trl")
    if options["tool_result"] == "subagent":
        raise ValueError("TRL: sub-agent mode has no TRL form (TRL returns tool results to the same conversation, "
                         "and cannot generate a sub-agent's turns): override env.tool_result=frames")  # fmt: skip
    return lambda: VideoToolEnv(samples, **options)


def completion_budget(env_config: Any, processor: Any, max_new_tokens: int = 256) -> TokenBudget:
    """Tokens of one episode of ``env_config`` as TRL counts them: each frame as ``processor``'s image processor
    pads it (at least its own minimum pixels: a Qwen3-VL processor upscales small frames), turns of at most
    ``max_new_tokens``. ``.feedback`` + one call turn is the least a completion needs for crops to reach the
    model; ``.response`` holds a whole episode."""
    from paravt.learners.adapters.budget import frame_pads

    ip = processor.image_processor
    cell = int(ip.patch_size) * int(ip.merge_size)
    size = getattr(ip, "size", None) or {}
    lowest = int(size.get("shortest_edge", 0) or getattr(ip, "min_pixels", 0) or 0)
    highest = int(size.get("longest_edge", 0) or getattr(ip, "max_pixels", 0) or env_config.max_pixels)
    pixels = min(max(env_config.max_pixels, lowest), highest)
    return token_budget(env_config, max_new_tokens=max_new_tokens, cell=cell, pads_per_frame=frame_pads(pixels, cell))  # fmt: skip


def check_completion_length(budget: TokenBudget, max_parallel: int, length: int, allow_rolled_back: bool) -> None:
    """Refuse (or with ``allow_rolled_back``, warn about) a completion length that cannot hold one turn of
    parallel crops; warn about one that cannot hold a whole episode."""
    one_turn = budget.feedback + max_parallel * CALL_TEXT_TOKENS
    if length < one_turn:
        message = (f"max_completion_length={length} cannot hold one turn of {max_parallel} parallel crops "
                   f"({one_turn} tokens: {budget.pads_per_frame} image pads per frame): TRL would roll back every "
                   "crop response and the model would never see a crop frame. Raise max_completion_length, or "
                   "lower env.max_parallel / crop_max_frames / max_pixels")  # fmt: skip
        if not allow_rolled_back:
            raise ValueError(message + " (allow_rolled_back_crops=True trains anyway)")
        logger.warning(message)
    elif length < budget.response:
        logger.warning("max_completion_length=%d holds one turn of crops but not a whole episode (%d tokens): "
                       "later turns' crops may be rolled back (logged as paravt/rolled_back_tool_responses)",
                       length, budget.response)  # fmt: skip


def force_prefix(processor: Any, prefix: str) -> None:
    """Make the chat template's generation prompt end with ``prefix`` (Qwen3-VL's template, TRL's tool-call
    parser kept: TRL recognises a template by its exact text, so its parser is set here)."""
    template = processor.chat_template or ""
    if QWEN3_VL_GENERATION_PROMPT not in template:
        raise ValueError("the env forces a response prefix (PARA-GRPO's think prefix), which the TRL adapter writes "
                         "into Qwen3-VL's chat template (trl.chat_template_utils.qwen3_vl_chat_template); this "
                         "processor's template is another. Load the processor with that template, or train "
                         "without the prefix (para.think_prefix=false)")  # fmt: skip
    from trl.chat_template_utils import qwen3_template

    forced = QWEN3_VL_GENERATION_PROMPT[:-4] + prefix.replace("\n", "\\n") + "' }}"
    processor.chat_template = processor.tokenizer.chat_template = template.replace(QWEN3_VL_GENERATION_PROMPT, forced)
    processor.tokenizer.response_template = qwen3_template


def grpo_trainer(model: str | Any, *, env: Callable[[], Any], n_samples: int, processor: Any = None,
                 epochs: int = 1, prompt_mode: str | None = None, max_new_tokens: int = 256,
                 allow_rolled_back_crops: bool = False, **grpo_args: Any):  # fmt: skip
    """A ``trl.GRPOTrainer`` whose rollouts are ParaVT episodes and whose reward is the env's.

    ``model``: a checkpoint path or a loaded Qwen-VL model (with ``processor`` then); ``grpo_args``:
    ``trl.GRPOConfig`` fields (``output_dir`` required). ``max_tool_calling_iterations`` defaults to the env's
    ``max_turns - 1`` (the last turn answers). ``max_completion_length`` is checked against
    ``completion_budget`` (``max_new_tokens``: a turn's length, for that check). ``prompt_mode``: the system
    prompt's (default: the env's)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from paravt.learners.adapters.trl.processor import load_processor

    probe = env()
    env_cfg = probe.unwrapped.config
    probe.close()
    if processor is None:
        if not isinstance(model, str):
            raise ValueError("grpo_trainer: pass processor= with a loaded model")
        processor = load_processor(model)
    if isinstance(model, str):
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(model)
    grpo_args.setdefault("max_tool_calling_iterations", env_cfg.max_turns - 1)
    config = GRPOConfig(**grpo_args)
    budget = completion_budget(env_cfg, processor, max_new_tokens)
    check_completion_length(budget, env_cfg.max_parallel, config.max_completion_length, allow_rolled_back_crops)
    if env_cfg.response_prefix:
        force_prefix(processor, env_cfg.response_prefix)
    return GRPOTrainer(
        model=model,
        reward_funcs=[make_reward(processor.tokenizer)],
        args=config,
        train_dataset=Dataset.from_list(dataset_rows(n_samples, epochs=epochs, prompt_mode=prompt_mode or env_cfg.prompt_mode)),
        processing_class=processor,
        environment_factory=lambda: ParaVTEnvironment(env()),
    )
