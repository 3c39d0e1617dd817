"""The learner learns: a few GRPO updates from a fixed seed raise the reward of a tiny policy.

A two-armed bandit on the real tiny Qwen3-VL, through the trainer's own ``update`` (advantages, PPO-clipped
loss, KL, optimiser step): the policy's suppressed tokens (which sampling and the learner's log-probs both mask)
leave it two tokens, " red" and " blue", and the reward is 1 for " red". What is checked is exact (the
policy's probability of " red", from its logits), not sampled, so the test is deterministic in what it asserts. The same updates with the reward negated must lower
that probability: a sign flipped in the advantage or the loss fails one of the two.
"""

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.config import load_recipe  # noqa: E402
from paravt.learners.trainer import Trainer  # noqa: E402
from paravt.learners.trajectory import single_turn_trajectory  # noqa: E402
from paravt_env.messages import Message  # noqa: E402

STEPS, GROUPS, SIZE = 6, 2, 8


def _arm_probability(policy, prompt, arm: int, other: int) -> float:
    with torch.no_grad():
        logits = policy.model(**policy.model_inputs(prompt)).logits[0, -1].float()
    return float(torch.softmax(logits[[arm, other]], dim=-1)[0])


def _train(tmp_path, synth_small, tiny_qwen3, sign: float, algorithm: str, extra: tuple = ()) -> tuple[float, float, list[float]]:
    data_dir, _ = synth_small
    cfg = load_recipe("tiny_cpu", [
        f"model.path={tiny_qwen3}", f"data.path={data_dir}", "data.heldout_n=0", "perception.steps=0",
        "sft.steps=0", "optim.lr=3e-3", "rollout.max_new_tokens=1", f"rollout.group_size={SIZE}",
        f"rollout.prompts_per_step={GROUPS}", f"algorithm={algorithm}", "seed=0", *extra,
    ])  # fmt: skip
    trainer = Trainer(cfg, tmp_path / f"{algorithm}_{sign:+.0f}", progress=False)
    try:
        policy = trainer.policy
        prompt = policy.encode([Message("user", "Pick a colour.")])
        arm, other = (policy.tokenizer.encode(w, add_special_tokens=False)[0] for w in (" red", " blue"))
        vocab = policy.model.get_output_embeddings().weight.shape[0]
        policy.suppress_ids = [i for i in range(vocab) if i not in (arm, other)]
        torch.manual_seed(0)
        before = _arm_probability(policy, prompt, arm, other)
        rewards = []
        for _ in range(STEPS):
            gens = policy.generate_encoded([prompt] * (GROUPS * SIZE))
            trajs = [single_turn_trajectory(policy, prompt, g) for g in gens]
            for tr, gen in zip(trajs, gens, strict=True):
                assert gen.token_ids[0] in (arm, other)
                hit = 1.0 if gen.token_ids[0] == arm else 0.0
                tr.reward = sign * hit
                tr.breakdown = {"accuracy": sign * hit, "format": 0.0, "tool": 0.0, "total": sign * hit}
            rewards.append(sum(t.reward for t in trajs) / len(trajs))
            trainer.update([trajs[k * SIZE : (k + 1) * SIZE] for k in range(GROUPS)])
        return before, _arm_probability(policy, prompt, arm, other), rewards
    finally:
        trainer.close()


RELEASE_ADVANTAGES = ("grpo.kl_in_reward=true", "grpo.batch_norm_weighting=token", "grpo.std_unbiased=true",
                      "grpo.adv_eps=1e-5", "grpo.reward_clip=20")  # fmt: skip


@pytest.mark.parametrize(("algorithm", "extra"), [("para_grpo", ()), ("grpo", ()), ("para_grpo", RELEASE_ADVANTAGES),
                                                  ("para_grpo", ("model.dtype=bf16",))],
                         ids=["para_grpo", "grpo", "para_grpo-release-advantages", "para_grpo-bf16"])  # fmt: skip
def test_grpo_updates_raise_the_reward_and_a_negated_reward_lowers_it(tmp_path, synth_small, tiny_qwen3, algorithm, extra):
    before, after, rewards = _train(tmp_path, synth_small, tiny_qwen3, +1.0, algorithm, extra)
    assert 0.2 < before < 0.8, before  # a fair start: both arms get sampled
    assert after > before + 0.2, (before, after, rewards)
    before_neg, after_neg, _ = _train(tmp_path, synth_small, tiny_qwen3, -1.0, algorithm, extra)
    assert before_neg == pytest.approx(before)
    assert after_neg < before_neg - 0.2, (before_neg, after_neg)
