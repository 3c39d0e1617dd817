"""Which RL checkpoint a run reports: the one that scored best on a validation split, not whichever step the run
happened to stop at (``select`` in a recipe; one main-job seed of four read 0.975 held out at steps 50-70
and 0.750 at step 80, after its rollouts' entropy jumped).

Every ``select.every`` RL steps from ``select.after``, the policy as it is is saved to
``RUN/select/step_NNNNNN/model`` and evaluated greedily on ``RUN/validation`` (``data.validation_n`` videos of the
training distribution under their own seed: never trained on, never the held-out split) into
``RUN/select/step_NNNNNN/eval``. The run's selected checkpoint is the candidate with the highest validation accuracy,
the earliest on a tie, so a run continued past a good step changes its choice only where a later policy scores
strictly higher. ``RUN/select/best.json`` names it; only its weights are kept. ``paravt train``'s held-out
evaluation evaluates it beside the last step (``RUN/eval_selected``).

Nothing here changes the training run: the evaluation saves and restores every RNG the trainer draws from, so a run
with selection computes the same steps, bit for bit, as one without.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from paravt.evaluation.heldout import BEST, SELECT_DIR, VALIDATION_SPLIT, selected, step_dir
from paravt_env import storage

__all__ = ["BEST", "SELECT_DIR", "VALIDATION_SPLIT", "Selection", "candidates", "choose", "first_candidate", "rng_preserved",
           "selected", "selects", "step_dir"]  # fmt: skip


def first_candidate(every: int, after: int) -> int:
    """The first step whose policy is a candidate: the first multiple of ``every`` at or after ``after`` (and 1)."""
    return -(-max(after, 1) // every) * every


def selects(cfg: Any, target: int = 1 << 62) -> bool:
    """Whether a run of ``cfg`` (a ``TrainConfig``) trained to step ``target`` evaluates any candidate. Never on real
    data (``data.path``): the validation split is drawn from the synthetic training distribution, as the held-out
    split is (the trainer says so)."""
    return (cfg.select.every > 0 and cfg.data.validation_n > 0 and not cfg.data.path
            and target >= first_candidate(cfg.select.every, cfg.select.after))  # fmt: skip


def candidates(out: str | Path) -> list[dict[str, Any]]:
    """Every evaluated candidate, by step: ``{"step", "accuracy", "n"}`` (a candidate whose validation an interrupt
    cut short has no ``summary.json`` yet and is not one)."""
    rows = []
    for folder in sorted((Path(out) / SELECT_DIR).glob("step_*")):
        summary = folder / "eval" / "summary.json"
        if summary.is_file():
            data = storage.read_json(summary)
            rows.append({"step": int(folder.name.split("_")[1]), "accuracy": float(data["accuracy"]), "n": int(data["n"])})
    return rows


def choose(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The highest validation accuracy, the earliest step on a tie (None: no candidate)."""
    return min(rows, key=lambda r: (-r["accuracy"], r["step"])) if rows else None


@contextlib.contextmanager
def rng_preserved() -> Iterator[None]:
    """torch's, numpy's and Python's global RNGs as they were, whatever the body draws (loading a model initialises
    weights before it reads them): the training run after a validation draws what it would have drawn."""
    from paravt.learners.checkpoint import rng_states, set_rng_states

    states = rng_states()
    try:
        yield
    finally:
        set_rng_states(states)


class Selection:
    """The validation schedule and choice of one run directory (``SelectConfig``)."""

    def __init__(self, every: int, after: int, out: str | Path) -> None:
        if every < 1:
            raise ValueError(f"select.every must be at least 1 for a selection, got {every}")
        self.every, self.after, self.out = every, after, Path(out)
        self.data = self.out / VALIDATION_SPLIT

    def due(self, step: int) -> bool:
        """Whether the policy after ``step`` is a candidate."""
        return step > 0 and step >= self.after and step % self.every == 0

    def done(self, step: int) -> bool:
        return (step_dir(self.out, step) / "eval" / "summary.json").is_file()

    def evaluate(self, step: int, save_model: Callable[[Path], None],
                 progress: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
        """Save the policy of ``step`` (``save_model(target)``), score it on the validation split, and choose again.
        Returns the candidate's row and the choice now. Resumable: rerun after an interrupt, it saves the same
        weights again (the step is replayed bit for bit) and scores the samples not yet scored."""
        from paravt.evaluation.fingerprints import checkpoint_identity
        from paravt.evaluation.harness import evaluate_checkpoint
        from paravt.evaluation.heldout import fresh
        from paravt.evaluation.progress import outside_job

        if not (self.data / "samples.jsonl").is_file():
            raise FileNotFoundError(f"{self.data} holds no validation split (samples.jsonl): select.every needs it "
                                    "(paravt train writes it before RL)")  # fmt: skip
        folder = step_dir(self.out, step)
        model = folder / "model"
        # inside RL's stage of the job: the held-out evaluation's stage is the run's last, not this
        with rng_preserved(), outside_job():
            if model.exists():
                shutil.rmtree(model)
            save_model(model)
            target = folder / "eval"
            fresh(target, checkpoint_identity(model))
            summary = evaluate_checkpoint(model, self.data, target, progress=progress)
        best = self.choose()
        return {"step": step, "accuracy": float(summary["accuracy"]), "n": int(summary["n"])}, best

    def choose(self) -> dict[str, Any] | None:
        """Write ``best.json`` for the candidates evaluated so far, then drop every other candidate's weights (in that
        order: an interrupt between the two leaves spare weights, removed next time, never a choice without its
        weights)."""
        rows = candidates(self.out)
        best = choose(rows)
        if best is None:
            return None
        storage.write_text_atomic(self.out / SELECT_DIR / BEST, json.dumps(best) + "\n")
        for row in rows:  # evaluated ones only: a candidate still being scored keeps its weights
            if row["step"] != best["step"]:
                shutil.rmtree(step_dir(self.out, row["step"]) / "model", ignore_errors=True)
        return best
