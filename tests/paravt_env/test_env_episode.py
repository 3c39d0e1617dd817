import json
import threading

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import paravt_env
from paravt_env import EnvConfig, RewardConfig, VideoToolEnv
from paravt_env.protocol import count_placeholders


def call(a, b, **extra):
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": a, "end_time": b, **extra}}) + "</tool_call>"


def windows(sample, n):
    d = sample.duration
    return [(d * i / n, d * i / n + min(8.0, d / n)) for i in range(n)]


@pytest.fixture
def samples(synth_small):
    return synth_small[1]


def test_make_with_a_path_and_with_samples(synth_small):
    data, samples = synth_small
    env = gymnasium.make(paravt_env.ENV_ID, samples=str(data), frame_budget=4)
    obs, info = env.reset(seed=0)
    assert obs["frames"].shape[0] == 4 and info["frame_budget"] == 4
    env.close()
    env = gymnasium.make(paravt_env.ENV_ID, samples=samples[:2], dispatch="sequential")
    assert env.unwrapped.config.dispatch == "sequential" and len(env.unwrapped.samples) == 2
    env.close()


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_check_env_passes(samples, render_mode):
    env = gymnasium.make(paravt_env.ENV_ID, samples=samples[:3], frame_budget=4, crop_max_frames=4, render_mode=render_mode)
    check_env(env.unwrapped, skip_render_check=render_mode is None)
    env.close()


def test_reset_shows_question_and_k_overview_frames(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=6))
    s = samples[0]
    obs, info = env.reset(options={"index": 0})
    assert obs["frames"].shape[0] == 6 == len(obs["timestamps"]) == count_placeholders(obs["text"])
    assert obs["frames"].dtype == np.uint8 and obs["frames"].shape[-1] == 3
    ts = obs["timestamps"]
    assert np.all(np.diff(ts) > 0) and ts[0] >= 0 and ts[-1] <= s.duration
    assert s.question in obs["text"] and all(o in obs["text"] for o in s.options)
    assert f"<{ts[0]:.1f} seconds><image>" in obs["text"]
    assert info["frame_budget"] == 6 and info["sample_id"] == s.id
    obs, info = env.reset(options={"index": 0, "frame_budget": 3})
    assert obs["frames"].shape[0] == 3 and info["frame_budget"] == 3
    assert env.observation_space.contains(obs)


def test_parallel_dispatch_runs_up_to_max_parallel_crops(samples):
    s = samples[1]
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, max_parallel=5))
    env.reset(options={"index": 1})
    wins = windows(s, 7)
    obs, reward, term, trunc, info = env.step("<think>Seven windows at once.</think>" + "".join(call(a, b) for a, b in wins))
    assert info["tool_calls"] == {"requested": 7, "executed": 5, "rejected": 2, "failed": 0}
    assert reward == 0.0 and not term and not trunc
    assert obs["text"].count("<tool_response>") == 7 and "at most 5 crops run per turn" in obs["text"]
    assert len(obs["frames"]) == len(obs["timestamps"]) == count_placeholders(obs["text"]) > 0
    for t in obs["timestamps"]:
        assert any(a <= t <= b for a, b in wins[:5])


def test_sequential_dispatch_runs_only_the_first_crop(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, dispatch="sequential"))
    env.reset(options={"index": 1})
    wins = windows(samples[1], 3)
    obs, _, _, _, info = env.step("".join(call(a, b) for a, b in wins))
    assert info["tool_calls"] == {"requested": 3, "executed": 1, "rejected": 2, "failed": 0}
    assert obs["text"].count("sequential dispatch runs one crop per turn") == 2
    assert all(wins[0][0] <= t <= wins[0][1] for t in obs["timestamps"])


def test_answer_terminates_and_scores(samples):
    s = next(x for x in samples if x.question_type == "mcq")
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    env.reset(options={"sample": s})
    _, reward, term, trunc, info = env.step(f"<think>I can tell from the frames.</think><answer>{s.answer}</answer>")
    assert term and not trunc
    bd = info["reward_breakdown"]
    assert reward == bd["total"] and bd["accuracy"] == 1.0 and set(bd) == {"total", "accuracy", "format", "tool"}
    assert info["prediction"] == s.answer == info["ground_truth"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>A</answer>")


def test_no_tool_call_and_no_answer_terminates(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    env.reset(options={"index": 0})
    _, _, term, trunc, info = env.step("I am not sure what to do.")
    assert term and not trunc and "reward_breakdown" in info


def test_running_out_of_turns_truncates_and_last_turn_asks_for_the_answer(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, max_turns=2))
    env.reset(options={"index": 0})
    obs, r, term, trunc, info = env.step(call(1, 5))
    assert not (term or trunc) and r == 0.0
    assert "This is your last turn" in obs["text"] and "<answer>" in obs["text"]
    obs, r, term, trunc, info = env.step(call(5, 9))
    assert trunc and not term and info["tool_calls"]["rejected"] == 1
    assert info["reward_breakdown"]["accuracy"] == 0.0


def test_render_grows_with_the_crops_seen(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4), render_mode="rgb_array")
    env.reset(options={"index": 0})
    first = env.render()
    env.step(call(0, 10) + call(10, 20))
    second = env.render()
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    assert second.size > first.size
    assert VideoToolEnv(samples, EnvConfig(frame_budget=4)).render() is None


def test_subagent_mode_sends_frames_and_returns_summaries(samples):
    seen = []

    def subagent(request):
        seen.append(request)
        return f"I saw {len(request.frames)} frames between {request.start:.0f} and {request.end:.0f}."

    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=subagent))
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(call(2, 10) + call(20, 30))
    assert info["tool_calls"]["executed"] == 2 and len(seen) == 2
    for req, (a, b) in zip(sorted(seen, key=lambda r: r.start), [(2, 10), (20, 30)], strict=True):
        assert len(req.frames) > 0 and all(a <= t <= b for t in req.frames.timestamps)
        assert samples[0].question in req.question
    assert "sub-agent summary: I saw" in obs["text"]
    assert obs["frames"].shape[0] == 0 == count_placeholders(obs["text"])


def test_subagent_calls_run_concurrently(samples):
    barrier = threading.Barrier(3, timeout=20)

    def subagent(request):
        barrier.wait()  # deadlocks (then raises) unless all three summaries are in flight together
        return "ok"

    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=subagent))
    env.reset(options={"index": 0})
    _, _, _, _, info = env.step(call(0, 5) + call(5, 10) + call(10, 15))
    assert info["tool_calls"]["executed"] == 3 and info["tool_calls"]["failed"] == 0


def test_batch_subagent_and_failing_subagent(samples):
    class Batch:
        def __call__(self, request):  # pragma: no cover - batch() is preferred
            raise AssertionError("batch() should be used")

        def batch(self, requests):
            return [f"summary {i}" for i in range(len(requests))]

    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=Batch()))
    env.reset(options={"index": 0})
    obs, *_ = env.step(call(0, 5) + call(5, 10))
    assert "summary 0" in obs["text"] and "summary 1" in obs["text"]

    def broken(request):
        raise ConnectionError("server down")

    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=broken))
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(call(0, 5))
    assert info["tool_calls"]["failed"] == 1 and "server down" in obs["text"]


def test_config_and_reset_errors_name_the_option(samples):
    with pytest.raises(TypeError, match="'dispach'"):
        VideoToolEnv(samples, dispach="parallel")
    with pytest.raises(ValueError, match="dispatch"):
        EnvConfig(dispatch="sideways")
    with pytest.raises(ValueError, match="max_turns"):
        EnvConfig(max_turns=0)
    with pytest.raises(ValueError, match="subagent"):
        EnvConfig(tool_result="subagent")
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    with pytest.raises(ValueError, match="'idx'"):
        env.reset(options={"idx": 0})
    with pytest.raises(IndexError):
        env.reset(options={"index": 99})


def test_executed_tool_source_credits_crops_the_env_ran(samples):
    s = next(x for x in samples if x.question_type == "mcq")
    cfg = RewardConfig(True, 0.5, 1.0, "f1", tool_source="executed")
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, reward=cfg))
    env.reset(options={"sample": s})
    env.step("<think>Let me look closer.</think>" + call(0, 5))
    _, _, _, _, info = env.step(f"<think>Now I know the answer.</think><answer>{s.answer}</answer>")
    assert info["executed_tool_calls"] == 1 and info["reward_breakdown"]["tool"] == pytest.approx(0.8)
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))  # released behaviour: no <tool_response> written
    env.reset(options={"sample": s})
    env.step("<think>Let me look closer.</think>" + call(0, 5))
    _, _, _, _, info = env.step(f"<think>Now I know the answer.</think><answer>{s.answer}</answer>")
    assert info["reward_breakdown"]["tool"] == pytest.approx(0.6)
