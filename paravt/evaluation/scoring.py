"""How ``paravt eval`` scores an answer: multiple choice by letter, open-ended by normalised overlap, grounding
by temporal IoU (``is_correct`` at IoU 0.5), and the release protocol's own scorer."""

from __future__ import annotations

import re
from typing import Any

from paravt_env import VideoQASample
from paravt_env.rewards import mcq_accuracy, normalize_text, temporal_iou

_DASH_SPAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:s|sec|seconds)?\s*(?:-|–|to)\s*(\d+(?:\.\d+)?)")


def grounding_span(text: str) -> tuple[float, float] | None:
    """A time span in an answer: ``[s, e]`` / ``s, e`` (the reward's form) or ``s - e seconds``."""
    from paravt_env.rewards import parse_span

    span = parse_span(text)
    if span is None:
        m = _DASH_SPAN_RE.search(text)
        span = (float(m.group(1)), float(m.group(2))) if m else None
    return span


def score_prediction(prediction: str, answer: str, question_type: str) -> float:
    """Per-sample score: MCQ letter match, grounding IoU, open-ended token F1 (the reward's accuracy rules,
    with grounding answers also read in the ``X.X - Y.Y seconds`` form of the eval prompt)."""
    from paravt_env.rewards import answer_accuracy

    if question_type == "tvg":
        pred, gt = grounding_span(prediction), grounding_span(answer)
        if pred is None or gt is None:
            return 0.0
        return temporal_iou(f"[{pred[0]}, {pred[1]}]", f"[{gt[0]}, {gt[1]}]")
    if question_type == "mcq":
        if not prediction or not answer:
            return 0.0
        return (
            1.0 if normalize_text(prediction) == normalize_text(answer) else mcq_accuracy(prediction, answer)
        )
    return answer_accuracy(prediction, answer, question_type, "f1")


def predicted_span(sample: VideoQASample, prediction: str, final_info: dict[str, Any], *, release: bool) -> tuple[float, float] | None:
    """The span a grounding answer names, as its scorer reads it (``release_span`` of the final response under
    the release protocol, ``grounding_span`` otherwise); None for other questions or where it names none."""
    if release:
        from paravt_env.data.release_questions import release_fields
        from paravt_env.rewards.release_scores import release_span

        return None if release_fields(sample)["is_mcq"] else release_span(final_info.get("final_response", ""))
    return grounding_span(prediction) if sample.question_type == "tvg" else None


def release_result(sample: VideoQASample, final_info: dict[str, Any]) -> tuple[float, str, str, bool, dict]:
    """(score, prediction, answer, correct, extra) of an episode under the release protocol, scored as the
    released driver scores: the option letter against its answer, or IoU (``correct``: IoU >= 0.5)."""
    from paravt_env.data.release_questions import release_fields
    from paravt_env.rewards.release_scores import release_score

    fields = release_fields(sample)
    final = final_info.get("final_response", "")
    span = tuple(fields["span"]) if fields.get("span") else None
    extra = {"release_id": fields.get("id"), "final_response": final[:500]}  # the release's id: rows to match
    if final_info.get("error"):  # the driver fails the sample: an error row scoring 0
        return 0.0, "", fields["answer"], False, {**extra, "final_response": ""}
    score, pred = release_score(final, is_mcq=fields["is_mcq"], answer=fields["answer"], span=span)
    correct = score == 1.0 if fields["is_mcq"] else score >= 0.5
    return score, pred, fields["answer"], correct, extra


def is_correct(score: float, question_type: str) -> bool:
    """MCQ: the right letter; grounding: IoU >= 0.5; open-ended: token F1 >= 0.5."""
    return score >= (1.0 if question_type == "mcq" else 0.5)
