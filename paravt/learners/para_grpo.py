"""PARA-GRPO = GRPO + Exploration Anchoring + nFrames Gating (arXiv 2605.20342, §3): the whole delta, and
``ALGORITHMS``, the one table that says what each algorithm sets (no other module compares algorithm names).

- **nFrames Gating** lives in the env (``EnvConfig(nframes_gating=True)``): K ~ U{4, 8, 16, 32, 64} per
  (prompt, epoch), shared by the group. The learner only has to reset every rollout of a group with the same
  sample and epoch.
- **Think prefix**: ``HFPolicy(think_prefix=True)`` forces ``<think>\\n`` at the start of every response.
- **Exploration Anchoring**, two granularities:

  * ``"sequence"`` (the released code): the anchor bonus is part of the scalar format reward
    (``RewardConfig.paravt()``: answer-suffix weighting and ``anchor_weight`` λ = 0.5), so every token of a
    rollout gets the same advantage. Nothing changes in the loss.
  * ``"token"`` (the paper's wording, "a format reward applied only at the structural-token positions"):

        A_t = A_task + λ · 1[t ∈ struct(o)] · A_fmt

    with A_task the group-normalised (accuracy + tool) reward and A_fmt the group-normalised format reward,
    computed with the vanilla format score (no anchor bonus inside it: the anchoring is the token weighting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from paravt_env.gating import FRAME_BUDGETS
from paravt_env.rewards import RewardConfig

ANCHORING = ("sequence", "token")


@dataclass
class ParaGRPOConfig:
    """What PARA-GRPO adds to GRPO (the released recipe's values)."""

    anchoring: str = "sequence"
    """"sequence" (released code: anchor bonus inside the scalar format reward) or "token" (the paper's
    per-token form on the structural tags)."""
    anchor_weight: float = 0.5
    """λ. Sequence granularity passes it to ``RewardConfig.anchor_weight``; token granularity scales A_fmt."""
    nframes_gating: bool = True
    """Draw the overview budget K per (prompt, epoch) from ``gating_choices`` (paper: {4, 8, 16, 32, 64})."""
    gating_choices: tuple[int, ...] = FRAME_BUDGETS
    """The budgets gating draws from (paper, Sec. 3: {4, 8, 16, 32, 64}). A tiny model on short videos can
    use a subset: on 30-90 s videos K >= 16 nearly always shows the needle, and a 64-frame prompt is most of
    a CPU step's cost."""
    think_prefix: bool = True
    """Force ``<think>\\n`` at the start of every response."""
    answer_suffix: bool = True
    """Answer tags outweigh ``<think>`` in the format reward (release ``ANSWER_SUFFIX=1``)."""
    prefix_scored: bool = False
    """Score the forced ``<think>\n`` as the policy's opening tag (``RewardConfig.score_forced_prefix``: the
    paper's intent). False is the release's reward, which scores generated text only."""

    balance_after_cap: bool = False
    """Count the balanced-tags bonus after the format cap (``RewardConfig.balance_after_cap``, a variant): under
    the release's reward an episode with a second, unclosed ``<think>`` scores as a clean one."""

    broken_call_penalty: float = 0.0
    """Format score lost per broken ``<tool_call>`` (``RewardConfig.broken_call_penalty``, a variant): under the
    release's reward a broken call beside well-formed ones costs nothing."""

    def __post_init__(self) -> None:
        if self.anchoring not in ANCHORING:
            raise ValueError(f"ParaGRPOConfig.anchoring must be one of {ANCHORING}, got {self.anchoring!r}")
        self.gating_choices = tuple(self.gating_choices)
        if not self.gating_choices or any(not isinstance(k, int) or isinstance(k, bool) or k < 1 for k in self.gating_choices):
            raise ValueError(f"para.gating_choices must be positive integer frame budgets, got {list(self.gating_choices)!r}")

    def reward_config(self, base: RewardConfig | None = None) -> RewardConfig:
        """The env's reward: the released preset for sequence anchoring; for token anchoring the anchor bonus
        is left out of the scalar (the loss applies it at the structural tokens instead)."""
        base = base or RewardConfig.paravt()
        weight = self.anchor_weight if self.anchoring == "sequence" else 0.0
        return RewardConfig(self.answer_suffix, weight, base.format_weight, base.mode, base.tool_source,
                            score_forced_prefix=self.prefix_scored, balance_after_cap=self.balance_after_cap,
                            broken_call_penalty=self.broken_call_penalty)  # fmt: skip


@dataclass(frozen=True)
class Algorithm:
    """What an algorithm sets in the env, the policy and the loss."""

    nframes_gating: bool
    """The env draws K per (prompt, epoch) from ``para.gating_choices`` (PARA-GRPO: nFrames Gating)."""
    think_prefix: bool
    """Every main-agent turn opens with a forced ``<think>\\n`` (prompt tokens; the reward scores what follows)."""
    token_anchoring: bool
    """The format advantage goes to the structural tokens only (``para.anchoring="token"``)."""
    reward: RewardConfig
    """The env's reward."""


def _vanilla_grpo(para: ParaGRPOConfig) -> Algorithm:
    """Vanilla GRPO as the release runs it: its vanilla reward, no gating, no think prefix."""
    return Algorithm(nframes_gating=False, think_prefix=False, token_anchoring=False, reward=RewardConfig.vanilla())


def _para_grpo(para: ParaGRPOConfig) -> Algorithm:
    """PARA-GRPO with the ``para`` section's switches (the ablation arms turn them off one by one)."""
    return Algorithm(nframes_gating=para.nframes_gating, think_prefix=para.think_prefix,
                     token_anchoring=para.anchoring == "token", reward=para.reward_config())  # fmt: skip


ALGORITHMS: dict[str, Callable[[ParaGRPOConfig], Algorithm]] = {"grpo": _vanilla_grpo, "para_grpo": _para_grpo}
"""Algorithm name (``TrainConfig.algorithm``) -> what it sets, given the ``para`` section."""


def algorithm(name: str, para: ParaGRPOConfig) -> Algorithm:
    """What algorithm ``name`` sets; an unknown name is an error that names the known ones."""
    if name not in ALGORITHMS:
        raise ValueError(f"TrainConfig.algorithm must be one of {sorted(ALGORITHMS)}, got {name!r}")
    return ALGORITHMS[name](para)


def token_anchored_advantages(
    task_advantage: float, format_advantage: float, struct_mask: torch.Tensor, anchor_weight: float
) -> torch.Tensor:
    """A_t = A_task + λ · 1[t ∈ struct] · A_fmt for one rollout (``struct_mask`` over its tokens)."""
    return task_advantage + anchor_weight * struct_mask.float() * format_advantage
