"""The env's tools as MCP tools, for OpenEnv's ``MCPToolClient`` over ``/openenv/ws`` (``openenv-core`` 0.3).

OpenEnv's MCP clients send ``{"type": "step", "data": {"type": "list_tools"}}`` and ``{"type": "step", "data":
{"type": "call_tool", "tool_name", "arguments"}}``; each call is one turn of the episode, and its result comes back
with the turn's reward and ``done`` inline (OpenEnv's simulation mode: tools with rewards). Three tools:

- ``crop_video(start_time, end_time)``: a turn of one call (what a sequential agent sends);
- ``crop_video_parallel(windows=[{start_time, end_time}, ...])``: a turn of several calls, run together (ParaVT's
  parallel turn; the env's ``max_parallel`` and crop budget apply as to any turn);
- ``answer(answer)``: the final turn.

Each is rendered as the turn text the env reads (``format_tool_call``, with the arguments the protocol asks for,
``info["call_arguments"]``), so an MCP agent plays exactly the episode a text agent would. A call this surface
cannot render (an unknown tool, missing or non-numeric times, too many windows) is a ``ToolCallError`` with MCP's
error type, and no turn is taken.
"""

from __future__ import annotations

import math
from typing import Any

from paravt_env.protocol.tool_schema import format_tool_call

MAX_WINDOWS = 64
"""The most windows one ``crop_video_parallel`` call may carry (the env rejects those past ``max_parallel``; this
bounds what a client may send)."""

_WINDOW = {"type": "object", "properties": {"start_time": {"type": "number", "description": "seconds"},
                                            "end_time": {"type": "number", "description": "seconds"}},
           "required": ["start_time", "end_time"]}  # fmt: skip
TOOLS = [
    {"name": "crop_video", "description": "Look closer at one window of the video: its frames come back.",
     "input_schema": _WINDOW},
    {"name": "crop_video_parallel",
     "description": "Look closer at several windows of the video in one turn; their frames come back together.",
     "input_schema": {"type": "object", "required": ["windows"],
                      "properties": {"windows": {"type": "array", "items": _WINDOW, "maxItems": MAX_WINDOWS}}}},
    {"name": "answer", "description": "Give the final answer; the episode ends and is scored.",
     "input_schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}},
]  # fmt: skip


class ToolCallError(ValueError):
    """A call that renders to no turn; ``error_type`` is MCP's (``ToolErrorType``'s value)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _window(w: Any, where: str) -> tuple[float, float]:
    if not isinstance(w, dict):
        raise ToolCallError("invalid_args", f"{where}: a window is an object {{start_time, end_time}}")
    out = []
    for key in ("start_time", "end_time"):
        v = w.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ToolCallError("invalid_args", f"{where}: {key} must be a finite number of seconds, got {v!r}")
        out.append(float(v))
    return out[0], out[1]


def turn_for(tool_name: Any, arguments: Any, call_arguments: dict[str, Any] | None = None) -> str:
    """The turn text for one MCP call (module docstring); ``call_arguments``: what the protocol puts in every
    call (LongVT's ``video_path``)."""
    if not isinstance(arguments, dict):
        raise ToolCallError("invalid_args", "arguments must be an object")
    if tool_name == "crop_video":
        return format_tool_call(*_window(arguments, "crop_video"), call_arguments)
    if tool_name == "crop_video_parallel":
        windows = arguments.get("windows")
        if not isinstance(windows, list) or not windows:
            raise ToolCallError("invalid_args", "crop_video_parallel: windows must be a non-empty list")
        if len(windows) > MAX_WINDOWS:
            raise ToolCallError("invalid_args", f"crop_video_parallel: {len(windows)} windows, above the limit of {MAX_WINDOWS}")
        return "".join(format_tool_call(*_window(w, f"crop_video_parallel windows[{i}]"), call_arguments)
                       for i, w in enumerate(windows))  # fmt: skip
    if tool_name == "answer":
        if not isinstance(arguments.get("answer"), str):
            raise ToolCallError("invalid_args", "answer: 'answer' must be a string")
        return f"<answer>{arguments['answer']}</answer>"
    raise ToolCallError("tool_not_found", f"unknown tool {tool_name!r}; tools: {', '.join(t['name'] for t in TOOLS)}")
