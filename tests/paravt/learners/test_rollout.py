import numpy as np
import pytest

torch = pytest.importorskip("torch")

from paravt.learners.rollout import run_episode, run_group  # noqa: E402
from paravt.learners.trajectory import struct_positions  # noqa: E402
from paravt.policies.hf import HFPolicy  # noqa: E402
from paravt_env import EnvConfig, VideoToolEnv, gated_frame_budget  # noqa: E402
from paravt_env.messages import Message  # noqa: E402
from paravt_env.tools import PENDING_SUBAGENT  # noqa: E402


class ScriptedTurns(HFPolicy):
    """The tiny model's own tokenizer and weights, but turns chosen by a script (so episodes reach tool
    calls and answers): the script's text is tokenised and teacher-forced through the model for its log-probs."""

    def __init__(self, base: HFPolicy, turns: list[str]) -> None:
        self.__dict__.update(base.__dict__)
        self.turns = turns

    def generate_encoded(self, prompts, **overrides):
        from paravt.policies.base import Generation

        out = []
        for p in prompts:
            turn = self.turns[min(self._turn_of(p), len(self.turns) - 1)]
            ids = self.tokenizer.encode(turn, add_special_tokens=False) + [self.end_of_turn_id]
            with torch.no_grad():
                lp = self.sequence_logprobs(p.with_ids(ids))[len(p.input_ids) - 1 :]
            out.append(Generation(text=turn, token_ids=ids, logprobs=lp.tolist()))
        return out

    def _turn_of(self, encoded) -> int:
        start = self.tokenizer.convert_tokens_to_ids("<|im_start|>")
        assistant = self.tokenizer.encode("assistant", add_special_tokens=False)
        ids = encoded.input_ids
        return sum(1 for i in range(len(ids) - len(assistant)) if ids[i] == start and ids[i + 1 : i + 1 + len(assistant)] == assistant) - 1


TURNS = [
    '<think>Two windows at once.</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 9}}</tool_call>'
    '<tool_call>{"name": "crop_video", "arguments": {"start_time": 20, "end_time": 27}}</tool_call>',
    "<think>I saw enough of the video.</think><answer>A</answer>",
]


def test_trajectory_masks_and_tokens(tiny_qwen3, synth_small):
    _, samples = synth_small
    base = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=32, temperature=1.0)
    policy = ScriptedTurns(base, TURNS)
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, max_turns=3))
    tr = run_episode(env, policy, options={"index": 0})
    assert tr.turns == 2 and tr.tool_calls == 2 and tr.frame_budget == 4
    assert len(tr.input_ids) == len(tr.loss_mask) == len(tr.logprobs) == len(tr.struct_mask)
    tok = base.tokenizer
    generated = [t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if m]
    assert tok.decode(generated).replace("<|im_end|>", "") == "".join(TURNS)
    # tool responses and prompts are never trained on; every image of the episode is in the sequence
    assert tr.encoded.n_images == 4 + int(tr.encoded.n_images - 4)
    pads = tr.input_ids.count(tok.convert_tokens_to_ids("<|image_pad|>"))
    assert pads == sum(int(np.prod(g)) // 4 for g in tr.encoded.image_grid_thw.tolist())
    assert "<tool_response>" in tok.decode([t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if not m])
    # structural tags of the generated turns: <think></think><tool_call></tool_call> x2, then think + answer
    struct = [tok.decode([t]) for t, s in zip(tr.input_ids, tr.struct_mask, strict=True) if s]
    assert struct == ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_call>", "</tool_call>",
                      "<think>", "</think>", "<answer>", "</answer>"]  # fmt: skip
    assert all(m for m, s in zip(tr.loss_mask, tr.struct_mask, strict=True) if s)
    # the whole sequence runs through the model, and the behaviour log-probs are its own
    with torch.no_grad():
        lp = base.sequence_logprobs(tr.encoded)
    mask = torch.tensor(tr.loss_mask[1:], dtype=torch.bool)
    assert np.allclose(lp.cpu()[mask].numpy(), np.array(tr.logprobs[1:])[mask.numpy()], atol=1e-4)
    assert tr.breakdown["format"] > 0 and tr.reward == pytest.approx(sum([tr.breakdown["accuracy"], tr.breakdown["format"], tr.breakdown["tool"]]))


def test_group_shares_the_gated_budget_and_generates_in_batches(tiny_qwen3, synth_small):
    _, samples = synth_small
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=1.0)
    envs = [VideoToolEnv(samples, EnvConfig(nframes_gating=True, max_turns=2)) for _ in range(3)]
    torch.manual_seed(0)
    group = run_group(envs, policy, options={"index": 2, "epoch": 5})
    k = gated_frame_budget(samples[2].id, 5, 0)
    assert [t.frame_budget for t in group] == [k] * 3
    assert all(t.sample_id == samples[2].id and t.epoch == 5 for t in group)
    assert len({tuple(t.input_ids) for t in group}) > 1  # sampled, not copied


def test_subagent_mode_uses_the_policy_itself(tiny_qwen3, synth_small):
    _, samples = synth_small
    base = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=16, temperature=0.0)
    policy = ScriptedTurns(base, TURNS)
    # PENDING_SUBAGENT: run_episode supplies the weight-sharing sub-agent (env.set_subagent)
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=PENDING_SUBAGENT))
    tr = run_episode(env, policy, options={"index": 0})
    text = base.tokenizer.decode([t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if not m])
    assert text.count("sub-agent summary:") == 2 and tr.encoded.n_images == 4
    # the sub-agent's own generations are kept apart, one single-turn trajectory per crop, with its frames
    assert len(tr.subagent_trajectories) == 2
    for sub in tr.subagent_trajectories:
        assert len(sub.input_ids) == len(sub.loss_mask) == len(sub.logprobs) == len(sub.struct_mask)
        assert sub.encoded.n_images > 0 and sub.n_generated > 0
        assert all(np.isfinite(lp) for lp, m in zip(sub.logprobs, sub.loss_mask, strict=True) if m)


def test_struct_positions_finds_multi_token_patterns():
    assert struct_positions([5, 1, 2, 9, 1, 2, 1], [[1, 2], [9]]) == [0, 1, 1, 1, 1, 1, 0]


def test_release_protocol_rollout_keeps_the_listed_messages(tiny_qwen3, synth_small):
    _, samples = synth_small
    base = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=16, temperature=0.0)
    policy = ScriptedTurns(base, TURNS)
    # the weight-sharing sub-agent, prompted as released
    env = VideoToolEnv(samples, EnvConfig(protocol="release", tool_result="subagent", subagent=PENDING_SUBAGENT))
    tr = run_episode(env, policy, options={"index": 0})
    prompt_text = base.tokenizer.decode([t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if not m])
    assert prompt_text.count("<tool_response>") == 2 and "seconds>" in prompt_text
    # the two crop messages follow each other; the assistant is prompted once, after both
    assert "<|im_end|>\n<|im_start|>user\n<tool_response>" in base.tokenizer.decode(tr.input_ids)
    assert "<|im_start|>assistant\n<|im_start|>" not in base.tokenizer.decode(tr.input_ids)
    assert len(tr.subagent_trajectories) == 2
    sub_prompt = base.tokenizer.decode(tr.subagent_trajectories[0].input_ids)
    assert "You are analyzing a video segment from 00:02 to 00:09 (duration: 7.0 seconds)." in sub_prompt
    assert tr.turns == 2 and tr.reward == tr.reward  # scored


def test_a_step_of_several_prompts_is_one_batch_and_the_update_pass_matches_the_single_one(tiny_qwen3, synth_small):
    """``run_batch`` plays several prompts' groups together (every env its own options); the learner's batched,
    right-padded forward pass gives each trajectory the log-probs of its own forward pass, and a compacted
    trajectory (frames kept zlib-packed) gives the same pixels back."""
    from paravt.learners.rollout import run_batch

    _, samples = synth_small
    policy = ScriptedTurns(HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=1.0), TURNS)
    envs = [VideoToolEnv(samples, EnvConfig(frame_budget=4, crop_max_frames=4)) for _ in range(4)]
    options = [{"index": i} for i in (0, 0, 3, 3)]
    trajs = run_batch(envs, policy, options)
    assert [t.sample_id for t in trajs] == [samples[i].id for i in (0, 0, 3, 3)]
    assert all(t.tool_calls == 2 for t in trajs) and len({len(t) for t in trajs}) > 1  # unequal lengths: padding
    with torch.no_grad():
        single = [policy.sequence_logprobs(t.encoded) for t in trajs]
        batched = policy.batch_logprobs([t.encoded for t in trajs])
        compact = policy.batch_logprobs([t.encoded.compact() for t in trajs], micro_batch=3)
        # a token cap of two of the shortest: the longest goes alone, and the results stay in input order
        capped = policy.batch_logprobs([t.encoded for t in trajs], max_tokens=2 * min(len(t) for t in trajs))
    for s, b, c, k, t in zip(single, batched, compact, capped, trajs, strict=True):
        assert s.shape == b.shape == c.shape == k.shape == (len(t) - 1,)
        assert torch.allclose(s, b, atol=1e-4) and torch.allclose(s, c, atol=1e-4) and torch.allclose(s, k, atol=1e-4)
    packed = trajs[0].encoded.compact()
    assert packed.pixel_values is not None and torch.equal(packed.pixel_values, trajs[0].encoded.pixel_values)
    with pytest.raises(ValueError, match="options"):
        run_batch(envs, policy, options[:2])
    for env in envs:
        env.close()


def test_length_buckets_put_similar_lengths_together_under_the_row_and_token_caps():
    from paravt.policies.encoded import length_buckets

    lengths = [100, 900, 120, 880, 400, 3000]
    assert length_buckets(lengths) == [[5, 1, 3, 4, 2, 0]]  # no cap: one batch, longest first
    assert length_buckets(lengths, max_rows=2) == [[5, 1], [3, 4], [2, 0]]
    # 2,000 padded tokens: 3,000 alone (over the cap on its own), 900 + 880, then 400, 120, 100 (3 x 400)
    assert length_buckets(lengths, max_tokens=2000) == [[5], [1, 3], [4, 2, 0]]
    assert sorted(i for b in length_buckets(lengths, max_rows=1, max_tokens=1) for i in b) == list(range(6))


def test_generation_in_token_capped_batches_returns_each_prompt_its_own_continuation(tiny_qwen3, synth_small):
    """Greedy continuations are the same whether the prompts share one batch or go in length buckets."""
    _, samples = synth_small
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=6, temperature=0.0)
    envs = [VideoToolEnv(samples, EnvConfig(frame_budget=k)) for k in (2, 4, 8)]
    prompts = []
    for env, k in zip(envs, (2, 4, 8), strict=True):
        obs, info = env.reset(options={"index": k % len(samples)})
        prompts.append(policy.encode([Message("system", info["system_prompt"]), Message("user", info["user_prompt"], list(obs["frames"]))]))
        env.close()
    assert len({len(p.input_ids) for p in prompts}) == 3
    together = policy.generate_encoded(prompts)
    policy.batch_tokens = min(len(p.input_ids) for p in prompts)  # every prompt alone
    apart = policy.generate_encoded(prompts)
    assert [g.token_ids for g in together] == [g.token_ids for g in apart]


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_the_token_stream_matches_the_chat_template_at_every_turn_boundary(tiny_qwen3, finish):
    """A turn that ended on <|im_end|> is followed by the template's "\\n" before the next <|im_start|>, as
    apply_chat_template renders the same messages (the local stream had none: the model was trained on a
    boundary it is never shown at inference)."""
    from paravt.learners.trajectory import TrajectoryBuilder
    from paravt.policies.base import Generation
    from paravt.policies.hf import HFPolicy
    from paravt_env.messages import Message

    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0)
    tok = policy.tokenizer
    history = [Message("system", "You are a video analyst."), Message("user", "What colour is the shape?")]
    builder = TrajectoryBuilder(policy, policy.encode(history), list(history))
    reply = '<think>\nlook</think>\n<tool_call>\n{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}\n</tool_call>'
    ids = tok.encode(reply, add_special_tokens=False)
    if finish == "stop":
        ids = ids + tok.encode("<|im_end|>", add_special_tokens=False)
    builder.add_turn(Generation(text=reply, token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish))
    builder.add_feedback([Message("user", "<tool_response>\nnothing\n</tool_response>")])
    expected = policy.render(builder.history, add_generation_prompt=True)
    assert tok.decode(builder.encoded.input_ids) == expected
    generated = [i for i, m in enumerate(builder.loss_mask) if m]
    assert tok.decode([builder.encoded.input_ids[i] for i in generated]) == tok.decode(ids)  # only the model's tokens


def test_rollouts_through_serve_env_equal_in_process(tiny_qwen3, synth_small, start_env_server):
    """The learners' own rollouts (``run_group``, batched generation) run unchanged on ``RemoteVideoToolEnv``:
    greedy, the same token ids, masks, rewards as with ``VideoToolEnv``."""
    from paravt.learners.rollout import run_group
    from paravt.policies.hf import HFPolicy
    from paravt_env import VideoToolEnv
    from paravt_env.remote import RemoteVideoToolEnv

    samples = synth_small[1][:2]
    server = start_env_server(samples)
    policy = HFPolicy.from_pretrained(tiny_qwen3, temperature=0.0, max_new_tokens=24)
    options = {"frame_budget": 4, "max_pixels": 12544}
    for i in range(len(samples)):
        local = run_group([VideoToolEnv(samples, **options) for _ in range(2)], policy, options={"index": i})
        remote_envs = [RemoteVideoToolEnv(server.url, **options) for _ in range(2)]
        remote = run_group(remote_envs, policy, options={"index": i})
        for a, b in zip(local, remote, strict=True):
            assert (a.input_ids, a.loss_mask, a.reward, a.breakdown, a.turns) == (b.input_ids, b.loss_mask, b.reward, b.breakdown, b.turns)
        for env in remote_envs:
            env.close()


@pytest.mark.parametrize("scripted", [False, True], ids=["sampled", "scripted_two_turns"])
def test_envs_beside_the_generation_give_the_episodes_of_envs_before_it(tiny_qwen3, synth_small, monkeypatch, scripted):
    """``run_batch`` runs the envs on a thread of their own (``continuing``), each next prompt prefilled as it
    comes; with the envs run first in the caller's thread, a step from the same seed is the same, token for token
    and log-prob for log-prob: the random model's sampled first turns, and scripted episodes that crop and then
    answer (the second turn's envs beside the generation)."""
    import paravt.learners.rollout as rollout

    _, samples = synth_small
    policy = HFPolicy.from_pretrained(tiny_qwen3, max_new_tokens=24, temperature=1.0)
    if scripted:
        policy = ScriptedTurns(policy, TURNS)
    options = [{"index": i} for i in (0, 0, 1, 1, 3)]
    runs = {}

    def before(work, order):  # every env's work first, in the caller's thread
        yield from [i for i in order if work(i)]

    for beside in (True, False):
        if not beside:
            monkeypatch.setattr(rollout, "continuing", before)
        envs = [VideoToolEnv(samples, EnvConfig(frame_budget=4, crop_max_frames=4, max_turns=3)) for _ in options]
        torch.manual_seed(3)
        runs[beside] = rollout.run_batch(envs, policy, options)
        for env in envs:
            env.close()
    for a, b in zip(runs[True], runs[False], strict=True):
        assert a.input_ids == b.input_ids and a.logprobs == b.logprobs and a.loss_mask == b.loss_mask
        assert a.reward == b.reward and a.turn_texts == b.turn_texts
    assert all(t.turns == (2 if scripted else 1) for t in runs[True])
    assert len({tuple(t.input_ids) for t in runs[True]}) == (3 if scripted else 5)  # sampled rows all differ


def test_continuing_yields_in_order_what_goes_on_and_raises_what_failed():
    import threading
    import time

    from paravt.learners.rollout import continuing

    where = []

    def work(i):
        where.append(threading.current_thread().name)
        time.sleep(0.01)
        return i % 2 == 0

    assert list(continuing(work, [4, 1, 2, 7, 0])) == [4, 2, 0]
    assert set(where) == {"paravt-rollout-envs"}

    def broken(i):
        if i == 2:
            raise RuntimeError("env 2 failed")
        return True

    seen = []
    with pytest.raises(RuntimeError, match="env 2 failed"):
        seen.extend(continuing(broken, [0, 1, 2, 3]))
    assert seen == [0, 1]
    started = []

    def slow(i):
        started.append(i)
        time.sleep(0.02)
        return True

    stream = continuing(slow, list(range(50)))
    assert next(stream) == 0
    stream.close()  # a reader that stops: the thread stops after the env it is in
    n = len(started)
    time.sleep(0.1)
    assert len(started) == n < 50

