"""Where and how ``paravt repro`` evaluates its policies on the held-out videos: each arm's final policy and the
shared cold start, at every K of ``ReproConfig.eval_frame_budgets`` (each evaluation resumes). Read by the
probe gate (the cold start's K = 64 evaluation is its tool-prior check) and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paravt.evaluation.harness import evaluate_checkpoint
from paravt.experiments.repro.arms import ReproConfig, coldstart_model
from paravt_env.storage import read_json


def eval_dir(run: Path, dispatch: str, k: int | None) -> Path:
    """Where a policy's held-out evaluation at overview budget ``k`` (None: its card's) with ``dispatch`` goes."""
    return Path(run) / (f"eval_{dispatch}" if k is None else f"eval_{dispatch}_k{k}")


def eval_budgets(cfg: ReproConfig) -> tuple[int | None, ...]:
    return tuple(cfg.eval_frame_budgets) or (None,)


def evaluate_run(run: Path, heldout: Path, cfg: ReproConfig, progress: bool = False) -> None:
    """An arm's final policy at every K of ``cfg.eval_frame_budgets`` with every dispatch (each resumes)."""
    for k in eval_budgets(cfg):
        for d in cfg.dispatch:
            evaluate_policy(run / "checkpoint" / "model", heldout, eval_dir(run, d, k), cfg, dispatch=d, frame_budget=k,
                      progress=progress)  # fmt: skip


def evaluate_coldstart(out: Path, cfg: ReproConfig, progress: bool = False) -> None:
    """The shared cold start itself at every K, parallel dispatch: the row every arm starts from."""
    for k in eval_budgets(cfg):
        evaluate_policy(coldstart_model(out), out / "coldstart" / "heldout", eval_dir(out / "coldstart", "parallel", k), cfg,
                  frame_budget=k, progress=progress)  # fmt: skip


def evaluate_policy(model: Path, heldout: Path, target: Path, cfg: ReproConfig, **kwargs: Any) -> None:
    """One evaluation, skipped when ``target`` already holds a finished summary of every sample asked for (a
    run directory carried over as ``results/repro/`` keeps it, without the weights that would be loaded to resume)."""
    summary = target / "summary.json"
    if summary.is_file():
        from paravt_env import load_samples

        done = read_json(summary)
        asked = len(load_samples(heldout, strict=False, keep_missing=True)[: cfg.eval_limit or None])
        if done.get("n") == asked and not any(f.get("transient") for f in done.get("failed", [])):
            return
    evaluate_checkpoint(model, heldout, target, limit=cfg.eval_limit, max_new_tokens=256, **kwargs)
