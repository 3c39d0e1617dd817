"""``paravt.learners.advantages``: a step's rewards become per-rollout (or per-token) advantages and loss weights,
computed here by hand on small groups."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.advantages import kl_reward_advantages, training_units  # noqa: E402
from paravt.learners.config import TrainConfig  # noqa: E402
from paravt.learners.grpo import GRPOConfig  # noqa: E402
from paravt.learners.para_grpo import ParaGRPOConfig  # noqa: E402
from paravt.learners.policies.encoded import Encoded  # noqa: E402
from paravt.learners.trajectory import Trajectory  # noqa: E402

PLAIN = GRPOConfig(reward_scale=1.0, reward_bias=0.0, batch_adv_norm=False, std_normalize=False, kl_coef=0.0,
                   loss_aggregation="sequence_mean")  # fmt: skip


def traj(reward: float, n_loss: int, *, accuracy: float = 0.0, fmt: float = 0.0, struct: tuple[int, ...] = ()) -> Trajectory:
    """A trajectory of 2 prompt tokens then ``n_loss`` generated ones (``struct``: positions of structural tags)."""
    n = 2 + n_loss
    mask = [0, 0] + [1] * n_loss
    struct_mask = [1 if i in struct else 0 for i in range(n)]
    return Trajectory(input_ids=list(range(n)), loss_mask=mask, logprobs=[0.0] * 2 + [-1.0] * n_loss,
                      struct_mask=struct_mask, encoded=Encoded(list(range(n))), reward=reward,
                      breakdown={"accuracy": accuracy, "format": fmt, "tool": 0.0})  # fmt: skip


def cfg(algorithm="para_grpo", grpo=PLAIN, **para) -> TrainConfig:
    return TrainConfig(algorithm=algorithm, grpo=grpo, para=ParaGRPOConfig(**para))


def test_sequence_advantages_are_the_centred_group_rewards_and_groups_weigh_the_same():
    groups = [[traj(1.0, 3), traj(0.0, 5)], [traj(0.5, 2), traj(0.5, 2), traj(0.5, 4)]]
    units, token_level, kl_reward = training_units(groups, cfg())
    assert not token_level and not kl_reward
    assert [round(at, 6) for _, at, _, _ in units] == [0.5, -0.5, 0.0, 0.0, 0.0]
    assert [af for _, _, af, _ in units] == [0.0] * 5
    assert [w for *_, w in units] == pytest.approx([1 / 4, 1 / 4, 1 / 6, 1 / 6, 1 / 6])


def test_token_mean_weighs_every_loss_token_of_the_batch_the_same():
    groups = [[traj(1.0, 3), traj(0.0, 5)]]
    units, *_ = training_units(groups, cfg(grpo=dataclasses.replace(PLAIN, loss_aggregation="token_mean")))
    # loss tokens are counted from position 1 (the first position has no prediction)
    assert [w for *_, w in units] == pytest.approx([3 / 8, 5 / 8])


def test_a_rollout_without_generated_tokens_trains_nothing():
    groups = [[traj(1.0, 3), traj(0.0, 0)]]
    units, *_ = training_units(groups, cfg())
    assert len(units) == 1 and units[0][0].reward == 1.0


def test_token_anchoring_splits_task_and_format_advantages_only_under_para_grpo():
    groups = [[traj(0.0, 3, accuracy=1.0, fmt=1.0), traj(0.0, 3, accuracy=0.0, fmt=0.5)]]
    units, token_level, _ = training_units(groups, cfg(anchoring="token"))
    assert token_level
    assert [round(at, 6) for _, at, _, _ in units] == [0.5, -0.5]  # accuracy + tool, centred
    assert [round(af, 6) for _, _, af, _ in units] == [0.25, -0.25]  # format, centred (std_normalize off here)
    _, vanilla_token_level, _ = training_units(groups, cfg(algorithm="grpo", anchoring="token"))
    assert not vanilla_token_level  # vanilla GRPO has no anchoring: the table says so, not the name


def test_subagent_generations_share_their_episode_advantage_when_included():
    main, other = traj(1.0, 3), traj(0.0, 3)
    main.subagent_trajectories = [traj(0.0, 2), traj(0.0, 2)]
    c = cfg()
    assert len(training_units([[main, other]], c)[0]) == 2
    c.rollout.include_subagents = True
    units, *_ = training_units([[main, other]], c)
    assert len(units) == 4
    assert [round(at, 6) for _, at, _, _ in units] == [0.5, -0.5, 0.5, 0.5]


def test_kl_in_the_reward_adds_the_kl_return_per_token_then_normalises_over_tokens():
    grpo = dataclasses.replace(PLAIN, kl_coef=0.5, kl_in_reward=True)
    groups = [[traj(1.0, 2), traj(0.0, 2)]]
    units, token_level, kl_reward = training_units(groups, cfg(grpo=grpo))
    assert kl_reward and not token_level
    same = [torch.tensor(u[0].logprobs[1:]) for u in units]  # reference == behaviour: no KL
    adv = kl_reward_advantages(units, same, cfg(grpo=grpo), token_level)
    assert torch.allclose(adv[0][1:], torch.tensor([0.5, 0.5])) and torch.allclose(adv[1][1:], torch.tensor([-0.5, -0.5]))
    shifted = [r - 1.0 for r in same]  # log pi_old - log pi_ref = 1 on every token: the return counts what is left
    adv = kl_reward_advantages(units, shifted, cfg(grpo=grpo), token_level)
    assert torch.allclose(adv[0][1:], torch.tensor([0.5 - 0.5 * 2, 0.5 - 0.5 * 1]))
    normed = kl_reward_advantages(units, shifted, cfg(grpo=dataclasses.replace(grpo, batch_adv_norm=True)), token_level)
    flat = torch.cat([a[1:] for a in normed])
    assert abs(float(flat.mean())) < 1e-5 and abs(float(flat.std(unbiased=False)) - 1.0) < 1e-4
