"""GRPO, top to bottom: group-normalised advantages, the PPO-clipped token loss, KL to a reference.

Shapes: one trajectory at a time (a multi-turn, multimodal sequence of T tokens), with
``mask`` = the trajectory's ``loss_mask`` shifted to the targets (1 on tokens the policy generated).

    A_i      = (r_i - mean_G(r)) / (std_G(r) + eps)        # group-normalised (Dr. GRPO: no std)
    ratio_t  = exp(logp_t - logp_old_t), capped at ``is_cap`` for stale rollouts
    L_clip_t = -min(ratio_t A_t, clip(ratio_t, 1 - eps_low, 1 + eps_high) A_t)
    L        = mean over the batch's loss tokens of (L_clip + beta * KL_t)   # k1: logp - logp_ref; k3: e^(ref-logp) - (ref-logp) - 1

Vanilla GRPO is this loss with ``RewardConfig.vanilla()`` rewards, no gating and no think prefix;
PARA-GRPO (``paravt.learners.para_grpo``) changes only the rewards, the frame budgets and the advantages.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOSS_AGGREGATIONS = ("token_mean", "sequence_mean")


@dataclass
class GRPOConfig:
    """Loss hyper-parameters (defaults: the released PARA-GRPO / vanilla GRPO recipes)."""

    eps_clip: float = 0.2
    """PPO clip range below 1 (and above, unless ``eps_clip_high`` is set). Release: 0.2."""
    eps_clip_high: float | None = None
    """Upper clip range ("clip-higher", DAPO); None: same as ``eps_clip``."""
    kl_coef: float = 0.01
    """β of the KL penalty to the frozen reference policy. Release: 0.01."""
    kl_estimator: str = "k3"
    """"k1" (log-ratio) or "k3" (Schulman's unbiased, always >= 0)."""
    kl_in_reward: bool = False
    """Put the KL into the reward instead of the loss, as the release's AReaL does: every generated token gets
    the reward -β·k1 (log π_old - log π_ref), summed to the episode's end (GAE with γ = λ = 1) and added to the
    group-normalised advantage before the batch normalisation, which is then over tokens; the loss has no KL
    term. False: β·KL (``kl_estimator``) is a loss term."""
    std_normalize: bool = True
    """Divide group advantages by the group's reward std (GRPO); False gives Dr. GRPO."""
    batch_adv_norm: bool = True
    """Re-normalise advantages over the whole batch after group normalisation. Release: on."""
    tool_credit: bool = True
    """The reward credits calling the tool as such (``RewardConfig.tool_credit``), under every algorithm, vanilla
    GRPO included. True: the released rewards. False: the tool-neutral variant, where at equal
    accuracy calling earns nothing over answering from the overview, so skipping the tool can pay."""
    reward_scale: float = 10.0
    """Rewards are mapped to scale * r + bias before normalisation. Release: 10."""
    reward_bias: float = -0.2
    """See ``reward_scale``. Release: -0.2."""
    is_cap: float = 5.0
    """Cap on the importance weight of stale rollouts. Release: 5."""
    reward_clip: float | None = None
    """Clip the scaled rewards to [-clip, clip] before any normalisation; None: no clip. Release: 20 (its
    AReaL ``reward_clip``; with scale 10 and bias -0.2 a reward above 2.02 is clipped)."""
    std_unbiased: bool = False
    """Group and batch std with Bessel's correction (n - 1), as the release's AReaL normalisation; False: the
    population std."""
    adv_eps: float = 1e-6
    """ε added to the std when normalising advantages. Release: 1e-5."""
    batch_norm_weighting: str = "rollout"
    """What the batch re-normalisation (``batch_adv_norm``) averages over: "rollout" (each rollout's advantage
    once) or "token" (each rollout's advantage once per loss token it has, the release's normalisation over
    the batch's tokens: a long tool-using rollout pulls the mean and std as much as its tokens count)."""
    loss_aggregation: str = "token_mean"
    """"token_mean": the loss averaged over every loss token of the step's batch (the release's AReaL loss):
    every generated token weighs the same. "sequence_mean": each trajectory's token mean, then the mean over
    trajectories, under which a long tool-using rollout's tokens weigh less than a short answer's (its one
    call-or-answer token gets ~1/200 of the weight instead of ~1/20)."""

    def __post_init__(self) -> None:
        if self.kl_estimator not in ("k1", "k3"):
            raise ValueError(f"GRPOConfig.kl_estimator must be 'k1' or 'k3', got {self.kl_estimator!r}")
        if self.loss_aggregation not in LOSS_AGGREGATIONS:
            raise ValueError(f"GRPOConfig.loss_aggregation must be one of {LOSS_AGGREGATIONS}, got {self.loss_aggregation!r}")
        if not self.eps_clip > 0:
            raise ValueError(f"GRPOConfig.eps_clip must be > 0, got {self.eps_clip}")
        if self.batch_norm_weighting not in ("rollout", "token"):
            raise ValueError(f"GRPOConfig.batch_norm_weighting must be 'rollout' or 'token', got {self.batch_norm_weighting!r}")
        if self.reward_clip is not None and not self.reward_clip > 0:
            raise ValueError(f"GRPOConfig.reward_clip must be > 0 (or null), got {self.reward_clip}")


def group_advantages(rewards: torch.Tensor, std_normalize: bool = True, eps: float = 1e-6, *,
                     unbiased: bool = False) -> torch.Tensor:  # fmt: skip
    """Advantages of the G rollouts of one prompt: reward minus the group mean (over the std with GRPO).
    A group whose rewards are all equal gets zero advantages (it carries no signal)."""
    rewards = rewards.float()
    centred = rewards - rewards.mean()
    if not std_normalize or rewards.numel() < 2:
        return centred
    return centred / (rewards.std(unbiased=unbiased) + eps)


def batch_normalize(advantages: torch.Tensor, eps: float = 1e-6, *, weights: torch.Tensor | None = None,
                    unbiased: bool = False) -> torch.Tensor:  # fmt: skip
    """Zero-mean, unit-std advantages over the batch (a no-op on a constant batch). ``weights``: how many
    times each entry counts (its loss tokens, for a normalisation over the batch's tokens)."""
    a = advantages.float()
    w = torch.ones_like(a) if weights is None else weights.float()
    n = w.sum()
    mean = (w * a).sum() / n
    var = (w * (a - mean) ** 2).sum() / ((n - 1) if unbiased and n > 1 else n)
    std = var.sqrt()
    if a.numel() < 2 or std < eps:
        return a - mean
    return (a - mean) / (std + eps)


def scaled_rewards(rewards: torch.Tensor, config: GRPOConfig) -> torch.Tensor:
    """``scale * r + bias``, clipped to ``±reward_clip`` when set (the release's order)."""
    out = rewards.float() * config.reward_scale + config.reward_bias
    if config.reward_clip is not None:
        out = out.clamp(-config.reward_clip, config.reward_clip)
    return out


def sequence_advantages(rewards: list[list[float]], config: GRPOConfig,
                        tokens: list[list[int]] | None = None) -> list[list[float]]:  # fmt: skip
    """Scalar advantage per rollout: group-normalise each group's scaled (and clipped) rewards, then
    (optionally) the batch, over rollouts or over tokens (``tokens``: each rollout's loss-token count, needed
    with ``batch_norm_weighting="token"``)."""
    groups = [group_advantages(scaled_rewards(torch.tensor(g), config), config.std_normalize, config.adv_eps,
                               unbiased=config.std_unbiased) for g in rewards]  # fmt: skip
    flat = torch.cat(groups)
    if config.batch_adv_norm:
        weights = None
        if config.batch_norm_weighting == "token":
            if tokens is None:
                raise ValueError("batch_norm_weighting='token' needs each rollout's loss-token count")
            weights = torch.tensor([n for g in tokens for n in g], dtype=torch.float32)
        flat = batch_normalize(flat, config.adv_eps, weights=weights, unbiased=config.std_unbiased)
    out, i = [], 0
    for g in rewards:
        out.append(flat[i : i + len(g)].tolist())
        i += len(g)
    return out


def kl_reward_to_go(old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """Per token, the sum from that token to the end of ``-beta * (old_logp - ref_logp)`` over the generated
    tokens (``mask``): the KL part of the return with γ = λ = 1. Zero where ``mask`` is 0 (prompt, tool
    responses) in the summands; every position carries the sum of what follows it."""
    k1 = (old_logp.float() - ref_logp.float()) * mask.float()
    return -beta * torch.flip(torch.cumsum(torch.flip(k1, [0]), 0), [0])


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(π || π_ref) estimate from the sampled tokens' log-probs."""
    if estimator == "k1":
        return logp - ref_logp
    if estimator == "k3":
        log_ratio = ref_logp - logp
        return torch.exp(log_ratio) - log_ratio - 1
    raise ValueError(f"unknown KL estimator {estimator!r}; known: 'k1', 'k3'")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the masked tokens (token-mean aggregation); 0 when nothing is masked in."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    is_cap: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clipped surrogate per token, token-mean aggregated over ``mask``.

    ``advantages`` is per token (a scalar broadcast for plain GRPO, a per-token vector with token-level
    anchoring). Returns the loss and diagnostics (clip fraction, mean ratio).
    """
    eps_high = eps_low if eps_high is None else eps_high
    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    if is_cap is not None:
        ratio = torch.clamp(ratio, max=is_cap)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = masked_mean(per_token, mask)
    with torch.no_grad():
        clip_frac = masked_mean(((ratio < 1.0 - eps_low) | (ratio > 1.0 + eps_high)).float(), mask)
        mean_ratio = masked_mean(ratio, mask)
    return loss, {"clip_fraction": float(clip_frac), "ratio": float(mean_ratio)}
