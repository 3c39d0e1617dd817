"""A group's rollouts scored with their shared prompt computed once equal scoring each whole, with gradients."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt.policies.shared_prefix import images_in, prompt_length, shared_prefix_logprobs  # noqa: E402
from paravt.policies.vision_cache import VisionCache  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


def _group(policy: HFPolicy):
    rng = np.random.default_rng(4)
    frames = [rng.integers(0, 255, (96, 128, 3), dtype=np.uint8) for _ in range(3)]
    text = "".join(f"<{i}.0 seconds><image>\n" for i in range(3)) + "What shape?"
    prompt = policy.encode([Message("system", "You are a video analyst."), Message("user", text, frames)])
    crop = [rng.integers(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(2)]
    rows = [prompt.with_ids([301, 302, 303]),
            prompt.with_ids([311, 312, 322]),
            prompt.with_ids([331]) + policy.encode([Message("user", "<image><image>crops", crop)], False).with_ids([341, 342])]  # fmt: skip
    masks = [[0] * len(prompt.input_ids) + [1] * 3,
             [0] * len(prompt.input_ids) + [1, 1, 0],
             [0] * len(prompt.input_ids) + [1] + [0] * (len(rows[2].input_ids) - len(prompt.input_ids) - 3) + [1, 1]]  # fmt: skip
    return prompt, rows, masks


@pytest.mark.parametrize("frozen", [False, True], ids=["update", "reference"])
def test_the_shared_prompt_gives_each_rows_logprobs_and_the_same_gradient(tiny_qwen3, frozen):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.7)
    prompt, rows, masks = _group(policy)
    scored = [[t for t, m in enumerate(mask) if m and t] for mask in masks]
    prefix = prompt_length(masks[0])
    assert prefix == len(prompt.input_ids) and images_in(rows[2], prefix, policy.image_pad_id, policy.merge_size) == 3
    vision = VisionCache(policy.model) if frozen else None
    policy.model.zero_grad()
    whole = policy.batch_logprobs(rows, micro_batch=1)
    sum(lp[[t - 1 for t in s]].sum() for lp, s in zip(whole, scored, strict=True)).backward()
    expected = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    policy.model.zero_grad()
    with torch.set_grad_enabled(not frozen):
        shared = shared_prefix_logprobs(policy, rows, prefix, scored, vision=vision)
    for lp_whole, lp_shared, s in zip(whole, shared, scored, strict=True):
        assert lp_shared.shape == lp_whole.shape
        at = [t - 1 for t in s]
        assert torch.allclose(lp_shared[at], lp_whole[at].detach(), atol=1e-5)
        rest = torch.ones(len(lp_shared), dtype=torch.bool)
        rest[at] = False
        assert (lp_shared[rest] == 0).all()
    if frozen:
        assert vision.stats["encoded"] == 5 or not vision.supported  # the overview once, the two crops once
        return
    sum(lp[[t - 1 for t in s]].sum() for lp, s in zip(shared, scored, strict=True)).backward()
    got = {n: p.grad for n, p in policy.model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name, grad in expected.items():  # the vision tower's too: the overview's graph is shared
        assert torch.allclose(got[name], grad, atol=1e-5, rtol=1e-4), name


def test_a_prefix_that_differs_or_ends_inside_an_image_is_refused(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8)
    prompt, rows, masks = _group(policy)
    other = rows[1].with_ids([])
    other.input_ids = [other.input_ids[0] + 1, *other.input_ids[1:]]
    with pytest.raises(ValueError, match="do not share"):
        shared_prefix_logprobs(policy, [rows[0], other], len(prompt.input_ids), [[len(prompt.input_ids)]] * 2)
    inside = prompt.input_ids.index(policy.image_pad_id) + 2
    with pytest.raises(ValueError, match="inside an image"):
        images_in(rows[0], inside, policy.image_pad_id, policy.merge_size)


def test_a_gradient_checkpointed_model_in_training_is_refused_by_name(tiny_qwen3):
    """transformers drops the cache in every layer of a checkpointed model that trains: the prompt's keys and values
    would never be kept (the 2B step's update on a GPU broke on it), so the path says which one to use instead."""
    from paravt.policies.shared_prefix import shares_prefix

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.7)
    prompt, rows, masks = _group(policy)
    scored = [[t for t, m in enumerate(mask) if m and t] for mask in masks]
    (getattr(policy.model, "activation_checkpointing_enable", None) or policy.model.gradient_checkpointing_enable)()
    assert shares_prefix(policy.model)  # in eval (rollouts, the frozen reference) the cache is kept
    policy.model.train()
    assert not shares_prefix(policy.model)
    with pytest.raises(ValueError, match="batch_logprobs"):
        shared_prefix_logprobs(policy, rows, prompt_length(masks[0]), scored)
