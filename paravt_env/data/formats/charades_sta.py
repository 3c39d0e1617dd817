"""Charades-STA temporal grounding: lmms-eval's ``lmms-eval/charades_sta`` rows and the original files.

lmms-eval rows: ``video`` ("3MSZA.mp4", under ``Charades_v1_480/``), ``caption``, ``timestamp`` (``[start,
end]`` in seconds, or that list as text), sometimes ``duration``. Original ``charades_sta_test.txt``: one
``"3MSZA 24.3 30.4##person turn a light on."`` per line. Also the common per-video JSON
(``{"3MSZA": {"duration": 30.96, "timestamps": [[24.3, 30.4]], "sentences": ["..."]}}``).
Every row becomes a ``tvg`` sample whose answer is ``"[start, end]"`` and whose one event is that span.
"""

from __future__ import annotations

import numpy as np

from .. import release_questions
from ..sample import Event, VideoQASample
from ._common import (
    Candidate,
    RowContext,
    as_float,
    first_present,
    parse_span,
    require,
    row_number,
    span_answer,
    with_extensions,
)


def matches(keys: set[str]) -> bool:
    return (
        "_line" in keys
        or ("caption" in keys and bool({"timestamp", "timestamps"} & keys))
        or {"sentences", "timestamps"} <= keys
    )


def question_for(caption: str) -> str:
    return (
        f"When does '{caption.strip().rstrip('.')}' happen in the video? Answer with [start, end] in seconds."
    )


def _denoise(x: float) -> float:
    """lmms-eval's parquet stores timestamps as float16 (24.3 -> 24.296875): recover the annotation's one
    decimal when the value is exactly that decimal's float16, keep any other value as it is."""
    tenth = round(x, 1)
    return tenth if np.float16(tenth) == np.float16(x) else round(x, 3)


def _sample(vid: str, caption: str, span: tuple[float, float], duration: float | None, n: str,
            index: int | None = None) -> Candidate:  # fmt: skip
    vid = vid.strip()
    # The release scores against the span as stored (float16 noise included) and quotes the caption as is.
    release = release_questions.charades(caption, (float(span[0]), float(span[1])), index)
    span = (_denoise(span[0]), _denoise(span[1]))
    for ext in (".mp4", ".MP4", ".avi", ".mkv", ".webm"):
        vid = vid.removesuffix(ext)
    start, end = span
    sample = VideoQASample(
        id=f"{vid}_{start:g}_{end:g}{n}",
        video_path=f"{vid}.mp4",
        question=question_for(caption),
        answer=span_answer(start, end),
        question_type="tvg",
        duration=duration,
        events=[Event(start, end, label=caption.strip())],
        extra={"caption": caption.strip(), "release": release},
    )
    return Candidate(sample, with_extensions(vid, ("", "Charades_v1_480/", "videos/", "Charades_v1/")))


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    if "_line" in row:
        head, sep, caption = row["_line"].partition("##")
        parts = head.split()
        if not sep or len(parts) != 3 or not caption.strip():
            raise ctx.error(f"expected 'VIDEO START END##caption', got {row['_line'][:80]!r}")
        span = parse_span(parts[1:], "timestamp", ctx)
        return [_sample(parts[0], caption, span, None, "")]
    if "sentences" in row:  # per-video JSON: parallel lists of sentences and [start, end] spans
        vid = str(first_present(row, ("_key", "video", "video_id")) or require(row, "_key", ctx))
        sentences, spans = row["sentences"], row.get("timestamps")
        if not isinstance(sentences, list) or not isinstance(spans, list) or len(sentences) != len(spans):
            raise ctx.error("fields 'sentences' and 'timestamps' must be lists of the same length")
        duration = as_float(row.get("duration"), "duration", ctx)
        return [
            _sample(vid, str(s), parse_span(t, f"timestamps[{j}]", ctx), duration, f"_{j}")
            for j, (s, t) in enumerate(zip(sentences, spans, strict=True))
        ]
    vid = str(first_present(row, ("video", "video_id", "vid")) or require(row, "video", ctx))
    field = "timestamp" if row.get("timestamp") is not None else "timestamps"
    span = parse_span(require(row, field, ctx), field, ctx)
    caption = str(first_present(row, ("caption", "query", "sentence")) or require(row, "caption", ctx))
    return [_sample(vid, caption, span, as_float(row.get("duration"), "duration", ctx), "", row_number(ctx))]
