"""MMVU: ``yale-nlp/MMVU`` ``validation.json`` and lmms-eval's ``lmms-eval/MMVU`` rows.

Row: ``id`` ("validation_0"), ``video`` (a hub URL ``.../resolve/main/videos/<Subject>/<n>.mp4``; locally the
same ``videos/<Subject>/<n>.mp4`` layout), ``youtube_url``, ``question_type`` ("multiple-choice" or
"open-ended"), ``metadata`` (subject, textbook, knowledge, rationale), ``question``, ``choices`` (``{"A": ...,
"E": ...}``, all empty strings for open-ended questions), ``answer`` (a letter, or free text). lmms-eval's
rows name the file in ``video_path`` instead.
"""

from __future__ import annotations

from .. import release_questions
from ..sample import VideoQASample
from ._common import LETTERS, Candidate, RowContext, drop_none, first_present, mcq, require, sample_id

_HUB = "/resolve/main/"


def matches(keys: set[str]) -> bool:
    return "choices" in keys and "question_type" in keys or "youtube_url" in keys


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    url = str(first_present(row, ("video_path", "video")) or require(row, "video", ctx))
    rel = url.split(_HUB, 1)[1] if _HUB in url else url
    choices = row.get("choices") or {}
    if isinstance(choices, (list, tuple)):
        choices = dict(zip(LETTERS, choices, strict=False))
    if not isinstance(choices, dict):
        raise ctx.error(f"field 'choices' must map letters to options, got {type(choices).__name__}")
    filled = {
        str(k).strip().upper(): str(v).strip() for k, v in choices.items() if v is not None and str(v).strip()
    }
    letters = sorted(filled)
    qtype = str(row.get("question_type", "")).lower()
    qid = sample_id(row, ("id",), ctx)
    question = str(require(row, "question", ctx))
    extra = drop_none(
        {
            "metadata": row.get("metadata"),
            "url": url if url != rel else None,
            **{k: row.get(k) for k in ("youtube_url", "subject", "knowledge", "rationale")},
        }
    )
    if letters and not qtype.startswith("open"):
        if letters != list(LETTERS[: len(letters)]):
            raise ctx.error(f"field 'choices' must fill letters A, B, ... in order, got {letters}")
        sample = mcq(
            ctx, id=qid, video=rel, question=question, options=[filled[k] for k in letters],
            answer=require(row, "answer", ctx), extra=extra,
        )  # fmt: skip
    else:
        sample = VideoQASample(qid, rel, question, str(require(row, "answer", ctx)), "oe", extra=extra)
    sample.extra["release"] = release_questions.mmvu(row)
    videos = [rel] + ([rel.removeprefix("videos/")] if rel.startswith("videos/") else [f"videos/{rel}"])
    return [Candidate(sample, videos)]
