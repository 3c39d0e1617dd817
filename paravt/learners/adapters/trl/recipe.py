"""GRPO with TRL on ParaVT episodes: the dataset rows, the env factory and the trainer, in one call.

    from paravt.learners.adapters.trl import grpo_trainer
    trainer = grpo_trainer("Qwen/Qwen3-VL-8B-Instruct", env=lambda: VideoToolEnv(samples, frame_budget=16),
                           n_samples=len(samples), output_dir="runs/trl", max_steps=100, num_generations=8)
    trainer.train()

``env`` builds one env per rollout (TRL pools and reuses them): a ``VideoToolEnv`` in process, or a
``RemoteVideoToolEnv`` of a ``paravt serve-env`` (``lambda: RemoteVideoToolEnv(url, frame_budget=16)``);
``recipe_env(cfg, samples)`` builds the env a recipe's rollouts play (gating, think prefix, released reward).

One observation, whichever engine: the policy reads under TRL the tokens it reads under the local trainer
(``paravt.policies.hf.HFPolicy.encode``). The processor TRL is handed renders with the checkpoint's own chat
template fed the local trainer's messages (``paravt.learners.adapters.trl.template``: no second tool schema in
the system message, the env's feedback as the env's message, the response prefix after the generation prompt),
and processes frames at the local trainer's pixel budget (``processor_pixels``: the recipe's, else the
checkpoint's card, else the env's).

Nothing silent: TRL rolls back, without a word, the tool responses that would push a completion past
``max_completion_length``, images and all. ``grpo_trainer`` refuses a ``max_completion_length`` that cannot hold
one turn of the env's parallel crops (``completion_budget``), naming the env settings that would fit it, warns
when it cannot hold a whole episode, and the reward logs ``paravt/rolled_back_tool_responses``.

PARA-GRPO's forced ``<think>\n`` (the env's ``response_prefix``): TRL builds every turn's generation prompt from
the chat template, so the adapter's template writes the prefix after the generation prompt; the prefix tokens
are then prompt / tool-suffix tokens, outside the loss, and the reward scores only the generated text, as in
the local trainer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paravt.learners.adapters.budget import CALL_TEXT_TOKENS, TokenBudget, frame_pads, token_budget
from paravt.learners.adapters.trl.environment import ParaVTEnvironment, make_reward
from paravt.learners.adapters.trl.template import local_chat_template
from paravt_env.protocol import system_prompt

logger = logging.getLogger(__name__)


def dataset_rows(n_samples: int, *, epochs: int = 1, prompt_mode: str = "agentic", seed: int | None = None) -> list[dict[str, Any]]:
    """One row per (epoch, sample): the system prompt as the row's conversation (TRL appends the env's
    reset content as the user turn) and the reset arguments. ``epoch`` feeds nFrames Gating: every rollout
    of a row (a GRPO group) gets the same K."""
    system = [{"role": "system", "content": system_prompt(prompt_mode)}, {"role": "user", "content": ""}]
    return [{"prompt": system, "index": i, "epoch": e, "seed": seed} for e in range(epochs) for i in range(n_samples)]


class RecipeEnv:
    """The env factory of a recipe's rollouts (``recipe_env``), with the pixel budget of the recipe's policy."""

    def __init__(self, options: dict[str, Any], samples: Any, processor_pixels: tuple[int, int], max_new_tokens: int) -> None:
        self.options = options
        self.samples = samples
        self.processor_pixels = processor_pixels
        """(min, max) pixels the local trainer's image processor runs at (``cfg.model.processor_pixels``)."""
        self.max_new_tokens = max_new_tokens
        """Tokens a turn may take (``rollout.max_new_tokens``)."""

    def __call__(self) -> Any:
        from paravt_env import VideoToolEnv

        return VideoToolEnv(self.samples, **self.options)


def recipe_env(cfg: Any, samples: Any) -> RecipeEnv:
    """A factory of the env a recipe's rollouts play (``recipe_env.env_options``: the local trainer's env), for
    ``grpo_trainer(env=...)``, carrying the recipe's processor pixel budget; ``samples``: a list or anything
    ``VideoToolEnv`` loads."""
    from paravt.learners.adapters.recipe_env import env_options, processor_pixels

    options = env_options(cfg, "trl")
    if options["tool_result"] == "subagent":
        raise ValueError("TRL: sub-agent mode has no TRL form (TRL returns tool results to the same conversation, "
                         "and cannot generate a sub-agent's turns): override env.tool_result=frames")  # fmt: skip
    pixels = processor_pixels(cfg)  # the local trainer's budget, as every engine's adapter reads it
    return RecipeEnv(options, samples, (pixels["min_pixels"], pixels["max_pixels"]), int(cfg.rollout.max_new_tokens))


def processor_pixels(model: Any, env: Any, env_config: Any, pixels: tuple[int, int] | None = None) -> tuple[tuple[int, int], str]:
    """The (min, max) pixels the policy's image processor runs at under the local trainer, and where they come
    from: ``pixels`` if given, else the recipe's (an env factory of ``recipe_env``), else the checkpoint's card
    (``paravt.json``: what it was trained at), else the env's ``min_pixels`` / ``max_pixels`` (the local
    trainer's default, ``model.processor_min_pixels`` / ``processor_max_pixels`` unset)."""
    from paravt.policies.card import trained_pixels

    card = trained_pixels(model) if isinstance(model, (str, Path)) else {}
    card_pixels = (card.get("min_pixels", env_config.min_pixels), card.get("max_pixels", env_config.max_pixels))
    recipe = getattr(env, "processor_pixels", None)
    if pixels is not None:
        chosen, source = (int(pixels[0]), int(pixels[1])), "pixels="
    elif recipe is not None:
        chosen, source = tuple(recipe), "the recipe (model.processor_min_pixels / processor_max_pixels, else env's)"
        if card and tuple(card_pixels) != chosen:
            logger.warning("the recipe's pixel budget %s differs from the one %s was trained at (its card: %s): "
                           "the recipe's applies", chosen, model, card_pixels)  # fmt: skip
    elif card:
        chosen, source = tuple(card_pixels), f"the checkpoint's card ({model}/paravt.json)"
    else:
        chosen, source = (env_config.min_pixels, env_config.max_pixels), "the env's min_pixels / max_pixels"
    if not 0 < chosen[0] <= chosen[1]:
        raise ValueError(f"pixel budget {chosen} from {source}: need 0 < min_pixels <= max_pixels")
    return chosen, source


def apply_pixels(processor: Any, pixels: tuple[int, int]) -> None:
    """Make ``processor``'s image processor run at ``pixels`` (min, max) wherever TRL calls it: the prompt
    through the processor, the tool responses' and the loss's images through ``image_processor`` itself. The
    local trainer passes the same ``size`` per call (``HFPolicy.pixel_kwargs``); TRL passes none, so the budget
    is the image processor's own ``size``."""
    ip = processor.image_processor
    size = dict(getattr(ip, "size", None) or {})
    size.update({"shortest_edge": int(pixels[0]), "longest_edge": int(pixels[1])})
    ip.size = type(ip.size)(**size) if getattr(ip, "size", None) is not None else size
    for name, value in (("min_pixels", pixels[0]), ("max_pixels", pixels[1])):
        if getattr(ip, name, None) is not None:  # Qwen2.5-VL-era processors read these too
            setattr(ip, name, int(value))


def check_vllm_pixels(model: Any, pixels: tuple[int, int], mode: str) -> None:
    """Refuse ``use_vllm`` when vLLM would see other images than TRL trains on. TRL builds its vLLM (``colocate``:
    ``vllm.LLM(model=...)``; ``server``: ``trl vllm-serve --model ...``) with no processor arguments, so vLLM
    processes every frame at the checkpoint's own ``preprocessor_config.json`` budget, while TRL's processor (its
    prompt's image pads, the loss) runs at ``pixels``, the local trainer's. Unless the two budgets are equal the
    frames vLLM generated from differ from those trained on (and the pads from the features). ``model``: the path
    vLLM loads (the server must serve the same checkpoint)."""
    from transformers import AutoImageProcessor

    from paravt.learners.adapters.budget import processor_budget

    path = getattr(model, "name_or_path", model)
    lo, hi, _ = processor_budget(AutoImageProcessor.from_pretrained(path))
    if (lo, hi) != tuple(pixels):
        raise ValueError(
            f"use_vllm (vllm_mode={mode}): vLLM processes frames at the checkpoint's own budget ({path}/"
            f"preprocessor_config.json: {lo}-{hi} pixels), TRL's processor at the local trainer's {pixels[0]}-{pixels[1]}; "
            f"the policy would generate from other images than it trains on. Train at the checkpoint's budget "
            f"(pixels=({lo}, {hi}), or the recipe's model.processor_min_pixels={lo} model.processor_max_pixels={hi}), "
            "or write the local trainer's budget into the checkpoint's preprocessor_config.json (size.shortest_edge / "
            "size.longest_edge)")  # fmt: skip


def use_local_template(processor: Any, response_prefix: str) -> None:
    """Render with the checkpoint's own chat template as the local trainer does (``template.local_chat_template``)
    and parse the Hermes ``<tool_call>`` blocks the env's prompts ask for with TRL's Qwen3 response parser (set
    here: TRL recognises a known template by its exact text, and this one is the checkpoint's, wrapped)."""
    from trl.chat_template_utils import qwen3_template

    own = processor.tokenizer.chat_template or processor.chat_template
    processor.chat_template = processor.tokenizer.chat_template = local_chat_template(own, response_prefix)
    processor.tokenizer.response_template = qwen3_template


def completion_budget(env_config: Any, processor: Any, max_new_tokens: int = 256) -> TokenBudget:
    """Tokens of one episode of ``env_config`` as TRL counts them: each frame as ``processor``'s image processor
    pads it (at least its own minimum pixels: a Qwen3-VL processor upscales small frames), turns of at most
    ``max_new_tokens``. ``.feedback`` + one call turn is the least a completion needs for crops to reach the
    model; ``.response`` holds a whole episode."""
    ip = processor.image_processor
    cell = int(ip.patch_size) * int(ip.merge_size)
    size = getattr(ip, "size", None) or {}
    lowest = int(size.get("shortest_edge", 0) or getattr(ip, "min_pixels", 0) or 0)
    highest = int(size.get("longest_edge", 0) or getattr(ip, "max_pixels", 0) or env_config.max_pixels)
    pixels = min(max(env_config.max_pixels, lowest), highest)
    return token_budget(env_config, max_new_tokens=max_new_tokens, cell=cell, pads_per_frame=frame_pads(pixels, cell))  # fmt: skip


def one_turn(env_config: Any, pads_per_frame: int, max_new_tokens: int = 256) -> int:
    """Tokens of one turn of ``env_config``'s parallel crops as a completion holds them: the calls' text, the
    crops' frames at ``pads_per_frame`` pads each with their text, and the next turn's header."""
    budget = token_budget(env_config, max_new_tokens=max_new_tokens, cell=32, pads_per_frame=pads_per_frame)  # cell: unused, pads given
    return budget.feedback + env_config.max_parallel * CALL_TEXT_TOKENS


def fitting_settings(env_config: Any, pads_per_frame: int, length: int, max_new_tokens: int = 256) -> dict[str, int]:
    """The largest value of each setting, the others kept, under which one turn of parallel crops fits ``length``
    tokens: ``max_parallel``, ``crop_max_frames``, ``pads_per_frame`` (a key is absent where no value fits)."""
    def fits(env: Any, pads: int) -> bool:
        return one_turn(env, pads, max_new_tokens) <= length

    out = {}
    for key in ("max_parallel", "crop_max_frames"):
        values = [v for v in range(getattr(env_config, key), 0, -1) if fits(dataclasses.replace(env_config, **{key: v}), pads_per_frame)]
        if values:
            out[key] = values[0]
    pads = [q for q in range(pads_per_frame, 0, -1) if fits(env_config, q)]
    if pads:
        out["pads_per_frame"] = pads[0]
    return out


def refusal(env_config: Any, pads_per_frame: int, cell: int, length: int, max_new_tokens: int = 256) -> str:
    """Why ``length`` cannot hold one turn of ``env_config``'s crops, and the env settings that would fit it."""
    turn = one_turn(env_config, pads_per_frame, max_new_tokens)
    fit = fitting_settings(env_config, pads_per_frame, length, max_new_tokens)
    crops = f"{env_config.max_parallel} crops of {env_config.crop_max_frames} frames"
    options = []
    if "max_parallel" in fit:
        env = dataclasses.replace(env_config, max_parallel=fit["max_parallel"])
        options.append(f"max_parallel={fit['max_parallel']} ({one_turn(env, pads_per_frame, max_new_tokens)} tokens)")
    if "crop_max_frames" in fit:
        env = dataclasses.replace(env_config, crop_max_frames=fit["crop_max_frames"])
        options.append(f"crop_max_frames={fit['crop_max_frames']} ({one_turn(env, pads_per_frame, max_new_tokens)} tokens)")
    if "pads_per_frame" in fit:
        q = fit["pads_per_frame"]
        options.append(f"max_pixels={q * cell * cell} ({q} image pads a frame, {one_turn(env_config, q, max_new_tokens)} "
                       "tokens; the env's max_pixels and the processor's, grpo_trainer(pixels=(min, max)))")  # fmt: skip
    elif options:
        options.append(f"no pixel budget alone: the text of {crops} is {one_turn(env_config, 0, max_new_tokens)} tokens")
    least = one_turn(dataclasses.replace(env_config, max_parallel=1, crop_max_frames=1), 1, max_new_tokens)
    change = ("change one env setting: " + "; or ".join(options) if options else
              f"no single env setting fits it (the least turn, 1 crop of 1 frame at 1 image pad, is {least} tokens)")  # fmt: skip
    return (f"max_completion_length={length} cannot hold one turn of {env_config.max_parallel} parallel crops of "
            f"{env_config.crop_max_frames} frames ({turn} tokens at {pads_per_frame} image pads a frame): TRL would roll "
            f"back every crop response and the model would never see a crop frame. Raise max_completion_length to "
            f"{turn}, or {change}")  # fmt: skip


def check_completion_length(budget: TokenBudget, env_config: Any, length: int, allow_rolled_back: bool, *, cell: int = 32,
                            max_new_tokens: int = 256) -> None:  # fmt: skip
    """Refuse (or with ``allow_rolled_back``, warn about) a completion length that cannot hold one turn of
    parallel crops, naming the env settings that would fit it; warn about one that cannot hold a whole episode."""
    if length < one_turn(env_config, budget.pads_per_frame, max_new_tokens):
        message = refusal(env_config, budget.pads_per_frame, cell, length, max_new_tokens)
        if not allow_rolled_back:
            raise ValueError(message + " (allow_rolled_back_crops=True trains anyway)")
        logger.warning(message)
    elif length < budget.response:
        logger.warning("max_completion_length=%d holds one turn of crops but not a whole episode (%d tokens): "
                       "later turns' crops may be rolled back (logged as paravt/rolled_back_tool_responses)",
                       length, budget.response)  # fmt: skip


def load_trl_processor(model: str | Path) -> Any:
    """The checkpoint's processor as TRL loads it when given none (``AutoProcessor``, prompts truncated and
    padded on the left); where ``AutoProcessor`` cannot load (a Qwen-VL processor without torchvision), its
    image-only form (``processor.images_only_processor``), with a warning."""
    try:
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(model, truncation_side="left", padding_side="left")
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        from paravt.learners.adapters.trl.processor import images_only_processor

        logger.warning("AutoProcessor could not load %s (%s): using its image-only Qwen-VL processor", model, exc)
        processor = images_only_processor(model)
        processor.tokenizer.truncation_side = processor.tokenizer.padding_side = "left"
        return processor


def grpo_trainer(model: str | Any, *, env: Callable[[], Any], n_samples: int, processor: Any = None,
                 pixels: tuple[int, int] | None = None, epochs: int = 1, prompt_mode: str | None = None,
                 max_new_tokens: int | None = None, allow_rolled_back_crops: bool = False, **grpo_args: Any):  # fmt: skip
    """A ``trl.GRPOTrainer`` whose rollouts are ParaVT episodes, read as the local trainer reads them, and whose
    reward is the env's.

    ``model``: a checkpoint path or a loaded Qwen-VL model (with ``processor`` then); ``processor``: configured in
    place (its chat template and pixel budget: the local trainer's); ``pixels``: (min, max) pixels of the image
    processor (default ``processor_pixels``); ``grpo_args``: ``trl.GRPOConfig`` fields (``output_dir``
    required). ``max_tool_calling_iterations`` defaults to the env's ``max_turns - 1`` (the last turn answers).
    ``max_new_tokens``: the most tokens one turn generates, as the local trainer's ``rollout.max_new_tokens`` (default:
    the recipe's with ``recipe_env``, else 256; TRL's own cap is the whole ``max_completion_length``), set in
    ``generation_kwargs`` unless given there (as ``max_tokens`` with ``use_vllm``, vLLM's name);
    ``max_completion_length`` is checked against ``completion_budget`` of such turns. ``prompt_mode``: the system prompt's (default: the env's; the rows are checked against it)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    probe = env()
    env_cfg = probe.unwrapped.config
    probe.close()
    if processor is None:
        if not isinstance(model, (str, Path)):
            raise ValueError("grpo_trainer: pass processor= with a loaded model")
        processor = load_trl_processor(model)
    chosen, source = processor_pixels(model, env, env_cfg, pixels)
    if grpo_args.get("use_vllm"):  # before the model loads: vLLM would otherwise see other frames than TRL trains on
        check_vllm_pixels(model, chosen, grpo_args.get("vllm_mode", "colocate"))
    apply_pixels(processor, chosen)
    logger.info("TRL: frames at %d-%d pixels (from %s)", chosen[0], chosen[1], source)
    use_local_template(processor, env_cfg.response_prefix)
    if isinstance(model, (str, Path)):
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(model)
    grpo_args.setdefault("max_tool_calling_iterations", env_cfg.max_turns - 1)
    if max_new_tokens is None:
        max_new_tokens = int(getattr(env, "max_new_tokens", 256))
    # TRL generates each turn (the first, and each after a tool response) with one generation config: capped here
    # as the local trainer caps its turns, else a turn may run to the whole max_completion_length. The cap goes by
    # its generator's name: vLLM's SamplingParams takes max_tokens (and refuses max_new_tokens), transformers'
    # generate max_new_tokens (and ignores max_tokens)
    cap = "max_tokens" if grpo_args.get("use_vllm") else "max_new_tokens"
    given = dict(grpo_args.get("generation_kwargs") or {})
    if other := sorted({"max_tokens", "max_new_tokens"} - {cap} & set(given)):
        raise ValueError(f"generation_kwargs {other}: with use_vllm={bool(grpo_args.get('use_vllm'))} a turn's cap "
                         f"is {cap!r}")  # fmt: skip
    grpo_args["generation_kwargs"] = {cap: max_new_tokens, **given}
    config = GRPOConfig(**grpo_args)
    budget = completion_budget(env_cfg, processor, max_new_tokens)
    cell = int(processor.image_processor.patch_size) * int(processor.image_processor.merge_size)
    check_completion_length(budget, env_cfg, config.max_completion_length, allow_rolled_back_crops, cell=cell,
                            max_new_tokens=max_new_tokens)  # fmt: skip
    return GRPOTrainer(
        model=model,
        reward_funcs=[make_reward(processor.tokenizer)],
        args=config,
        train_dataset=Dataset.from_list(dataset_rows(n_samples, epochs=epochs, prompt_mode=prompt_mode or env_cfg.prompt_mode)),
        processing_class=processor,
        environment_factory=lambda: ParaVTEnvironment(env()),
    )
