"""A training run's held-out evaluation: its RL checkpoint and the cold start it started from, on the run's
held-out split and on that split's counterfactual copy, side by side (what ``paravt train`` prints at its end and
``paravt.experiments.generalisation`` reuses). The run's layout: ``RUN/checkpoint/model``, ``RUN/coldstart/model``,
``RUN/heldout``, ``RUN/heldout_counterfactual``; the evaluations go to ``RUN/eval*``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HELDOUT_SPLIT = "heldout"
"""``RUN/heldout``: the run's held-out videos (written by the trainer before it trains)."""
COUNTERFACTUAL_SPLIT = "heldout_counterfactual"
"""``RUN/heldout_counterfactual``: the same videos, every needle recoloured (``paravt.evaluation.counterfactual``)."""


def fresh(target: Path, identity: str, twins: tuple[str, ...] = ()) -> None:
    """Keep ``target`` (an evaluation of a checkpoint, and its twins ``target`` + suffix on other splits) only if
    it evaluated the checkpoint as it is now (``checkpoint.json``); a continued run saves new weights to the same
    path, and its evaluation is redone rather than resumed."""
    for folder in (target, *(target.with_name(target.name + suffix) for suffix in twins)):
        marker = folder / "checkpoint.json"
        if folder.exists():
            seen = _evaluated_identity(marker)
            if seen != identity:
                why = "the checkpoint changed since it was evaluated" if seen else f"{marker} is missing or unreadable"
                print(f"{folder}: {why}: evaluating again")
                shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"identity": identity}) + "\n")


def _evaluated_identity(marker: Path) -> str | None:
    """The identity ``marker`` records, None where it is missing or damaged (then the evaluation is redone: its rows
    cannot be tied to the checkpoint)."""
    try:
        identity = json.loads(marker.read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return None
    return identity if isinstance(identity, str) else None


def evaluate_heldout(out: Path, progress: bool = True) -> str:
    """``paravt eval --policy hf:RUN/checkpoint/model --data RUN/heldout --out RUN/eval`` (the checkpoint's
    policy card supplies the env options), and the same for the cold start the RL started from
    (``RUN/coldstart/model`` -> ``RUN/eval_coldstart``), as Markdown with the two side by side. Where the
    split's counterfactual copy exists (``RUN/heldout_counterfactual``: every needle recoloured), both are also
    evaluated on it (``RUN/eval_counterfactual``, ``RUN/eval_coldstart_counterfactual``) and the table says how
    often the answer follows the new colour and how often it keeps the old one
    (``paravt.evaluation.counterfactual``)."""
    from paravt.evaluation.counterfactual import follow_rates
    from paravt.evaluation.fingerprints import checkpoint_identity
    from paravt.evaluation.harness import evaluate_checkpoint
    from paravt.evaluation.report import to_markdown

    data, counter = out / HELDOUT_SPLIT, out / COUNTERFACTUAL_SPLIT
    runs = [("RL", out / "checkpoint" / "model", out / "eval")]
    if (out / "coldstart" / "model" / "paravt.json").is_file():
        runs.insert(0, ("cold start", out / "coldstart" / "model", out / "eval_coldstart"))
    with_counter = (counter / "samples.jsonl").is_file()
    parts, rows = [], []
    for label, model, target in runs:
        fresh(target, checkpoint_identity(model), ("_counterfactual",) if with_counter else ())
        summary = evaluate_checkpoint(model, data, target, progress=progress)
        parts.append(to_markdown(summary, f"Held-out evaluation ({label}): hf:{model} on {data}"))
        row = (f"| {label} | {summary['accuracy']:.3f} | {summary['avg_tool_calls']:.2f} | "
               f"{summary['tool_usage_rate']:.2f} | {summary['n']} |")  # fmt: skip
        if with_counter:
            twin = target.with_name(target.name + "_counterfactual")
            evaluate_checkpoint(model, counter, twin, progress=progress)
            rates = follow_rates(data, counter, twin)
            row += f" {_rate(rates['follows'])} | {_rate(rates['keeps'])} |"
        rows.append(row)
    head = "| policy | held-out accuracy | crops per episode | tool use | n |"
    table = [head + (" needles recoloured: follows the new colour | keeps the old one |" if with_counter else ""),
             "|---|---|---|---|---|" + ("---|---|" if with_counter else ""), *rows]  # fmt: skip
    return "".join(parts) + "\n" + "\n".join(table) + "\n"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
