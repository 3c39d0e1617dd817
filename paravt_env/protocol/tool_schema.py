"""The ``crop_video`` tool as the model sees it: a JSON schema (OpenAI / Qwen function-calling layout) and
the canonical way to write a call."""

from __future__ import annotations

import json
from typing import Any

TOOL_NAME = "crop_video"

CROP_VIDEO_TOOL: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Look closer at part of the video: returns frames sampled at 1 frame per second (at most 16) "
            "from the window [start_time, end_time], each tagged with its time. Call it several times in "
            "one turn to inspect several windows in parallel."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "start_time": {
                    "type": "number",
                    "description": "Start of the window, in seconds from the video start.",
                },
                "end_time": {
                    "type": "number",
                    "description": "End of the window, in seconds; larger than start_time.",
                },
            },
            "required": ["start_time", "end_time"],
        },
    },
}
"""Pass as ``tools=[CROP_VIDEO_TOOL]`` to a chat template or an OpenAI-compatible server."""


def format_tool_call(start_time: float, end_time: float, extra: dict[str, Any] | None = None) -> str:
    """One call in the canonical JSON form, e.g. for SFT targets and scripted agents; ``extra``: arguments the
    protocol asks for first (LongVT's ``video_path``: ``info["call_arguments"]``)."""
    args = {**(extra or {}), "start_time": round(float(start_time), 2), "end_time": round(float(end_time), 2)}
    return f"<tool_call>\n{json.dumps({'name': TOOL_NAME, 'arguments': args})}\n</tool_call>"
