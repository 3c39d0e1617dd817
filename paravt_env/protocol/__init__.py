"""The text protocol between agent and env: system prompts, the ``crop_video`` schema, the response parser,
and how frames and times are written into the text."""

from .markers import IMAGE_PLACEHOLDER, THINK_PREFIX, count_placeholders, frame_marker, frames_block
from .parser import STRUCTURAL_TAGS, ParsedResponse, TagSpan, ToolCall, parse_response
from .prompts import ANSWER_FORMATS, PROMPT_MODES, SYSTEM_PROMPTS, system_prompt, uses_tools
from .times import parse_time
from .tool_schema import CROP_VIDEO_TOOL, TOOL_NAME, format_tool_call

__all__ = [
    "ANSWER_FORMATS",
    "CROP_VIDEO_TOOL",
    "IMAGE_PLACEHOLDER",
    "PROMPT_MODES",
    "STRUCTURAL_TAGS",
    "SYSTEM_PROMPTS",
    "THINK_PREFIX",
    "TOOL_NAME",
    "ParsedResponse",
    "TagSpan",
    "ToolCall",
    "count_placeholders",
    "format_tool_call",
    "frame_marker",
    "frames_block",
    "parse_response",
    "parse_time",
    "system_prompt",
    "uses_tools",
]
