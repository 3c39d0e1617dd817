"""A ``Trajectory`` is one episode as the model saw it: the exact token sequence (prompt, every generated turn,
every tool response), a ``loss_mask`` that is 1 only on tokens the policy generated, their behaviour
log-probabilities, a ``struct_mask`` on the structural tags (``<think>``, ``</think>``, ``<tool_call>``,
``</tool_call>``, ``<answer>``, ``</answer>``) for Exploration Anchoring, the images in order, the frame
budget K and the reward breakdown. ``TrajectoryBuilder`` appends turns as generated ids, never re-tokenised,
so the learner scores exactly what was sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from paravt.policies.encoded import Encoded
from paravt.policies.hf import HFPolicy
from paravt_env.messages import Message
from paravt_env.protocol import STRUCTURAL_TAGS


@dataclass
class Trajectory:
    """One episode in token space, and how it was scored."""

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    struct_mask: list[int]
    encoded: Encoded = field(repr=False)
    reward: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)
    frame_budget: int = 0
    turns: int = 0
    tool_calls: int = 0
    sample_id: str = ""
    epoch: int = 0
    turn_texts: list[str] = field(default_factory=list)
    truncated: bool = False
    record: dict[str, Any] | None = field(default=None, repr=False)
    """What the episode did, as an episode record (``paravt_env.records``, schema ``paravt-episode/1``)."""
    subagent_trajectories: list[Trajectory] = field(default_factory=list, repr=False)
    """The sub-agent's generations of this episode ("subagent" mode), one single-turn trajectory each,
    kept apart: the release trains only the main agent (``rollout.include_subagents`` opts in)."""

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_generated(self) -> int:
        return sum(self.loss_mask)


class TrajectoryBuilder:
    """Accumulates one episode's tokens as the turns happen."""

    def __init__(self, policy: HFPolicy, prompt: Encoded, history: list[Message]) -> None:
        self.policy = policy
        self.encoded = prompt
        self.history = history
        self.loss_mask = [0] * len(prompt.input_ids)
        self.logprobs = [0.0] * len(prompt.input_ids)
        self.struct = [0] * len(prompt.input_ids)
        self.texts: list[str] = []
        self._tag_ids = [policy.tokenizer.encode(t, add_special_tokens=False) for t in STRUCTURAL_TAGS]

    def add_turn(self, gen) -> None:
        ids = list(gen.token_ids)
        self.encoded = self.encoded.with_ids(ids)
        self.loss_mask += [1] * len(ids)
        self.logprobs += list(gen.logprobs)
        self.struct += struct_positions(ids, self._tag_ids)
        # The chat template closes an assistant turn with "<|im_end|>\n": a turn that stopped on <|im_end|> gets
        # the "\n", one cut at max_new_tokens (or stopped on another end token) the whole closing, not trained.
        closing = self.policy.end_of_turn()
        if gen.finish_reason != "length" and ids and ids[-1] == closing[0]:
            closing = closing[1:]
        if closing:
            self.encoded = self.encoded.with_ids(closing)
            self._pad(len(closing))
        self.history.append(Message("assistant", gen.text))
        self.texts.append(gen.text)

    def add_feedback(self, messages: Sequence[Message]) -> Encoded:
        """The env's reply, one or several messages (the release protocol: one per crop), as one continuation:
        the assistant is prompted once, after the last of them."""
        delta = self.policy.encode_continuation(self.history, messages)
        self.history.extend(messages)
        self.encoded = self.encoded + delta
        self._pad(len(delta.input_ids))
        return self.encoded

    def _pad(self, n: int) -> None:
        self.loss_mask += [0] * n
        self.logprobs += [0.0] * n
        self.struct += [0] * n


def loss_positions(loss_mask: Sequence[int]) -> list[int]:
    """The positions t >= 1 whose log-probs a loss reads (``HFPolicy.batch_logprobs(scored=...)``: the other
    positions' logits are never computed; values and gradients equal scoring every position within 1e-5,
    ``tests/paravt/policies/test_hf_policy.py``, not always bit for bit: the projection of fewer rows may round
    differently)."""
    return [t for t, m in enumerate(loss_mask) if m and t]


def struct_positions(ids: Sequence[int], tag_ids: Sequence[Sequence[int]]) -> list[int]:
    """1 at every token of every occurrence of a structural tag's token pattern in ``ids``."""
    mask = [0] * len(ids)
    for pattern in tag_ids:
        n = len(pattern)
        if n == 0:
            continue
        for i in range(len(ids) - n + 1):
            if ids[i] == pattern[0] and list(ids[i : i + n]) == list(pattern):
                mask[i : i + n] = [1] * n
    return mask


def single_turn_trajectory(policy: HFPolicy, prompt: Encoded, gen) -> Trajectory:
    """A one-turn trajectory (a sub-agent call): the prompt, then the generated ids."""
    n = len(prompt.input_ids)
    tag_ids = [policy.tokenizer.encode(t, add_special_tokens=False) for t in STRUCTURAL_TAGS]
    return Trajectory(
        input_ids=prompt.input_ids + list(gen.token_ids),
        loss_mask=[0] * n + [1] * len(gen.token_ids),
        logprobs=[0.0] * n + list(gen.logprobs),
        struct_mask=[0] * n + struct_positions(gen.token_ids, tag_ids),
        encoded=prompt.with_ids(gen.token_ids),
        turns=1,
        turn_texts=[gen.text],
    )
