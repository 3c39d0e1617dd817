"""LongVideoBench: ``lvb_val.json`` and the ``longvideobench/LongVideoBench`` parquet lmms-eval reads.

JSON rows: ``video_id``, ``question``, ``candidates`` (list of option texts), ``correct_choice`` (0-based
index), ``video_path`` ("<video_id>.mp4", under ``videos/``), ``subtitle_path`` (under ``subtitles/``),
``duration`` (seconds), ``duration_group``, ``question_category``, ``topic_category``, ``level``, ``id``, ...
The parquet has ``option0`` ... ``option4`` instead of ``candidates`` ("N/A" where a question has fewer).
The test files (``lvb_test_wo_gt.json``) hold no ``correct_choice``: they cannot be loaded as QA samples.
"""

from __future__ import annotations

from .. import release_questions
from ._common import Candidate, RowContext, as_float, drop_none, first_present, mcq, require, sample_id

META = (
    "video_id", "duration_group", "question_category", "topic_category", "level", "subtitle_path",
    "starting_timestamp_for_subtitles", "question_wo_referring_query", "position", "view_count",
)  # fmt: skip
_EMPTY = ("", "N/A", "n/a", None)


def matches(keys: set[str]) -> bool:
    return (
        "correct_choice" in keys
        or ("option0" in keys and "video_path" in keys)
        or ("candidates" in keys and "duration_group" in keys)
    )


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    if isinstance(row.get("candidates"), list):
        options = [str(c).strip() for c in row["candidates"]]
    else:
        options = [str(row[f"option{i}"]).strip() for i in range(10) if row.get(f"option{i}") not in _EMPTY]
        if not options:
            raise ctx.error("missing field 'candidates' (or option0 ... option4)")
    if row.get("correct_choice") is None:
        raise ctx.error("missing field 'correct_choice' (LongVideoBench test files carry no ground truth)")
    choice = row["correct_choice"]
    if isinstance(choice, str) and choice.strip().isdigit():
        choice = int(choice)
    if isinstance(choice, float) and choice.is_integer():
        choice = int(choice)
    if isinstance(choice, int) and not 0 <= choice < len(options):
        raise ctx.error(f"field 'correct_choice' = {choice} is outside the {len(options)} options")
    video = first_present(row, ("video_path",)) or f"{require(row, 'video_id', ctx)}.mp4"
    sample = mcq(
        ctx,
        id=sample_id(row, ("id",), ctx),
        video=str(video),
        question=str(require(row, "question", ctx)),
        options=options,
        answer=choice,
        answer_field="correct_choice",
        duration=as_float(row.get("duration"), "duration", ctx),
        extra=drop_none({k: row.get(k) for k in META}),
    )
    sample.extra["release"] = release_questions.longvideobench(
        {**row, "correct_choice": choice if isinstance(choice, int) else sample.answer}
    )
    subtitle = row.get("subtitle_path")
    subtitles = [f"subtitles/{subtitle}", str(subtitle)] if subtitle else []
    return [Candidate(sample, [f"videos/{video}", str(video)], subtitles=subtitles)]
