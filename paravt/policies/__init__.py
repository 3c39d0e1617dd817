"""Model policies: transformers Qwen-VL checkpoints (``HFPolicy``) and a tiny local checkpoint builder.

Everything here imports torch/transformers lazily, on use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paravt.policies.base import Conversation, Generation, Policy
from paravt.policies.tiny_model import (
    build_tiny_model,  # light: imports torch/transformers only when called
)
from paravt_env.episodes import episode_class


def agent_for_spec(spec: str, *, max_new_tokens: int = 2048, tool_result: str = "frames",
                   protocol: str = "paravt", temperature: float = 0.0) -> tuple[Callable[[], Any], Any]:  # fmt: skip
    """An agent factory (and the env's sub-agent, in "subagent" mode) for ``hf:PATH``, ``openai:URL[#MODEL]`` or
    ``sglang:URL#TOKENIZER`` (greedy decoding by default, the paper's eval protocol; ``temperature`` > 0
    samples). Under ``protocol="release"`` an OpenAI-compatible server gets its frames as JPEG 85, as the
    released driver sends them."""
    from paravt.policies.agent import PolicyAgent, PolicySubAgent

    if spec.startswith("hf:"):
        from paravt.policies.card import read_card, trained_pixels
        from paravt.policies.hf import HFPolicy

        # A card (written by our trainer) names the prefix the policy was trained with and the pixel budget
        # its image processor ran at: a frame the env gives at 112 px is 3x3 merged tokens under the trained
        # budget but 4x4 under the processor's default, which the policy has never seen. Released checkpoints
        # have no card: no forced prefix, their processor's own budget.
        policy = HFPolicy.from_pretrained(spec[3:], device="auto", max_new_tokens=max_new_tokens, temperature=temperature,
                                          think_prefix=bool(read_card(spec[3:]).get("think_prefix", False)),
                                          **trained_pixels(spec[3:]))  # fmt: skip
    elif spec.startswith("openai:"):
        from paravt.policies.remote import OpenAIPolicy

        url, _, model = spec[len("openai:") :].partition("#")  # openai:http://host:port/v1#model-name
        policy = OpenAIPolicy(url, model or "default", max_new_tokens=max_new_tokens, temperature=temperature,
                              image_format="jpeg" if episode_class(protocol).release else "png")  # fmt: skip
    elif spec.startswith("sglang:"):
        from transformers import AutoTokenizer

        from paravt.policies.remote import SGLangPolicy

        url, _, tokenizer_path = spec[len("sglang:") :].partition("#")  # sglang:http://host:port#TOKENIZER_PATH
        if not tokenizer_path:
            raise ValueError("sglang:URL#TOKENIZER_PATH: the prompt is rendered with the model's chat template")
        policy = SGLangPolicy(url, AutoTokenizer.from_pretrained(tokenizer_path), max_new_tokens=max_new_tokens, temperature=temperature)
    else:
        raise ValueError(f"unknown model policy {spec!r}; use hf:PATH, openai:URL[#MODEL] or sglang:URL#TOKENIZER")
    subagent = PolicySubAgent(policy) if tool_result == "subagent" else None
    return (lambda: PolicyAgent(policy)), subagent


__all__ = ["Conversation", "Generation", "Policy", "agent_for_spec", "build_tiny_model"]
