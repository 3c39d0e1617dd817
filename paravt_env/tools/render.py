"""What the agent reads back after its tool calls: one ``<tool_response>`` block per call, in call order."""

from __future__ import annotations

from ..protocol.markers import escape_placeholders, frames_block
from ..video import Frames
from .crop import CropResult
from .dispatch import TurnToolReport

_echo = escape_placeholders


def _describe(result: CropResult, tool_result: str) -> str:
    head = f"crop_video call #{result.call_index + 1}"
    if result.status != "executed":
        return f"{head} {result.status}: {_echo(result.error)}"
    req = result.request
    lines = [f"{head}: window [{req.start:.1f}, {req.end:.1f}] s, {len(result.frames)} frames"]
    lines += [f"note: {_echo(n)}" for n in req.notes]
    if tool_result == "subagent":
        lines.append(f"sub-agent summary: {_echo(result.summary)}")
    else:
        lines.append(frames_block(result.frames.timestamps))
    return "\n".join(lines)


def render_tool_responses(report: TurnToolReport, tool_result: str) -> tuple[str, Frames]:
    """The feedback text and the frames it refers to (none in "subagent" mode: the summaries replace them)."""
    blocks = [f"<tool_response>\n{_describe(r, tool_result)}\n</tool_response>" for r in report.results]
    if tool_result == "subagent":
        frames = Frames.empty()
    else:
        frames = Frames.concatenate([r.frames for r in report.results if r.status == "executed"])
    return "\n".join(blocks), frames
