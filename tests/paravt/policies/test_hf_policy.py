import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


def _conversation(n_images: int, question: str = "What shape?") -> list[Message]:
    rng = np.random.default_rng(n_images)
    frames = [rng.integers(0, 255, (128, 160, 3), dtype=np.uint8) for _ in range(n_images)]
    text = "".join(f"<{i}.0 seconds><image>\n" for i in range(n_images)) + question
    return [Message("system", "You are a video analyst."), Message("user", text, frames)]


def test_placeholders_must_match_images():
    with pytest.raises(ValueError, match="2 <image> placeholders but 1 images"):
        Message("user", "<image><image>", [np.zeros((4, 4, 3), np.uint8)])


def test_greedy_batch_is_deterministic_and_matches_single_calls(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=12, temperature=0.0)
    convs = [_conversation(4), _conversation(0, "No frames here."), _conversation(2)]
    batch = policy.generate(convs)
    assert [g.token_ids for g in batch] == [g.token_ids for g in policy.generate(convs)]
    for conv, gen in zip(convs, batch, strict=True):
        [single] = policy.generate([conv])
        assert single.token_ids == gen.token_ids  # left padding does not change what is generated
        assert all(lp <= 0 for lp in gen.logprobs)


def test_behaviour_logprobs_match_a_teacher_forced_forward_pass(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=16, temperature=0.8, think_prefix=True)
    torch.manual_seed(0)
    prompt = policy.encode(_conversation(3))
    [gen] = policy.generate_encoded([prompt])
    assert gen.text.startswith("<think>\n") and gen.prefix == "<think>\n"
    full = prompt.with_ids(gen.token_ids)
    with torch.no_grad():
        lp = policy.sequence_logprobs(full)[len(prompt.input_ids) - 1 :]
    assert np.allclose(lp.cpu().numpy(), np.array(gen.logprobs), atol=1e-4)


def test_never_samples_image_pads(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=64, temperature=5.0)
    pads = set(policy.suppress_ids)
    assert pads
    torch.manual_seed(1)
    for gen in policy.generate([_conversation(1)] * 4):
        assert not pads & set(gen.token_ids)


def test_the_weight_sharing_subagent_is_never_given_the_think_prefix(tiny_qwen3):
    """PARA-GRPO forces "<think>\\n" on the main agent only: the release's workflow and the OpenRLHF executor
    prompt the sub-agent without it, and so does the local trainer's recorded sub-agent."""
    from paravt.policies.agent import PolicySubAgent
    from paravt.policies.hf import THINK_PREFIX
    from paravt_env.tools.subagent import SubAgentRequest
    from paravt_env.video import Frames

    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=6, think_prefix=True)
    frames = Frames(images=np.zeros((2, 56, 56, 3), np.uint8), timestamps=np.array([1.0, 2.0]), indices=np.array([0, 1]))
    request = SubAgentRequest("What colour?", 0.0, 4.0, frames)
    from paravt.learners.trajectory import single_turn_trajectory

    sub = PolicySubAgent(policy, recorder=single_turn_trajectory)
    sub.batch([request])
    [traj] = sub.trajectories
    prefix_ids = policy.tokenizer.encode(THINK_PREFIX, add_special_tokens=False)
    prompt_ids = traj.input_ids[: len(traj.input_ids) - traj.n_generated]
    assert prompt_ids[-len(prefix_ids):] != prefix_ids and not traj.turn_texts[0].startswith(THINK_PREFIX)
    assert policy.think_prefix  # the main agent keeps its prefix
    [main_gen] = policy.generate([[Message("user", "hi")]])
    assert main_gen.text.startswith(THINK_PREFIX)
    [plain] = policy.generate([[Message("user", "hi")]], think_prefix=False)
    assert not plain.text.startswith(THINK_PREFIX)


def test_logprobs_at_the_scored_positions_only_equal_the_full_pass_with_its_gradients(tiny_qwen3):
    """The update scores generated positions only (logits of the others never computed): same values and the same
    gradients as scoring every position and masking, in a padded batch and alone."""
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.7)
    seqs = [policy.encode(_conversation(2)).with_ids([311, 312, 313, 314, 315]), policy.encode(_conversation(0)).with_ids([321, 322])]
    scored = [[len(s.input_ids) - 5, len(s.input_ids) - 3, len(s.input_ids) - 1] for s in seqs]
    for rows, picks in ((seqs, scored), (seqs[:1], scored[:1])):
        policy.model.zero_grad()
        full = policy.batch_logprobs(rows)
        loss_full = sum(lp[[t - 1 for t in p]].sum() for lp, p in zip(full, picks, strict=True))
        loss_full.backward()
        grads = [p.grad.clone() for p in policy.model.parameters() if p.grad is not None]
        policy.model.zero_grad()
        part = policy.batch_logprobs(rows, scored=picks)
        for lp_full, lp_part, p in zip(full, part, picks, strict=True):
            assert lp_part.shape == lp_full.shape
            at = [t - 1 for t in p]
            assert torch.allclose(lp_part[at], lp_full[at].detach(), atol=1e-5)
            others = torch.ones(len(lp_part), dtype=torch.bool)
            others[at] = False
            assert (lp_part[others] == 0).all()
        sum(lp[[t - 1 for t in p]].sum() for lp, p in zip(part, picks, strict=True)).backward()
        new = [p.grad for p in policy.model.parameters() if p.grad is not None]
        assert len(new) == len(grads) and all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, new, strict=True))


def test_a_frozen_models_image_features_are_computed_once_and_change_nothing(tiny_qwen3):
    from paravt.policies.vision_cache import VisionCache

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.7)
    seqs = [policy.encode(_conversation(3)).with_ids([301, 302, 303]) for _ in range(4)]  # a group: one overview
    vision = VisionCache(policy.model)
    if not vision.supported:
        pytest.skip("this transformers takes no precomputed image features")
    with torch.no_grad():
        plain = policy.batch_logprobs(seqs, micro_batch=2)
        cached = policy.batch_logprobs(seqs, micro_batch=2, vision=vision)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(plain, cached, strict=True))
    assert (vision.stats["images"], vision.stats["encoded"]) == (12, 3)


def test_frames_seen_again_are_not_processed_again_and_give_the_processors_pixels(tiny_qwen3):
    from paravt.policies.vision_inputs import process_images

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, min_pixels=784, max_pixels=12544)
    rng = np.random.default_rng(2)
    frames = [rng.integers(0, 255, (96 + 16 * i, 128, 3), dtype=np.uint8) for i in range(3)]
    batch = [frames[0], frames[1], frames[0], frames[2]]
    pixels, grid = policy.process_images(batch)
    again, grid_again = policy.process_images(batch[::-1])
    expected, expected_grid = process_images(policy.image_processor, batch, policy.pixel_kwargs)
    assert torch.equal(pixels, expected) and torch.equal(grid, expected_grid)
    assert torch.equal(grid_again, expected_grid.flip(0))
    assert policy._processed.stats == {"frames": 8, "processed": 3}


def test_kept_pixels_follow_a_pixel_budget_set_after_the_policy_was_built(tiny_qwen3):
    """A server sets each request's budget (``pixel_kwargs``) on a built policy: a frame seen before at another
    budget is processed again at the new one, as one processor call would."""
    from paravt.policies.vision_inputs import process_images

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8)
    frame = np.random.default_rng(3).integers(0, 255, (224, 224, 3), dtype=np.uint8)
    policy.pixel_kwargs = {"size": {"shortest_edge": 784, "longest_edge": 12544}}
    _, first = policy.process_images([frame])
    policy.pixel_kwargs = {"size": {"shortest_edge": 784, "longest_edge": 50176}}
    pixels, second = policy.process_images([frame])
    expected, expected_grid = process_images(policy.image_processor, [frame], policy.pixel_kwargs)
    assert not torch.equal(first, second) and torch.equal(second, expected_grid) and torch.equal(pixels, expected)


def test_the_suppress_mask_is_the_ids_and_follows_a_new_assignment(tiny_qwen3):
    """Sampling and scoring read a mask built once (a list of ~150k ids indexed at every sampled token cost most of
    a decode step at a published size); it must say exactly what ``suppress_ids`` says, also after they change."""
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8)
    vocab = policy.model.config.get_text_config().vocab_size
    mask = policy.suppress_mask(vocab, "cpu")
    assert mask.dtype == torch.bool and mask.nonzero().flatten().tolist() == sorted(policy.suppress_ids)
    assert policy.suppress_mask(vocab, "cpu") is mask  # built once
    free = next(i for i in range(vocab) if i not in set(policy.suppress_ids))
    policy.suppress_ids = [*policy.suppress_ids, free]
    assert policy.suppress_mask(vocab, "cpu")[free] and not mask[free]
    with pytest.raises(AttributeError):
        policy.suppress_ids.append(6)  # a tuple: an in-place change would leave the mask stale
    policy.suppress_ids = []
    assert policy.suppress_mask(vocab, "cpu") is None
