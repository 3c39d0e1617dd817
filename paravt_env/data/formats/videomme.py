"""Video-MME: ``lmms-lab/Video-MME`` (``videomme/test-00000-of-00001.parquet``) as lmms-eval reads it.

Row: ``video_id`` ("001"), ``duration`` ("short" / "medium" / "long"), ``domain``, ``sub_category``, ``url``,
``videoID`` (the YouTube id: the video is ``data/<videoID>.mp4``), ``question_id`` ("001-1"), ``task_type``,
``question``, ``options`` (``["A. ...", "B. ...", ...]``), ``answer`` ("C"). Subtitles, when downloaded, are
``subtitle/<videoID>.srt`` beside ``data/``. Also read: the official release's nested JSON (one entry per
video with a ``questions`` list) and Video-MME v2 rows (``video_id`` names the file, ``options`` is one
string with a line per option).
"""

from __future__ import annotations

from .. import release_questions
from ._common import (
    Candidate,
    RowContext,
    drop_none,
    first_present,
    mcq,
    options_list,
    require,
    sample_id,
    with_extensions,
)

META = ("video_id", "videoID", "duration", "domain", "sub_category", "task_type", "url", "language")


def matches(keys: set[str]) -> bool:
    if "videoID" in keys:
        return True
    if "questions" in keys and ({"video_id", "url", "domain"} & keys):
        return True
    return {"question_id", "task_type", "options", "answer"} <= keys and "video_id" in keys


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    if isinstance(row.get("questions"), list):  # official JSON: one entry per video, its questions nested
        top = {k: v for k, v in row.items() if k != "questions"}
        out = []
        for j, q in enumerate(row["questions"]):
            if not isinstance(q, dict):
                raise ctx.error(f"field 'questions' item {j} must be an object, got {type(q).__name__}")
            out += _read_one({**top, **q}, ctx.at(f"question {j}"))
        return out
    return _read_one(row, ctx)


def _read_one(row: dict, ctx: RowContext) -> list[Candidate]:
    # v1: videoID (the YouTube id) names the file, video_id is a running number; v2 has video_id only.
    vid = str(first_present(row, ("videoID",)) or require(row, "video_id", ctx))
    vid = vid.removesuffix(".mp4")
    sample = mcq(
        ctx,
        id=sample_id(row, ("question_id", "qid", "id"), ctx),
        video=f"{vid}.mp4",
        question=str(require(row, "question", ctx)),
        options=options_list(require(row, "options", ctx), "options", ctx),
        answer=require(row, "answer", ctx),
        extra=drop_none({k: row.get(k) for k in META}),
    )
    sample.extra["release"] = release_questions.videomme(row)
    videos = with_extensions(vid, ("data/", "", "videos/", "video/"))
    return [
        Candidate(sample, videos, subtitles=[f"subtitle/{vid}.srt", f"subtitles/{vid}.srt", f"{vid}.srt"])
    ]
