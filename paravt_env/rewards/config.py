"""``RewardConfig``: the knobs of the ParaVT reward, with the released recipes as presets."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .tool import TOOL_SOURCES

ACCURACY_MODES = ("exact", "f1", "llm")


@dataclass(frozen=True)
class RewardConfig:
    """How a finished episode is scored: ``total = accuracy + format_weight * format + tool``."""

    answer_suffix: bool = True
    """Answer tags outweigh ``<think>`` in the format score (release env ``ANSWER_SUFFIX=1``; paper §3.3,
    constrained-decoding weighting). On in PARA-GRPO, off in vanilla GRPO."""
    anchor_weight: float = 0.5
    """λ of Exploration Anchoring, sequence granularity: scales the ``</think>`` closure / think→answer
    bonus and the unclosed-``<think>`` penalty (release ``ANCHOR_WEIGHT``; PARA-GRPO 0.5, vanilla 0)."""
    format_weight: float = 1.0
    """Weight of the format term in the total (release ``FORMAT_WEIGHT``; 1.0 in both released recipes)."""
    mode: str = "f1"
    """Accuracy of open-ended answers: "exact" (normalised match only), "f1" (token F1) or "llm" (judge,
    see ``paravt_env.rewards.judge``). MCQ and grounding always use letter match and temporal IoU."""
    tool_source: str = "completion"
    """Where the tool term learns that a tool ran: "completion" (released behaviour: ``<tool_response>``
    in the generated text) or "executed" (the env's count of crops it really ran)."""

    score_forced_prefix: bool = False
    """Score a forced response prefix (PARA-GRPO's ``<think>\n``, ``EnvConfig.response_prefix``) as if the
    policy had written it. Off (the release): only generated text is scored, so with the prefix forced the
    think credit and the anchor bonus can never be earned and ``<think>\n<answer>x</answer>`` (format 0.60)
    outscores the compliant ``...</think><answer>x</answer>`` (0.50). On (the paper's intent, §3.3: the
    prefix is the policy's opening tag): the compliant turn scores 1.00, the bare answer 0.35."""

    balance_after_cap: bool = False
    """Add the +0.1 for balanced tags after the cap instead of before it. Off (the release): the score is capped
    at 1.0 after the bonus, and a well-formed episode with the anchor bonus already earns 1.05-1.45 without it,
    so an unbalanced one (a second ``<think>`` opened and never closed, the drift RL shows on the tiny model)
    costs nothing. On (a variant): the rest is capped at 0.9 and the bonus added after, so every episode with
    unbalanced tags scores 0.1 below a balanced one."""

    broken_call_penalty: float = 0.0
    """Subtracted from the format score, after its cap, for each ``<tool_call>`` whose body is not a JSON call
    with a name (an empty one included). 0 (the release): the +0.3 for a call needs one call to parse, and a
    well-formed answer turn already reaches the cap without it, so a broken call beside good ones costs
    nothing. A variant. Measured on ``tiny_cpu`` (three seeds from the same cold starts): 0.1 kept
    the fifth call's end time "100.0" written right where RL still called (p 0.96 and 0.81; 0.84-0.91 without it)
    and made RL worse (held-out 0.617 against 0.825, one seed of three dropped the tool): most sampled call
    turns of a tiny model break somewhere, and the penalty made calling cost."""

    tool_credit: bool = True
    """Credit for calling the tool as such. True (the release): the tool term (0.1 for a parseable call, 0.3 once a
    tool ran, +0.5 when the answer is also right) and the format score's +0.3 for a ``<think>`` before the first
    call. False (a variant): neither, so at equal accuracy and format an episode that calls earns
    nothing over one that answers from the overview. Under the release's reward a redundant crop earns +0.9
    (vanilla) or +0.6 (PARA-GRPO) over a right answer without it, so the skip-the-tool shortcut the paper's
    Tool Prior Paradox needs is penalised and cannot appear; this variant lets it (docs/env.md, "Rewards")."""

    def __post_init__(self) -> None:
        if not isinstance(self.tool_credit, bool):
            raise ValueError(f"RewardConfig.tool_credit must be true or false, got {self.tool_credit!r}")
        if self.mode not in ACCURACY_MODES:
            raise ValueError(f"RewardConfig.mode must be one of {ACCURACY_MODES}, got {self.mode!r}")
        if self.tool_source not in TOOL_SOURCES:
            raise ValueError(
                f"RewardConfig.tool_source must be one of {TOOL_SOURCES}, got {self.tool_source!r}"
            )
        for name in ("anchor_weight", "format_weight", "broken_call_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"RewardConfig.{name} must be a finite number, got {value!r}")
        if self.broken_call_penalty < 0:
            raise ValueError(f"RewardConfig.broken_call_penalty must be >= 0, got {self.broken_call_penalty!r}")

    @classmethod
    def paravt(cls) -> RewardConfig:
        """The released PARA-GRPO reward (``paravt/rl/configs/paragrpo_8b.yaml``)."""
        return cls(answer_suffix=True, anchor_weight=0.5, format_weight=1.0, mode="f1")

    @classmethod
    def paravt_prefix_scored(cls) -> RewardConfig:
        """``paravt()`` with the forced ``<think>\n`` scored as the policy's opening tag (the paper's intent;
        see ``score_forced_prefix``)."""
        return cls(answer_suffix=True, anchor_weight=0.5, format_weight=1.0, mode="f1", score_forced_prefix=True)

    @classmethod
    def vanilla(cls) -> RewardConfig:
        """The vanilla-GRPO baseline (``vanilla_grpo_8b.yaml``): no answer-suffix weighting, no anchoring."""
        return cls(answer_suffix=False, anchor_weight=0.0, format_weight=1.0, mode="f1")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewardConfig:
        """From a recipe's ``reward:`` block; a preset name under ``preset`` is the base, keys override it."""
        data = dict(data)
        preset = data.pop("preset", None)
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown reward option(s) {unknown}; known: {sorted(known)} and 'preset'")
        if preset is None:
            return cls(**data)
        if preset not in ("paravt", "paravt_prefix_scored", "vanilla"):
            raise ValueError(f"unknown reward preset {preset!r}; known: 'paravt', 'paravt_prefix_scored', 'vanilla'")
        return cls(**{**asdict(getattr(cls, preset)()), **data})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
