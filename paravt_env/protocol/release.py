"""The released ParaVT eval driver's and RL workflow's messages (``protocol="release"``), rule for rule.

A released checkpoint (ParaVT-8B, Qwen3-VL-8B under the ParaVT prompt) was evaluated by the release's
driver (EvolvingLMMs-Lab/ParaVT ``paravt/eval/driver.py``); shown anything else it is out of distribution
and scores lower for reasons nobody can see. This module holds what that driver writes and how it reads a
reply, so that ``VideoToolEnv(protocol="release")`` renders the same requests:

- system prompts of the four prompt modes the paper's rows use (``direct``, ``reasoning``,
  ``agentic_general``, ``agentic_minimal``) and the tool schema they embed (which, unlike ours, requires a
  ``video_path`` argument: the driver ignores it and crops the sample's own video);
- the user turn: the overview frames as images without timestamps, then the benchmark's question text
  (``paravt_env.data.release_questions``), then, in the agentic modes, ``The video path for this video is:
  <file name>``;
- one user message per executed crop: its frames then ``<tool_response>\\n{n} frames from {st:.1f}s to
  {et:.1f}s.\\n</tool_response>``, or the error text when the crop yields no frame;
- calls are read only from ``<tool_call>{json}</tool_call>`` and ``<tool_code>crop_video(k=v, ...)</tool_code>``;
  the first ``max_parallel`` run, any others are dropped silently; calls beside an answer run too;
- a turn without a readable call is the final response; after ``max_turns`` rounds of calls a forced
  final-answer message is sent, with its own token cap (64 for multiple choice, 128 for grounding).

Its RL workflow (``paravt/rl/workflow.py``, ``paravt/rl/subagents/crop_video``) writes differently: a tool
block appended to the parquet's system prompt, a sub-agent prompt naming only the window, summaries cut at
512 tokens, one ``<tool_response>`` per summary (the second part of this module; the episode is
``paravt_env.episodes.release_rl``).

What the release does that is unsound is reproduced here on purpose (the point is to see what the release
showed the model) and documented where it happens; ``protocol="paravt"`` keeps the sound behaviour.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from ..records import finite_or_none
from .markers import escape_placeholders

RELEASE_PROMPT_MODES = ("direct", "reasoning", "agentic_general", "agentic_minimal")
"""The release's prompt modes with a prompt in its tree (its three baseline-specific modes are stubs)."""

MODE_ALIASES = {"agentic": "agentic_general", "agentic_compact": "agentic_general"}
"""Our prompt-mode names for the release's default agentic mode (``agentic_compact``, our short form of
``agentic``, is asked in the release's own words)."""

DEFAULT_MAX_TOKENS = 2048
"""Output cap of every generation but the forced final one (the driver's ``--max_tokens``)."""

RELEASE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "crop_video",
        "description": "Analyze a cropped video segment by sampling frames from a specific time range.",
        "parameters": {
            "type": "object",
            "properties": {
                "video_path": {"type": "string", "description": "Path to the video file"},
                "start_time": {"type": "number", "description": "Start time in seconds"},
                "end_time": {"type": "number", "description": "End time in seconds"},
            },
            "required": ["video_path", "start_time", "end_time"],
        },
    },
}
"""The release's ``crop_video`` schema (it matches its SFT data), rendered with ``json.dumps`` defaults."""

_SCHEMA = json.dumps(RELEASE_TOOL)

_DIRECT = (
    "You are a helpful video understanding assistant. Watch the video carefully and answer the question. "
    "Provide your final answer in <answer></answer> tags."
)

_REASONING = (
    "You are a helpful assistant. When the user asks a question, your response must include two parts: "
    "first, the reasoning process enclosed in <think>...</think> tags, then the final answer enclosed in "
    "<answer>...</answer> tags."
)

_AGENTIC_GENERAL = (
    "You are a video understanding agent that can analyze videos by cropping and examining specific "
    "segments.\n"
    "\n"
    "Available tool:\n"
    "<tools>\n"
    f"{_SCHEMA}\n"
    "</tools>\n"
    "\n"
    "For tool calls, return a JSON object within <tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{"name": "crop_video", "arguments": {"video_path": "...", "start_time": 0, "end_time": 10}}\n'
    "</tool_call>\n"
    "\n"
    "You may emit **multiple <tool_call> blocks in one turn** to analyze different segments in parallel "
    "\u2014 this is more efficient than sequential calls and is the recommended dispatch shape for this agent.\n"
    "\n"
    "Format strictly as:\n"
    "<think>your reasoning here</think>\n"
    "<tool_call>...</tool_call>  (zero or more, parallel if multiple)\n"
    "<answer>your final answer</answer>\n"
    "\n"
    "Always wrap your reasoning in <think> tags and your final answer in <answer> tags."
)

_AGENTIC_MINIMAL = (
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    f"{_SCHEMA}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)

RELEASE_SYSTEM_PROMPTS = {
    "direct": _DIRECT,
    "reasoning": _REASONING,
    "agentic_general": _AGENTIC_GENERAL,
    "agentic_minimal": _AGENTIC_MINIMAL,
}

MCQ_INSTRUCTION = "Answer with the option letter only."
DIRECT_MCQ_INSTRUCTION = (
    "Think step by step, use crop_video if needed, then provide your answer in <answer>X</answer> tags where "
    "X is the option letter."
)
"""The release appends this one to multiple-choice questions in ``direct`` mode only (it mentions a tool that
mode does not offer, and every other mode gets the bare letter instruction): reproduced as is."""

FORCED_FINAL = {
    True: ("Based on the video and cropped segments above, answer with ONLY the letter.", 64),
    False: (
        "Based on the video and any cropped segments, provide your final answer about when the event happens. "
        "Use the format: 'The event happens in the X.X - Y.Y seconds.'",
        128,
    ),
}
"""(message, token cap) of the forced final turn, by ``is_mcq``."""


def release_mode(mode: str) -> str:
    """The release's name of ``mode`` (``agentic`` is its ``agentic_general``), checked."""
    name = MODE_ALIASES.get(mode, mode)
    if name not in RELEASE_PROMPT_MODES:
        raise ValueError(f"the release protocol has no prompt mode {mode!r}; known: {RELEASE_PROMPT_MODES}")
    return name


def is_agentic(mode: str) -> bool:
    return release_mode(mode).startswith("agentic_")


def release_system_prompt(mode: str) -> str:
    return RELEASE_SYSTEM_PROMPTS[release_mode(mode)]


def mcq_instruction(mode: str) -> str:
    return DIRECT_MCQ_INSTRUCTION if release_mode(mode) == "direct" else MCQ_INSTRUCTION


def user_question(question: str, video_path: str, mode: str) -> str:
    """The text after the frames: the question, plus the video's file name in the agentic modes (unless the
    question already speaks of a "video path")."""
    if is_agentic(mode) and "video path" not in question.lower():
        return f"{question} The video path for this video is: {os.path.basename(video_path)}"
    return question


def tool_response(n_frames: int, start: float, end: float) -> str:
    """The text after one crop's frames (times as the model asked for them, not clamped)."""
    return f"<tool_response>\n{n_frames} frames from {start:.1f}s to {end:.1f}s.\n</tool_response>"


def crop_error(start: float, end: float) -> str:
    """The whole message of a crop that yielded no frame."""
    return f"<tool_response>\n[Error cropping {start:.1f}s-{end:.1f}s]\n</tool_response>"


# --- the RL workflow (paravt/rl/workflow.py, paravt/rl/subagents/crop_video) -------------------------------
RL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "crop_video",
        "description": (
            "Analyze a cropped video segment by sampling fixed number of frames and providing a summary of the "
            "content. Use this when you need to understand what happens in a specific time range of a video."
        ),
        "parameters": RELEASE_TOOL["function"]["parameters"]["properties"],
    },
}
"""The schema the RL workflow writes (its sub-agent's description; ``parameters`` holds the bare properties)."""

RL_TOOLS_SYSTEM = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    f"{json.dumps(RL_TOOL)}\n"
    "</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)
"""Appended to the parquet's system prompt (after a blank line) when it holds no ``<tools>`` block, or the
whole system prompt when the parquet has none."""

MAX_TOOL_RESPONSE_TOKENS = 512
"""A sub-agent summary longer than this many tokens is cut there and ends with " [truncated]"."""

def _mm_ss(seconds: float) -> str:
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


def release_subagent_prompt(start: float, end: float) -> str:
    """The text after the crop's frames in the release's sub-agent request (only the window, no question)."""
    return (
        f"You are analyzing a video segment from {_mm_ss(start)} to {_mm_ss(end)} (duration: {end - start:.1f} "
        "seconds).\n\n"
        "The images shown are frames sampled from this video segment. Carefully examine each frame in sequence "
        "to understand the temporal progression of events.\n\n"
        "Your task: Provide a concise summary of what happens in this video segment.\n\n"
        "Guidelines:\n"
        "- Describe the key actions, events, or changes that occur across the frames\n"
        "- Note any important objects, people, or elements visible in the scene\n"
        "- Capture the temporal flow (what happens first, then, finally)\n"
        "- Focus on factual observations rather than interpretations\n\n"
        "Summary:"
    )


def rl_tool_response(summary: str) -> str:
    """The release's tool message around a sub-agent's summary; a placeholder the summary writes is defused
    (in the release it is plain text; here it would stand for a frame that is not there)."""
    return f"<tool_response>\n{escape_placeholders(summary)}\n</tool_response>"


RL_CROP_FAILED = "[Error: crop_video failed]"


# --- reading a reply --------------------------------------------------------------------------------------
class ReleaseCallError(ValueError):
    """A call the release's driver cannot handle: its ``<tool_call>`` holds JSON that is not an object, or
    its ``arguments`` is not an object. The driver then fails the whole sample (score 0, an error row)."""


@dataclass(frozen=True)
class ReleaseCall:
    """One crop as the release's driver runs it: times already read its way."""

    start: float
    end: float
    arguments: dict[str, Any]


_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_TOOL_CODE_RE = re.compile(r"<tool_code>\s*(.*?)\s*</tool_code>", re.DOTALL)
_CROP_CODE_RE = re.compile(r"crop_video\s*\((.*)\)\s*", re.DOTALL)
_KWARG_SPLIT_RE = re.compile(r",\s*(?=[a-zA-Z_]+\s*=)")


def release_time(value: Any) -> float:
    """Seconds the release's way: numbers and numeric strings, ``MM:SS`` / ``HH:MM:SS``; anything else 0.0.
    An integer beyond a float's range (JSON allows 400 digits) is the ``ReleaseCallError`` Python's own
    ``float()`` would make of it in the driver, never an exception out of ``step``."""
    try:
        return float(value)
    except OverflowError:
        raise ReleaseCallError(f"a crop time of {len(str(value))} digits is beyond a float's range") from None
    except (TypeError, ValueError):
        pass
    if isinstance(value, str) and ":" in value:
        parts = value.split(":")
        try:
            if len(parts) == 2:
                return float(parts[0]) * 60 + float(parts[1])
            if len(parts) == 3:
                return float(parts[0]) * 3600 + float(parts[1]) * 60 + float(parts[2])
        except ValueError:
            pass
    return 0.0


def _code_arguments(body: str) -> dict[str, Any] | None:
    """``crop_video(start_time=1, end_time=2)`` -> its keyword arguments (floats where they parse)."""
    body = body.strip()
    if not body or body.startswith("<|im_end|>"):
        return None
    m = _CROP_CODE_RE.match(body)
    if not m:
        return None
    args: dict[str, Any] = {}
    for kv in _KWARG_SPLIT_RE.split(m.group(1)):
        if "=" not in kv:
            continue
        key, value = kv.split("=", 1)
        value = value.strip().strip("\"'")
        try:
            args[key.strip()] = float(value)
        except ValueError:
            args[key.strip()] = value
    return args or None


def raw_release_calls(text: str) -> list[Any]:
    """Every call the release's parser finds, in its order: each ``<tool_call>`` whose body is valid JSON
    (any JSON value: the driver does not check), then each readable ``<tool_code>`` call. The tool name is
    never checked: every call crops."""
    calls: list[Any] = []
    for body in _TOOL_CALL_RE.findall(text):
        with contextlib.suppress(ValueError):  # invalid JSON: the release skips the block
            calls.append(json.loads(body))
    for body in _TOOL_CODE_RE.findall(text):
        args = _code_arguments(body)
        if args is not None:
            calls.append({"name": "crop_video", "arguments": args})
    return calls


_HERMES_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


@dataclass
class HermesCall:
    """One call as the release's RL workflow reads it (its Hermes tool parser)."""

    name: Any
    arguments: dict[str, Any]

    @property
    def start_time(self) -> float | None:
        return finite_or_none(self.arguments.get("start_time"))

    @property
    def end_time(self) -> float | None:
        return finite_or_none(self.arguments.get("end_time"))


def hermes_calls(text: str) -> list[HermesCall]:
    """The calls of one generation as the release's RL workflow parses them (``paravt/rl/workflow.py`` through
    its Hermes tool parser): every ``<tool_call>`` block, closed or running to the end of the text, must hold a
    JSON object with ``name`` and object ``arguments``; if any one does not, the turn has no call at all (the
    parser fails as a whole and the episode ends). ``<tool_code>`` is not read."""
    calls = []
    for closed, unclosed in _HERMES_RE.findall(text):
        try:
            body = json.loads(closed or unclosed)
            name, arguments = body["name"], body["arguments"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return []
        if not isinstance(arguments, dict):
            return []
        calls.append(HermesCall(name, arguments))
    return calls


def release_calls(text: str, max_parallel: int) -> list[ReleaseCall]:
    """The crops the release's driver runs for one reply: the first ``max_parallel`` calls (all when
    ``max_parallel <= 0``), times defaulting to start 0 and end start + 10. Raises ``ReleaseCallError`` where
    the driver fails the sample."""
    calls = raw_release_calls(text)
    if max_parallel > 0:
        calls = calls[:max_parallel]
    out = []
    for call in calls:
        if not isinstance(call, dict):
            raise ReleaseCallError(f"a <tool_call> holds {type(call).__name__} JSON, not an object")
        args = call.get("arguments", {})
        if not isinstance(args, dict):
            raise ReleaseCallError(f"a tool call's arguments is {type(args).__name__}, not an object")
        start = release_time(args.get("start_time", args.get("start", 0)))
        end = release_time(args.get("end_time", args.get("end", start + 10)))
        out.append(ReleaseCall(start, end, args))
    return out


__all__ = [
    "HermesCall",
    "hermes_calls",
    "DEFAULT_MAX_TOKENS",
    "FORCED_FINAL",
    "MAX_TOOL_RESPONSE_TOKENS",
    "RL_CROP_FAILED",
    "RL_TOOL",
    "RL_TOOLS_SYSTEM",
    "RELEASE_PROMPT_MODES",
    "RELEASE_SYSTEM_PROMPTS",
    "RELEASE_TOOL",
    "ReleaseCall",
    "ReleaseCallError",
    "crop_error",
    "is_agentic",
    "mcq_instruction",
    "raw_release_calls",
    "release_calls",
    "release_mode",
    "release_subagent_prompt",
    "release_system_prompt",
    "release_time",
    "rl_tool_response",
    "tool_response",
    "user_question",
]
