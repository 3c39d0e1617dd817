"""The released ParaVT RL parquet (``ParaVT/ParaVT-Parquet``, read by ``paravt/rl/data/dataset.py``).

Columns: ``prompt`` (list of ``{"role", "content"}``; the user content holds a ``<video>`` placeholder),
``videos`` (list of ``{"video": path}``, relative to the video root, sometimes ``file://``), ``extra_info``
(JSON text or a struct with ``answer`` and ``question_type``: ``mcq`` / ``tvg`` / anything else is scored as
open-ended). verl-style files may also carry ``data_source``, ``ability`` and ``reward_model.ground_truth``.
"""

from __future__ import annotations

from typing import Any

from ..sample import VideoQASample
from ._common import Candidate, RowContext, decode_json_field, maybe_float, sample_id, span_answer

PLACEHOLDERS = ("<video>", "<image>")
_TYPES = {
    "mcq": "mcq", "multiple_choice": "mcq", "multiple-choice": "mcq", "multi-choice": "mcq", "mc": "mcq",
    "tvg": "tvg", "temporal_grounding": "tvg", "temporal-grounding": "tvg", "grounding": "tvg", "vtg": "tvg",
    "oe": "oe", "open_ended": "oe", "open-ended": "oe", "openended": "oe",
}  # fmt: skip


def matches(keys: set[str]) -> bool:
    return "prompt" in keys and bool({"videos", "extra_info"} & keys)


def _text(content: Any) -> str:
    if isinstance(content, list):  # [{"type": "video"}, {"type": "text", "text": ...}]
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("text"))
    return "" if content is None else str(content)


def read(row: dict, ctx: RowContext) -> list[Candidate]:
    prompt = decode_json_field(row.get("prompt"), "prompt", ctx)
    if not isinstance(prompt, list) or not prompt:
        raise ctx.error(f"field 'prompt' must be a non-empty list of {{role, content}}, got {prompt!r:.80}")
    users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise ctx.error("field 'prompt' has no message with role 'user'")
    question = _text(users[-1].get("content"))
    for placeholder in PLACEHOLDERS:
        question = question.replace(placeholder, "")
    question = question.strip()
    if not question:
        raise ctx.error("field 'prompt': the user message has no text besides the placeholder")
    system = [_text(m.get("content")) for m in prompt if isinstance(m, dict) and m.get("role") == "system"]

    extra = decode_json_field(row.get("extra_info"), "extra_info", ctx)
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise ctx.error(f"field 'extra_info' must be a JSON object, got {extra!r:.80}")
    answer = extra.get("answer")
    if answer is None:
        reward_model = decode_json_field(row.get("reward_model"), "reward_model", ctx)
        answer = reward_model.get("ground_truth") if isinstance(reward_model, dict) else row.get("answer")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        raise ctx.error("no answer: field 'extra_info' has no 'answer' (nor reward_model.ground_truth)")
    if (
        isinstance(answer, (list, tuple))
        and len(answer) == 2
        and all(isinstance(a, (int, float)) for a in answer)
    ):
        answer = span_answer(*answer)
    raw_type = str(extra.get("question_type") or "oe").strip()
    qtype = _TYPES.get(raw_type.lower(), "oe")  # the ParaVT reward scores every other type as open-ended

    videos = decode_json_field(row.get("videos"), "videos", ctx) or []
    if isinstance(videos, (str, dict)):
        videos = [videos]
    paths = [v.get("video") if isinstance(v, dict) else v for v in videos]
    paths = [str(p) for p in paths if p]
    if not paths:
        raise ctx.error(f"field 'videos' names no video: {row.get('videos')!r:.80}")
    paths = [p.removeprefix("file://") for p in paths]

    # The row's id, else extra_info's index (ParaVT rows carry one), else the file and row number.
    qid = sample_id({**extra, "row_id": row.get("id")}, ("id", "uid", "question_id", "row_id", "index"), ctx)
    kept = {k: v for k, v in extra.items() if k not in ("answer", "question_type")}
    # The prompt as the release's RL workflow renders it (protocol="release" starts episodes from it).
    info: dict[str, Any] = {"extra_info": kept, "prompt_messages": [
        {"role": str(m.get("role")), "content": _text(m.get("content"))} for m in prompt if isinstance(m, dict)
    ]}  # fmt: skip
    if raw_type != qtype:
        info["question_type_raw"] = raw_type
    if system:
        info["system_prompt"] = system[0]
    if len(paths) > 1:
        info["more_videos"] = paths[1:]
    for key in ("data_source", "ability"):
        if row.get(key) is not None:
            info[key] = row[key]
    sample = VideoQASample(
        id=qid,
        video_path=paths[0],
        question=question,
        answer=str(answer),
        question_type=qtype,
        duration=maybe_float(extra.get("duration")),
        extra=info,
    )
    return [Candidate(sample, [paths[0]])]
