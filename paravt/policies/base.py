"""What a policy is: given conversations (text with ``<image>`` placeholders plus frames), produce the next
assistant turn of each, with the generated token ids and their log-probabilities.

The env writes every frame into its text as ``<t seconds><image>``; a policy puts the frames at the
placeholders, in order, through its own model's processor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from paravt_env.messages import Message

Conversation = list[Message]


@dataclass
class Generation:
    """One generated turn: its text (with any forced prefix), the ids the model generated, and their
    log-probabilities under the sampling distribution (temperature and top-p applied)."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prefix: str = ""  # forced text before the generation (e.g. "<think>\n"); not generated, not in token_ids
    prefix_ids: list[int] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" (end-of-turn token) or "length"
    prompt_tokens: int | None = None
    """Tokens of the context this turn was generated from (what a policy without a kept cache reads again every
    turn), where the policy knows (a server's ``usage``); None where it does not."""
    completion_tokens: int | None = None
    """Tokens generated, where a server reports them without the ids (OpenAI ``usage``); else ``len(token_ids)``."""


@runtime_checkable
class Policy(Protocol):
    """A batched turn generator (the main agent, a sub-agent, or both: ParaVT shares the weights)."""

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int | None = None) -> list[Generation]:
        """The next assistant turn of each conversation (``max_new_tokens``: this call's cap, else the policy's)."""
        ...
