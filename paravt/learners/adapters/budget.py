"""How many tokens and images a recipe's episodes can need: the numbers an engine's length settings must hold.

Every engine cuts a trajectory at a length it is told (OpenRLHF ``--data.max_len``, verl
``data.max_prompt_length`` / ``data.max_response_length``, TRL ``max_completion_length``). A cut inside a tool
response keeps the response's images but not all of their pads, and the actor's forward fails or, worse, trains
on misaligned vision features. The adapters therefore never commit a tool response that does not fit (the
episode ends as truncated, as verl's own ``ToolAgentLoop`` does), and the launchers size the engine from this
module so that a recipe's episodes fit in the first place.

Upper bounds, not estimates: a frame of at most the env's ``max_pixels`` reaches the engine's processor, which
resizes it into whole ``patch * merge`` cells between its own minimum and maximum (Qwen3-VL's processor
upscales anything under 65,536 pixels: a 224 x 224 frame becomes 256 x 256, 64 pads, not 49), so a frame costs
``max(max_pixels, processor minimum) // cell**2`` pads plus its text (the time tag, ``<|vision_start|>``,
``<|vision_end|>``); text costs at most one token per ``TEXT_BYTES_PER_TOKEN`` bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TEXT_BYTES_PER_TOKEN = 2
"""Bound on text compression: Qwen's 151k-token BPE takes ~4 bytes a token on English, the tiny test model's
2k-token BPE ~2.5 (``tests/paravt/learners/adapters/test_budget.py`` checks real episodes against the bound)."""
FRAME_TEXT_TOKENS = 24
"""A frame's text around its pads: the time tag (``<1.5 seconds>``), ``<|vision_start|>``, ``<|vision_end|>``."""
CALL_TEXT_TOKENS = 96
"""One crop's ``<tool_response>`` text besides its frames (call number, window, frame count, the note)."""
TURN_TEXT_TOKENS = 64
"""Chat markup between turns (``<|im_end|>``, the role headers, the turns-left note, the think prefix)."""
QUESTION_TOKENS = 512
"""The question with its options when the samples are not at hand (a released question: < 200 tokens)."""
SUMMARY_TOKENS = 512
"""A sub-agent's reply as it reaches the main agent (the release cuts it at 512 tokens)."""


PROCESSOR_MIN_PIXELS = {32: 65536, 28: 3136}
"""The released processors' own lower pixel bound by cell size: Qwen3-VL (``size.shortest_edge`` 65,536),
Qwen2-VL / Qwen2.5-VL (``min_pixels`` 3,136)."""


def patch_merge(model_path: str | None, tiny_arch: str = "qwen3_vl") -> int:
    """Pixels per side of one image pad: patch 16 x merge 2 for Qwen3-VL, 14 x 2 for Qwen2-VL / Qwen2.5-VL (a
    path that does not say which counts as Qwen2.5-VL: more pads per frame, the safe side)."""
    name = (model_path or tiny_arch).lower().replace("_", "").replace("-", "")
    return 32 if "qwen3" in name else 28


def frame_pads(max_pixels: int, cell: int) -> int:
    """Image pads of one frame of at most ``max_pixels`` pixels, ``cell`` pixels per pad side."""
    return max(1, max_pixels // (cell * cell))


def text_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / TEXT_BYTES_PER_TOKEN)


@dataclass(frozen=True)
class TokenBudget:
    """Upper bounds of one episode of a recipe, in tokens (images: a count)."""

    pads_per_frame: int
    """Image pads of one frame at the env's ``max_pixels``."""
    overview_frames: int
    """The largest overview K the episodes get (the gating choices' largest under nFrames Gating)."""
    max_images: int
    """Overview frames plus every crop frame that comes back to the main agent (none in sub-agent mode)."""
    prompt: int
    """System prompt, question and overview frames, up to the first generation prompt."""
    turn: int
    """One generated turn (the recipe's ``rollout.max_new_tokens``)."""
    feedback: int
    """One turn's tool responses as they come back (``max_parallel`` crops: frames, or sub-agent summaries),
    with the next turn's header."""
    response: int
    """Everything after the prompt: ``max_turns`` turns and the feedback between them."""

    @property
    def total(self) -> int:
        return self.prompt + self.response

    def as_dict(self) -> dict[str, int]:
        return {"pads_per_frame": self.pads_per_frame, "overview_frames": self.overview_frames,
                "max_images": self.max_images, "prompt": self.prompt, "turn": self.turn, "feedback": self.feedback,
                "response": self.response, "total": self.total}  # fmt: skip


def token_budget(env: Any, *, max_new_tokens: int, cell: int, question_tokens: int = QUESTION_TOKENS,
                 pads_per_frame: int | None = None) -> TokenBudget:  # fmt: skip
    """The budget of episodes of ``env`` (an ``EnvConfig``) whose turns are at most ``max_new_tokens`` long and
    whose frames cost ``cell``-pixel pads (``patch_merge``; ``pads_per_frame``: a count measured otherwise, e.g.
    with a processor that upscales). The overview is the largest K the env can show: under nFrames Gating the
    largest of its ``gating_choices``, else its ``frame_budget``."""
    from paravt_env.protocol import system_prompt

    pads = frame_pads(env.max_pixels, cell) if pads_per_frame is None else pads_per_frame
    k = max([env.frame_budget, *(env.gating_choices if env.nframes_gating else ())])
    per_frame = pads + FRAME_TEXT_TOKENS
    prompt = text_tokens(system_prompt(env.prompt_mode)) + question_tokens + k * per_frame + TURN_TEXT_TOKENS
    if env.tool_result == "subagent":
        per_call, crop_images = SUMMARY_TOKENS + CALL_TEXT_TOKENS, 0
    else:
        per_call, crop_images = env.crop_max_frames * per_frame + CALL_TEXT_TOKENS, env.max_parallel * env.crop_max_frames
    feedback = env.max_parallel * per_call + TURN_TEXT_TOKENS
    turns = max(1, env.max_turns)
    return TokenBudget(pads_per_frame=pads, overview_frames=k, max_images=k + crop_images * (turns - 1), prompt=prompt,
                       turn=max_new_tokens, feedback=feedback, response=turns * max_new_tokens + (turns - 1) * feedback)  # fmt: skip


def recipe_budget(cfg: Any, samples: list[Any] | None = None) -> TokenBudget:
    """``token_budget`` of a ``TrainConfig``: its rollouts' env (``run_setup.env_config``), its turn length, its
    model's pad size and processor minimum (``model.processor_min_pixels``, else the released processor's); with
    ``samples``, the longest question among them instead of ``QUESTION_TOKENS``."""
    from paravt.learners.run_setup import env_config

    env = env_config(cfg)
    cell = patch_merge(cfg.model.path, cfg.model.tiny_arch)
    lowest = cfg.model.processor_min_pixels or PROCESSOR_MIN_PIXELS[cell]
    question = max((text_tokens(s.question_with_options()) for s in samples), default=QUESTION_TOKENS) if samples else QUESTION_TOKENS
    return token_budget(env, max_new_tokens=cfg.rollout.max_new_tokens, cell=cell, question_tokens=question,
                        pads_per_frame=frame_pads(max(env.max_pixels, lowest), cell))  # fmt: skip


def passes_for_steps(cfg: Any, n_samples: int, why: str) -> tuple[int, int]:
    """``(steps a pass, passes)`` that reach the recipe's ``steps`` RL steps of ``rollout.prompts_per_step`` prompts
    over ``n_samples`` prompts, for an engine that counts whole passes over its data (verl's epochs, OpenRLHF's
    episodes) and steps of the full size only: the passes are the steps rounded up to whole passes. A split smaller
    than one step is refused, ``why`` saying what the engine would do with it."""
    per_pass = n_samples // cfg.rollout.prompts_per_step
    if per_pass == 0:
        raise ValueError(f"the split has {n_samples} samples, fewer than rollout.prompts_per_step="
                         f"{cfg.rollout.prompts_per_step}: {why}; export more samples or lower rollout.prompts_per_step")  # fmt: skip
    return per_pass, -(-int(cfg.steps) // per_pass)


def processor_budget(image_processor: Any) -> tuple[int, int, int]:
    """``(min_pixels, max_pixels, factor)`` an image processor of the Qwen-VL families resizes with by default
    (its ``size`` ``shortest_edge``/``longest_edge``, else ``min_pixels``/``max_pixels``; factor: patch x merge)."""
    size = getattr(image_processor, "size", None) or {}
    get = size.get if isinstance(size, dict) else (lambda k: getattr(size, k, None))
    lo = get("shortest_edge") or getattr(image_processor, "min_pixels", None)
    hi = get("longest_edge") or getattr(image_processor, "max_pixels", None)
    if lo is None or hi is None:
        raise ValueError(f"{type(image_processor).__name__} names no pixel budget (size.shortest_edge / longest_edge): "
                         "the adapters support the Qwen-VL processors")  # fmt: skip
    factor = int(image_processor.patch_size) * int(getattr(image_processor, "merge_size", 2))
    return int(lo), int(hi), factor
