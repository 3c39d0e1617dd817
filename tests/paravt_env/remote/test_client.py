"""``RemoteVideoToolEnv`` against a real server: the in-process env's observations, rewards and errors."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from paravt.baselines.agents import make_baseline
from paravt_env import REMOTE_ENV_ID, VideoToolEnv
from paravt_env.play import play_episode
from paravt_env.remote import RemoteEnvError, RemoteVideoToolEnv

CROPS = ('<think>look</think><tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 12}}'
         '</tool_call><tool_call>{"name": "crop_video", "arguments": {"start_time": 20, "end_time": 31}}</tool_call>'
         '<tool_call>{"name": "crop_video", "arguments": {"start_time": 500, "end_time": 400}}</tool_call>')  # fmt: skip


def same_obs(a, b):
    return (a["text"] == b["text"] and a["frames"].dtype == b["frames"].dtype and np.array_equal(a["frames"], b["frames"])
            and a["timestamps"].tobytes() == b["timestamps"].tobytes())  # fmt: skip


def test_check_env_passes(env_server):
    env = RemoteVideoToolEnv(env_server.url, frame_budget=8)
    check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("encoding", ["raw", "png"])
@pytest.mark.parametrize("options", [{"frame_budget": 8}, {"nframes_gating": True, "dispatch": "sequential", "max_turns": 4}])
def test_same_episode_as_in_process(env_server, env_samples, encoding, options):
    local = VideoToolEnv(env_samples, **options)
    remote = RemoteVideoToolEnv(env_server.url, frame_encoding=encoding, **options)
    for i in range(len(env_samples)):
        a, ia = local.reset(seed=3, options={"index": i, "epoch": 1})
        b, ib = remote.reset(seed=3, options={"index": i, "epoch": 1})
        assert same_obs(a, b) and ia["frame_budget"] == ib["frame_budget"] and ia["user_prompt"] == ib["user_prompt"]
        assert remote.sample.id == local.sample.id and remote.sample.answer == local.sample.answer
        for action in (CROPS, "<answer>[3.0, 9.0]</answer>"):
            la, lr, lt, ltr, li = local.step(action)
            ra, rr, rt, rtr, ri = remote.step(action)
            assert same_obs(la, ra) and (lr, lt, ltr) == (rr, rt, rtr)
            assert li["crops"] == ri["crops"] and li["tool_calls"] == ri["tool_calls"]
            if lt or ltr:
                assert li["reward_breakdown"] == ri["reward_breakdown"]
                break
    remote.close()


def test_our_scripted_rollouts_run_unchanged(env_server, env_samples):
    """paravt_env.play.play_episode (what paravt eval runs) through the remote env: the same results."""
    for agent in (make_baseline("detector"), make_baseline("uniform"), make_baseline("oracle")):
        local = VideoToolEnv(env_samples, frame_budget=16)
        remote = gymnasium.make(REMOTE_ENV_ID, url=env_server.url, frame_budget=16)
        for i in range(len(env_samples)):
            a = play_episode(local, agent, seed=0, options={"index": i})
            b = play_episode(remote, agent, seed=0, options={"index": i})
            assert (a.actions, a.reward, a.breakdown, a.tool_calls, a.overview) == (b.actions, b.reward, b.breakdown, b.tool_calls, b.overview)
        remote.close()


def test_errors_keep_their_type(env_server):
    with pytest.raises(TypeError, match="frame_budgt"):
        RemoteVideoToolEnv(env_server.url, frame_budgt=8)
    with pytest.raises(ValueError, match="dispatch"):
        RemoteVideoToolEnv(env_server.url, dispatch="sideways")
    env = RemoteVideoToolEnv(env_server.url, frame_budget=4)
    with pytest.raises(IndexError, match="outside"):
        env.reset(options={"index": 99})
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>A</answer>")  # no episode yet
    env.reset(options={"sample_id": env.samples()[1]["id"]})
    assert env.sample.id == env.samples()[1]["id"]
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_unreachable_server_is_named():
    with pytest.raises(RemoteEnvError, match="127.0.0.1:9"):
        RemoteVideoToolEnv("http://127.0.0.1:9", timeout=2)


def test_render_draws_the_contact_sheet(env_server, env_samples):
    local = VideoToolEnv(env_samples, frame_budget=4, render_mode="rgb_array")
    remote = RemoteVideoToolEnv(env_server.url, frame_budget=4, render_mode="rgb_array", frame_encoding="png")
    local.reset(options={"index": 0})
    remote.reset(options={"index": 0})
    assert np.array_equal(local.render(), remote.render())
    remote.close()
