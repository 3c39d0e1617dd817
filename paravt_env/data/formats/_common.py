"""Shared pieces of the format readers: the row context, option/letter handling, time parsing."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sample import Event, VideoQASample

LETTERS = "ABCDEFGHIJ"
VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".MP4")
"""Tried in this order when a benchmark names a video by its id only."""

_LETTERED = re.compile(r"^\s*\(?([A-J])\s*[\.\):：]\s*(.*)$", re.S)
_BARE_LETTER = re.compile(r"^\s*\(?([A-J])\)?\s*(?:[\.\):]\s*)?$")


class DataFormatError(ValueError):
    """A row that cannot be read; the message names the file, the row and the field."""


@dataclass
class RowContext:
    """Where a row comes from, for error messages and for path guesses that depend on the file."""

    file: Path
    where: str
    """e.g. ``/data/lvb_val.json: row 3`` (rows of JSON lists and parquet count from 0, lines from 1)."""

    def at(self, suffix: str) -> RowContext:
        return RowContext(self.file, f"{self.where}, {suffix}")

    def error(self, message: str) -> DataFormatError:
        return DataFormatError(f"{self.where}: {message}")


@dataclass
class Candidate:
    """A sample read from a row, with the relative or absolute paths its video may have (first found wins)."""

    sample: VideoQASample
    videos: list[str]
    subtitles: list[str] = field(default_factory=list)
    """Subtitle file names to look for next to the found video (and in sibling folders); stored in
    ``extra["subtitle_path"]`` when one exists."""


def require(row: dict, name: str, ctx: RowContext) -> Any:
    """``row[name]``, or a ``DataFormatError`` naming the file, row and field."""
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ctx.error(f"missing field {name!r} (keys present: {sorted(row)})")
    return value


def first_present(row: dict, names: Iterable[str]) -> Any:
    for name in names:
        value = row.get(name)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def as_float(value: Any, name: str, ctx: RowContext) -> float | None:
    """A finite float, None for a missing value, or an error naming the field."""
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ctx.error(f"field {name!r} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ctx.error(f"field {name!r} must be finite, got {value!r}")
    return x


def strip_letter(option: Any) -> str:
    """``"A. red"`` / ``"(A) red"`` -> ``"red"`` (``VideoQASample`` letters options itself)."""
    text = str(option).strip()
    m = _LETTERED.match(text)
    return m.group(2).strip() if m and m.group(2).strip() else text


def options_list(value: Any, name: str, ctx: RowContext) -> list[str]:
    """Options given as a list (lettered or not), a dict ``{"A": ...}``, or one string with a line each."""
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if isinstance(value, dict):
        value = [value[k] for k in sorted(value)]
    if not isinstance(value, (list, tuple)):
        raise ctx.error(f"field {name!r} must be a list of options, got {type(value).__name__}")
    return [strip_letter(v) for v in value if v is not None and str(v).strip()]


def letter_of(answer: Any, options: list[str], ctx: RowContext, name: str = "answer") -> str:
    """The option letter an answer names: a letter (``"B"``, ``"(B)"``, ``"B. text"``), an index, or the text
    of one option. Errors name the field and list the options."""
    if isinstance(answer, bool):
        raise ctx.error(f"field {name!r} must name an option, got {answer!r}")
    if isinstance(answer, int):
        letter = LETTERS[answer] if 0 <= answer < len(options) else None
    else:
        text = str(answer).strip()
        letter = None
        m = _BARE_LETTER.match(text)
        if m and LETTERS.index(m.group(1)) < len(options):
            letter = m.group(1)
        else:
            wanted = _norm(strip_letter(text))
            matches = [i for i, opt in enumerate(options) if _norm(opt) == wanted]
            if len(matches) == 1:
                letter = LETTERS[matches[0]]
            elif _LETTERED.match(text):  # "(C) 3" where the text part does not match exactly
                letter = _LETTERED.match(text).group(1)
            elif re.fullmatch(r"\(?[a-j]\)?\.?", text):  # a lower-case letter
                letter = text.strip("(.)").upper()
    if letter is None or LETTERS.index(letter) >= len(options):
        raise ctx.error(f"field {name!r} = {answer!r} names none of the {len(options)} options {options}")
    return letter


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split()).rstrip(".")


def embedded_options(question: str) -> tuple[str, list[str]]:
    """Split ``"Q?\\n(A) x\\n(B) y"`` (LVBench, lmms-eval MLVU) into the question and its options.

    Options must run A, B, C, ... on lines of their own; a line that continues an option is appended to it.
    Text without such lines comes back unchanged with no options.
    """
    stem: list[str] = []
    options: list[str] = []
    for line in (ln.strip() for ln in question.strip().splitlines()):
        if not line:
            continue
        m = _LETTERED.match(line)
        if m and m.group(1) == LETTERS[len(options)] and len(options) < len(LETTERS):
            options.append(m.group(2).strip())
        elif options:
            options[-1] = f"{options[-1]} {line}"
        else:
            stem.append(line)
    if len(options) < 2:
        return question.strip(), []
    return "\n".join(stem), options


def fmt_seconds(x: float) -> str:
    """A time as the benchmarks write it: at least one decimal, no float noise (``24.3``, ``30.0``)."""
    text = f"{round(float(x), 3):.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def span_answer(start: float, end: float) -> str:
    return f"[{fmt_seconds(start)}, {fmt_seconds(end)}]"


def parse_span(value: Any, name: str, ctx: RowContext) -> tuple[float, float]:
    """``[s, e]``, ``(s, e)``, ``"[s, e]"`` or ``"s e"`` -> (s, e) with 0 <= s <= e."""
    if isinstance(value, str):
        nums = re.findall(r"-?\d+(?:\.\d+)?", value)
        value = [float(v) for v in nums]
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], (list, tuple)):
        value = value[0]
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ctx.error(f"field {name!r} must be [start, end], got {value!r}")
    start, end = (as_float(v, name, ctx) for v in value)
    if start is None or end is None or start < 0 or end < start:
        raise ctx.error(f"field {name!r} must be [start, end] with 0 <= start <= end, got {value!r}")
    return start, end


def clock_seconds(text: str) -> float:
    """``"01:02:03.5"`` / ``"02:03"`` / ``"123.5"`` -> seconds."""
    seconds = 0.0
    for part in text.strip().split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def clock_span(text: Any) -> tuple[float, float] | None:
    """``"00:15-00:19"`` -> (15.0, 19.0); None when the text is not such a span."""
    if not isinstance(text, str):
        return None
    m = re.match(r"^\s*([\d:.]+)\s*[-~–]\s*([\d:.]+)\s*$", text)
    if not m:
        return None
    try:
        start, end = clock_seconds(m.group(1)), clock_seconds(m.group(2))
    except ValueError:
        return None
    return (start, end) if end >= start else None


def with_extensions(stem: str, prefixes: Iterable[str] = ("",)) -> list[str]:
    """``stem`` under each prefix with each common video extension (or as is, if it has one)."""
    names = (
        [stem]
        if stem.lower().endswith(tuple(e.lower() for e in VIDEO_EXTENSIONS))
        else [stem + ext for ext in VIDEO_EXTENSIONS]
    )
    return [f"{p}{n}" for p in prefixes for n in names]


def decode_json_field(value: Any, name: str, ctx: RowContext) -> Any:
    """Parquet columns often hold JSON text; decode it (a non-JSON string is returned as is)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ctx.error(f"field {name!r} is not valid JSON: {exc.msg}") from None
    return value


def mcq(
    ctx: RowContext,
    *,
    id: str,
    video: str,
    question: str,
    options: list[str],
    answer: Any,
    duration: float | None = None,
    events: list[Event] | None = None,
    extra: dict[str, Any] | None = None,
    answer_field: str = "answer",
) -> VideoQASample:
    """A multiple-choice sample with its answer checked against its options."""
    if len(options) < 2:
        raise ctx.error(f"a multiple-choice row needs at least 2 options, got {options}")
    return VideoQASample(
        id=id,
        video_path=video,
        question=question.strip(),
        answer=letter_of(answer, options, ctx, answer_field),
        question_type="mcq",
        options=options,
        duration=duration,
        events=events or [],
        extra=extra or {},
    )


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def maybe_float(value: Any) -> float | None:
    """A finite float if ``value`` is one (VideoMME's ``duration`` is "short"/"medium"/"long": not a time)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def sample_id(row: dict, names: Iterable[str], ctx: RowContext) -> str:
    """The row's own id (the first of ``names`` present, 0 included), else one made from the file and row."""
    value = first_present(row, names)
    if value is not None:
        return str(value)
    where = ctx.where.split(": ", 1)[-1].replace(" ", "")
    return f"{ctx.file.stem}-{where}"


def row_number(ctx: RowContext) -> int | None:
    """The row's position in its file (``row N`` of a JSON list or parquet), for ids that count rows."""
    m = re.search(r"row (\d+)$", ctx.where)
    return int(m.group(1)) if m else None
