import json
import math
import random
import string

import numpy as np
import pytest

import paravt_env.env as env_module
from paravt_env import EnvConfig, VideoToolEnv


def call(**arguments):
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": arguments}) + "</tool_call>"


@pytest.fixture
def samples(synth_small):
    return synth_small[1]


def test_a_crop_naming_another_file_reads_only_the_current_video(samples, monkeypatch):
    opened = []
    real_open = env_module.open_video

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(env_module, "open_video", spy)
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    env.reset(options={"index": 2})
    other = samples[3].video_path
    action = (
        call(video_path="/etc/passwd", start_time=1, end_time=6)
        + call(video_path=other, start_time=2, end_time=7)
        + '<tool_code>crop_video("/root/.ssh/id_rsa", 3, 8)</tool_code>'
    )
    obs, _, _, _, info = env.step(action)
    assert info["tool_calls"]["executed"] == 3
    assert obs["text"].count("ignored: crops always read the current video") == 3
    assert opened == [samples[2].video_path]
    assert len(obs["frames"]) > 0


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<tool_call>{not json}</tool_call>", "invalid JSON"),
        ('<tool_call>{"name": "delete_video", "arguments": {}}</tool_call>', "unknown tool"),
        (call(start_time=30, end_time=10), "must be smaller than end_time"),
        (call(start_time=-50, end_time=-10), "leaves less than"),
        (call(start_time=float("nan"), end_time=5), "NaN"),
        ('<tool_call>{"name": "crop_video", "arguments": {"start_time": -Infinity, "end_time": Infinity}}</tool_call>', "clamped"),
        (call(start_time=1e300, end_time=1e301), "leaves less than"),
        (call(start_time="soon", end_time=5), "not a time"),
        (call(start_time=1), "missing argument end_time"),
    ],
)
def test_bad_calls_become_feedback(samples, action, expected):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(action)
    assert expected in obs["text"]
    assert not term and not trunc and reward == 0.0
    assert info["tool_calls"]["requested"] == 1


def test_too_many_calls_and_megabyte_turns(samples):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, max_parallel=3))
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(call(start_time=1, end_time=3) * 20)
    assert info["tool_calls"]["executed"] == 3 and info["tool_calls"]["rejected"] == 17
    env.reset(options={"index": 0})
    huge = "<think>" + "x" * 1_000_000 + "</think>" + call(start_time=1, end_time=3)
    obs, _, term, _, info = env.step(huge)
    assert info["action_truncated"] and term  # the call was cut off with the tail: nothing left to run
    assert info["reward_breakdown"]["total"] == pytest.approx(info["reward_breakdown"]["total"])


@pytest.mark.parametrize("action", ["\x00\x01\x1b[31m\u202e<answer>\udcff", b"\xff\xfe<answer>A</answer>", None, 12.5, ""])
def test_odd_actions_never_raise(samples, action):
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4))
    env.reset(options={"index": 0})
    obs, reward, term, trunc, info = env.step(action)
    assert env.observation_space.contains(obs) and math.isfinite(reward)


TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_code>", "</tool_code>", "<answer>", "</answer>",
        "<tool_response>", "<|im_end|>", "<|im_start|>", "{", "}", '"name"', '"crop_video"', '"arguments"', ":", ","]  # fmt: skip
TIMES = [0, 1, 2, 4, 7.5, 12, 20, 33, -5, 3.5, 1e9, -1e9, 1e308, "nan", "inf", "-inf", "01:05", "x", None, True, [], {}]


def _fuzz_action(rng: random.Random, env) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return env.action_space.sample()
    if kind == 1:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(200)))
    if kind == 2:
        return "".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(80)))
    if kind == 3:
        return "".join(rng.choice(TAGS + [" crop_video(", ")", "B", "12.5"]) for _ in range(rng.randrange(30)))
    calls = []
    for _ in range(rng.randrange(1, 8)):
        a, b = rng.choice(TIMES), rng.choice(TIMES)
        if rng.random() < 0.5:
            body = json.dumps({"name": rng.choice(["crop_video", "crop_video", "zoom"]), "arguments": {"start_time": a, "end_time": b}})
            if rng.random() < 0.2:
                body = body[: rng.randrange(len(body))]
            calls.append(f"<tool_call>{body}</tool_call>")
        else:
            calls.append(f"<tool_code>crop_video({a!r}, {b!r})</tool_code>")
    tail = rng.choice(["", "<answer>B</answer>", "<answer>", "</think>"])
    return "<think>fuzz</think>" + "".join(calls) + tail


def test_fuzz_1500_actions_never_raise(samples):
    rng = random.Random(1234)
    env = VideoToolEnv(samples, EnvConfig(frame_budget=4, crop_max_frames=4, max_turns=3))
    env.action_space.seed(99)
    keys = {"turn", "frame_budget", "tool_calls", "parse_problems", "timing"}
    obs, info = env.reset(seed=0)
    done = False
    executed = episodes = 0
    for _ in range(1500):
        if done:
            obs, info = env.reset()
        action = _fuzz_action(rng, env)
        obs, reward, term, trunc, info = env.step(action)
        assert env.observation_space.contains(obs)
        assert math.isfinite(reward) and keys <= set(info)
        assert obs["frames"].dtype == np.uint8 and len(obs["frames"]) == len(obs["timestamps"])
        executed += info["tool_calls"]["executed"]
        done = term or trunc
        if done:
            episodes += 1
            assert set(info["reward_breakdown"]) == {"total", "accuracy", "format", "tool"}
    assert executed > 100 and episodes > 300  # the fuzz reached the crop path and ended many episodes
