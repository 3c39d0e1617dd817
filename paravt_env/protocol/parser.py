"""``parse_response``: read one model turn into think text, tool calls, answer, problems and tag spans.

The parser is for *acting* (which crops to run, whether the agent answered) and for *locating* the
structural tags (Exploration Anchoring needs their token positions). It is deliberately more forgiving than
the released reward's own predicates, which ``paravt_env.rewards`` keeps verbatim for parity: a call the
model meant is executed, and what was wrong with it is reported back as feedback.

Understood call forms, anywhere in the turn (also inside ``<think>``, as the released workflow's parser):

- ``<tool_call>{"name": "crop_video", "arguments": {"start_time": 10, "end_time": 20}}</tool_call>``,
  also with ``"parameters"``, an ``arguments`` JSON string, an OpenAI ``{"function": {...}}`` wrapper, a
  JSON list of calls, a Markdown code fence, or a Python call inside the tags;
- ``<tool_code>crop_video(start_time=10, end_time=20)</tool_code>`` (the Qwen-VL pre-training prior):
  keyword or positional arguments (``crop_video(10, 20)``, ``crop_video("v.mp4", 10, 20)``), one call per
  line or several statements, ``print(...)`` wrappers;
- argument aliases ``start``/``end`` (and ``start_sec``, ``begin``, ...) and clock times ``"01:05"``,
  ``"0:01:05.5"``.

It never raises: on any input it returns a ``ParsedResponse`` (a problem is recorded instead).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .times import parse_time
from .tool_schema import TOOL_NAME

STRUCTURAL_TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<answer>", "</answer>")
"""The tags whose token positions Exploration Anchoring rewards (the paper's struct(o))."""

BLOCK_KINDS = ("think", "tool_call", "tool_code", "answer")

MAX_CALLS = 64
"""Calls beyond this in one turn are ignored (and reported): nobody needs 10,000 crops."""
MAX_CODE_CHARS = 20_000
"""``<tool_code>`` bodies longer than this are not parsed as Python (``ast`` on megabytes is slow)."""

START_KEYS = (
    "start_time",
    "start",
    "start_sec",
    "start_secs",
    "start_seconds",
    "begin",
    "begin_time",
    "from",
)
END_KEYS = ("end_time", "end", "end_sec", "end_secs", "end_seconds", "stop", "stop_time", "to")

_TAG_RE = re.compile(r"<(/?)(think|tool_call|tool_code|answer)>")
_STRUCT_RE = re.compile(r"</?(?:think|tool_call|answer)>")
_OPEN_THINK_END_RE = re.compile(r"<tool_|<answer>|<\|im_end\|>")
_FENCE_RE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class TagSpan:
    """One structural tag in the text: ``text[start:end] == tag``."""

    tag: str
    start: int
    end: int


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model wrote it.

    ``start_time``/``end_time`` are seconds (``None`` if missing or unreadable); ``error`` says why the
    call cannot run as written (invalid JSON, missing argument, ...), ``None`` if it parsed.
    """

    name: str
    arguments: dict[str, Any]
    start_time: float | None
    end_time: float | None
    form: str  # "json" (<tool_call>) or "code" (<tool_code>, or Python inside <tool_call>)
    span: tuple[int, int]  # the whole block, tags included
    error: str | None = None


@dataclass(frozen=True)
class ParsedResponse:
    """What one turn says. ``answer is None`` means the turn gave no answer."""

    text: str
    think: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    problems: tuple[str, ...] = ()
    spans: tuple[TagSpan, ...] = field(default=(), repr=False)

    @property
    def valid_tool_calls(self) -> tuple[ToolCall, ...]:
        """Calls to ``crop_video`` that parsed with both times."""
        return tuple(c for c in self.tool_calls if c.error is None and c.name == TOOL_NAME)


@dataclass
class _Block:
    kind: str
    start: int  # index of "<"
    body_start: int
    body_end: int
    end: int  # one past the closing tag (or body_end when unclosed)
    closed: bool


def _scan_blocks(text: str, problems: list[str]) -> tuple[dict[str, list[_Block]], list[TagSpan]]:
    """Pair opening and closing tags, per kind, in one pass.

    An opening tag while the same kind is still open closes the previous block there (reported as
    unclosed); a closing tag with nothing open is reported as stray; a block still open at the end runs to
    the end of the text (for ``<think>``, to the first ``<tool_``/``<answer>``/``<|im_end|>`` after it).
    """
    blocks: dict[str, list[_Block]] = {k: [] for k in BLOCK_KINDS}
    open_at: dict[str, tuple[int, int] | None] = dict.fromkeys(BLOCK_KINDS)
    unclosed = dict.fromkeys(BLOCK_KINDS, 0)
    stray = dict.fromkeys(BLOCK_KINDS, 0)
    for m in _TAG_RE.finditer(text):
        kind, closing = m.group(2), bool(m.group(1))
        current = open_at[kind]
        if closing:
            if current is None:
                stray[kind] += 1
                continue
            blocks[kind].append(_Block(kind, current[0], current[1], m.start(), m.end(), True))
            open_at[kind] = None
        else:
            if current is not None:
                unclosed[kind] += 1
                blocks[kind].append(_Block(kind, current[0], current[1], m.start(), m.start(), False))
            open_at[kind] = (m.start(), m.end())
    for kind, current in open_at.items():
        if current is None:
            continue
        unclosed[kind] += 1
        end = len(text)
        if kind == "think":
            stop = _OPEN_THINK_END_RE.search(text, current[1])
            end = stop.start() if stop else end
        elif kind == "answer":
            stop = text.find("<|im_end|>", current[1])
            end = stop if stop != -1 else end
        blocks[kind].append(_Block(kind, current[0], current[1], end, end, False))
    for kind in BLOCK_KINDS:
        if unclosed[kind]:
            problems.append(f"unclosed <{kind}> ({unclosed[kind]}x): every <{kind}> needs a </{kind}>")
        if stray[kind]:
            problems.append(f"stray </{kind}> without an opening <{kind}> ({stray[kind]}x)")
    for kind in BLOCK_KINDS:
        blocks[kind].sort(key=lambda b: b.start)
    spans = [TagSpan(m.group(0), m.start(), m.end()) for m in _STRUCT_RE.finditer(text)]
    return blocks, spans


def _unfence(body: str) -> str:
    body = body.strip()
    m = _FENCE_RE.match(body)
    return m.group(1).strip() if m else body


def _times(arguments: dict[str, Any]) -> tuple[float | None, float | None, str | None]:
    """Start and end in seconds from the arguments (aliases and clock strings allowed), and what is wrong."""
    found: dict[str, float | None] = {}
    errors = []
    for canonical, keys in (("start_time", START_KEYS), ("end_time", END_KEYS)):
        key = next((k for k in keys if k in arguments), None)
        if key is None:
            errors.append(f"missing argument {canonical}")
            found[canonical] = None
            continue
        value = parse_time(arguments[key])
        if value is None:
            errors.append(f"argument {key}={str(arguments[key])[:40]!r} is not a time in seconds")
        found[canonical] = value
    return found["start_time"], found["end_time"], "; ".join(errors) or None


def _call(name: Any, arguments: Any, form: str, span: tuple[int, int], error: str | None = None) -> ToolCall:
    if not isinstance(name, str) or not name:
        return ToolCall("", {}, None, None, form, span, error or "the call has no tool name")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return ToolCall(
                name, {}, None, None, form, span, "arguments is a string that is not a JSON object"
            )
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(
            name, {}, None, None, form, span, f"arguments must be an object, got {type(arguments).__name__}"
        )
    if name != TOOL_NAME:
        return ToolCall(name, arguments, None, None, form, span, error)
    start, end, problem = _times(arguments)
    return ToolCall(name, arguments, start, end, form, span, error or problem)


def _json_calls(body: str, span: tuple[int, int]) -> list[ToolCall]:
    src = _unfence(body)
    if not src:
        return [ToolCall("", {}, None, None, "json", span, "empty <tool_call> block")]
    try:
        data = json.loads(src)
    except (ValueError, RecursionError) as exc:
        data = _lenient_json(src)
        if data is None:
            code = _code_calls(src, span) if "(" in src else []
            if code:
                return code
            reason = str(exc)[:120] if isinstance(exc, ValueError) else "nested too deeply"
            return [ToolCall("", {}, None, None, "json", span, f"invalid JSON in <tool_call>: {reason}")]
    items = data if isinstance(data, list) else [data]
    calls = []
    for item in items[:MAX_CALLS]:
        if not isinstance(item, dict):
            calls.append(ToolCall("", {}, None, None, "json", span, "a <tool_call> must hold a JSON object"))
            continue
        if isinstance(item.get("function"), dict):  # OpenAI layout: {"type": "function", "function": {...}}
            item = item["function"]
        arguments = item.get("arguments", item.get("parameters"))
        calls.append(_call(item.get("name"), arguments, "json", span))
    return calls


def _lenient_json(src: str) -> Any:
    """The first JSON value in ``src`` when junk surrounds it (a stray brace, trailing prose)."""
    start = src.find("{")
    if start == -1:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(src, start)
    except (ValueError, RecursionError):
        return None
    return data


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (
        Exception
    ):  # literal_eval raises ValueError, TypeError, SyntaxError, RecursionError, MemoryError...
        return _Unreadable(ast.unparse(node)[:40] if hasattr(ast, "unparse") else "?")


@dataclass(frozen=True)
class _Unreadable:
    source: str

    def __str__(self) -> str:
        return self.source


def _python_calls(tree: ast.AST) -> list[ast.Call]:
    """Top-level calls of each statement (``crop_video(...)``, ``x = crop_video(...)``, ``print(crop_video(...))``)."""
    out = []
    for stmt in getattr(tree, "body", []):
        node = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            node = node.args[0] if node.args else None
        if isinstance(node, ast.Call):
            out.append(node)
    return out


def _parse_python(src: str) -> list[ast.Call]:
    try:
        return _python_calls(ast.parse(src, mode="exec"))
    except Exception:  # SyntaxError, ValueError (NUL bytes), RecursionError, MemoryError
        pass
    calls = []
    for line in src.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # Models often leave a stray quote around the closing parenthesis: crop_video(1, 2)' or ...=20.0')
        for candidate in (line, re.sub(r"\)\s*['\"].*$", ")", line), re.sub(r"(['\"])(\s*\))", r"\2", line)):
            try:
                calls += _python_calls(ast.parse(candidate, mode="exec"))
                break
            except Exception:
                continue
    return calls


def _code_calls(body: str, span: tuple[int, int]) -> list[ToolCall]:
    src = _unfence(body)
    if not src:
        return [ToolCall("", {}, None, None, "code", span, "empty <tool_code> block")]
    if len(src) > MAX_CODE_CHARS:
        return [
            ToolCall("", {}, None, None, "code", span, f"tool code longer than {MAX_CODE_CHARS} characters")
        ]
    nodes = _parse_python(src)
    if not nodes:
        return [ToolCall("", {}, None, None, "code", span, "no function call found in <tool_code>")]
    calls = []
    for node in nodes[:MAX_CALLS]:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        arguments = {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg is not None}
        positional = [_literal(a) for a in node.args]
        if positional and isinstance(positional[0], str) and len(positional) >= 3:
            arguments.setdefault("video_path", positional.pop(0))  # the release's (video_path, start, end)
        free = [k for k in ("start_time", "end_time") if not any(a in arguments for a in _aliases(k))]
        for key, value in zip(free, positional, strict=False):
            arguments[key] = value
        arguments = {k: (str(v) if isinstance(v, _Unreadable) else v) for k, v in arguments.items()}
        calls.append(_call(name, arguments, "code", span))
    return calls


def _aliases(canonical: str) -> tuple[str, ...]:
    return START_KEYS if canonical == "start_time" else END_KEYS


def _coerce_text(text: Any) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    return str(text)


def parse_response(text: Any) -> ParsedResponse:
    """Parse one turn. Never raises; whatever could not be understood is listed in ``problems``."""
    try:
        return _parse(_coerce_text(text))
    except Exception as exc:  # a parser bug must not become an env crash; it becomes a problem
        raw = text if isinstance(text, str) else ""
        return ParsedResponse(text=raw, problems=(f"internal parser error: {type(exc).__name__}: {exc}",))


def _parse(text: str) -> ParsedResponse:
    problems: list[str] = []
    blocks, spans = _scan_blocks(text, problems)

    think = None
    if blocks["think"]:
        b = blocks["think"][0]
        think = text[b.body_start : b.body_end].strip()

    answer = None
    if blocks["answer"]:
        b = blocks["answer"][0]
        answer = text[b.body_start : b.body_end].strip()
        if not answer:
            problems.append("empty <answer></answer>")

    calls: list[ToolCall] = []
    tagged = [(b, "json") for b in blocks["tool_call"]] + [(b, "code") for b in blocks["tool_code"]]
    tagged.sort(key=lambda item: item[0].start)
    for b, form in tagged:
        span = (b.start, b.end)
        body = text[b.body_start : b.body_end]
        if body.lstrip().startswith("<|im_end|>"):
            body = ""
        calls += _json_calls(body, span) if form == "json" else _code_calls(body, span)
    if len(calls) > MAX_CALLS:
        problems.append(f"{len(calls)} tool calls in one turn; only the first {MAX_CALLS} were read")
        calls = calls[:MAX_CALLS]
    for i, call in enumerate(calls, 1):
        if call.error:
            problems.append(f"tool call #{i}: {call.error}")
        elif call.name != TOOL_NAME:
            problems.append(f"tool call #{i}: unknown tool {call.name[:40]!r} (the only tool is {TOOL_NAME})")
    return ParsedResponse(
        text=text,
        think=think,
        tool_calls=tuple(calls),
        answer=answer,
        problems=tuple(problems),
        spans=tuple(spans),
    )
