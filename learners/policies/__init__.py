"""Model policies: transformers Qwen-VL checkpoints (``HFPolicy``) and a tiny local checkpoint builder.

Everything here imports torch/transformers lazily, on use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Conversation, Generation, Message, Policy


def agent_for_spec(spec: str, *, max_new_tokens: int = 2048, tool_result: str = "frames") -> tuple[Callable[[], Any], Any]:
    """An agent factory (and the env's sub-agent, in "subagent" mode) for ``hf:PATH`` (greedy decoding, the
    paper's eval protocol)."""
    from .agent import PolicyAgent, PolicySubAgent

    if spec.startswith("hf:"):
        from .hf import HFPolicy

        policy = HFPolicy.from_pretrained(spec[3:], device="auto", max_new_tokens=max_new_tokens, temperature=0.0)
    else:
        raise ValueError(f"unsupported model policy {spec!r}: this build serves hf:PATH")
    subagent = PolicySubAgent(policy) if tool_result == "subagent" else None
    return (lambda: PolicyAgent(policy)), subagent


def build_tiny_model(*args: Any, **kwargs: Any):
    from .tiny_model import build_tiny_model as build

    return build(*args, **kwargs)


__all__ = ["Conversation", "Generation", "Message", "Policy", "agent_for_spec", "build_tiny_model"]
