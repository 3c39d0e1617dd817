"""From a step's rewards to what the update weighs: per-rollout (or per-token) advantages and loss weights.

    groups of trajectories ──► training_units: (trajectory, A_task, A_fmt, weight) per trained sequence
                               (sub-agent turns share their episode's advantages)
    KL in the reward form  ──► kl_reward_advantages: per token, A + the KL return, batch-normalised over tokens

Sequence anchoring (GRPO, PARA-GRPO's default): one scalar advantage of the total reward per rollout. Token
anchoring (PARA-GRPO ``para.anchoring=token``): A_task from accuracy + tool terms, A_fmt from the format term,
combined per token by ``para_grpo.token_anchored_advantages``. ``grpo.loss_aggregation`` sets each sequence's
weight: per trajectory (every rollout of a group the same) or per token (the release: every loss token of the
batch the same).
"""

from __future__ import annotations

import dataclasses

import torch

from paravt.learners.config import TrainConfig
from paravt.learners.grpo import batch_normalize, group_advantages, kl_reward_to_go
from paravt.learners.para_grpo import sequence_advantages, token_anchored_advantages
from paravt.learners.trajectory import Trajectory

Unit = tuple[Trajectory, float, float, float]
"""(trajectory, A_task, A_fmt, weight of its token-mean loss in the step's loss)."""


def training_units(groups: list[list[Trajectory]], cfg: TrainConfig) -> tuple[list[Unit], bool, bool]:
    """The step's trained sequences with their advantages and weights; also whether advantages are per token
    (token anchoring) and whether the KL goes into them (``grpo.kl_in_reward``)."""
    token_level = cfg.settings().token_anchoring
    token_counts = [[sum(t.loss_mask[1:]) for t in g] for g in groups]  # per rollout, for token-weighted norms
    # KL in the reward (the release's form): the batch normalisation waits until the per-token KL returns
    # are in the advantages, then runs over the batch's tokens.
    kl_reward = cfg.grpo.kl_in_reward and cfg.grpo.kl_coef > 0
    adv_cfg = dataclasses.replace(cfg.grpo, batch_adv_norm=False) if kl_reward else cfg.grpo
    if token_level:
        task = sequence_advantages([[t.breakdown["accuracy"] + t.breakdown["tool"] for t in g] for g in groups], adv_cfg, token_counts)
        fmt = [group_advantages(torch.tensor([t.breakdown["format"] for t in g]), cfg.grpo.std_normalize).tolist() for g in groups]
    else:
        task = sequence_advantages([[t.reward for t in g] for g in groups], adv_cfg, token_counts)
        fmt = [[0.0] * len(g) for g in groups]
    units: list[Unit] = []
    for g, a_task, a_fmt in zip(groups, task, fmt, strict=True):
        mine = [(tr, at, af) for tr, at, af in zip(g, a_task, a_fmt, strict=True)]
        if cfg.rollout.include_subagents:  # the sub-agent shares the weights and its episode's outcome
            mine += [(sub, at, af) for tr, at, af in zip(g, a_task, a_fmt, strict=True) for sub in tr.subagent_trajectories]
        units += [(tr, at, af, 1.0 / len(mine) / len(groups)) for tr, at, af in mine if sum(tr.loss_mask) > 0]
    if cfg.grpo.loss_aggregation == "token_mean":  # every loss token of the batch weighs the same
        tokens = sum(sum(tr.loss_mask[1:]) for tr, *_ in units)
        units = [(tr, at, af, sum(tr.loss_mask[1:]) / tokens) for tr, at, af, _ in units]
    return units, token_level, kl_reward


def kl_reward_advantages(units: list[Unit], refs: list[torch.Tensor], cfg: TrainConfig, token_level: bool) -> list[torch.Tensor]:
    """Per unit, per token: its group-normalised advantage (token-anchored with PARA-GRPO's token anchoring)
    plus the KL return ``-β Σ_{t'≥t} (log π_old - log π_ref)`` (``refs``: the reference's log-probs), then,
    with ``batch_adv_norm``, normalised over every loss token of the batch (the release's order)."""
    out, masks = [], []
    for (tr, at, af, _), ref in zip(units, refs, strict=True):
        ref = ref.float().cpu()
        mask = torch.tensor(tr.loss_mask[1:], dtype=torch.float32)
        old = torch.tensor(tr.logprobs[1:], dtype=torch.float32)
        if token_level:
            base = token_anchored_advantages(at, af, torch.tensor(tr.struct_mask[1:]), cfg.para.anchor_weight)
        else:
            base = torch.full_like(mask, at)
        out.append(base + kl_reward_to_go(old, ref, mask, cfg.grpo.kl_coef))
        masks.append(mask)
    if cfg.grpo.batch_adv_norm and out:  # over every loss token of the batch, once (mask as weight)
        flat = batch_normalize(torch.cat(out), cfg.grpo.adv_eps, weights=torch.cat(masks), unbiased=cfg.grpo.std_unbiased)
        out = list(flat.split([len(a) for a in out]))
    return out
