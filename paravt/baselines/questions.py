"""What a synthetic question asks, read from the text the agent is shown, and how to answer it from what the
agent has seen.

The scripted baselines read the question like a model would: from the observation's text (``Question: ...``
and the lettered options), never from the sample's ground truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from paravt.baselines.vision import Detection
from paravt_env.data.synth_plan import PALETTE, SHAPES

_QUESTION_RE = re.compile(r"^Question: (.*)$", re.MULTILINE)
_OPTION_RE = re.compile(r"^([A-H])\. (.+)$", re.MULTILINE)
_DURATION_RE = re.compile(r"The video lasts ([\d.]+) seconds")

_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("colours", re.compile(r"(\w+) coloured shapes? briefly appears? in the video[^?]*\. What (?:are their colours|is its "
                           r"colour)\?")),
    ("colour_of", re.compile(r"A (\w+) briefly appears in the video\. What colour is it\?")),
    ("shape_of", re.compile(r"A (\w+) shape briefly appears in the video\. What shape is it\?")),
    ("first", re.compile(r"Which of these coloured shapes appears first in the video\?")),
    ("next", re.compile(r"Which coloured shape appears next in the video after the (\w+ \w+)\?")),
    ("count", re.compile(r"How many coloured shapes appear in the video")),
    ("colour_of", re.compile(r"What colour is the (\w+) that briefly appears in the video\?")),
    ("shape_of", re.compile(r"What shape is the (\w+) object that briefly appears in the video\?")),
    ("when", re.compile(r"When does the (\w+ \w+) appear in the video\?")),
)


@dataclass(frozen=True)
class Query:
    """A parsed question: its kind, its subject (a shape, a colour or a label) and its lettered options."""

    kind: str  # colour_of | shape_of | first | next | count | colours | when | unknown
    subject: str = ""
    options: dict[str, str] = field(default_factory=dict)  # letter -> text
    duration: float = 0.0

    @property
    def is_mcq(self) -> bool:
        return bool(self.options)

    @property
    def needles(self) -> int:
        """How many needles a ``colours`` question says the video holds (its number word), else 0."""
        from paravt_env.data.synth_questions import NUMBER_WORDS

        words = [w.lower() for w in NUMBER_WORDS]
        return words.index(self.subject.lower()) if self.kind == "colours" and self.subject.lower() in words else 0


def parse_query(text: str, duration: float | None = None) -> Query:
    """Read the question and options out of the first observation's text."""
    m = _QUESTION_RE.search(text)
    question = m.group(1) if m else text
    options = {}
    if m:
        tail = text[m.end() :]
        for om in _OPTION_RE.finditer(tail):
            if om.group(1) in options:
                break
            options[om.group(1)] = om.group(2).strip()
    if duration is None:
        dm = _DURATION_RE.search(text)
        duration = float(dm.group(1)) if dm else 0.0
    for kind, pattern in _PATTERNS:
        qm = pattern.search(question)
        if qm:
            return Query(kind, qm.group(1) if qm.groups() else "", options, float(duration))
    return Query("unknown", "", options, float(duration))


@dataclass
class Evidence:
    """Everything the agent has seen: every frame time, and the needles found in them."""

    seen: list[float] = field(default_factory=list)
    detections: list[Detection] = field(default_factory=list)

    def add(self, times, detections: list[Detection]) -> None:
        self.seen.extend(float(t) for t in times)
        self.seen.sort()
        self.detections.extend(detections)
        self.detections.sort(key=lambda d: d.t)

    def first_seen(self) -> dict[str, float]:
        """Each label's earliest detection time."""
        out: dict[str, float] = {}
        for d in self.detections:
            out.setdefault(d.label, d.t)
        return out

    def with_(
        self, *, shape: str | None = None, colour: str | None = None, label: str | None = None
    ) -> list[Detection]:
        return [
            d
            for d in self.detections
            if (shape is None or d.shape == shape)
            and (colour is None or d.colour == colour)
            and (label is None or d.label == label)
        ]


def _letter_for(query: Query, text: str) -> str | None:
    for letter, option in query.options.items():
        if option.strip().lower() == text.lower():
            return letter
    return None


def _guess(query: Query, excluded: set[str]) -> str:
    """An option not ruled out by what was seen (first such letter), or a plausible word."""
    for letter, option in query.options.items():
        if option.lower() not in excluded:
            return letter
    if query.options:
        return next(iter(query.options))
    return ""


def answer(query: Query, ev: Evidence) -> tuple[str, str]:
    """The answer text (letter, word or ``[s, e]``) and a one-line reason, from the evidence so far."""
    first = ev.first_seen()
    if query.kind in ("colour_of", "shape_of"):
        hits = ev.with_(shape=query.subject) if query.kind == "colour_of" else ev.with_(colour=query.subject)
        if hits:
            value = hits[0].colour if query.kind == "colour_of" else hits[0].shape
            reason = f"the {hits[0].label} is visible at {hits[0].t:.1f} seconds"
            if query.is_mcq:
                return _letter_for(query, value) or _guess(query, set()), reason
            return value, reason
        # Colours and shapes are unique within a video: those seen on other needles are not the answer.
        if query.kind == "colour_of":
            excluded = {d.colour for d in ev.detections}
            fallback = next((c for c in PALETTE if c not in excluded), "red")
        else:
            excluded = {d.shape for d in ev.detections}
            fallback = next((s for s in SHAPES if s not in excluded), "circle")
        reason = f"I did not find it; ruling out {sorted(excluded)}"
        return (_guess(query, excluded) if query.is_mcq else fallback), reason
    if query.kind == "first":
        shown = [(t, lab) for lab, t in first.items() if _letter_for(query, lab)]
        if shown:
            t, lab = min(shown)
            return _letter_for(query, lab), f"the {lab} appears first, at {t:.1f} seconds"
        return _guess(query, set()), "none of the options was found"
    if query.kind == "next":
        if query.subject in first:
            t0 = first[query.subject]
            later = sorted((t, lab) for lab, t in first.items() if t > t0 and lab != query.subject)
            if later:
                t, lab = later[0]
                return _letter_for(query, lab) or _guess(
                    query, set()
                ), f"after {t0:.1f} s the next shape is the {lab} at {t:.1f} s"
        return _guess(query, {query.subject}), f"I could not place what follows the {query.subject}"
    if query.kind == "count":
        n = len(first)
        letter = _letter_for(query, str(n))
        if letter is None and query.options:
            # Fewer found than any option: the smallest option is the best guess.
            letter = min(
                query.options,
                key=lambda k: abs(int(query.options[k]) - n) if query.options[k].isdigit() else 99,
            )
        return (letter or str(n)), f"I found {n} distinct shapes: {sorted(first)}"
    if query.kind == "colours":
        # the colours found, in order of appearance; a needle not found is left out rather than guessed (token
        # F1: a missing word costs less than a wrong one)
        found = sorted((t, lab) for lab, t in first.items())[: query.needles or None]
        colours = [d.colour for _, lab in found for d in ev.with_(label=lab)[:1]]
        return " ".join(colours) or "red", f"I found {len(found)} of {query.needles} coloured shapes"
    if query.kind == "when":
        span = event_span(ev, query.subject, query.duration)
        if span is not None:
            return (
                f"[{span[0]:.1f}, {span[1]:.1f}]",
                f"the {query.subject} is visible from about {span[0]:.1f} to {span[1]:.1f} s",
            )
        return f"[0.0, {query.duration:.1f}]", f"I did not find the {query.subject}"
    return _guess(query, set()) or "unknown", "I do not understand the question"


def event_span(ev: Evidence, label: str, duration: float) -> tuple[float, float] | None:
    """Estimated [start, end] of a needle: between the last frame without it and the first with it, and so on
    at the other end (the midpoint of each uncertainty interval)."""
    hits = [d.t for d in ev.with_(label=label)]
    if not hits:
        return None
    lo, hi = min(hits), max(hits)
    before = [t for t in ev.seen if t < lo - 1e-6]
    after = [t for t in ev.seen if t > hi + 1e-6]
    # The boundary lies between the last frame without the needle and the first with it; take the midpoint,
    # but never more than half a second away from a hit (a far negative says little about the boundary).
    prev_neg = before[-1] if before else 0.0
    next_neg = after[0] if after else duration
    start = lo - min((lo - prev_neg) / 2, 0.5)
    end = hi + min((next_neg - hi) / 2, 0.5)
    return max(0.0, start), min(duration, max(end, start + 0.5))


def boundary_gaps(ev: Evidence, label: str, duration: float) -> list[tuple[float, float]]:
    """The unresolved boundaries of a found needle: (last negative, first hit) and (last hit, next negative)."""
    hits = [d.t for d in ev.with_(label=label)]
    if not hits:
        return []
    lo, hi = min(hits), max(hits)
    before = [t for t in ev.seen if t < lo - 1e-6]
    after = [t for t in ev.seen if t > hi + 1e-6]
    return [
        (before[-1] if before else max(0.0, lo - 8.0), lo),
        (hi, after[0] if after else min(duration, hi + 8.0)),
    ]
