"""Does an answer follow the pixels? A policy evaluated on a split's counterfactual copy (``paravt synth
--counterfactual colour``: the same videos with every needle recoloured, all else kept) is scored against the new
answers (it follows the pixels) and against the original ones (it keeps an answer the pixels no longer show: a
memorised, guessed or text-driven answer).

Only pairs whose question reads the same in both splits and whose answer changed count (open-ended colour
questions under a recolouring); the rest are re-asked questions, not counterfactuals, and are left out, counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def follow_rates(original: str | Path, counterfactual: str | Path, results: str | Path) -> dict[str, Any]:
    """``follows`` and ``keeps`` (fractions of the counted pairs), ``n`` (pairs counted), ``not_counterfactual``
    (samples left out: another question text, or the same answer) and ``unscored`` (counted samples with no
    result row, or an error row), for the evaluation ``results`` (a ``results.jsonl``, or its directory) of a
    policy on the ``counterfactual`` split of the ``original`` one."""
    from paravt.evaluation.scoring import is_correct, score_prediction
    from paravt.evaluation.store import read_results
    from paravt_env import load_samples

    # questions and answers only: the videos need not be there (a run's committed copy keeps samples.jsonl alone)
    before = {s.id: s for s in load_samples(original, keep_missing=True)}
    after = {s.id: s for s in load_samples(counterfactual, keep_missing=True)}
    path = Path(results)
    rows = {r["id"]: r for r in read_results(path / "results.jsonl" if path.is_dir() else path)}
    pairs = [(before[i], after[i]) for i in sorted(before.keys() & after.keys())
             if before[i].question == after[i].question and before[i].answer != after[i].answer]  # fmt: skip
    follows = keeps = unscored = 0
    for old, new in pairs:
        row = rows.get(new.id)
        if row is None or row.get("error"):
            unscored += 1
            continue
        prediction = row.get("prediction") or ""
        follows += is_correct(score_prediction(prediction, new.answer, new.question_type), new.question_type)
        keeps += is_correct(score_prediction(prediction, old.answer, old.question_type), old.question_type)
    scored = len(pairs) - unscored
    return {
        "follows": follows / scored if scored else None, "keeps": keeps / scored if scored else None,
        "n": scored, "not_counterfactual": len(after) - len(pairs), "unscored": unscored,
    }  # fmt: skip
