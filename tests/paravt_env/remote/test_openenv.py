"""OpenEnv's protocol at ``/openenv``: a WebSocket session plays the in-process env's episode (frames bit for bit,
reward, state), refuses what it must with OpenEnv's error codes, and frees its session on disconnect. With
OpenEnv's own client package installed (``nox -s openenv``), its ``EnvClient`` drives the same episode."""

import json

import httpx
import numpy as np
import pytest
from engine_env import engine_import  # tests/engine_env.py

from paravt_env import VideoToolEnv
from paravt_env.remote.wire import decode_frames

websockets_sync = pytest.importorskip("websockets.sync.client")

CROPS = ('<tool_call>{"name": "crop_video", "arguments": {"start_time": 2, "end_time": 12}}</tool_call>'
         '<tool_call>{"name": "crop_video", "arguments": {"start_time": 20, "end_time": 30}}</tool_call>')  # fmt: skip


def in_process(samples, index):
    env = VideoToolEnv(samples, frame_budget=4)
    obs0, _ = env.reset(seed=0, options={"index": index})
    obs1, *_ = env.step(CROPS)
    _, reward, terminated, _, info = env.step("<answer>A</answer>")
    return obs0["frames"], obs1["frames"], reward, info


def ws_url(server):
    return server.url.replace("http://", "ws://") + "/openenv/ws"


def exchange(ws, kind, data=None):
    ws.send(json.dumps({"type": kind, **({"data": data} if data is not None else {})}))
    return json.loads(ws.recv(timeout=60))


def test_an_episode_over_openenvs_websocket_equals_in_process(env_server, env_samples):
    want0, want1, reward, info = in_process(env_samples, 2)
    with websockets_sync.connect(ws_url(env_server), max_size=1 << 26) as ws:
        r = exchange(ws, "reset", {"seed": 0, "index": 2, "options": {"frame_budget": 4}})
        assert r["type"] == "observation" and r["data"]["done"] is False and r["data"]["reward"] is None
        assert np.array_equal(decode_frames(r["data"]["observation"]["frames"]), want0)
        assert httpx.get(env_server.url + "/health").json()["sessions"] == 1  # one connection, one session
        r = exchange(ws, "step", {"text": CROPS})
        assert np.array_equal(decode_frames(r["data"]["observation"]["frames"]), want1)
        r = exchange(ws, "step", {"text": "<answer>A</answer>"})
        assert r["data"]["done"] is True and r["data"]["reward"] == reward
        assert r["data"]["observation"]["info"]["reward_breakdown"] == info["reward_breakdown"]
        state = exchange(ws, "state")
        assert state["type"] == "state" and state["data"]["step_count"] == 2 and state["data"]["sample_id"] == env_samples[2].id
        r = exchange(ws, "step", {"text": "again"})
        assert r["type"] == "error" and r["data"]["code"] == "EXECUTION_ERROR"
    assert httpx.get(env_server.url + "/health").json()["sessions"] == 0  # freed with the connection
    assert httpx.get(env_server.url + "/openenv/health").json() == {"status": "healthy"}
    schema = httpx.get(env_server.url + "/openenv/schema").json()
    assert schema["action"]["properties"]["text"]["type"] == "string"


def test_openenv_refusals_use_openenvs_codes(env_samples, start_env_server):
    server = start_env_server(env_samples, max_sessions=1)
    with websockets_sync.connect(ws_url(server), max_size=1 << 26) as ws:
        assert exchange(ws, "reset", {"options": {"frame_budget": 100000}})["data"]["code"] == "VALIDATION_ERROR"
        assert exchange(ws, "jump")["data"]["message"].startswith("unknown message type 'jump'")
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=30))["data"]["code"] == "VALIDATION_ERROR"
        assert exchange(ws, "step", {"text": "x"})["data"]["message"].startswith("step before reset")
        assert exchange(ws, "reset", {"index": 0})["type"] == "observation"
        with websockets_sync.connect(ws_url(server), max_size=1 << 26) as other:  # the server's one session is taken
            assert exchange(other, "reset", {"index": 0})["data"]["code"] == "CAPACITY_REACHED"


def test_openenvs_own_client_drives_the_env(env_server, env_samples):
    engine_import("openenv", "openenv.core")
    from paravt_env.remote.openenv_client import VideoToolAction, VideoToolEnvClient

    want0, want1, reward, info = in_process(env_samples, 1)
    with VideoToolEnvClient(base_url=env_server.url + "/openenv").sync() as env:
        first = env.reset(seed=0, index=1, options={"frame_budget": 4})
        assert np.array_equal(first.observation.frames_array(), want0) and not first.done
        crops = env.step(VideoToolAction(text=CROPS))
        assert np.array_equal(crops.observation.frames_array(), want1)
        last = env.step(VideoToolAction(text="<answer>A</answer>"))
        assert last.done and last.reward == reward
        assert last.observation.info["reward_breakdown"] == info["reward_breakdown"]
        assert env.state().step_count == 2
        print("OpenEnv EnvClient episode:", {"K": len(first.observation.timestamps), "crop frames": len(crops.observation.timestamps),
                                             "reward": last.reward, "breakdown": last.observation.info["reward_breakdown"]})  # fmt: skip
