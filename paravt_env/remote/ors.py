"""The Open Reward Standard (ORS, ``openreward`` 0.1.167) for ``VideoToolEnv``, served by ``paravt serve-env`` beside
its REST and OpenEnv routes, on the same port, when the ``openreward`` package is installed (``paravt-gym[ors]``).

ORS's own server (``openreward.environments.Server``) answers; this module only supplies its environment class,
``videotool``:

- one split, ``train``: the server's samples, a task per sample, ``{"index", "sample_id", "question_type",
  "duration"}``. A task may also carry ``seed``, ``epoch``, ``frame_budget`` (the reset's) and ``options`` (the env's
  ``EnvConfig`` fields, within the server's ceilings, as a REST session's ``options``);
- the prompt: the first observation, its text then its frames as PNG image blocks (``detail.timestamp``: seconds);
- three tools, the same as MCP's (``mcp_tools``), each one turn of the episode rendered as the text the env reads:
  ``crop_video``, ``crop_video_parallel`` (a turn of several calls, run together) and ``answer``; a result is the
  turn's observation (text, then image blocks), its reward and ``finished`` inline (ORS's per-call reward), the
  env's ``info`` (reward breakdown included) as ``metadata``.

Every session is a session of the server's store: its ceilings, its capacity (a 503 with ``Retry-After`` when all
are taken), its idle reaper; env work runs on the server's worker threads. A malformed call (a window without
``end_time``) is ORS's ``input_validation`` error and takes no turn, as under MCP; a call after the episode ended is
ORS's ``episode_finished``. ORS's client reaches it as any self-hosted ORS server::

    from openreward import OpenReward
    env = OpenReward().environments.get("videotool", base_url="http://HOST:PORT")
    with env.session(split="train", index=0) as session:
        prompt = session.get_prompt()
        out = session.call_tool("crop_video_parallel", {"windows": [{"start_time": 2, "end_time": 12}]})

TRL's ORS adapter (``trl.experimental.openreward``, TRL 1.16.0) keeps only the text blocks of a result: a policy
trained through it sees the tool's text and not the crop's frames (docs/env-server.md).
"""

# No `from __future__ import annotations`: ORS reads the tools' annotations with get_type_hints, and the models
# they name are local to ors_environment.
import contextlib
from typing import Any

import anyio
from pydantic import BaseModel, Field, field_validator

from .mcp_tools import MAX_WINDOWS, ToolCallError, turn_for
from .sessions import ApiError
from .wire import jsonable

ENV_NAME = "videotool"
SPLIT = "train"
TASK_KEYS = {"index", "sample_id", "question_type", "duration", "seed", "epoch", "frame_budget", "options"}
"""What a task spec may hold: the listed task's fields, and what shapes its episode."""


def available() -> bool:
    """Whether ``openreward`` (the ORS SDK, whose server this module uses) is importable."""
    try:
        import openreward.environments  # noqa: F401
    except ImportError:
        return False
    return True


class Window(BaseModel, extra="forbid"):
    start_time: float = Field(description="seconds", allow_inf_nan=False)
    end_time: float = Field(description="seconds", allow_inf_nan=False)


class Windows(BaseModel, extra="forbid"):
    windows: list[Window] = Field(min_length=1, max_length=MAX_WINDOWS)


class Answer(BaseModel, extra="forbid"):
    answer: str

    @field_validator("answer")
    @classmethod
    def _bounded(cls, v: str) -> str:
        if len(v) > 65536:
            raise ValueError(f"the answer is {len(v)} characters, above the limit of 65536")
        return v


def _http(exc: ApiError) -> Exception:
    from fastapi import HTTPException

    return HTTPException(exc.status, str(exc), headers=exc.headers)


def _blocks(observation: dict[str, Any]) -> list[Any]:
    """An observation on the wire with PNG frames (``wire.encode_observation``) as ORS blocks: its text, then one
    image block per frame."""
    from openreward.environments import ImageBlock, TextBlock

    blocks: list[Any] = [TextBlock(text=observation["text"])] if observation["text"] else []
    for png, t in zip(observation["frames"]["data"], observation["timestamps"], strict=True):
        blocks.append(ImageBlock(data=png, mimeType="image/png", detail={"timestamp": t}))
    return blocks


def ors_environment(server: Any) -> type:
    """ORS's environment class for ``server`` (an ``EnvServer``): its store, limits and worker threads."""
    from fastapi import HTTPException
    from openreward.environments import Environment, ToolOutput, tool

    store = server.store

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=server.limiter)

    def task(i: int) -> dict[str, Any]:
        s = store.samples[i]
        return {"index": i, "sample_id": s.id, "question_type": s.question_type, "duration": s.duration}

    class VideoTool(Environment):
        """ParaVT-Gym's VideoToolEnv: long-video QA with parallel crop_video calls."""

        def __init__(self, task_spec: Any = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (ORS's signature)
            super().__init__(task_spec, secrets)
            if not isinstance(task_spec, dict):
                raise HTTPException(400, "a task spec is an object (POST /videotool/tasks lists them)")
            unknown = sorted(set(task_spec) - TASK_KEYS)
            if unknown:
                raise HTTPException(400, f"unknown task field(s) {unknown}; known: {sorted(TASK_KEYS)}")
            self.sid: str | None = None
            self.prompt: list[Any] = []
            self.call_arguments: dict[str, Any] = {}
            try:
                self.sid = store.open_session(
                    {"options": task_spec.get("options") or {}, "frame_encoding": "png"}
                ).id
            except ApiError as exc:
                raise _http(exc) from None

        async def setup(self) -> None:
            """The episode's reset (decoding the video): ORS runs it after ``/create``, before the prompt."""
            spec = self.task_spec
            options = {
                k: spec[k] for k in ("index", "sample_id", "epoch", "frame_budget") if spec.get(k) is not None
            }
            if "index" in options and "sample_id" in options:
                # a listed task carries both; they must name the same sample
                i = options["index"]
                if not (
                    isinstance(i, int)
                    and 0 <= i < len(store.samples)
                    and store.samples[i].id == str(options["sample_id"])
                ):
                    self.teardown()
                    raise HTTPException(
                        400, f"task index {i!r} and sample_id {options['sample_id']!r} name different samples"
                    )
                del options["sample_id"]
            body = {"seed": spec.get("seed"), "options": options}
            try:
                out = await in_thread(server.locked, self.sid, lambda s: store.reset(s, body))
            except ApiError as exc:
                self.teardown()  # an episode that cannot start holds no session of the store
                raise _http(exc) from None
            self.call_arguments = out["info"].get("call_arguments") or {}
            self.prompt = _blocks(out["observation"])

        def teardown(self) -> None:
            if self.sid is not None:
                with contextlib.suppress(ApiError):  # reaped for idling already
                    store.close_session(self.sid)
                self.sid = None

        def get_prompt(self) -> list[Any]:
            return self.prompt

        @classmethod
        def list_splits(cls) -> list[str]:
            return [SPLIT]

        @classmethod
        def list_tasks(cls, split: str) -> list[dict[str, Any]]:
            return [task(i) for i in range(len(store.samples))]

        async def _turn(self, name: str, arguments: dict[str, Any]) -> Any:
            try:  # the models above admit only what renders; the check stays so no call skips it
                text = turn_for(name, arguments, self.call_arguments)
            except ToolCallError as exc:
                raise HTTPException(400, str(exc)) from None
            try:
                out = await in_thread(server.locked, self.sid, lambda s: store.step(s, {"action": text}))
            except ApiError as exc:
                raise _http(exc) from None
            return ToolOutput(blocks=_blocks(out["observation"]), metadata=jsonable(out["info"]), reward=out["reward"],
                              finished=bool(out["terminated"] or out["truncated"]))  # fmt: skip

        @tool(exclusive=True)
        async def crop_video(self, args: Window) -> ToolOutput:
            """Look closer at one window of the video (seconds): its frames come back."""
            return await self._turn("crop_video", args.model_dump())

        @tool(exclusive=True)
        async def crop_video_parallel(self, args: Windows) -> ToolOutput:
            """Look closer at several windows of the video in one turn; their frames come back together."""
            return await self._turn("crop_video_parallel", args.model_dump())

        @tool(exclusive=True)
        async def answer(self, args: Answer) -> ToolOutput:
            """Give the final answer; the episode ends and is scored."""
            return await self._turn("answer", args.model_dump())

    VideoTool.__name__ = VideoTool.__qualname__ = ENV_NAME  # ORS routes an environment by its class name
    return VideoTool


OURS = frozenset({"v1", "openenv", "health", "docs", "redoc", "openapi.json"})
"""The first path segments serve-env's own app answers; every other path is ORS's (``/create_session``,
``/create``, ``/videotool/...``). ``/health`` is ours: its ``{"status": "ok", ...}`` is a superset of ORS's."""


class WithOrs:
    """serve-env's app and ORS's side by side at the root of one port (the ORS client takes a host, not a path):
    a request goes to the app that owns its first path segment; the lifespan (ORS's session reaper) to ORS's."""

    def __init__(self, ours: Any, ors: Any) -> None:
        self.ours, self.ors = ours, ors

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.ors(scope, receive, send)
            return
        first = scope.get("path", "/").strip("/").split("/", 1)[0]
        await (self.ours if first in OURS else self.ors)(scope, receive, send)


def with_ors(app: Any, server: Any) -> Any:
    """``app`` with ORS beside it when ``openreward`` is installed; else ``app``, whose ORS entry points answer 501
    and say what to install."""
    if available():
        from openreward.environments import Server

        return WithOrs(app, Server([ors_environment(server)], return_errors="exception").app)
    from .asgi import error_response

    async def not_installed() -> Any:
        return error_response(501, "this server speaks the Open Reward Standard when the openreward package is "
                                   "installed: pip install 'paravt-gym[ors]'", "NotImplemented")  # fmt: skip

    for path in ("/create_session", "/create", "/list_environments"):
        app.add_api_route(path, not_installed, methods=["GET", "POST"], include_in_schema=False)
    return app
