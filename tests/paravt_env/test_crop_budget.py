"""``EnvConfig.crop_budget``: one budget of crops per episode for both dispatch modes, the turns it needs, and
the calls past it refused with feedback that says so."""

from __future__ import annotations

import json

import pytest

from paravt_env import EnvConfig, VideoToolEnv


def call(start: float, end: float) -> str:
    return "<tool_call>" + json.dumps({"name": "crop_video", "arguments": {"start_time": start, "end_time": end}}) + "</tool_call>"


def windows(duration: float, n: int) -> list[tuple[float, float]]:
    step = duration / n
    return [(round(i * step + 1.0, 1), round(i * step + 4.0, 1)) for i in range(n)]


def play(env: VideoToolEnv, turns: list[str]) -> list[dict]:
    env.reset(options={"index": 3})
    infos = []
    for text in turns:
        obs, _, term, trunc, info = env.step(text)
        info["text"] = obs["text"]
        infos.append(info)
        if term or trunc:
            break
    return infos


@pytest.mark.parametrize("dispatch", ["parallel", "sequential"])
def test_both_modes_spend_one_budget_and_get_the_turns_it_needs(env_samples, dispatch):
    budget = 3
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, crop_max_frames=2, dispatch=dispatch, crop_budget=budget,
                                              max_turns=2))  # fmt: skip
    try:
        assert env.config.turn_limit == budget + 1  # whatever max_turns says
        obs, info = env.reset(options={"index": 3})
        assert info["limits"]["max_turns"] == 4 and info["limits"]["crop_budget"] == 3
        assert "at most 3 crops in all" in obs["text"]
        wins = windows(env_samples[3].duration, 6)
        five = "".join(call(*w) for w in wins[:5])
        infos = play(env, [five, five, five, five, "<answer>A</answer>"])
    finally:
        env.close()
    executed = [i["tool_calls"]["executed"] for i in infos]
    spent = [s["status"] for i in infos for s in i["crops"]]
    assert sum(executed) == budget and spent.count("executed") == budget
    if dispatch == "parallel":
        assert executed[:2] == [3, 0]  # three of the five run, the rest is past the budget
        first = infos[0]["crops"]
        assert [c["status"] for c in first] == ["executed"] * 3 + ["rejected"] * 2
        assert all("crop budget of 3 crops is spent" in c["error"] for c in first[3:])
        assert "Your crop budget is spent" in infos[0]["text"]
    else:
        assert executed[:3] == [1, 1, 1]  # one a turn: the budget needs its three turns, and a fourth answers
        assert "sequential dispatch runs one crop per turn" in infos[0]["crops"][1]["error"]
        assert "You have 2 turns and 1 crops left" in infos[1]["text"]
        assert infos[2]["turn"] == 3 and "This is your last turn" in infos[2]["text"]
    assert infos[-1]["turn"] <= budget + 1


def test_a_refused_window_does_not_spend_the_budget(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, crop_max_frames=2, crop_budget=2))
    try:
        wins = windows(env_samples[3].duration, 4)
        infos = play(env, [call(50_000, 50_010) + call(*wins[0]) + call(*wins[1]), "<answer>A</answer>"])
    finally:
        env.close()
    statuses = [c["status"] for c in infos[0]["crops"]]
    assert statuses == ["rejected", "executed", "executed"]


def test_no_budget_is_the_turn_and_parallel_limits_as_before(env_samples):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, crop_max_frames=2, max_turns=2))
    try:
        wins = windows(env_samples[3].duration, 6)
        infos = play(env, ["".join(call(*w) for w in wins[:6]), "<answer>A</answer>"])
    finally:
        env.close()
    assert infos[0]["tool_calls"]["executed"] == 5 and env.config.turn_limit == 2
    assert "crop budget" not in json.dumps(infos[0]["crops"])


def test_a_budget_is_refused_where_it_cannot_apply():
    with pytest.raises(ValueError, match="crop_budget must be None or an integer >= 1"):
        EnvConfig(crop_budget=0)
    with pytest.raises(ValueError, match="crop_budget is a paravt-protocol option"):
        EnvConfig(crop_budget=2, protocol="release")


@pytest.mark.parametrize("dispatch", ["parallel", "sequential"])
def test_a_turn_budget_caps_the_turns_of_both_modes_whatever_the_crop_budget(env_samples, dispatch):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, crop_max_frames=2, dispatch=dispatch, crop_budget=6,
                                              turn_budget=2, max_turns=5))  # fmt: skip
    try:
        assert env.config.turn_limit == 2  # not crop_budget + 1, not max_turns
        obs, info = env.reset(options={"index": 3})
        assert info["limits"]["max_turns"] == 2 and "2 turns in all" in obs["text"]
        wins = windows(env_samples[3].duration, 6)
        five = "".join(call(*w) for w in wins[:5])
        infos = play(env, [five, five, "<answer>A</answer>"])
    finally:
        env.close()
    # one call turn, then the last turn must answer: its calls never run, and the episode is over after it
    assert len(infos) == 2 and "This is your last turn" in infos[0]["text"]
    assert infos[0]["tool_calls"]["executed"] == (5 if dispatch == "parallel" else 1)
    assert infos[1]["tool_calls"]["executed"] == 0


def test_a_turn_budget_without_a_crop_budget_and_where_it_cannot_apply(env_samples):
    config = EnvConfig(frame_budget=4, turn_budget=4, max_turns=2)
    assert config.turn_limit == 4
    env = VideoToolEnv(env_samples, config)
    try:
        obs, _ = env.reset(options={"index": 0})
    finally:
        env.close()
    assert "4 turns in all" in obs["text"]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="turn_budget must be None or an integer >= 1"):
            EnvConfig(turn_budget=bad)
    with pytest.raises(ValueError, match="turn_budget is a paravt-protocol option"):
        EnvConfig(turn_budget=2, protocol="release")
