"""LongVT's evaluation protocol (arXiv 2511.20785; ``EvolvingLMMs-Lab/LongVT`` @ 08d755b, driven by lmms-eval's
``async_openai`` chat model): the facts a compatible re-implementation needs, read from the release and written
down in ``benchmarks/peers/longvt_release_notes.md``.

- No system prompt: the server's chat template (``examples/eval/tool_call_qwen2_5_vl.jinja``) writes its default
  one and the tool block (``tools_system_text``).
- One user message: the overview frames (qwen-vl-utils at 1 fps, at most ``--frame-budget`` of them, 784 to 50176
  pixels, no timestamps), the question with ``TOOL_PROMPT`` after one space, then the driver's path line.
- The tool is its MCP server's ``crop_video(video_path, start_time, end_time)`` in seconds, called in Hermes form
  (``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``); a crop returns 1 frame a second of the window
  (at most 128) and nothing else, or FastMCP's error text.
- The scored answer is the first ``<answer>...</answer>`` (else the last ``\\boxed{}``, else the last line's
  trailing number).
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

TOOL_PROMPT = (
    "Think first, call **crop_video** if needed, then answer. Format strictly as:  <think>...</think>  "
    "<tool_call>...</tool_call> (if tools needed)  <answer>...</answer>."
)
"""The task's instruction after the question (``lmms_eval_tasks/longvt/utils.py``; the double spaces are its own)."""

DEFAULT_SYSTEM = "You are a helpful assistant."
"""What the chat template writes as the system prompt when the request has none."""

TOOL = {
    "type": "function",
    "function": {
        "name": "crop_video",
        "description": "Crop a video to a specified duration.",
        "parameters": {
            "properties": {
                "video_path": {"default": None, "description": "Path to the video file", "title": "Video Path",
                               "type": "string"},
                "start_time": {"default": None, "description": "Start time in seconds", "title": "Start Time",
                               "type": "number"},
                "end_time": {"default": None, "description": "End time in seconds, must be > start_time",
                             "title": "End Time", "type": "number"},
            },
            "title": "crop_videoArguments",
            "type": "object",
        },
    },
}  # fmt: skip
"""The tool entry the driver sends: the MCP server's FastMCP input schema (every argument defaults to None, so
nothing is ``required``) in an OpenAI function wrapper (lmms-eval's ``MCPClient.get_function_list``)."""

OVERVIEW_SPEC = {"fps": 1.0, "min_pixels": 784, "max_pixels": 50176}
"""The overview request (``run_eval.sh``: ``fps=1,max_frames=$MAX_FRAME_NUM,max_pixels=50176``; the frame budget
is ``max_frames``, 768 in the paper's runs)."""
CROP_SPEC = {"fps": 1.0, "min_frames": 1, "max_frames": 128, "min_pixels": 784, "max_pixels": 50176}
"""The MCP server's ``fetch_video`` request for a crop."""


def tools_system_text(system: str = DEFAULT_SYSTEM) -> str:
    """The system message's text as LongVT's eval chat template writes it for a request with tools (between
    ``<|im_start|>system\\n`` and ``<|im_end|>``): the system prompt, then the Hermes tool block with each tool
    as JSON (``tojson``: ``", "`` and ``": "`` separators, keys in order)."""
    tools = "".join(json.dumps(t, ensure_ascii=False) for t in (TOOL,))
    return (
        f"{system}\n# Tools\nYou may call one or more functions to assist with the user query.\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>{tools}</tools>\n"
        "For each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>{"name": <function-name>, "arguments": '
        "<args-json-object>}</tool_call>"
    )


def question_text(question: str) -> str:
    """The task's text part: the question, one space, ``TOOL_PROMPT``."""
    return question.strip() + " " + TOOL_PROMPT


def path_line(video_path: str) -> str:
    """The text part the driver appends after the task's when it offers tools."""
    return f"\nVideo 0 has video path: {video_path}"


def tool_error(message: str) -> str:
    """A failed call's tool result: FastMCP's text for an exception the tool raised."""
    return f"Error executing tool crop_video: {message}"


def _number(value: Any) -> float | None:
    """A JSON argument as the tool's pydantic ``float`` reads it: numbers and numeric strings; None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def crop_problem(arguments: dict[str, Any], video_path: str, duration: float) -> str | None:
    """Why the MCP server refuses these arguments (its checks, in its order, with its messages), or None when
    it crops. A path other than the episode's video is reported as not found: the env opens no other file."""
    path = arguments.get("video_path")
    start, end = arguments.get("start_time"), arguments.get("end_time")
    for name, value in (("video_path", path), ("start_time", start), ("end_time", end)):
        if value is None:
            return f"{name} parameter is required"
    s, e = _number(start), _number(end)
    if s is None or e is None or not isinstance(path, str):
        bad = "video_path" if not isinstance(path, str) else "start_time" if s is None else "end_time"
        return f"1 validation error for crop_videoArguments\n{bad}\n  Input should be a valid " + (
            "string" if bad == "video_path" else "number")
    if not path.strip():
        return "video_path cannot be empty"
    if s < 0:
        return f"start_time must be non-negative, got {s}"
    if e <= s:
        return f"end_time ({e}) must be greater than start_time ({s})"
    if os.path.normpath(os.path.abspath(path)) != os.path.normpath(os.path.abspath(video_path)):
        return f"Video file not found: {path}"
    if s >= duration:
        return f"start_time ({s}s) exceeds video duration ({duration:.2f}s)"
    if e > duration:
        return f"end_time ({e}s) exceeds video duration ({duration:.2f}s)"
    return None


_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_TRAILING_NUMBER_RE = re.compile(r"(-?\d+(?:\.\d+)?)\s*$")


def _last_boxed(text: str) -> str | None:
    """The body of the last ``\\boxed{...}``, braces matched."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None


def longvt_answer(text: str) -> str:
    """The answer LongVT's scorer reads: the first ``<answer>`` body, else the last ``\\boxed{}``, else the
    trailing number of the last line; stripped of one trailing full stop. ``""`` when there is none."""
    m = _ANSWER_RE.search(text)
    found = m.group(1) if m else _last_boxed(text)
    if found is None:
        lines = text.strip().splitlines()
        n = _TRAILING_NUMBER_RE.search(lines[-1]) if lines else None
        found = n.group(1) if n else ""
    found = found.strip()
    return found[:-1].strip() if found.endswith(".") else found


__all__ = ["CROP_SPEC", "DEFAULT_SYSTEM", "OVERVIEW_SPEC", "TOOL", "TOOL_PROMPT", "crop_problem", "longvt_answer",
           "path_line", "question_text", "tool_error", "tools_system_text"]
