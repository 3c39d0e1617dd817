"""``compute_reward``: the scalar an episode earns, and its parts.

Released ParaVT composition (``paravt/rl/rewards/compose.py``): a degenerate completion (``<|im_start|>``
spam: at least 5 of them in under 300 characters) scores 0 everywhere; otherwise
``total = accuracy + format_weight * format + tool``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .answer import extract_answer, normalize_text
from .config import RewardConfig
from .format import format_reward
from .judge import llm_judge
from .metrics import mcq_accuracy, temporal_iou, token_f1
from .tool import tool_reward


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one episode and its three terms."""

    total: float
    accuracy: float
    format: float
    tool: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


ZERO = RewardBreakdown(0.0, 0.0, 0.0, 0.0)


def is_degenerate(completion: str) -> bool:
    """The release's guard against chat-token spam with no content."""
    return completion.count("<|im_start|>") >= 5 and len(completion) < 300


def answer_accuracy(
    prediction: str, answer: str, question_type: str, mode: str = "f1", question: str = ""
) -> float:
    """Accuracy of an extracted answer: 0 if either side is empty, 1 on a normalised match, else by question
    type (``mcq`` letter match, ``tvg`` temporal IoU) or, for anything else, by ``mode``."""
    if not prediction or not answer:
        return 0.0
    if normalize_text(prediction) == normalize_text(answer):
        return 1.0
    if question_type == "mcq":
        return mcq_accuracy(prediction, answer)
    if question_type == "tvg":
        return temporal_iou(prediction, answer)
    if mode == "exact":
        return 0.0
    if mode == "llm":
        return llm_judge(question, prediction, answer)
    return token_f1(prediction, answer)


def compute_reward(
    completion: str,
    answer: str,
    question_type: str,
    config: RewardConfig | None = None,
    *,
    executed_tool_calls: int | None = None,
    question: str = "",
) -> RewardBreakdown:
    """Score everything the agent generated in an episode (its turns concatenated, tool responses excluded).

    ``question`` is only read by the LLM judge; ``executed_tool_calls`` only by ``tool_source="executed"``.
    """
    config = config if config is not None else RewardConfig.paravt()
    completion = completion if isinstance(completion, str) else str(completion)
    answer = "" if answer is None else str(answer)
    if is_degenerate(completion):
        return ZERO
    accuracy = answer_accuracy(extract_answer(completion), answer, question_type, config.mode, question)
    fmt = format_reward(completion, answer_suffix=config.answer_suffix, anchor_weight=config.anchor_weight,
                        balance_after_cap=config.balance_after_cap, broken_call_penalty=config.broken_call_penalty,
                        tool_credit=config.tool_credit)  # fmt: skip
    tool = tool_reward(
        completion, accuracy, source=config.tool_source, executed_tool_calls=executed_tool_calls
    ) if config.tool_credit else 0.0
    total = accuracy + config.format_weight * fmt + tool
    if not math.isfinite(total):  # cannot happen with the metrics above; guard the learners anyway
        raise FloatingPointError(f"non-finite reward {total} for question type {question_type!r}")
    return RewardBreakdown(total=total, accuracy=accuracy, format=fmt, tool=tool)
