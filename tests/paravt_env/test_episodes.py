"""``paravt_env.episodes``: one ``Episode`` class per message protocol, registered by name and picked once at
reset; under every protocol ``info["messages"]`` lists the observation's messages at reset and after every step."""

from __future__ import annotations

import pytest

from paravt_env import EnvConfig, VideoToolEnv
from paravt_env.episodes import (
    EPISODES,
    PROTOCOLS,
    ParaVTEpisode,
    ReleaseEvalEpisode,
    ReleaseRLEpisode,
    episode_of,
    resolve_protocol,
)
from paravt_env.messages import observation_messages

CALLS = ('<think>look</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 5}}</tool_call>'
         '<tool_call>{"name": "crop_video", "arguments": {"start_time": 6, "end_time": 9}}</tool_call>')  # fmt: skip
CONFIGS = {
    "paravt": {},
    "release": {"protocol": "release"},
    "release_rl": {"protocol": "release_rl", "tool_result": "subagent", "subagent": lambda r: "a red circle"},
}


def test_the_registry_names_every_protocol_once():
    assert PROTOCOLS == ("paravt", "release", "release_rl", "longvt")
    assert [EPISODES[name].name for name in PROTOCOLS] == list(PROTOCOLS)
    assert [EPISODES[name].release for name in PROTOCOLS] == [False, True, True, False]
    assert [EPISODES[name].calls_per_turn for name in PROTOCOLS] == [None, None, None, 1]
    assert (ParaVTEpisode, ReleaseEvalEpisode, ReleaseRLEpisode) == tuple(EPISODES[n] for n in PROTOCOLS[:3])


def test_the_release_with_subagents_is_its_rl_workflow_and_unknown_protocols_are_named():
    assert resolve_protocol("release", "subagent") == "release_rl"
    assert resolve_protocol("release", "frames") == "release"
    assert episode_of(EnvConfig(protocol="release", tool_result="subagent", subagent=lambda r: "")) is ReleaseRLEpisode
    with pytest.raises(ValueError, match="protocol must be one of"):
        EnvConfig(protocol="ours")
    with pytest.raises(ValueError, match='needs tool_result="subagent"'):
        EnvConfig(protocol="release_rl")
    with pytest.raises(ValueError, match="release-protocol option"):
        EnvConfig(video_channel="video_url")


@pytest.mark.parametrize("protocol", list(CONFIGS))
def test_every_protocol_lists_the_messages_of_every_observation(env_samples, protocol):
    env = VideoToolEnv(env_samples, EnvConfig(frame_budget=4, crop_max_frames=3, max_turns=2, **CONFIGS[protocol]))
    obs, info = env.reset(options={"index": 0})
    assert info["protocol"] == protocol
    opening = observation_messages(obs, info)  # raises if the listing and the frames disagree
    assert opening[0].role == "system" and any(m.role == "user" for m in opening)
    assert sum(len(m.images) for m in opening) == len(obs["frames"]) > 0
    done, steps = False, 0
    while not done:
        obs, _, terminated, truncated, info = env.step(CALLS)
        done, steps = terminated or truncated, steps + 1
        replies = observation_messages(obs, info)
        assert sum(len(m.images) for m in replies) == len(obs["frames"])
        assert obs["text"] == "\n".join(m.text for m in replies)
        assert all(m.role == "user" for m in replies)
    assert steps >= 2 and "reward_breakdown" in info
    env.close()
