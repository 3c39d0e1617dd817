"""How the released eval driver scores a final response (``protocol="release"``).

Multiple choice: the option letter (A-J) read from the response, compared with the answer as a string (a
sample whose answer is not a letter, like MMVU's open-ended rows that the release loads as multiple choice,
can then never score: reproduced, and documented in ``paravt_env.data.release_questions``). Grounding: a
``[start, end]`` read from the response by the release's cascade of patterns, scored by temporal IoU against
the annotation's span; nothing readable scores 0.
"""

from __future__ import annotations

import re

LETTERS = "ABCDEFGHIJ"

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_WORD_LETTER_RE = re.compile(r"\b([A-J])\b")
_ANSWER_IS_RE = re.compile(r"(?:answer|Answer)\s*(?:is|:)\s*([A-J])")
_TIME_TAG_RE = re.compile(r"<time>([^<]+)</time>")
_CLOCK_SPAN_RE = re.compile(r"(\d+):(\d+(?:\.\d+)?)\s*[-–—]\s*(\d+):(\d+(?:\.\d+)?)")
_SECONDS_SPAN_RE = re.compile(r"(\d+\.?\d*)\s*[-–—]\s*(\d+\.?\d*)")
_START_RE = re.compile(r"(?:start(?:ing)?|begin(?:ning)?)\s*(?:time)?[:\s]*(\d+\.?\d*)", re.I)
_END_RE = re.compile(r"(?:end(?:ing)?|finish(?:ing)?)\s*(?:time)?[:\s]*(\d+\.?\d*)", re.I)
_NUMBER_RE = re.compile(r"(\d+\.?\d*)")


def release_letter(text: str) -> str:
    """The option letter of a response: a lone letter inside ``<answer>``, else a standalone letter there;
    else the whole response if it is one letter; else "answer is X" / "Answer: X"; else the first standalone
    capital A-J anywhere; else the response's first character."""
    text = text.strip()
    m = _ANSWER_RE.search(text)
    if m:
        inner = m.group(1).strip()
        if len(inner) == 1 and inner in LETTERS:
            return inner
        lm = _WORD_LETTER_RE.search(inner)
        if lm:
            return lm.group(1)
    if len(text) == 1 and text in LETTERS:
        return text
    for pattern in (_ANSWER_IS_RE, _WORD_LETTER_RE):
        m = pattern.search(text)
        if m:
            return m.group(1)
    return text[:1]


def release_span(text: str) -> tuple[float, float] | None:
    """A ``(start, end)`` in seconds from a grounding response: ``MM:SS - MM:SS`` before bare ``s - e``
    (inside ``<time>`` first, then anywhere), then "start ... end ..." words, then the first two numbers."""
    if not text or not text.strip():
        return None
    tag = _TIME_TAG_RE.search(text)
    for target in ([tag.group(1)] if tag else []) + [text]:
        m = _CLOCK_SPAN_RE.search(target)
        if m:
            start = int(m.group(1)) * 60 + float(m.group(2))
            end = int(m.group(3)) * 60 + float(m.group(4))
            if start < end < 3600:
                return start, end
        m = _SECONDS_SPAN_RE.search(target)
        if m:
            start, end = float(m.group(1)), float(m.group(2))
            if end > start:
                return start, end
    starts, ends = _START_RE.findall(text), _END_RE.findall(text)
    if starts and ends:
        return float(starts[0]), float(ends[0])
    numbers = _NUMBER_RE.findall(text)
    if len(numbers) >= 2:
        return float(numbers[0]), float(numbers[1])
    return None


def release_iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Temporal IoU as the release computes it (a reversed prediction counts its negative overlap as 0)."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def release_score(final: str, *, is_mcq: bool, answer: str, span: tuple[float, float] | None = None) -> tuple[float, str]:
    """``(score, prediction)`` of one final response, as the release's driver records them."""
    if is_mcq:
        pred = release_letter(final)
        return (1.0 if pred == answer else 0.0), pred
    if span is None:
        raise ValueError("a grounding sample needs its ground-truth span")
    pred_span = release_span(final)
    if pred_span:
        return release_iou(pred_span, span), f"{pred_span[0]:.1f}-{pred_span[1]:.1f}"
    return 0.0, final[:200]


__all__ = ["release_iou", "release_letter", "release_score", "release_span"]
