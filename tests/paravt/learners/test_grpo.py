import math

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.grpo import (  # noqa: E402
    GRPOConfig,
    batch_normalize,
    clipped_policy_loss,
    group_advantages,
    kl_penalty,
    masked_mean,
    sequence_advantages,  # noqa: E402
)
from paravt.learners.para_grpo import ParaGRPOConfig, token_anchored_advantages  # noqa: E402
from paravt_env.rewards import RewardConfig  # noqa: E402


def test_group_advantages_hand_computed():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # mean 0.5, population std 0.5
    assert torch.allclose(group_advantages(r), torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-5)
    assert torch.allclose(group_advantages(r, std_normalize=False), torch.tensor([0.5, -0.5, -0.5, 0.5]))
    assert torch.equal(group_advantages(torch.tensor([0.7, 0.7, 0.7])), torch.zeros(3))  # no signal


def test_batch_normalize():
    a = torch.tensor([2.0, 4.0, 6.0, 8.0])
    out = batch_normalize(a)
    assert abs(float(out.mean())) < 1e-6 and abs(float(out.std(unbiased=False)) - 1) < 1e-4
    assert torch.equal(batch_normalize(torch.tensor([3.0, 3.0])), torch.zeros(2))


def test_sequence_advantages_scale_bias_and_batch_norm():
    cfg = GRPOConfig(reward_scale=10.0, reward_bias=-0.2, batch_adv_norm=False)
    # scaling and bias cancel inside group normalisation: only the ordering and spread matter
    adv = sequence_advantages([[1.0, 0.0], [0.2, 0.6]], cfg)
    assert adv[0] == pytest.approx([1.0, -1.0], abs=1e-5) and adv[1] == pytest.approx([-1.0, 1.0], abs=1e-5)
    cfg = GRPOConfig(std_normalize=False, batch_adv_norm=False)
    adv = sequence_advantages([[1.0, 0.0], [0.2, 0.6]], cfg)
    assert adv[0] == pytest.approx([5.0, -5.0]) and adv[1] == pytest.approx([-2.0, 2.0])


@pytest.mark.parametrize(
    ("ratio", "adv", "expected"),
    [
        (1.0, 1.0, -1.0),  # on-policy: -A
        (1.5, 1.0, -1.2),  # positive advantage, ratio clipped at 1.2
        (0.5, 1.0, -0.5),  # min() keeps the unclipped (pessimistic) term
        (1.5, -1.0, 1.5),  # negative advantage: min() keeps the unclipped term
        (0.5, -1.0, 0.8),  # negative advantage, clipped at 0.8
    ],
)
def test_clipped_loss_hand_computed(ratio, adv, expected):
    old = torch.zeros(1)
    logp = torch.log(torch.tensor([ratio]))
    loss, diag = clipped_policy_loss(logp, old, torch.tensor([adv]), torch.ones(1), 0.2)
    assert float(loss) == pytest.approx(expected, abs=1e-6)
    assert diag["clip_fraction"] == (1.0 if abs(ratio - 1) > 0.2 else 0.0)


def test_clip_higher_and_importance_cap():
    logp = torch.log(torch.tensor([1.25]))
    loss, _ = clipped_policy_loss(logp, torch.zeros(1), torch.ones(1), torch.ones(1), 0.2, eps_high=0.28)
    assert float(loss) == pytest.approx(-1.25, abs=1e-6)
    logp = torch.log(torch.tensor([50.0]))
    loss, _ = clipped_policy_loss(logp, torch.zeros(1), -torch.ones(1), torch.ones(1), 0.2, is_cap=5.0)
    assert float(loss) == pytest.approx(5.0, abs=1e-5)  # the stale rollout's weight is capped


def test_loss_is_a_token_mean_over_the_mask_and_has_the_policy_gradient():
    logp = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
    old = logp.detach().clone()
    mask = torch.tensor([1.0, 0.0, 1.0])
    adv = torch.tensor([2.0, 100.0, -1.0])
    loss, _ = clipped_policy_loss(logp, old, adv, mask)
    assert float(loss.detach()) == pytest.approx(-(2.0 - 1.0) / 2)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([-1.0, 0.0, 0.5])  # d/dlogp of -A*ratio/2 at ratio 1
    assert float(masked_mean(torch.ones(3), torch.zeros(3))) == 0.0


def test_kl_estimators():
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    assert kl_penalty(logp, ref, "k1").tolist() == pytest.approx([0.5, -1.0])
    k3 = kl_penalty(logp, ref, "k3")
    assert k3.tolist() == pytest.approx([math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1])
    assert (k3 >= 0).all() and float(kl_penalty(logp, logp, "k3").abs().sum()) == 0
    with pytest.raises(ValueError, match="'k2'"):
        kl_penalty(logp, ref, "k2")


def test_token_anchoring_on_a_hand_built_trajectory():
    # tokens:       <think> a b </think> <answer> B </answer> <|im_end|>
    struct = torch.tensor([1, 0, 0, 1, 1, 0, 1, 0])
    adv = token_anchored_advantages(0.5, -2.0, struct, anchor_weight=0.5)
    assert adv.tolist() == pytest.approx([-0.5, 0.5, 0.5, -0.5, -0.5, 0.5, -0.5, 0.5])


def test_para_grpo_reward_configs():
    assert ParaGRPOConfig().reward_config() == RewardConfig.paravt()
    token = ParaGRPOConfig(anchoring="token").reward_config()
    assert token.anchor_weight == 0.0 and token.answer_suffix  # the anchoring moves into the loss
    with pytest.raises(ValueError, match="anchoring"):
        ParaGRPOConfig(anchoring="word")
    with pytest.raises(ValueError, match="kl_estimator"):
        GRPOConfig(kl_estimator="k9")


def test_release_reward_clip_std_and_token_weighted_batch_normalisation_by_hand():
    from paravt.learners.grpo import GRPOConfig, batch_normalize, group_advantages, scaled_rewards

    # scale 10, bias -0.2, clip 20: 2.5 -> 24.8 -> 20; 0 -> -0.2
    cfg = GRPOConfig(reward_clip=20.0)
    assert scaled_rewards(torch.tensor([2.5, 0.0]), cfg).tolist() == pytest.approx([20.0, -0.2])
    assert scaled_rewards(torch.tensor([2.5]), GRPOConfig()).tolist() == pytest.approx([24.8])
    # Bessel-corrected group std: [1, 0] -> centred ±0.5, std sqrt(0.5)
    unbiased = group_advantages(torch.tensor([1.0, 0.0]), eps=1e-5, unbiased=True)
    assert unbiased.tolist() == pytest.approx([0.5 / (0.5**0.5 + 1e-5), -0.5 / (0.5**0.5 + 1e-5)])
    # over tokens: [1, -1] with 3 and 1 loss tokens -> mean 0.5, var (3*0.25 + 2.25)/4 = 0.75
    by_tokens = batch_normalize(torch.tensor([1.0, -1.0]), 0.0, weights=torch.tensor([3.0, 1.0]))
    assert by_tokens.tolist() == pytest.approx([0.5 / 0.75**0.5, -1.5 / 0.75**0.5])
    assert batch_normalize(torch.tensor([1.0, -1.0]), 0.0).tolist() == pytest.approx([1.0, -1.0])  # per rollout


def test_sequence_advantages_weigh_the_batch_by_tokens_when_asked():
    cfg = GRPOConfig(reward_scale=1.0, reward_bias=0.0, batch_norm_weighting="token", adv_eps=0.0)
    # two groups of two: group advantages ±1 each; tokens [3, 1] and [1, 1] -> weights 3, 1, 1, 1
    adv = sequence_advantages([[1.0, 0.0], [1.0, 0.0]], cfg, tokens=[[3, 1], [1, 1]])
    a = torch.tensor([1.0, -1.0, 1.0, -1.0])
    w = torch.tensor([3.0, 1.0, 1.0, 1.0])
    mean = (w * a).sum() / w.sum()
    std = ((w * (a - mean) ** 2).sum() / w.sum()).sqrt()
    assert [x for g in adv for x in g] == pytest.approx(((a - mean) / std).tolist(), abs=1e-5)
    with pytest.raises(ValueError, match="needs each rollout's loss-token count"):
        sequence_advantages([[1.0, 0.0]], cfg)
    with pytest.raises(ValueError, match="batch_norm_weighting must be"):
        GRPOConfig(batch_norm_weighting="sample")


def test_kl_reward_to_go_by_hand():
    from paravt.learners.grpo import kl_reward_to_go

    old = torch.tensor([0.0, -1.0, -2.0, -0.5, -1.5])
    ref = torch.tensor([0.0, -1.1, -2.2, -0.5, -1.8])  # k1 = old - ref = [0, .1, .2, 0, .3]
    mask = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0])  # the 4th token is a tool response: not the policy's
    got = kl_reward_to_go(old, ref, mask, beta=0.01)
    assert got.tolist() == pytest.approx([-0.006, -0.006, -0.005, -0.003, -0.003])
