"""LVBench: ``video_info.meta.jsonl`` (``THUDM/LVBench``) and lmms-eval's flat ``lmms-eval/LVBench`` rows.

Original, one line per video: ``key`` (the YouTube id; videos are ``<key>.mp4``), ``type`` (genre),
``video_info`` (``duration_minutes``, ...), ``qa``: a list of ``uid``, ``question`` (the options are inside
it, one per line: ``"(A) ..."``), ``answer`` (a letter), ``question_type`` (a list of categories),
``time_reference`` (``"MM:SS-MM:SS"``: where the evidence is). Flat rows: one question each, with
``video_path`` (relative to the dataset folder) instead of ``key``; options may also come as ``options``.
"""

from __future__ import annotations

from .. import release_questions
from ..sample import Event
from ._common import (
    Candidate,
    RowContext,
    clock_span,
    drop_none,
    embedded_options,
    first_present,
    maybe_float,
    mcq,
    options_list,
    require,
    sample_id,
    with_extensions,
)


def matches(keys: set[str]) -> bool:
    return "qa" in keys or ("uid" in keys and "question" in keys and "answer" in keys)


def _duration(info: object) -> float | None:
    if not isinstance(info, dict):
        return None
    minutes = maybe_float(info.get("duration_minutes"))
    if minutes is not None:
        return minutes * 60
    return maybe_float(info.get("duration"))


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    if "qa" in row:
        if not isinstance(row["qa"], list):
            raise ctx.error(f"field 'qa' must be a list of questions, got {type(row['qa']).__name__}")
        top = {k: v for k, v in row.items() if k != "qa"}
        return [c for j, qa in enumerate(row["qa"]) for c in _read_one({**top, **qa}, ctx.at(f"qa {j}"))]
    return _read_one(row, ctx)


def _read_one(row: dict, ctx: RowContext) -> list[Candidate]:
    question, options = embedded_options(str(require(row, "question", ctx)))
    if row.get("options") is not None and not options:
        options = options_list(row["options"], "options", ctx)
    path = first_present(row, ("video_path", "video"))
    key = first_present(row, ("key", "video_id"))
    if path is None and key is None:
        raise ctx.error("missing field 'key' (or 'video_path')")
    events = []
    span = clock_span(row.get("time_reference"))
    if span is not None:
        events.append(Event(span[0], span[1], label="time_reference"))
    categories = row.get("question_type")
    sample = mcq(
        ctx,
        id=sample_id(row, ("uid", "id"), ctx),
        video=str(path if path is not None else f"{key}.mp4"),
        question=question,
        options=options,
        answer=require(row, "answer", ctx),
        duration=_duration(row.get("video_info")),
        events=events,
        extra=drop_none(
            {
                "key": key,
                "type": row.get("type"),
                "question_type": list(categories) if isinstance(categories, (list, tuple)) else categories,
                "time_reference": row.get("time_reference"),
            }
        ),
    )
    sample.extra["release"] = release_questions.lvbench(row)
    videos = []
    if path is not None:
        videos += [str(path), f"videos/{path}"]
    if key is not None:
        videos += with_extensions(str(key), ("", "videos/", "all_videos/", "video/"))
    return [Candidate(sample, videos)]
