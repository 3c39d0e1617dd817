"""The cross-entropy loop of the cold-start stages: token weighting and learning-rate schedule."""

import random
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from paravt.learners.coldstart.sft import lr_scheduler, train_cross_entropy  # noqa: E402


@dataclass
class _Episode:
    """A teacher episode reduced to what weighting sees: one decision token (crop or guess) and ``n - 1``
    other loss tokens (a crop episode's calls make it ten times longer than a guess)."""

    crop: bool
    loss_mask: list[int]


class _DecisionModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.decision = torch.nn.Parameter(torch.zeros(2))  # logits of (guess, crop)
        self.filler = torch.nn.Parameter(torch.zeros(2))  # the other tokens: always class 0


class _Policy:
    def __init__(self) -> None:
        self.model = _DecisionModel()


def per_item(loss):
    """A loss of one item as the loop takes losses: a forward pass per item."""
    return lambda policy, items: (([i], [loss(policy, item)]) for i, item in enumerate(items))


def _token_mean_loss(policy: _Policy, ep: _Episode) -> torch.Tensor:
    n = sum(ep.loss_mask[1:])
    ce = torch.nn.functional.cross_entropy
    decision = ce(policy.model.decision[None], torch.tensor([int(ep.crop)]))
    filler = ce(policy.model.filler[None], torch.tensor([0]))
    return (decision + (n - 1) * filler) / n


def test_every_decision_token_weighs_the_same_whatever_its_episode_length_or_batch():
    """30 % crop episodes (200 loss tokens) beside guesses (20): the learnt p(crop) is the data's 0.3. A token
    mean over each 2-episode batch gave the short guesses' decisions 5x the weight (measured there: 0.09)."""
    rng = random.Random(0)
    items = [_Episode(crop, [0] + [1] * (200 if crop else 20)) for crop in (rng.random() < 0.3 for _ in range(400))]
    share = sum(e.crop for e in items) / len(items)
    policy = _Policy()
    rows = train_cross_entropy(policy, items, per_item(_token_mean_loss), steps=1500, batch=2, lr=0.02, grad_clip=10.0,
                               seed=0, stage="sft", schedule="cosine", warmup_ratio=0.05)  # fmt: skip
    p_crop = float(torch.softmax(policy.model.decision.detach(), -1)[1])
    assert abs(p_crop - share) < 0.06, (p_crop, share)
    assert rows[-1]["lr"] < 1e-4 * 0.02 and max(r["lr"] for r in rows) == pytest.approx(0.02, rel=0.01)


def test_schedules_warm_up_then_decay_or_hold_and_unknown_names_are_refused():
    def lrs(schedule: str) -> list[float]:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        sched, out = lr_scheduler(opt, schedule, 20, 0.1), []
        for _ in range(20):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    cosine, constant = lrs("cosine"), lrs("constant")
    assert cosine[0] == 0.0 and cosine[2] == pytest.approx(1.0) and cosine[-1] < 0.05
    assert all(a >= b for a, b in zip(cosine[2:-1], cosine[3:], strict=True))
    assert constant[0] == 0.0 and constant[2:] == [1.0] * 18
    with pytest.raises(ValueError, match="unknown lr schedule 'linear'"):
        lrs("linear")


def test_weight_decay_shrinks_weights_the_loss_does_not_touch():
    """AdamW's decoupled decay: a parameter the loss does not move (``filler``, zero gradient) shrinks by
    lr * wd per step with decay and stays put without."""

    def decision_only(policy: _Policy, ep: _Episode) -> torch.Tensor:
        ce = torch.nn.functional.cross_entropy(policy.model.decision[None], torch.tensor([int(ep.crop)]))
        return ce + 0.0 * policy.model.filler.sum()

    items = [_Episode(True, [0, 1])] * 4
    for wd, expected in ((0.0, 1.0), (0.5, (1 - 0.1 * 0.5) ** 10)):
        policy = _Policy()
        with torch.no_grad():
            policy.model.filler.fill_(1.0)
        train_cross_entropy(policy, items, per_item(decision_only), steps=10, batch=1, lr=0.1, grad_clip=10.0, seed=0,
                            stage="sft", weight_decay=wd)  # fmt: skip
        assert policy.model.filler.detach().tolist() == pytest.approx([expected] * 2, rel=1e-5)


def _examples(policy, n: int, seed: int = 0) -> list:
    """Perception-style items of different lengths: frames, a question, a target of 1-12 words (loss on it)."""
    import numpy as np

    from paravt.learners.coldstart.perception import encode_example

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        frames = [rng.integers(0, 256, (56, 56, 3), dtype=np.uint8) for _ in range(1 + i % 3)]
        target = " ".join(["red", "green", "the", "circle"][j % 4] for j in range(1 + (i * 5) % 12))
        out.append(encode_example(policy, frames, [float(t) for t in range(len(frames))], target))
    return out


def test_a_batched_step_gives_the_gradient_of_its_items_one_by_one(tiny_qwen3):
    """Padded passes that score only the loss positions (``token_means``) against one full pass per item scoring
    every position: the same weighted losses and the same gradient, to float error."""
    from functools import partial

    from paravt.learners.coldstart.sft import accumulate, token_means
    from paravt.learners.grpo import masked_mean
    from paravt.policies.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_qwen3, device="cpu")
    items = _examples(policy, 7)
    weights = [0.5 + 0.25 * i for i in range(len(items))]
    passes = []

    def batched(p, xs):
        for bucket, values in token_means(p, xs, min_fill=0.0, micro_batch=4):
            passes.append(bucket)
            yield bucket, values

    policy.model.zero_grad()
    together = accumulate(policy, items, weights, batched)
    grad = {n: q.grad.clone() for n, q in policy.model.named_parameters() if q.grad is not None}
    assert len(passes) == 2 and sorted(i for b in passes for i in b) == list(range(7))  # it did batch them

    def full(p, xs):  # the loss as it was first written: every position of one item's pass
        for i, x in enumerate(xs):
            logp = p.sequence_logprobs(x.encoded, temperature=1.0)
            yield [i], [-masked_mean(logp, torch.tensor(x.loss_mask[1:], dtype=torch.float32))]

    policy.model.zero_grad()
    alone = accumulate(policy, items, weights, full)
    assert together == pytest.approx(alone, rel=1e-5)
    for name, q in policy.model.named_parameters():
        if q.grad is not None:
            assert torch.allclose(grad[name], q.grad, rtol=1e-4, atol=1e-6), name
    policy.model.zero_grad()
    one_by_one = accumulate(policy, items, weights, partial(token_means, micro_batch=1))
    assert one_by_one == pytest.approx(alone, rel=1e-5)


def test_only_similar_lengths_share_a_pass():
    from paravt.policies.encoded import length_buckets

    lengths = [1700, 300, 1600, 320, 90, 100]
    assert length_buckets(lengths, max_rows=8) == [[0, 2, 3, 1, 5, 4]]
    assert length_buckets(lengths, max_rows=8, min_fill=0.8) == [[0, 2], [3, 1], [5, 4]]
    assert length_buckets(lengths, max_rows=1, min_fill=0.8) == [[0], [2], [3], [1], [5], [4]]
