"""Rewards: the released ParaVT reward (accuracy + format with Exploration Anchoring + tool), reproduced
exactly by ``RewardConfig.paravt()``, and its metrics."""

from .answer import extract_answer, normalize_text
from .compute import RewardBreakdown, answer_accuracy, compute_reward, is_degenerate
from .config import ACCURACY_MODES, RewardConfig
from .format import (
    format_reward,
    has_nonempty_answer,
    has_parseable_tool_call,
    has_substantive_think,
    tags_balanced,
    think_before_tool,
)
from .judge import JUDGE_STATS, llm_judge
from .metrics import mcq_accuracy, parse_span, temporal_iou, token_f1
from .tool import TOOL_SOURCES, tool_reward

__all__ = [
    "ACCURACY_MODES",
    "JUDGE_STATS",
    "TOOL_SOURCES",
    "RewardBreakdown",
    "RewardConfig",
    "answer_accuracy",
    "compute_reward",
    "extract_answer",
    "format_reward",
    "has_nonempty_answer",
    "has_parseable_tool_call",
    "has_substantive_think",
    "is_degenerate",
    "llm_judge",
    "mcq_accuracy",
    "normalize_text",
    "parse_span",
    "tags_balanced",
    "temporal_iou",
    "think_before_tool",
    "token_f1",
    "tool_reward",
]
