"""The unit of data every layer passes around: one question about one video."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

QUESTION_TYPES = ("mcq", "oe", "tvg")
"""Multiple choice (answer is a letter A-D), open-ended (free text), temporal grounding ("[start, end]")."""


@dataclass
class Event:
    """A ground-truth moment in a video: what an oracle would crop to find the answer."""

    start: float
    end: float
    label: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.start = seconds(self.start, "event start")
        self.end = seconds(self.end, "event end")
        if self.end < self.start:
            raise ValueError(f"event {self.label!r} ends ({self.end}) before it starts ({self.start})")


def seconds(value: Any, what: str, *, positive: bool = False) -> float:
    """``value`` as a finite time in seconds (>= 0, or > 0 with ``positive``), numeric strings included;
    anything else is refused naming ``what`` and the value: a NaN or a string would only fail later, in
    arithmetic far from the row that held it."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise ValueError(f"{what} must be a finite number of seconds {'> 0' if positive else '>= 0'}, got {value!r}")
    return x


@dataclass
class VideoQASample:
    """One question about one video, with its ground truth.

    ``video_path`` is resolved (absolute or relative to the working directory) by the loader; the env only
    ever opens this path, never one written by a model.
    """

    id: str
    video_path: str
    question: str
    answer: str
    question_type: str = "oe"
    options: list[str] = field(default_factory=list)
    duration: float | None = None
    events: list[Event] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.question_type not in QUESTION_TYPES:
            raise ValueError(
                f"sample {self.id!r}: question_type must be one of {QUESTION_TYPES}, got {self.question_type!r}"
            )
        self.id = str(self.id)
        self.answer = str(self.answer)
        if self.duration is not None:
            self.duration = seconds(self.duration, f"sample {self.id!r}: field 'duration'", positive=True)
        try:
            self.events = [e if isinstance(e, Event) else Event(**e) for e in self.events]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"sample {self.id!r}: field 'events': {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> VideoQASample:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(row) - known
        if unknown:
            raise ValueError(f"VideoQASample: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        missing = {"id", "video_path", "question", "answer"} - set(row)
        if missing:
            raise ValueError(
                f"VideoQASample: missing field(s) {sorted(missing)} in row with id={row.get('id')!r}"
            )
        return cls(**row)

    def question_with_options(self) -> str:
        """The question as shown to a model: MCQ options on their own lines, lettered A, B, C, ..."""
        if not self.options:
            return self.question
        lines = [self.question]
        for i, opt in enumerate(self.options):
            letter = chr(ord("A") + i)
            text = opt.strip()
            # Options often arrive already lettered ("A. red"); do not letter them twice.
            if len(text) >= 2 and text[0].upper() == letter and text[1] in ".):":
                lines.append(text)
            else:
                lines.append(f"{letter}. {text}")
        return "\n".join(lines)
