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


WINDOWS = [{"start_time": 2, "end_time": 12}, {"start_time": 20, "end_time": 30}]  # CROPS' two windows


def call(ws, name, **arguments):
    return exchange(ws, "step", {"type": "call_tool", "tool_name": name, "arguments": arguments})


def test_mcp_tool_calls_over_openenvs_websocket_play_the_text_agents_episode(env_server, env_samples):
    """OpenEnv's MCP messages: tools listed before any reset; each call one turn of the episode, with the turn's
    reward and done beside its result; the crops of a parallel call are CROPS' frames, the answer scores as
    in-process. A call that renders to no turn is MCP's error, and no turn is taken."""
    want0, want1, reward, info = in_process(env_samples, 2)
    with websockets_sync.connect(ws_url(env_server), max_size=1 << 26) as ws:
        listed = exchange(ws, "step", {"type": "list_tools"})["data"]["observation"]["tools"]
        assert [t["name"] for t in listed] == ["crop_video", "crop_video_parallel", "answer"]
        assert exchange(ws, "step", {"type": "call_tool", "tool_name": "answer", "arguments": {"answer": "A"}})[
            "data"]["message"].startswith("step before reset")
        r = exchange(ws, "reset", {"seed": 0, "index": 2, "options": {"frame_budget": 4}})
        assert np.array_equal(decode_frames(r["data"]["observation"]["frames"]), want0)
        bad = call(ws, "crop_video", start_time=2)["data"]
        assert bad["observation"]["error"] == {"error_type": "invalid_args",
                                               "message": "crop_video: end_time must be a finite number of seconds, got None"}
        assert call(ws, "zoom")["data"]["observation"]["error"]["error_type"] == "tool_not_found"
        assert call(ws, "crop_video_parallel", windows=[{"start_time": 0, "end_time": 1}] * 65)["data"]["observation"][
            "error"]["message"].endswith("65 windows, above the limit of 64")  # fmt: skip
        assert exchange(ws, "state")["data"]["step_count"] == 0  # none of them took a turn
        crops = call(ws, "crop_video_parallel", windows=WINDOWS)["data"]
        assert crops["done"] is False and crops["observation"]["error"] is None
        assert np.array_equal(decode_frames(crops["observation"]["result"]["data"]["frames"]), want1)
        last = call(ws, "answer", answer="A")["data"]
        assert last["done"] is True and last["reward"] == reward
        assert last["observation"]["result"]["data"]["info"]["reward_breakdown"] == info["reward_breakdown"]


def test_openenvs_own_mcp_client_drives_the_env(env_server, env_samples):
    """OpenEnv's ``MCPToolClient`` (its simulation mode: tools with rewards) against ``/openenv``."""
    engine_import("openenv", "openenv.core")
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    want0, want1, reward, info = in_process(env_samples, 1)
    with MCPToolClient(base_url=env_server.url + "/openenv").sync() as env:
        assert [t.name for t in env.list_tools()] == ["crop_video", "crop_video_parallel", "answer"]
        env.reset(seed=0, index=1, options={"frame_budget": 4})
        crops = env.call_tool("crop_video_parallel", windows=WINDOWS)
        assert np.array_equal(decode_frames(crops["frames"]), want1)
        last = env.step(CallToolAction(tool_name="answer", arguments={"answer": "A"}))
        assert last.done and last.reward == reward
        assert last.observation.result["data"]["info"]["reward_breakdown"] == info["reward_breakdown"]
        with pytest.raises(RuntimeError, match="invalid_args"):
            env.call_tool("crop_video", start_time="soon", end_time=3)
