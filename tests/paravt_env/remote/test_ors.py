"""The Open Reward Standard on ``paravt serve-env``: ORS's own client (``openreward`` 0.1.167, ``nox -s
"engine(name='ors')"``) plays the in-process env's episode (frames bit for bit, reward, breakdown), a malformed call
is ORS's validation error and takes no turn, the server's capacity and ceilings hold, and a session is freed when the
client closes it. Without ``openreward`` the ORS entry points say what to install."""

import base64

import httpx
import numpy as np
import pytest
from engine_env import engine_import, in_engine_env  # tests/engine_env.py

from paravt_env import VideoToolEnv
from paravt_env.remote.wire import _png_frame

CROPS = ('<tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 12}}</tool_call>'
         '<tool_call>{"name": "crop_video", "arguments": {"start_time": 20, "end_time": 30}}</tool_call>')  # fmt: skip
WINDOWS = {"windows": [{"start_time": 2, "end_time": 12}, {"start_time": 20, "end_time": 30}]}


def in_process(samples, index):
    env = VideoToolEnv(samples, frame_budget=4)
    obs0, _ = env.reset(seed=0, options={"index": index})
    obs1, *_ = env.step(CROPS)
    _, reward, _, _, info = env.step("<answer>A</answer>")
    return obs0, obs1, reward, info


def frames_of(blocks):
    images = [b for b in blocks if b.type == "image"]
    assert all(b.mimeType == "image/png" for b in images)
    return np.stack([_png_frame(base64.b64decode(b.data), "block") for b in images]), [
        b.detail["timestamp"] for b in images
    ]


def text_of(blocks):
    return "".join(b.text for b in blocks if b.type == "text")


def ors_env(server):
    engine_import("ors", "openreward")
    from openreward import OpenReward

    return OpenReward(api_key="local").environments.get("videotool", base_url=server.url)


def test_ors_client_plays_the_in_process_episode(env_server, env_samples):
    env = ors_env(env_server)
    obs0, obs1, reward, info = in_process(env_samples, 2)
    assert env.list_splits() == ["train"]
    tasks = env.list_tasks("train")
    assert [t.task_spec["sample_id"] for t in tasks] == [s.id for s in env_samples]
    assert sorted(t.name for t in env.list_tools()) == ["answer", "crop_video", "crop_video_parallel"]
    with env.session(task=_task(env, {**tasks[2].task_spec, "seed": 0, "frame_budget": 4})) as session:
        prompt = session.get_prompt()
        frames, stamps = frames_of(prompt)
        assert np.array_equal(frames, obs0["frames"]) and stamps == obs0["timestamps"].tolist()
        assert text_of(prompt) == obs0["text"]
        assert httpx.get(env_server.url + "/health").json()["sessions"] == 1
        out = session.call_tool("crop_video_parallel", WINDOWS)
        frames, stamps = frames_of(out.blocks)
        assert np.array_equal(frames, obs1["frames"]) and stamps == obs1["timestamps"].tolist()
        assert text_of(out.blocks) == obs1["text"] and not out.finished
        out = session.call_tool("answer", {"answer": "A"})
        assert out.finished and out.reward == reward
        assert out.metadata["reward_breakdown"] == info["reward_breakdown"]
        with pytest.raises(Exception, match="episode has finished"):
            session.call_tool("crop_video", {"start_time": 1, "end_time": 2})
    assert httpx.get(env_server.url + "/health").json()["sessions"] == 0  # freed with the ORS session


def _task(env, spec):
    from openreward.api.environments.client import Task

    return Task(server_name=env.server, environment_name=env.name, task_spec=spec, namespace=env.namespace)


def test_a_malformed_call_is_feedback_and_takes_no_turn(env_server, env_samples):
    env = ors_env(env_server)
    obs0, obs1, reward, _ = in_process(env_samples, 1)
    with env.session(task=_task(env, {"index": 1, "seed": 0, "frame_budget": 4})) as session:
        for bad in ({"start_time": 2}, {"start_time": 2, "end_time": "late"}, {"windows": []}):
            tool = "crop_video_parallel" if "windows" in bad else "crop_video"
            with pytest.raises(Exception, match="validation"):
                session.call_tool(tool, bad)
        out = session.call_tool("crop_video_parallel", WINDOWS)  # still the episode's first turn
        assert np.array_equal(frames_of(out.blocks)[0], obs1["frames"])
        assert session.call_tool("answer", {"answer": "A"}).reward == reward


def test_ors_sessions_hold_the_servers_capacity_and_ceilings(env_samples, start_env_server):
    server = start_env_server(env_samples, max_sessions=1)
    env = ors_env(server)

    def refused(match, **session):
        with pytest.raises(Exception, match=match), env.session(**session) as s:
            s.get_prompt()

    refused("frame_budget|ceiling|above", task=_task(env, {"index": 0, "options": {"frame_budget": 100000}}))
    refused("unknown task field", task=_task(env, {"index": 0, "path": "/etc/passwd"}))
    refused("name different samples", task=_task(env, {"index": 0, "sample_id": env_samples[1].id}))
    with env.session(split="train", index=0) as session:
        session.get_prompt()
        refused("sessions are taken", split="train", index=1)
    # a client that never deletes a session whose episode could not start leaves no session of the server held
    headers = {"X-Session-ID": "raw-client"}
    assert httpx.post(server.url + "/create", json={"task_spec": {"index": 99}}, headers=headers).status_code == 200
    r = httpx.get(server.url + "/videotool/prompt", headers=headers)
    assert r.status_code == 400 and "index" in r.json()["detail"]
    assert httpx.get(server.url + "/health").json()["sessions"] == 0


@pytest.mark.skipif(in_engine_env("ors"), reason="openreward is installed in its own environment")
def test_without_openreward_the_ors_entry_points_say_what_to_install(env_server):
    from paravt_env.remote.ors import available

    if available():
        pytest.skip("openreward is installed here")
    r = httpx.post(env_server.url + "/create_session")
    assert r.status_code == 501 and "paravt-gym[ors]" in r.json()["error"]["message"]
    assert httpx.get(env_server.url + "/health").json()["status"] == "ok"  # serve-env's own routes unchanged
