"""MLVU: the dev set's per-task JSON files (``MLVU/json/1_plotQA.json``, ...) and lmms-eval's ``sy1998/MLVU_dev``.

Dev JSON rows: ``video`` (file name, under ``MLVU/video/<N>_<task>/``), ``duration``, ``question``,
``candidates`` (option texts), ``answer`` (the *text* of the right candidate), ``question_type`` ("plotQA",
"findNeedle", "ego", "count", "order", "anomaly_reco", "topic_reasoning"). The generation tasks
(``8_sub_scene.json``, ``9_summary.json``) have no candidates: they load as open-ended. lmms-eval rows:
``video_name``, ``duration``, ``question`` (options inside it, ``"(A) ..."`` lines), ``candidates``,
``answer`` (a letter), ``task_type``, ``question_id``.
"""

from __future__ import annotations

from .. import release_questions
from ..sample import VideoQASample
from ._common import (
    Candidate,
    RowContext,
    as_float,
    drop_none,
    embedded_options,
    first_present,
    mcq,
    require,
    row_number,
    sample_id,
)

TASK_DIRS = {
    "plotQA": "1_plotQA", "findNeedle": "2_needle", "needle": "2_needle", "ego": "3_ego", "count": "4_count",
    "order": "5_order", "anomaly_reco": "6_anomaly_reco", "topic_reasoning": "7_topic_reasoning",
    "subPlot": "8_sub_scene", "sub_scene": "8_sub_scene", "summary": "9_summary",
}  # fmt: skip


def matches(keys: set[str]) -> bool:
    if "video_name" in keys and "question" in keys:
        return True
    return (
        "video" in keys and "question" in keys and bool({"candidates", "question_type", "task_type"} & keys)
    )


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    video = str(first_present(row, ("video", "video_name")) or require(row, "video", ctx))
    task = first_present(row, ("question_type", "task_type"))
    stem, embedded = embedded_options(str(require(row, "question", ctx)))
    candidates = row.get("candidates")
    options = (
        [str(c).strip() for c in candidates]
        if isinstance(candidates, (list, tuple)) and candidates
        else embedded
    )
    question = stem if embedded else str(row["question"]).strip()
    qid = sample_id(row, ("question_id", "id"), ctx)
    duration = as_float(row.get("duration"), "duration", ctx)
    extra = drop_none({"task": task, "scoring_points": row.get("scoring_points")})
    if options:
        sample = mcq(
            ctx, id=qid, video=video, question=question, options=options,
            answer=require(row, "answer", ctx), duration=duration, extra=extra,
        )  # fmt: skip
    else:
        sample = VideoQASample(
            qid, video, question, str(require(row, "answer", ctx)), "oe", duration=duration, extra=extra
        )
    sample.extra["release"] = release_questions.mlvu(row, row_number(ctx))
    # Where the videos live: beside the file, in a folder per task (named like the JSON file, or after the
    # task), or in MLVU's own layout, MLVU/video/<N>_<task>/ next to MLVU/json/.
    folders = (
        [ctx.file.stem] + ([TASK_DIRS[task]] if task in TASK_DIRS else []) + ([str(task)] if task else [])
    )
    videos = [video, f"video/{video}", f"videos/{video}"]
    for folder in dict.fromkeys(folders):
        videos += [f"{folder}/{video}", f"video/{folder}/{video}", f"../video/{folder}/{video}"]
    return [Candidate(sample, videos)]
