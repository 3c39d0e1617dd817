"""Answer metrics: token F1 (open-ended), multiple-choice letter match, temporal IoU (grounding).

Released ParaVT definitions (``paravt/rl/rewards/task_metrics.py``), rule for rule. One deliberate
difference: where the release would raise (a "number" such as ``"."`` or ``"1.2.3"`` in a time span), these
return 0.0, because a reward must never crash a rollout.
"""

from __future__ import annotations

import re

from .answer import normalize_text

_SPAN_RE = re.compile(r"\[?\s*([\d.]+)\s*,\s*([\d.]+)\s*\]?")
_MCQ_PATTERNS = (
    re.compile(r"^\(?([A-D])\)?$"),
    re.compile(r"[Tt]he answer is\s*\(?([A-D])\)?"),
    re.compile(r"[Oo]ption\s*\(?([A-D])\)?"),
    re.compile(r"^([A-D])[.):]"),
    re.compile(r"\b([A-D])\b"),
)


def token_f1(pred: str, gt: str) -> float:
    """SQuAD-style F1 of normalised whitespace tokens.

    The overlap is counted over token *sets* while precision and recall divide by token counts with
    repeats, exactly as the release does (so repeating a correct word lowers precision).
    """
    pred_tokens = normalize_text(pred).split()
    gt_tokens = normalize_text(gt).split()
    if not pred_tokens or not gt_tokens:
        return 0.0
    common = len(set(pred_tokens) & set(gt_tokens))
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(gt_tokens)
    return 2 * precision * recall / (precision + recall)


def mcq_accuracy(pred: str, gt: str) -> float:
    """1.0 if the prediction names the ground-truth letter (A-D), else 0.0.

    Accepts ``B``, ``(B)``, ``The answer is B``, ``Option B``, ``B. red circle`` and, last, any standalone
    capital A-D in the text (the first match of each pattern is the one that counts).
    """
    letter = gt.strip().upper()
    if len(letter) != 1 or letter not in "ABCD":
        return 0.0
    pred = pred.strip()
    if pred.upper() == letter:
        return 1.0
    for pattern in _MCQ_PATTERNS:
        m = pattern.search(pred)
        if m and m.group(1).upper() == letter:
            return 1.0
    return 0.0


def parse_span(text: str) -> tuple[float, float] | None:
    """The first ``[start, end]`` (brackets optional) pair of decimals in ``text``, or ``None``."""
    m = _SPAN_RE.search(text)
    if not m:
        return None
    try:
        return float(m.group(1)), float(m.group(2))
    except ValueError:  # "." or "1.2.3" match [\d.]+ but are not numbers (the release raises here)
        return None


def temporal_iou(pred: str, gt: str) -> float:
    """Intersection over union of the first time span in each string; 0.0 if either is missing or empty."""
    p, g = parse_span(pred), parse_span(gt)
    if p is None or g is None:
        return 0.0
    (ps, pe), (gs, ge) = p, g
    if pe <= ps or ge <= gs:
        return 0.0
    inter = max(0.0, min(pe, ge) - max(ps, gs))
    union = (pe - ps) + (ge - gs) - inter
    return inter / union if union > 0 else 0.0
