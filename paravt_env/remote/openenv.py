"""OpenEnv's protocol for ``VideoToolEnv``, mounted at ``/openenv`` by ``paravt serve-env``.

OpenEnv (meta-pytorch/OpenEnv; ``openenv-core`` 0.3) clients (``EnvClient``, what TRL's OpenEnv examples wrap)
speak over one WebSocket per session at ``{base_url}/ws``, here ``ws://HOST:PORT/openenv/ws``:

- client ``{"type": "reset", "data": {"seed", "episode_id", "index" | "sample_id", "epoch", "frame_budget",
  "options": {EnvConfig fields}}}``; ``options`` shapes the connection's env on its first reset, within the
  server's ceilings (``EnvServerLimits``);
- client ``{"type": "step", "data": {"text": "<the agent's whole turn>"}}``;
- client ``{"type": "step", "data": {"type": "list_tools"}}`` / ``{"type": "step", "data": {"type": "call_tool",
  "tool_name", "arguments"}}``: OpenEnv's MCP tool calls (``MCPToolClient``), each call one turn, its result with
  the turn's reward and ``done`` (``mcp_tools``);
- client ``{"type": "state"}``, ``{"type": "close"}``;
- server ``{"type": "observation", "data": {"observation": {"text", "timestamps", "frames", "info"}, "reward",
  "done"}}`` (``frames`` in ``paravt_env.remote.wire``'s format; ``info`` the env's, reward breakdown included);
- server ``{"type": "state", "data": {"episode_id", "step_count", "sample_id", "frame_budget"}}``;
- server ``{"type": "error", "data": {"message", "code"}}``, ``code`` one of ``VALIDATION_ERROR`` (a bad message
  or option, named), ``EXECUTION_ERROR`` (a step after the episode ended), ``CAPACITY_REACHED`` (every session of
  the server taken).

A connection is a session of the server's store (its limits and ceilings, its idle reaper), closed with the
connection. ``GET /openenv/health``, ``/openenv/metadata`` and ``/openenv/schema`` answer as OpenEnv's server
does. OpenEnv's stateless HTTP ``/reset`` and ``/step`` (a fresh env per request) cannot carry an episode of this
env and are not served; the REST routes under ``/v1`` stay for clients that are not OpenEnv's.
``paravt_env.remote.openenv_client.VideoToolEnvClient`` is the client, on OpenEnv's own ``EnvClient``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

import anyio
from fastapi import WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field

from .mcp_tools import TOOLS, ToolCallError, turn_for
from .sessions import ApiError

PREFIX = "/openenv"


class OpenEnvAction(BaseModel):
    text: str = Field(description="the agent's whole turn (crop_video calls, or the answer)")


class OpenEnvObservation(BaseModel):
    text: str = ""
    timestamps: list[float] = Field(default_factory=list)
    frames: dict[str, Any] = Field(default_factory=dict, description="paravt_env.remote.wire FRAMES")
    info: dict[str, Any] = Field(default_factory=dict)
    reward: float | None = None
    done: bool = False


class OpenEnvState(BaseModel):
    episode_id: str | None = None
    step_count: int = 0
    sample_id: str | None = None
    frame_budget: int | None = None


def _code(exc: ApiError) -> str:
    return "CAPACITY_REACHED" if exc.status == 503 else "EXECUTION_ERROR" if exc.status == 409 else "VALIDATION_ERROR"


def mount_openenv(app: Any, server: Any) -> None:
    """Add OpenEnv's routes for ``server`` (an ``EnvServer``) to ``app``."""
    store, limits = server.store, server.limits

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=server.limiter)

    @app.get(f"{PREFIX}/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get(f"{PREFIX}/metadata")
    async def metadata() -> dict[str, Any]:
        return {"name": "ParaVT/VideoTool-v0", "version": "1",
                "description": "Long-video QA with parallel crop_video calls (ParaVT-Gym's VideoToolEnv)"}  # fmt: skip

    @app.get(f"{PREFIX}/schema")
    async def schema() -> dict[str, Any]:
        return {"action": OpenEnvAction.model_json_schema(), "observation": OpenEnvObservation.model_json_schema(),
                "state": OpenEnvState.model_json_schema()}  # fmt: skip

    @app.websocket(f"{PREFIX}/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        session, state, call_arguments = None, OpenEnvState(), {}

        async def send_error(message: str, code: str = "VALIDATION_ERROR") -> None:
            await websocket.send_json({"type": "error", "data": {"message": message, "code": code}})

        def observation(out: dict[str, Any], reward: float | None, done: bool) -> dict[str, Any]:
            obs = {**out["observation"], "info": out["info"]}
            return {"type": "observation", "data": {"observation": obs, "reward": reward, "done": done}}

        async def receive_text() -> str | None:
            """The next text frame; None for a binary frame (starlette's receive_text would fail on it with a
            KeyError and close the connection as if normally)."""
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            return message.get("text")

        try:
            while True:
                raw = await receive_text()
                if raw is None:
                    await send_error("binary frames are not accepted: send each message as a JSON text frame")
                    continue
                if len(raw) > limits.max_body_bytes:
                    await send_error(f"the message is {len(raw)} characters, above the limit of {limits.max_body_bytes}")
                    continue
                try:
                    message = json.loads(raw)
                except (ValueError, RecursionError):
                    await send_error("the message is not JSON this server accepts")
                    continue
                if not isinstance(message, dict) or not isinstance(message.get("data", {}), dict):
                    await send_error("a message is an object {type, data} whose data is an object")
                    continue
                kind, data = message.get("type"), message.get("data") or {}
                try:
                    if kind == "reset":
                        if session is None:
                            session = await in_thread(store.open_session, {"options": data.get("options") or {},
                                                                           "frame_encoding": "raw"})  # fmt: skip
                        elif data.get("options"):
                            raise ApiError(400, "'options' shape the env on a connection's first reset; open a new "
                                                "connection for other options")  # fmt: skip
                        reset_options = {k: data[k] for k in ("index", "sample_id", "epoch", "frame_budget") if k in data}
                        body = {"seed": data.get("seed"), "options": reset_options}
                        out = await in_thread(server.locked, session.id, lambda s, b=body: store.reset(s, b))
                        call_arguments = out["info"].get("call_arguments") or {}
                        state = OpenEnvState(episode_id=str(data.get("episode_id") or uuid.uuid4()), step_count=0,
                                             sample_id=out["info"].get("sample_id"), frame_budget=out["info"].get("frame_budget"))  # fmt: skip
                        await websocket.send_json(observation(out, None, False))
                    elif kind == "step" and data.get("type") == "list_tools":  # MCP discovery: no reset needed
                        await websocket.send_json({"type": "observation", "data": {
                            "observation": {"tools": TOOLS, "metadata": {}}, "reward": None, "done": False}})  # fmt: skip
                    elif kind == "step":
                        if session is None:
                            raise ApiError(409, "step before reset: reset first")
                        mcp, tool = data.get("type") == "call_tool", data.get("tool_name")  # an MCP tool call
                        if mcp:
                            try:
                                text = turn_for(tool, data.get("arguments", {}), call_arguments)
                            except ToolCallError as exc:  # MCP's error, and no turn taken
                                await websocket.send_json({"type": "observation", "data": {"observation": {
                                    "tool_name": str(tool), "result": None, "metadata": {},
                                    "error": {"error_type": exc.error_type, "message": str(exc)}}, "reward": None, "done": False}})  # fmt: skip
                                continue
                        elif isinstance(data.get("text"), str):
                            text = data["text"]
                        else:
                            raise ApiError(400, "a step's data needs 'text', the agent's whole turn as a string")
                        out = await in_thread(server.locked, session.id, lambda s, b={"action": text}: store.step(s, b))
                        state.step_count += 1
                        done = out["terminated"] or out["truncated"]
                        if not mcp:
                            await websocket.send_json(observation(out, out["reward"], done))
                        else:  # the turn's observation as the tool's result, its reward and done beside it
                            result = {**out["observation"], "info": out["info"]}
                            await websocket.send_json({"type": "observation", "data": {
                                "observation": {"tool_name": tool, "result": {"data": result}, "error": None, "metadata": {}},
                                "reward": out["reward"], "done": done}})  # fmt: skip
                    elif kind == "state":
                        await websocket.send_json({"type": "state", "data": state.model_dump()})
                    elif kind == "close":
                        break
                    else:
                        raise ApiError(400, f"unknown message type {kind!r}; known: reset, step, state, close")
                except ApiError as exc:
                    await send_error(str(exc), _code(exc))
        except WebSocketDisconnect:
            pass
        finally:
            if session is not None:
                with contextlib.suppress(ApiError):  # already reaped
                    await in_thread(store.close_session, session.id)
            with contextlib.suppress(Exception):  # the client closed first (starlette raises a disconnect here)
                await websocket.close()
