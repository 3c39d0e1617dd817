"""The rollout engine (``paravt.policies.kv_engine``) against transformers' ``generate`` and a fresh forward pass."""

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.learners.trajectory import TrajectoryBuilder  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env.messages import Message  # noqa: E402


def _frames(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (96, 128, 3), dtype=np.uint8) for _ in range(n)]


def _conversation(n_images: int, seed: int = 0, question: str = "What shape?") -> list[Message]:
    text = "".join(f"<{i}.0 seconds><image>\n" for i in range(n_images)) + question
    return [Message("system", "You are a video analyst."), Message("user", text, _frames(n_images, seed))]


def _feedback(turn: int) -> Message:
    return Message("user", f"<tool_response>crop {turn}<image><image></tool_response>", _frames(2, 100 + turn))


def _episode(policy: HFPolicy, key, turns: int = 3, seed: int = 0):
    """A multi-turn episode built as the trainer's rollout builds it (generated ids kept, feedback appended)."""
    history = _conversation(3, seed)
    builder = TrajectoryBuilder(policy, policy.encode(history), list(history))
    for turn in range(turns):
        [gen] = policy.generate_encoded([builder.encoded], sessions=[key] if key is not None else None)
        builder.add_turn(gen)
        if turn < turns - 1:
            builder.add_feedback([_feedback(turn)])
    return builder


@pytest.fixture(scope="module")
def tiny_qwen25(tmp_path_factory):
    from paravt.policies.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen25") / "model", arch="qwen2_5_vl", seed=0)


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen2_5_vl"])
def test_greedy_turns_with_a_kept_cache_equal_generate_rereading_the_conversation(arch, tiny_qwen3, tiny_qwen25):
    path = tiny_qwen3 if arch == "qwen3_vl" else tiny_qwen25
    engine = HFPolicy.from_pretrained(path, max_new_tokens=20, temperature=0.0)
    reference = HFPolicy.from_pretrained(path, max_new_tokens=20, temperature=0.0, engine="generate")
    ours, theirs = _episode(engine, "episode"), _episode(reference, None)
    assert ours.encoded.input_ids == theirs.encoded.input_ids  # the same three turns, token for token
    assert np.allclose(ours.logprobs, theirs.logprobs, atol=1e-4)
    stats = engine.cached.stats
    assert stats["reused_tokens"] > stats["prefill_tokens"] / 2  # turns 2 and 3 prefilled only what was added


def test_without_precomputed_features_each_chunk_encodes_its_own_images(tiny_qwen3):
    """transformers before ``mm_encoder_outputs`` (the engines' pins): the chunk's pixels go in as they are."""
    engine = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=20, temperature=0.0)
    engine.cached.vision.supported = False
    reference = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=20, temperature=0.0, engine="generate")
    assert _episode(engine, "e").encoded.input_ids == _episode(reference, None).encoded.input_ids
    assert engine.cached.vision.stats["images"] == 0


def test_sampled_logprobs_equal_a_fresh_forward_of_the_finished_episode(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=0.7, think_prefix=True)
    torch.manual_seed(3)
    builder = _episode(policy, "e")
    with torch.no_grad():
        fresh = policy.sequence_logprobs(builder.encoded)
    mask = torch.tensor(builder.loss_mask[1:]).bool()
    assert int(mask.sum()) >= 30
    assert torch.allclose(fresh.cpu()[mask], torch.tensor(builder.logprobs[1:])[mask], atol=1e-4)


def test_one_sampled_row_draws_what_generate_draws_from_the_same_seed(tiny_qwen3):
    """Sampling is generate's (suppression, temperature, top-p, multinomial on torch's generator): alone, a row
    draws the same tokens from the same seed. (In a batch the draws differ: finished rows leave it.)"""
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=0.8, top_p=0.95)
    reference = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=0.8, top_p=0.95, engine="generate")
    prompt = policy.encode(_conversation(2, seed=4))
    torch.manual_seed(11)
    [ours] = policy.generate_encoded([prompt])
    torch.manual_seed(11)
    [theirs] = reference.generate_encoded([prompt])
    assert len(ours.token_ids) > 10 and ours.token_ids == theirs.token_ids
    assert np.allclose(ours.logprobs, theirs.logprobs, atol=1e-4)


def test_a_groups_identical_prompts_are_prefilled_once(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=12, temperature=0.7)
    prompt = policy.encode(_conversation(2, seed=9))
    torch.manual_seed(5)
    gens = policy.generate_encoded([prompt] * 4, sessions=[("g", i) for i in range(4)])
    stats = policy.cached.stats
    assert stats["prefill_tokens"] == len(prompt.input_ids) and stats["shared_tokens"] == 3 * len(prompt.input_ids)
    assert len({tuple(g.token_ids) for g in gens}) > 1  # each row samples its own continuation from the shared cache
    # the live counters (read while a decode runs: benchmarks.gpu.gpu_step) end where the totals do
    assert stats["decoded_tokens"] == stats["generated_tokens"] == sum(len(g.token_ids) for g in gens)
    assert stats["decode_steps"] == max(len(g.token_ids) for g in gens)
    for i, gen in enumerate(gens):  # and each keeps a cache of its own: the next turn extends it
        follow = prompt.with_ids(gen.token_ids + policy.end_of_turn()[1:] + [301, 302])
        [nxt] = policy.generate_encoded([follow], sessions=[("g", i)], temperature=0.0)
        [fresh] = policy.generate_encoded([follow], temperature=0.0)
        assert nxt.token_ids == fresh.token_ids


def test_a_batch_of_unequal_rows_equals_each_row_alone(tiny_qwen3):
    """Rows right-aligned in one cache (left padding masked), leaving it as they end: the same tokens as alone."""
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=16, temperature=0.0)
    prompts = [policy.encode(_conversation(n, seed=n)) for n in (0, 4, 1, 2)]
    together = policy.generate_encoded(prompts)
    for prompt, gen in zip(prompts, together, strict=True):
        [alone] = policy.generate_encoded([prompt])
        assert alone.token_ids == gen.token_ids
        assert np.allclose(alone.logprobs, gen.logprobs, atol=1e-4)


def test_a_prompt_that_does_not_extend_the_cache_is_prefilled_from_where_it_differs(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.0)
    first = policy.encode(_conversation(2, seed=1))
    policy.generate_encoded([first], sessions=["k"])
    # Same token ids (same number and size of images), other pixels: nothing past the first image is reused.
    other = policy.encode(_conversation(2, seed=2))
    assert other.input_ids == first.input_ids
    before = dict(policy.cached.stats)
    [reused] = policy.generate_encoded([other], sessions=["k"])
    [fresh] = policy.generate_encoded([other])
    assert reused.token_ids == fresh.token_ids
    first_image = other.input_ids.index(policy.image_pad_id)
    assert policy.cached.stats["reused_tokens"] - before["reused_tokens"] == first_image


def test_each_distinct_image_goes_through_the_vision_tower_once_per_step(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=4, temperature=0.0)
    vision = policy.cached.vision
    if not vision.supported:
        pytest.skip("this transformers takes no precomputed image features")
    # four prompts that show the same overview under other questions
    policy.generate_encoded([policy.encode(_conversation(3, seed=7, question=f"Question {i}?")) for i in range(4)])
    assert (vision.stats["images"], vision.stats["encoded"]) == (12, 3)
    with torch.no_grad():  # an optimizer step changes the tower in place: its features are computed again
        next(policy.model.model.visual.parameters()).add_(1e-3)
    policy.generate_encoded([policy.encode(_conversation(3, seed=7))])
    assert vision.stats["encoded"] == 6
    policy.new_step()
    policy.generate_encoded([policy.encode(_conversation(3, seed=7))])
    assert vision.stats["encoded"] == 9


def test_turns_of_episodes_in_flight_are_generated_as_one_batch(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.0)
    prompts = [policy.encode(_conversation(n, seed=n)) for n in (1, 2, 3, 4)]
    alone = [policy.generate_encoded([p])[0].token_ids for p in prompts]
    results: dict[int, list[int]] = {}
    entered = threading.Barrier(len(prompts))

    def play(i: int) -> None:
        with policy.gather.episode():
            entered.wait()  # every episode is in flight before any asks for a turn
            results[i] = policy.generate_encoded([prompts[i]])[0].token_ids

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(len(prompts))] == alone
    assert policy.gather.batches[-1] == len(prompts)


def test_a_batch_begins_with_the_first_turn_and_closes_when_every_episode_in_flight_has_one_in_it(tiny_qwen3, monkeypatch):
    """The streamed gather: the first episode's prompt is prefilled while the others still step (here: sleep)
    before asking; the batch holds every episode's turn and gives what each prompt alone gives; an episode that
    ends while a batch is open does not hold it (its cache is dropped when the engine is free)."""
    import time

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=8, temperature=0.0)
    prompts = [policy.encode(_conversation(n, seed=n)) for n in (1, 2, 3)]
    alone = [policy.generate_encoded([p])[0].token_ids for p in prompts]
    events: list[tuple[str, int]] = []
    real = policy.cached._prefill

    def prefill(prompt, key, images):
        events.append(("prefill", next(i for i, p in enumerate(prompts) if p is prompt)))
        return real(prompt, key, images)

    monkeypatch.setattr(policy.cached, "_prefill", prefill)
    entered = threading.Barrier(len(prompts) + 1)
    results: dict[int, list[int]] = {}

    def play(i: int) -> None:
        with policy.gather.episode():
            entered.wait()
            time.sleep(0.3 * i)  # episode i's env step takes 0.3 i s
            events.append(("ask", i))
            results[i] = policy.generate_encoded([prompts[i]], sessions=[("ep", i)])[0].token_ids

    def ends_early() -> None:  # an episode in flight that finishes instead of asking
        with policy.gather.episode():
            entered.wait()
            time.sleep(0.1)
            policy.end_sessions([("gone", 0)])

    threads = [threading.Thread(target=play, args=(i,)) for i in range(len(prompts))]
    threads.append(threading.Thread(target=ends_early))
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert time.monotonic() - started < policy.gather.max_wait_s + 1.5  # nobody waited out the gather's deadline
    assert [results[i] for i in range(len(prompts))] == alone
    assert policy.gather.batches[-1] == len(prompts)
    assert events.index(("prefill", 0)) < events.index(("ask", 2))  # the first prompt went in before the last asked
    assert ("ep", 0) in policy.cached.sessions and not policy._ended


def test_a_failed_batch_raises_in_every_episode_whose_turn_it_held(tiny_qwen3):
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=4, temperature=0.0)
    bad = policy.encode(_conversation(1))
    bad.input_ids = bad.input_ids[:-3] + [policy.image_pad_id] * 3  # pads without pixels: the forward pass fails
    errors: list[BaseException] = []
    entered = threading.Barrier(2)

    def play(prompt) -> None:
        with policy.gather.episode():
            entered.wait()
            try:
                policy.generate_encoded([prompt])
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    threads = [threading.Thread(target=play, args=(p,)) for p in (bad, policy.encode(_conversation(0)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    # the bad turn's batch raised in each episode whose turn it held: both turns in it, or the other's in the next
    assert (len(errors) == 2 and policy.gather.batches == [2]) or (len(errors) == 1 and policy.gather.batches == [1, 1])


def test_prompts_that_arrive_one_at_a_time_give_what_the_whole_list_gives(tiny_qwen3):
    """``generate_as_ready``: each prompt prefilled as it arrives (here: late, from a slow producer), the batch
    decoded after the last, the same draws and log-probs as ``generate_encoded`` of the list from the same seed;
    a subclass with its own ``generate_encoded`` is asked for the list."""
    import time

    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=16, temperature=0.9)
    prompts = [policy.encode(_conversation(2, seed=s)) for s in (1, 1, 2, 3)]  # two identical: prefilled once
    keys = [("a", i) for i in range(4)]
    torch.manual_seed(5)
    whole = policy.generate_encoded(prompts, sessions=keys)
    policy.new_step()

    def slowly():
        for p, k in zip(prompts, keys, strict=True):
            time.sleep(0.02)
            yield p, k

    torch.manual_seed(5)
    arrived = policy.generate_as_ready(slowly())
    assert [g.token_ids for g in arrived] == [g.token_ids for g in whole]
    assert [g.logprobs for g in arrived] == [g.logprobs for g in whole]
    assert [g.prompt_tokens for g in arrived] == [len(p.input_ids) for p in prompts]

    class Own(HFPolicy):
        def __init__(self, base):
            self.__dict__.update(base.__dict__)
            self.asked = []

        def generate_encoded(self, prompts, **kw):
            self.asked.append((len(prompts), kw.get("sessions")))
            return ["x"] * len(prompts)

    own = Own(policy)
    assert own.generate_as_ready(iter(zip(prompts[:2], keys[:2], strict=True))) == ["x", "x"]
    assert own.asked == [(2, keys[:2])]
