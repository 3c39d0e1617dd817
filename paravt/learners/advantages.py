"""From a step's rewards to what the update weighs: ``TrainingUnit``, the one unit of training data.

    groups of trajectories ──► trained_trajectories: the sequences that train (main agent, and the sub-agent's
                               turns with ``rollout.include_subagents``, sharing their episode's advantages)
                           ──► training_units: per sequence, its per-token advantages and its loss weight

How the per-token advantage is made is decided here, once:

- sequence anchoring (GRPO, PARA-GRPO's default): the group-normalised total reward, the same on every token;
- token anchoring (PARA-GRPO ``para.anchoring=token``): A_task (accuracy + tool) everywhere plus λ · A_fmt on the
  structural tokens (``para_grpo.token_anchored_advantages``);
- KL in the reward (``grpo.kl_in_reward``, the release's form): either of the above plus the per-token KL return,
  normalised over the batch's tokens; it needs the frozen reference's log-probs, which the caller computes.

``grpo.loss_aggregation`` sets each sequence's weight: per trajectory (every rollout of a group the same) or per
token (the release: every loss token of the batch the same). The trainer reads units without asking how their
advantages were made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from paravt.learners.config import TrainConfig
from paravt.learners.grpo import batch_normalize, group_advantages, kl_reward_to_go, sequence_advantages
from paravt.learners.para_grpo import token_anchored_advantages
from paravt.learners.trajectory import Trajectory
from paravt.policies.encoded import Encoded

ReferenceLogprobs = Callable[[list[Encoded]], Sequence[torch.Tensor]]
"""The frozen reference's log-probs of each sequence (element i of length len(i) - 1): ``HFPolicy.batch_logprobs``
with the reference model."""


@dataclass
class TrainingUnit:
    """One trained sequence of a step."""

    trajectory: Trajectory
    """The tokens, loss mask and behaviour log-probs (a main-agent rollout or one of its sub-agent turns)."""
    advantages: torch.Tensor
    """float32, one per target position (length ``len(input_ids) - 1``, aligned with ``loss_mask[1:]``): what the
    clipped loss multiplies each token's ratio by. Zero-information positions (prompt, tool responses) carry
    values too; the loss mask keeps them out."""
    weight: float
    """The weight of this sequence's token-mean loss in the step's loss (the weights of a step sum to 1)."""
    task_advantage: float
    """The scalar it started from: the group-normalised total reward (sequence anchoring) or accuracy + tool
    (token anchoring). Kept for the metrics and tests."""
    format_advantage: float
    """Token anchoring's group-normalised format reward (0 otherwise)."""


def kl_in_reward(cfg: TrainConfig) -> bool:
    """Whether the KL goes into the advantages (the release's form) rather than into the loss."""
    return cfg.grpo.kl_in_reward and cfg.grpo.kl_coef > 0


def _scalar_advantages(groups: list[list[Trajectory]], cfg: TrainConfig) -> tuple[list[list[float]], list[list[float]]]:
    """Per rollout: (A_task, A_fmt). Sequence anchoring puts everything in A_task and 0 in A_fmt."""
    token_counts = [[sum(t.loss_mask[1:]) for t in g] for g in groups]  # per rollout, for token-weighted norms
    # KL in the reward: the batch normalisation waits until the per-token KL returns are in the advantages,
    # then runs over the batch's tokens (``_add_kl_return``).
    adv_cfg = dataclasses.replace(cfg.grpo, batch_adv_norm=False) if kl_in_reward(cfg) else cfg.grpo
    if cfg.settings().token_anchoring:
        task = sequence_advantages([[t.breakdown["accuracy"] + t.breakdown["tool"] for t in g] for g in groups], adv_cfg, token_counts)
        fmt = [group_advantages(torch.tensor([t.breakdown["format"] for t in g]), cfg.grpo.std_normalize).tolist() for g in groups]
    else:
        task = sequence_advantages([[t.reward for t in g] for g in groups], adv_cfg, token_counts)
        fmt = [[0.0] * len(g) for g in groups]
    return task, fmt


def _selected(groups: list[list[Trajectory]], cfg: TrainConfig) -> list[tuple[Trajectory, float, float, float]]:
    """(trajectory, A_task, A_fmt, weight) of every sequence that trains, in step order."""
    task, fmt = _scalar_advantages(groups, cfg)
    picked: list[tuple[Trajectory, float, float, float]] = []
    for g, a_task, a_fmt in zip(groups, task, fmt, strict=True):
        mine = list(zip(g, a_task, a_fmt, strict=True))
        if cfg.rollout.include_subagents:  # the sub-agent shares the weights and its episode's outcome
            mine += [(sub, at, af) for tr, at, af in zip(g, a_task, a_fmt, strict=True) for sub in tr.subagent_trajectories]
        picked += [(tr, at, af, 1.0 / len(mine) / len(groups)) for tr, at, af in mine if sum(tr.loss_mask) > 0]
    if cfg.grpo.loss_aggregation == "token_mean":  # every loss token of the batch weighs the same
        tokens = sum(sum(tr.loss_mask[1:]) for tr, *_ in picked)
        picked = [(tr, at, af, sum(tr.loss_mask[1:]) / tokens) for tr, at, af, _ in picked]
    return picked


def trained_trajectories(groups: list[list[Trajectory]], cfg: TrainConfig) -> list[Trajectory]:
    """The sequences a step trains on (those with generated tokens), in the order of its units."""
    return [tr for tr, *_ in _selected(groups, cfg)]


def _per_token(tr: Trajectory, at: float, af: float, cfg: TrainConfig) -> torch.Tensor:
    if cfg.settings().token_anchoring:
        return token_anchored_advantages(at, af, torch.tensor(tr.struct_mask[1:]), cfg.para.anchor_weight)
    return torch.full((len(tr.input_ids) - 1,), at, dtype=torch.float32)


def _add_kl_return(trajs: list[Trajectory], base: list[torch.Tensor], refs: Sequence[torch.Tensor],
                   cfg: TrainConfig) -> list[torch.Tensor]:  # fmt: skip
    """Per sequence, per token: ``base`` plus the KL return ``-β Σ_{t'≥t} (log π_old - log π_ref)``, then, with
    ``batch_adv_norm``, normalised over every loss token of the batch (the release's order)."""
    out, masks = [], []
    for tr, adv, ref in zip(trajs, base, refs, strict=True):
        mask = torch.tensor(tr.loss_mask[1:], dtype=torch.float32)
        old = torch.tensor(tr.logprobs[1:], dtype=torch.float32)
        out.append(adv + kl_reward_to_go(old, ref.float().cpu(), mask, cfg.grpo.kl_coef))
        masks.append(mask)
    if cfg.grpo.batch_adv_norm and out:  # over every loss token of the batch, once (mask as weight)
        flat = batch_normalize(torch.cat(out), cfg.grpo.adv_eps, weights=torch.cat(masks), unbiased=cfg.grpo.std_unbiased)
        out = list(flat.split([len(a) for a in out]))
    return out


def training_units(groups: list[list[Trajectory]], cfg: TrainConfig,
                   reference_logprobs: ReferenceLogprobs | None = None) -> list[TrainingUnit]:  # fmt: skip
    """The step's trained sequences, each with its per-token advantages and its loss weight.
    ``reference_logprobs`` is needed (and only called) when the KL goes into the reward."""
    picked = _selected(groups, cfg)
    trajs = [tr for tr, *_ in picked]
    per_token = [_per_token(tr, at, af, cfg) for tr, at, af, _ in picked]
    if kl_in_reward(cfg):
        if reference_logprobs is None:
            raise ValueError("grpo.kl_in_reward needs the reference's log-probs: pass reference_logprobs")
        per_token = _add_kl_return(trajs, per_token, reference_logprobs([tr.encoded for tr in trajs]) if trajs else [], cfg)
    return [TrainingUnit(tr, adv, w, at, af) for (tr, at, af, w), adv in zip(picked, per_token, strict=True)]
