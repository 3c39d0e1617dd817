"""VideoToolEnv episodes: make/check_env, reset, parallel and sequential dispatch, endings, rewards, render,
sub-agents, and option errors (the issue's acceptance criteria)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import paravt_env
import paravt_env.tools.dispatch as dispatch_module
from paravt_env import FRAME_BUDGETS, EnvConfig, RewardConfig, VideoToolEnv
from paravt_env.protocol import count_placeholders
from paravt_env.tools import SubAgentRequest

FINAL_KEYS = {"reward_breakdown", "prediction", "ground_truth", "executed_tool_calls"}
STEP_KEYS = {"turn", "frame_budget", "tool_calls", "parse_problems", "timing"}


def call(start, end, **extra) -> str:
    arguments = {"start_time": start, "end_time": end, **extra}
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": arguments}) + "</tool_call>"


def disjoint_windows(duration: float, n: int, length: float = 6.0) -> list[tuple[float, float]]:
    """``n`` non-overlapping windows of ``length`` seconds spread over the video."""
    step = duration / n
    assert step > length
    return [(round(i * step + 1.0, 1), round(i * step + 1.0 + length, 1)) for i in range(n)]


def frames_per_response(text: str, timestamps: np.ndarray) -> list[np.ndarray]:
    """Split an observation's timestamps by ``<tool_response>`` block (frames follow the placeholders' order)."""
    blocks = re.findall(r"<tool_response>(.*?)</tool_response>", text, re.DOTALL)
    out, pos = [], 0
    for block in blocks:
        n = count_placeholders(block)
        out.append(timestamps[pos : pos + n])
        pos += n
    assert pos == len(timestamps)
    return out


def assert_consistent(env: VideoToolEnv, obs: dict) -> None:
    assert env.observation_space.contains(obs)
    assert obs["frames"].dtype == np.uint8 and obs["frames"].ndim == 4 and obs["frames"].shape[-1] == 3
    assert obs["timestamps"].dtype == np.float64
    assert len(obs["frames"]) == len(obs["timestamps"]) == count_placeholders(obs["text"])


# --- construction ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["directory", "jsonl", "pathlike"])
def test_make_with_a_path(env_dataset, which):
    data, samples = env_dataset
    path = {"directory": str(data), "jsonl": str(data / "samples.jsonl"), "pathlike": data / "samples.jsonl"}[
        which
    ]
    env = gymnasium.make(paravt_env.ENV_ID, samples=path, frame_budget=4)
    try:
        assert isinstance(env.unwrapped, VideoToolEnv)
        assert [s.id for s in env.unwrapped.samples] == [s.id for s in samples]
        obs, info = env.reset(seed=0)
        assert obs["frames"].shape[0] == 4 and info["frame_budget"] == 4
        assert info["sample_id"] in {s.id for s in samples}
    finally:
        env.close()


def test_make_with_a_list_of_samples_or_dicts(env_samples):
    env = gymnasium.make(paravt_env.ENV_ID, samples=env_samples[:2], dispatch="sequential", max_turns=4)
    try:
        cfg = env.unwrapped.config
        assert cfg.dispatch == "sequential" and cfg.max_turns == 4 and len(env.unwrapped.samples) == 2
        obs, info = env.reset(options={"index": 1})
        assert info["sample_id"] == env_samples[1].id
    finally:
        env.close()
    env = VideoToolEnv([s.to_dict() for s in env_samples[:2]], EnvConfig(frame_budget=4))
    assert env.samples == env_samples[:2]
    single = VideoToolEnv(env_samples[3], frame_budget=4)
    assert single.samples == [env_samples[3]]
    with pytest.raises(ValueError, match="at least one sample"):
        VideoToolEnv([])
    with pytest.raises(TypeError, match="samples"):
        VideoToolEnv(42)


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_check_env_passes(env_samples, render_mode):
    env = gymnasium.make(
        paravt_env.ENV_ID, samples=env_samples[:3], frame_budget=4, crop_max_frames=4, render_mode=render_mode
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped, skip_render_check=render_mode is None)
        gym_warnings = [str(w.message) for w in caught if "gymnasium" in w.filename]
        assert gym_warnings == []
    finally:
        env.close()
    with pytest.raises(ValueError, match="render_mode"):
        VideoToolEnv(env_samples, render_mode="human")


# --- reset ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", FRAME_BUDGETS)
def test_reset_shows_question_options_and_k_overview_frames(env_samples, k):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=k))
    for i, s in enumerate(env_samples):
        obs, info = env.reset(options={"index": i})
        assert_consistent(env, obs)
        assert obs["frames"].shape[0] == k == len(obs["timestamps"]) == count_placeholders(obs["text"])
        ts = obs["timestamps"]
        assert np.all(np.diff(ts) > 0), ts
        assert ts[0] >= 0 and ts[-1] <= s.duration
        # Uniform overview: frame j lies in the j-th of k equal segments of the video.
        seg = s.duration / k
        assert np.all(ts >= np.arange(k) * seg - 1e-6) and np.all(ts <= (np.arange(k) + 1) * seg + 1e-6)
        text = obs["text"]
        markers = [f"<{t:.1f} seconds><image>" for t in ts]
        positions = [text.find(m) for m in markers]
        assert all(p >= 0 for p in positions) and positions == sorted(positions)
        assert s.question in text and all(o in text for o in s.options)
        assert info["frame_budget"] == k and info["sample_id"] == s.id and info["turn"] == 0
        assert info["question_type"] == s.question_type and info["duration"] == pytest.approx(s.duration)
    env.close()


def test_reset_option_frame_budget_overrides_the_config(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=8))
    obs, info = env.reset(options={"index": 2, "frame_budget": 3})
    assert obs["frames"].shape[0] == 3 == count_placeholders(obs["text"]) and info["frame_budget"] == 3
    obs, info = env.reset(options={"index": 2})
    assert obs["frames"].shape[0] == 8 and info["frame_budget"] == 8
    obs, info = env.reset(options={"sample": env_samples[1], "frame_budget": 5, "epoch": 2})
    assert obs["frames"].shape[0] == 5 and info["epoch"] == 2 and info["sample_id"] == env_samples[1].id
    assert env.observation_space.contains(obs)


def test_reset_seed_picks_reproducibly(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    ids = [env.reset(seed=s)[1]["sample_id"] for s in range(8)]
    assert ids == [env.reset(seed=s)[1]["sample_id"] for s in range(8)]
    assert len(set(ids)) > 1


# --- dispatch -------------------------------------------------------------------------------------------
def test_parallel_dispatch_runs_up_to_max_parallel_crops(env_samples):
    s = env_samples[1]
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_parallel=5))
    env.reset(options={"index": 1})
    wins = disjoint_windows(s.duration, 7)
    obs, reward, term, trunc, info = env.step(
        "<think>Seven windows.</think>" + "".join(call(a, b) for a, b in wins)
    )
    assert info["tool_calls"] == {"requested": 7, "executed": 5, "rejected": 2, "failed": 0}
    assert reward == 0.0 and not term and not trunc and info["turn"] == 1
    assert set(info) >= STEP_KEYS and not FINAL_KEYS & set(info)
    assert_consistent(env, obs)
    text = obs["text"]
    assert text.count("<tool_response>") == 7 == text.count("</tool_response>")
    assert text.count("not executed: at most 5 crops run per turn") == 2
    assert "crop_video call #6 rejected" in text and "crop_video call #7 rejected" in text
    per_call = frames_per_response(text, obs["timestamps"])
    for (a, b), ts in zip(wins[:5], per_call[:5], strict=True):
        assert len(ts) > 0 and np.all((ts >= a) & (ts <= b)), (a, b, ts)
    assert all(len(ts) == 0 for ts in per_call[5:])


def test_parallel_crops_decode_concurrently(env_samples, monkeypatch):
    barrier = threading.Barrier(5, timeout=20)
    threads = set()
    real = dispatch_module.execute_crop

    def together(*args, **kwargs):
        threads.add(threading.get_ident())
        barrier.wait()  # a sequential executor would break the barrier after its timeout: the crop fails
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatch_module, "execute_crop", together)
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_parallel=5))
    env.reset(options={"index": 3})
    wins = disjoint_windows(env_samples[3].duration, 5)
    _, _, _, _, info = env.step("".join(call(a, b) for a, b in wins))
    assert info["tool_calls"] == {"requested": 5, "executed": 5, "rejected": 0, "failed": 0}
    assert len(threads) == 5


def test_sequential_dispatch_runs_only_the_first_crop(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, dispatch="sequential", max_turns=4))
    env.reset(options={"index": 1})
    wins = disjoint_windows(env_samples[1].duration, 3)
    obs, reward, term, trunc, info = env.step("".join(call(a, b) for a, b in wins))
    assert info["tool_calls"] == {"requested": 3, "executed": 1, "rejected": 2, "failed": 0}
    assert reward == 0.0 and not term and not trunc
    assert (
        obs["text"].count("sequential dispatch runs one crop per turn; request it again in your next turn")
        == 2
    )
    per_call = frames_per_response(obs["text"], obs["timestamps"])
    a, b = wins[0]
    assert len(per_call[0]) > 0 and np.all((per_call[0] >= a) & (per_call[0] <= b))
    # The next turn runs the next crop.
    obs, _, _, _, info = env.step("".join(call(a, b) for a, b in wins[1:]))
    assert info["tool_calls"] == {"requested": 2, "executed": 1, "rejected": 1, "failed": 0}
    a, b = wins[1]
    assert np.all((obs["timestamps"] >= a) & (obs["timestamps"] <= b))


# --- endings and reward ---------------------------------------------------------------------------------
def test_correct_answer_terminates_with_accuracy_one(env_samples, mcq_sample):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    env.reset(options={"sample": mcq_sample})
    obs, reward, term, trunc, info = env.step(
        f"<think>The frames show it.</think><answer>{mcq_sample.answer}</answer>"
    )
    assert term and not trunc
    bd = info["reward_breakdown"]
    assert set(bd) == {"total", "accuracy", "format", "tool"} and set(info) >= FINAL_KEYS
    assert reward == bd["total"] and bd["accuracy"] == 1.0
    assert bd["total"] == pytest.approx(bd["accuracy"] + bd["format"] + bd["tool"])
    assert info["prediction"] == mcq_sample.answer == info["ground_truth"]
    assert info["executed_tool_calls"] == 0 and info["tool_calls"]["requested"] == 0
    assert obs["frames"].shape[0] == 0 and env.observation_space.contains(obs)


def test_open_ended_answer_and_a_wrong_answer(env_samples, mcq_sample):
    oe = next(s for s in env_samples if s.question_type == "oe")
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    env.reset(options={"sample": oe})
    _, reward, term, _, info = env.step(f"<think>Seen it.</think><answer>{oe.answer}</answer>")
    assert (
        term and info["reward_breakdown"]["accuracy"] == 1.0 and reward == info["reward_breakdown"]["total"]
    )
    wrong = next(letter for letter in "ABCD" if letter != mcq_sample.answer)
    env.reset(options={"sample": mcq_sample})
    _, reward, term, _, info = env.step(f"<think>A guess.</think><answer>{wrong}</answer>")
    assert (
        term and info["reward_breakdown"]["accuracy"] == 0.0 and reward == info["reward_breakdown"]["total"]
    )


def test_an_answer_beside_tool_calls_ends_the_episode_without_running_them(env_samples, mcq_sample):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    env.reset(options={"sample": mcq_sample})
    _, _, term, trunc, info = env.step(call(1, 5) + call(5, 9) + f"<answer>{mcq_sample.answer}</answer>")
    assert term and not trunc
    assert info["tool_calls"] == {"requested": 2, "executed": 0, "rejected": 2, "failed": 0}
    assert info["executed_tool_calls"] == 0


def test_a_turn_without_calls_or_answer_terminates(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step("<think>I am not sure what to do.</think>")
    assert term and not trunc and set(info) >= FINAL_KEYS
    assert reward == info["reward_breakdown"]["total"] and info["reward_breakdown"]["accuracy"] == 0.0
    assert info["ground_truth"] == env_samples[0].answer and info["executed_tool_calls"] == 0


def test_running_out_of_turns_truncates(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_turns=2))
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(call(1, 5))
    assert not term and not trunc and reward == 0.0 and info["tool_calls"]["executed"] == 1
    # On the last allowed turn the feedback asks for the final answer in the question type's format.
    assert "This is your last turn: no more tool calls." in obs["text"]
    assert "Answer with a short phrase" in obs["text"]  # sample 0 is open-ended
    obs, reward, term, trunc, info = env.step(call(5, 9))
    assert trunc and not term
    assert info["tool_calls"] == {"requested": 1, "executed": 0, "rejected": 1, "failed": 0}
    assert reward == info["reward_breakdown"]["total"] and info["executed_tool_calls"] == 1
    assert info["reward_breakdown"]["accuracy"] == 0.0 and info["turn"] == 2
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>A</answer>")


def test_turn_prompts_count_down_and_only_the_last_asks_for_the_answer(env_samples, mcq_sample):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_turns=3))
    env.reset(options={"sample": mcq_sample})
    obs, *_ = env.step(call(1, 5))
    assert "You have 2 turns left" in obs["text"] and "last turn" not in obs["text"]
    obs, *_ = env.step(call(5, 9))
    assert (
        "This is your last turn" in obs["text"]
        and "Answer with the letter of the correct option" in obs["text"]
    )
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_turns=2, force_final_answer=False))
    env.reset(options={"sample": mcq_sample})
    obs, *_ = env.step(call(1, 5))
    assert "last turn" not in obs["text"]


def test_reward_is_zero_until_the_end_and_step_needs_reset(env_samples, mcq_sample):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_turns=3))
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>A</answer>")
    env.reset(options={"sample": mcq_sample})
    rewards = [env.step(call(1 + 5 * t, 5 + 5 * t))[1] for t in range(2)]
    assert rewards == [0.0, 0.0]
    _, reward, term, _, info = env.step(f"<answer>{mcq_sample.answer}</answer>")
    assert term and reward == info["reward_breakdown"]["total"] > 0
    with pytest.raises(RuntimeError):
        env.step("<answer>A</answer>")
    env.reset(options={"sample": mcq_sample})  # a new episode starts cleanly
    assert env.agent_text == ""
    _, _, term, _, _ = env.step("<answer>A</answer>")
    assert term


def test_executed_tool_source_credits_crops_the_env_ran(env_samples, mcq_sample):
    executed = dataclasses.replace(RewardConfig.paravt(), tool_source="executed")

    def episode(reward_config, first_turn, answer=mcq_sample.answer):
        env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, reward=reward_config))
        env.reset(options={"sample": mcq_sample})
        env.step("<think>Let me look closer.</think>" + first_turn)
        return env.step(f"<think>Now I know.</think><answer>{answer}</answer>")[4]

    info = episode(executed, call(1, 6))
    assert info["executed_tool_calls"] == 1 and info["reward_breakdown"]["tool"] == pytest.approx(0.8)
    # The released "completion" source never sees <tool_response> in the agent's own text: 0.1 + 0.5.
    info = episode(RewardConfig.paravt(), call(1, 6))
    assert info["executed_tool_calls"] == 1 and info["reward_breakdown"]["tool"] == pytest.approx(0.6)
    # A call the env rejected is not credited as executed.
    info = episode(executed, call(30, 10))
    assert info["executed_tool_calls"] == 0 and info["reward_breakdown"]["tool"] == pytest.approx(0.6)
    wrong = next(letter for letter in "ABCD" if letter != mcq_sample.answer)
    info = episode(executed, call(1, 6), answer=wrong)
    assert (
        info["reward_breakdown"]["tool"] == pytest.approx(0.3) and info["reward_breakdown"]["accuracy"] == 0
    )


# --- render ---------------------------------------------------------------------------------------------
def test_render_is_an_rgb_image_that_grows_with_the_crops_seen(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, max_turns=3), render_mode="rgb_array")
    env.reset(options={"index": 0})
    sheets = [env.render()]
    env.step(call(1, 9) + call(20, 28))
    sheets.append(env.render())
    env.step(call(30, 38) + call(40, 48))
    sheets.append(env.render())
    for sheet in sheets:
        assert (
            isinstance(sheet, np.ndarray)
            and sheet.dtype == np.uint8
            and sheet.ndim == 3
            and sheet.shape[2] == 3
        )
    assert sheets[0].size < sheets[1].size < sheets[2].size
    env.reset(options={"index": 0})
    assert env.render().shape == sheets[0].shape
    assert VideoToolEnv(env_samples, EnvConfig(frame_budget=4)).render() is None


# --- sub-agents -----------------------------------------------------------------------------------------
def test_subagent_callable_gets_each_crops_frames_and_its_summary_comes_back(env_samples):
    seen: list[SubAgentRequest] = []
    lock = threading.Lock()

    def subagent(request: SubAgentRequest) -> str:
        with lock:
            seen.append(request)
        return f"I saw {len(request.frames)} frames between {request.start:.0f} and {request.end:.0f} s."

    s = env_samples[0]
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=subagent))
    env.reset(options={"index": 0})
    wins = [(2.0, 10.0), (20.0, 30.0)]
    obs, reward, term, trunc, info = env.step(call(*wins[0]) + call(*wins[1]))
    assert info["tool_calls"] == {"requested": 2, "executed": 2, "rejected": 0, "failed": 0}
    assert not term and not trunc and reward == 0.0
    assert len(seen) == 2
    for req, (a, b) in zip(sorted(seen, key=lambda r: r.start), wins, strict=True):
        assert (req.start, req.end) == (a, b)
        assert len(req.frames) > 0 and req.frames.images.dtype == np.uint8
        assert np.all((req.frames.timestamps >= a) & (req.frames.timestamps <= b))
        assert s.question in req.question and count_placeholders(req.prompt()) == len(req.frames)
        assert f"I saw {len(req.frames)} frames between {a:.0f} and {b:.0f} s." in obs["text"]
    assert obs["text"].count("sub-agent summary: I saw") == 2
    assert obs["frames"].shape[0] == 0 == len(obs["timestamps"]) == count_placeholders(obs["text"])
    assert env.observation_space.contains(obs)


def test_subagent_batch_object_gets_all_crops_of_a_turn_at_once(env_samples):
    class Batch:
        def __init__(self):
            self.calls: list[list[SubAgentRequest]] = []

        def batch(self, requests):
            self.calls.append(list(requests))
            return [f"batched summary {i} of [{r.start:.0f}, {r.end:.0f}]" for i, r in enumerate(requests)]

    agent = Batch()
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=agent))
    env.reset(options={"index": 2})
    wins = [(1.0, 6.0), (10.0, 15.0), (20.0, 25.0)]
    obs, _, _, _, info = env.step("".join(call(a, b) for a, b in wins))
    assert info["tool_calls"]["executed"] == 3 and len(agent.calls) == 1 and len(agent.calls[0]) == 3
    for i, (req, (a, b)) in enumerate(zip(agent.calls[0], wins, strict=True)):
        assert len(req.frames) > 0 and np.all((req.frames.timestamps >= a) & (req.frames.timestamps <= b))
        assert f"batched summary {i} of [{a:.0f}, {b:.0f}]" in obs["text"]
    assert obs["frames"].shape[0] == 0 == count_placeholders(obs["text"])


def test_subagent_calls_run_concurrently(env_samples):
    barrier = threading.Barrier(3, timeout=20)
    threads = set()

    def subagent(request):
        threads.add(threading.get_ident())
        barrier.wait()  # three summaries in flight together, or BrokenBarrierError after the timeout
        return "ok"

    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=subagent))
    env.reset(options={"index": 0})
    _, _, _, _, info = env.step(call(0, 5) + call(5, 10) + call(10, 15))
    assert info["tool_calls"] == {"requested": 3, "executed": 3, "rejected": 0, "failed": 0}
    assert len(threads) == 3 and not barrier.broken


def test_a_failing_subagent_is_feedback_not_an_exception(env_samples):
    def flaky(request):
        if request.start >= 10:
            raise ConnectionError("sub-agent server down")
        return "fine"

    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=flaky))
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(call(0, 5) + call(10, 15) + call(20, 25))
    assert info["tool_calls"] == {"requested": 3, "executed": 1, "rejected": 0, "failed": 2}
    assert obs["text"].count("failed: sub-agent failed: sub-agent server down") == 2
    assert "sub-agent summary: fine" in obs["text"] and not term and not trunc and reward == 0.0

    class BrokenBatch:
        def batch(self, requests):
            raise TimeoutError("batch timed out")

    class ShortBatch:
        def batch(self, requests):
            return ["only one"]

    for agent, message in (
        (BrokenBatch(), "batch timed out"),
        (ShortBatch(), "returned 1 summaries for 2 crops"),
    ):
        env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=agent))
        env.reset(options={"index": 0})
        obs, _, term, _, info = env.step(call(0, 5) + call(10, 15))
        assert info["tool_calls"]["failed"] == 2 and obs["text"].count(message) == 2 and not term


# --- option errors --------------------------------------------------------------------------------------
def test_unknown_options_are_a_type_error_that_names_them(env_samples):
    with pytest.raises(TypeError, match=r"\['dispach'\]"):
        VideoToolEnv(env_samples, dispach="parallel")
    with pytest.raises(TypeError, match=r"\['framebudget', 'max_paralel'\]"):
        gymnasium.make(paravt_env.ENV_ID, samples=env_samples, framebudget=4, max_paralel=2)
    with pytest.raises(TypeError, match="nframe_gating"):
        EnvConfig.from_kwargs(nframe_gating=True)
    with pytest.raises(TypeError, match="nframe_gating"):
        paravt_env.GroupedEnv(env_samples, group_size=2, nframe_gating=True)
    with pytest.raises(TypeError, match="either in config or as keywords"):
        VideoToolEnv(env_samples, EnvConfig(), frame_budget=4)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"dispatch": "sideways"}, "dispatch"),
        ({"tool_result": "pixels"}, "tool_result"),
        ({"prompt_mode": "chatty"}, "prompt_mode"),
        ({"max_parallel": 0}, "max_parallel"),
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": True}, "max_turns"),
        ({"frame_budget": -4}, "frame_budget"),
        ({"frame_budget": 2.5}, "frame_budget"),
        ({"crop_max_frames": 0}, "crop_max_frames"),
        ({"max_action_chars": 0}, "max_action_chars"),
        ({"gating_choices": ()}, "gating_choices"),
        ({"gating_choices": (4, 0)}, "gating_choices"),
        ({"crop_fps": 0}, "crop_fps"),
        ({"crop_fps": float("nan")}, "crop_fps"),
        ({"crop_fps": float("inf")}, "crop_fps"),
        ({"min_pixels": 60000, "max_pixels": 50176}, "min_pixels"),
        ({"max_pixels": 100}, "max_pixels"),
        ({"backend": "ffmpeg"}, "backend"),
        ({"overview_tolerance": -1.0}, "overview_tolerance"),
        ({"seed": "zero"}, "seed"),
        ({"reward": "paravt"}, "reward"),
        ({"tool_result": "subagent"}, "subagent"),
        ({"tool_result": "subagent", "subagent": 42}, "subagent"),
    ],
)
def test_bad_option_values_are_a_value_error_that_names_the_option(env_samples, options, name):
    with pytest.raises(ValueError, match=name):
        EnvConfig(**options)
    with pytest.raises(ValueError, match=name):
        gymnasium.make(paravt_env.ENV_ID, samples=env_samples, **options)


def test_reward_option_may_be_a_recipe_dict(env_samples, mcq_sample):
    env = VideoToolEnv(env_samples, frame_budget=4, reward={"preset": "vanilla", "tool_source": "executed"})
    assert env.config.reward == dataclasses.replace(RewardConfig.vanilla(), tool_source="executed")
    env.reset(options={"sample": mcq_sample})
    _, reward, term, _, info = env.step(f"<answer>{mcq_sample.answer}</answer>")
    assert term and reward == info["reward_breakdown"]["total"]
    with pytest.raises(ValueError, match="tool_sorce"):
        EnvConfig(reward={"tool_sorce": "executed"})


def test_bad_reset_options(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4))
    with pytest.raises(ValueError, match=r"\['idx'\]"):
        env.reset(options={"idx": 0})
    with pytest.raises(ValueError, match="frame_budget"):
        env.reset(options={"index": 0, "frame_budget": 0})
    most = env.observation_space["frames"].max_frames
    with pytest.raises(ValueError, match="frame_budget"):
        env.reset(options={"index": 0, "frame_budget": most + 1})
    obs, _ = env.reset(options={"index": 0, "frame_budget": most})
    assert env.observation_space.contains(obs)
    with pytest.raises(IndexError, match="index=99"):
        env.reset(options={"index": 99})
    with pytest.raises(TypeError, match="sample"):
        env.reset(options={"sample": "not a sample"})


def test_a_forced_prefix_is_parsed_but_not_scored(env_samples):
    """The release scores the tokens the policy generated: a `<think>\\n` the prompt forced earns nothing."""
    oe = next((s for s in env_samples if s.question_type == "oe"), env_samples[0])
    turn = "<think>\nThe overview shows enough here.</think>\n<answer>" + oe.answer + "</answer>"
    scores = {}
    for prefix in ("", "<think>\n"):
        env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, response_prefix=prefix))
        env.reset(options={"sample": oe})
        _, reward, terminated, _, info = env.step(turn)
        assert terminated and info["prediction"] == oe.answer
        scores[prefix] = info["reward_breakdown"]
        assert env.generated_text() == turn[len(prefix):]
        env.close()
    # without its generated <think> the turn loses the think credit, the anchor bonus and the balanced-tag bonus
    assert scores[""]["format"] == 1.0
    assert scores["<think>\n"]["format"] == pytest.approx(0.5)
    assert scores[""]["accuracy"] == scores["<think>\n"]["accuracy"]
    with pytest.raises(ValueError, match="response_prefix"):
        EnvConfig(response_prefix=None)


def test_a_hung_or_unreadable_subagent_fails_its_crops_and_the_episode_goes_on(env_samples):
    release = threading.Event()

    def hung(request):
        if request.start >= 10:
            release.wait(30)  # a dead server that never answers
        return "fine"

    class Unprintable:
        def __str__(self):
            raise UnicodeError("reply is not text")

    class BadReplies:
        def batch(self, requests):
            return [Unprintable() for _ in requests]

    class HungBatch:
        def batch(self, requests):
            release.wait(30)
            return ["late"] * len(requests)

    try:
        env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=hung, subagent_timeout=0.5))
        env.reset(options={"index": 0})
        t0 = time.perf_counter()
        obs, _, term, _, info = env.step(call(0, 5) + call(10, 15))
        assert time.perf_counter() - t0 < 10
        assert info["tool_calls"]["executed"] == 1 and info["tool_calls"]["failed"] == 1 and not term
        assert "sub-agent failed: no reply within 0.5 s" in obs["text"] and "sub-agent summary: fine" in obs["text"]
        for agent, message in ((BadReplies(), "reply is not text"), (HungBatch(), "no reply within 0.5 s")):
            env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, tool_result="subagent", subagent=agent,
                                                      subagent_timeout=0.5))  # fmt: skip
            env.reset(options={"index": 0})
            obs, _, term, _, info = env.step(call(0, 5) + call(10, 15))
            assert info["tool_calls"]["failed"] == 2 and obs["text"].count(message) == 2 and not term
    finally:
        release.set()
    with pytest.raises(ValueError, match="subagent_timeout"):
        EnvConfig(subagent_timeout=0)
