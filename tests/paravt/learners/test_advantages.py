"""``paravt.learners.advantages``: a step's rewards become per-rollout (or per-token) advantages and loss weights,
computed here by hand on small groups."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.advantages import TrainingUnit, trained_trajectories, training_units  # noqa: E402
from paravt.learners.config import TrainConfig  # noqa: E402
from paravt.learners.grpo import GRPOConfig  # noqa: E402
from paravt.learners.para_grpo import ParaGRPOConfig  # noqa: E402
from paravt.learners.trajectory import Trajectory  # noqa: E402
from paravt.policies.encoded import Encoded  # noqa: E402

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


def scalars(units: list[TrainingUnit]) -> list[float]:
    return [round(u.task_advantage, 6) for u in units]


def test_sequence_advantages_are_the_centred_group_rewards_and_groups_weigh_the_same():
    groups = [[traj(1.0, 3), traj(0.0, 5)], [traj(0.5, 2), traj(0.5, 2), traj(0.5, 4)]]
    units = training_units(groups, cfg())
    assert scalars(units) == [0.5, -0.5, 0.0, 0.0, 0.0]
    assert [u.format_advantage for u in units] == [0.0] * 5
    assert [u.weight for u in units] == pytest.approx([1 / 4, 1 / 4, 1 / 6, 1 / 6, 1 / 6])
    # sequence anchoring: the scalar on every target position, prompt included (the loss mask keeps it out)
    for u in units:
        assert u.advantages.dtype == torch.float32 and len(u.advantages) == len(u.trajectory.input_ids) - 1
        assert torch.equal(u.advantages, torch.full_like(u.advantages, u.task_advantage))


def test_token_mean_weighs_every_loss_token_of_the_batch_the_same():
    groups = [[traj(1.0, 3), traj(0.0, 5)]]
    units = training_units(groups, cfg(grpo=dataclasses.replace(PLAIN, loss_aggregation="token_mean")))
    # loss tokens are counted from position 1 (the first position has no prediction)
    assert [u.weight for u in units] == pytest.approx([3 / 8, 5 / 8])


def test_a_rollout_without_generated_tokens_trains_nothing():
    groups = [[traj(1.0, 3), traj(0.0, 0)]]
    units = training_units(groups, cfg())
    assert len(units) == 1 and units[0].trajectory.reward == 1.0
    assert trained_trajectories(groups, cfg()) == [units[0].trajectory]


def test_token_anchoring_splits_task_and_format_advantages_only_under_para_grpo():
    groups = [[traj(0.0, 3, accuracy=1.0, fmt=1.0, struct=(2, 4)), traj(0.0, 3, accuracy=0.0, fmt=0.5)]]
    units = training_units(groups, cfg(anchoring="token"))
    assert scalars(units) == [0.5, -0.5]  # accuracy + tool, centred
    assert [round(u.format_advantage, 6) for u in units] == [0.25, -0.25]  # format, centred (std_normalize off here)
    # A_t = A_task + λ A_fmt at the structural tokens (positions 2 and 4 are targets 1 and 3), A_task elsewhere
    assert torch.allclose(units[0].advantages, torch.tensor([0.5, 0.5 + 0.5 * 0.25, 0.5, 0.5 + 0.5 * 0.25]))
    assert torch.allclose(units[1].advantages, torch.full((4,), -0.5))
    vanilla = training_units(groups, cfg(algorithm="grpo", anchoring="token"))
    # vanilla GRPO has no anchoring (the table says so, not the name): the total reward, the same everywhere
    assert all(torch.equal(u.advantages, torch.full_like(u.advantages, u.task_advantage)) for u in vanilla)
    assert [u.format_advantage for u in vanilla] == [0.0, 0.0]


def test_subagent_generations_share_their_episode_advantage_when_included():
    main, other = traj(1.0, 3), traj(0.0, 3)
    main.subagent_trajectories = [traj(0.0, 2), traj(0.0, 2)]
    c = cfg()
    assert len(training_units([[main, other]], c)) == 2
    c.rollout.include_subagents = True
    units = training_units([[main, other]], c)
    assert len(units) == 4
    assert scalars(units) == [0.5, -0.5, 0.5, 0.5]


def test_kl_in_the_reward_adds_the_kl_return_per_token_then_normalises_over_tokens():
    grpo = dataclasses.replace(PLAIN, kl_coef=0.5, kl_in_reward=True)
    groups = [[traj(1.0, 2), traj(0.0, 2)]]
    with pytest.raises(ValueError, match="reference_logprobs"):
        training_units(groups, cfg(grpo=grpo))
    behaviour = {id(t.encoded): torch.tensor(t.logprobs[1:]) for t in groups[0]}
    same = lambda encs: [behaviour[id(e)] for e in encs]  # noqa: E731  reference == behaviour: no KL
    adv = [u.advantages for u in training_units(groups, cfg(grpo=grpo), same)]
    assert torch.allclose(adv[0][1:], torch.tensor([0.5, 0.5])) and torch.allclose(adv[1][1:], torch.tensor([-0.5, -0.5]))
    shifted = lambda encs: [r - 1.0 for r in same(encs)]  # noqa: E731  log pi_old - log pi_ref = 1 on every token
    adv = [u.advantages for u in training_units(groups, cfg(grpo=grpo), shifted)]
    assert torch.allclose(adv[0][1:], torch.tensor([0.5 - 0.5 * 2, 0.5 - 0.5 * 1]))  # the return counts what is left
    normed = training_units(groups, cfg(grpo=dataclasses.replace(grpo, batch_adv_norm=True)), shifted)
    flat = torch.cat([u.advantages[1:] for u in normed])
    assert abs(float(flat.mean())) < 1e-5 and abs(float(flat.std(unbiased=False)) - 1.0) < 1e-4
    called = []
    training_units(groups, cfg(grpo=dataclasses.replace(grpo, kl_in_reward=False)), lambda e: called.append(e))
    assert called == []  # the KL in the loss: the reference is not asked for here
