"""A training run's held-out evaluation: its RL checkpoint and the cold start it started from, on the run's
held-out split and on that split's counterfactual copy, side by side (what ``paravt train`` prints at its end and
``paravt.experiments.generalisation`` reuses). The run's layout: ``RUN/checkpoint/model``, ``RUN/coldstart/model``,
``RUN/heldout``, ``RUN/heldout_counterfactual``; the evaluations go to ``RUN/eval*``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from paravt_env.storage import read_json

HELDOUT_SPLIT = "heldout"
"""``RUN/heldout``: the run's held-out videos (written by the trainer before it trains)."""
COUNTERFACTUAL_SPLIT = "heldout_counterfactual"
"""``RUN/heldout_counterfactual``: the same videos, every needle recoloured (``paravt.evaluation.counterfactual``)."""

VALIDATION_SPLIT = "validation"
"""``RUN/validation``: the run's validation videos (``paravt.learners.run_setup.write_validation``)."""
SELECT_DIR = "select"
"""``RUN/select``: one folder per candidate of the run's checkpoint selection (``paravt.learners.selection``), and
``best.json``, the choice."""
BEST = "best.json"
SELECTED_EVAL = "eval_selected"
"""``RUN/eval_selected``: the held-out evaluation of the checkpoint the run selected on its validation split."""


def step_dir(out: str | Path, step: int) -> Path:
    """``RUN/select/step_NNNNNN``: the candidate of ``step`` (its ``model`` while it is the choice, its ``eval``)."""
    return Path(out) / SELECT_DIR / f"step_{step:06d}"


def selected_choice(out: str | Path) -> dict[str, Any] | None:
    """``RUN/select/best.json``: the step the run selected, ``{"step", "accuracy", "n"}`` (its validation figures), or
    None where the run has no selection (off, or no candidate evaluated yet). Its weights need not be there (a slim
    copy of a run keeps the choice and its evaluations)."""
    path = Path(out) / SELECT_DIR / BEST
    return read_json(path) if path.is_file() else None


def selected(out: str | Path) -> dict[str, Any] | None:
    """The run's selected checkpoint, ``selected_choice`` with ``"model"``, the path of its weights. A choice whose
    weights are gone is a ``FileNotFoundError`` that says so."""
    best = selected_choice(out)
    if best is None:
        return None
    model = step_dir(out, int(best["step"])) / "model"
    if not model.is_dir():
        raise FileNotFoundError(f"{Path(out) / SELECT_DIR / BEST} selects step {best['step']}, whose weights {model} are missing")
    return {**best, "model": model}


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
        identity = read_json(marker).get("identity")
    except (OSError, ValueError):  # missing, or damaged (storage.DamagedFile)
        return None
    return identity if isinstance(identity, str) else None


def evaluate_heldout(out: Path, progress: bool = True) -> str:
    """``paravt eval --policy hf:RUN/checkpoint/model --data RUN/heldout --out RUN/eval`` (the checkpoint's
    policy card supplies the env options), and the same for the cold start the RL started from
    (``RUN/coldstart/model`` -> ``RUN/eval_coldstart``) and, where the run selects its checkpoint on a validation
    split, for the selected one (``RUN/select`` -> ``RUN/eval_selected``), as Markdown side by side. Where the
    split's counterfactual copy exists (``RUN/heldout_counterfactual``: every needle recoloured), both are also
    evaluated on it (``RUN/eval_counterfactual``, ``RUN/eval_coldstart_counterfactual``) and the table says how
    often the answer follows the new colour and how often it keeps the old one
    (``paravt.evaluation.counterfactual``)."""
    from paravt.evaluation.counterfactual import follow_rates
    from paravt.evaluation.fingerprints import checkpoint_identity
    from paravt.evaluation.report import to_markdown

    data, counter = out / HELDOUT_SPLIT, out / COUNTERFACTUAL_SPLIT
    runs = [("RL", out / "checkpoint" / "model", out / "eval")]
    if (best := selected(out)) is not None:  # the run's checkpoint chosen on its validation split (select.every)
        runs.append((f"RL, selected (step {best['step']})", best["model"], out / SELECTED_EVAL))
    if (out / "coldstart" / "model" / "paravt.json").is_file():
        runs.insert(0, ("cold start", out / "coldstart" / "model", out / "eval_coldstart"))
    with_counter = (counter / "samples.jsonl").is_file()
    parts, rows, said = [], [], []
    for label, model, target in runs:
        fresh(target, checkpoint_identity(model), ("_counterfactual",) if with_counter else ())
        summary = _evaluate(model, data, target, progress, said)
        parts.append(to_markdown(summary, f"Held-out evaluation ({label}): hf:{model} on {data}"))
        row = (f"| {label} | {summary['accuracy']:.3f} | {summary['avg_tool_calls']:.2f} | "
               f"{summary['tool_usage_rate']:.2f} | {summary['n']} |")  # fmt: skip
        if with_counter:
            twin = target.with_name(target.name + "_counterfactual")
            _evaluate(model, counter, twin, progress, said)
            rates = follow_rates(data, counter, twin)
            row += f" {_rate(rates['follows'])} | {_rate(rates['keeps'])} |"
        rows.append(row)
    head = "| policy | held-out accuracy | crops per episode | tool use | n |"
    table = [head + (" needles recoloured: follows the new colour | keeps the old one |" if with_counter else ""),
             "|---|---|---|---|---|" + ("---|---|" if with_counter else ""), *rows]  # fmt: skip
    return "".join(parts) + "\n" + "\n".join(table) + "\n\n" + "\n".join(said) + "\n"


def _evaluate(model: Path, data: Path, target: Path, progress: bool, said: list[str]) -> dict:
    """``evaluate_checkpoint`` into ``target``, and what it did in ``said``: the samples it scored now, or that
    it had nothing to evaluate (a resumed run whose checkpoint did not change)."""
    from paravt.evaluation.harness import evaluate_checkpoint, pending_samples
    from paravt_env import load_samples

    todo = pending_samples(target, load_samples(data, strict=False, keep_missing=True))
    summary = evaluate_checkpoint(model, data, target, progress=progress)
    said.append(f"{target}: nothing to evaluate, {summary['n']} rows already scored" if todo == 0 else
                f"{target}: {todo} samples scored now" + (f", {summary['n'] - todo} before" if summary["n"] > todo else ""))  # fmt: skip
    return summary


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


RESULT_PICTURE = "result.png"
"""``RUN/result.png``: the run's result in one picture (``plot_result``)."""
POLICY_DIRS = (("cold start", "eval_coldstart"), ("RL", "eval"), ("RL, selected", SELECTED_EVAL))


def result_figures(out: Path) -> dict[str, dict]:
    """Per policy of the run's held-out evaluation (``RUN/eval_coldstart``, ``RUN/eval``): accuracy (the mean
    score, as ``summary.json`` has it), ``n``, crops per episode and accuracy where the overview missed the asked
    needle and where it showed it (``summary.json``'s ``by_overview``; absent on real data), and the recoloured
    check's ``follows`` / ``keeps`` (None without the counterfactual evaluation). Policies not evaluated are left
    out."""
    from paravt.evaluation.counterfactual import follow_rates

    figures = {}
    for label, name in POLICY_DIRS:
        path = out / name / "summary.json"
        if not path.is_file():
            continue
        summary = read_json(path)  # a damaged summary is a DamagedFile naming it
        split = summary.get("by_overview") or {}
        row = {"accuracy": summary["accuracy"], "n": summary["n"], "crops": summary["avg_tool_calls"],
               "by_overview": {k: {"n": v["n"], "crops": v["avg_tool_calls"], "accuracy": v["accuracy"]} for k, v in split.items()},
               "follows": None, "keeps": None}  # fmt: skip
        twin = out / f"{name}_counterfactual"
        if (twin / "results.jsonl").is_file() and (out / COUNTERFACTUAL_SPLIT / "samples.jsonl").is_file():
            rates = follow_rates(out / HELDOUT_SPLIT, out / COUNTERFACTUAL_SPLIT, twin)
            row.update(follows=rates["follows"], keeps=rates["keeps"])
        figures[label] = row
    return figures


def plot_result(out: Path, figures: dict[str, dict] | None = None, title: str = "") -> Path:
    """Draw ``RUN/result.png``: the cold start against the RL checkpoint on the held-out split (accuracy), the
    crops per episode where the overview missed the needle and where it showed it (a policy that learnt when to
    crop crops on the misses only), and the recoloured check (follows the new colour, keeps the old one).
    Needs matplotlib (the ``plot`` extra): an ``ImportError`` otherwise."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = result_figures(out) if figures is None else figures
    labels = list(figures)
    colours = {"cold start": "#999", "RL": "#36c", "RL, selected": "#393"}
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    ax = axes[0]
    bars = ax.bar(labels, [figures[p]["accuracy"] for p in labels], color=[colours.get(p, "#666") for p in labels])
    ax.bar_label(bars, fmt="%.3f", fontsize=9)
    ax.set_ylim(0, 1.1)
    ax.set_title(f"held-out accuracy (mean score, n = {max((figures[p]['n'] for p in labels), default=0)})", fontsize=10)
    counts = {k: next((f["by_overview"][k]["n"] for f in figures.values() if k in f["by_overview"]), 0) for k in ("missed", "showed")}
    _grouped(axes[1], figures, colours, [("missed", f"overview missed it ({counts['missed']})"),
                                         ("showed", f"overview showed it ({counts['showed']})")],
             lambda f, k: (f["by_overview"].get(k) or {}).get("crops") if (f["by_overview"].get(k) or {}).get("n") else None,
             "%.2f")  # fmt: skip
    axes[1].set_title("crops per episode, where the overview ... the needle", fontsize=10)
    _grouped(axes[2], figures, colours, [("follows", "follows the new colour"), ("keeps", "keeps the old one")],
             lambda f, k: f[k], "%.3f")
    axes[2].set_ylim(0, 1.1)
    axes[2].set_title("needles recoloured: the answer ...", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path = out / RESULT_PICTURE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grouped(ax, figures: dict[str, dict], colours: dict[str, str], groups: list[tuple[str, str]], value, fmt: str) -> None:
    """Bars of ``value(figures[policy], key)`` per group, one bar per policy; a missing value draws nothing and
    says "n/a"."""
    width = 0.8 / max(1, len(figures))
    for i, policy in enumerate(figures):
        xs = [g + (i - (len(figures) - 1) / 2) * width for g in range(len(groups))]
        values = [value(figures[policy], key) for key, _ in groups]
        bars = ax.bar(xs, [0 if v is None else v for v in values], width, label=policy, color=colours.get(policy, "#666"))
        ax.bar_label(bars, labels=["n/a" if v is None else fmt % v for v in values], fontsize=8)
    ax.set_xticks(range(len(groups)), [text for _, text in groups], fontsize=9)
    top = max([value(f, key) or 0 for f in figures.values() for key, _ in groups] + [1.0])
    ax.set_ylim(0, top * 1.15)
    ax.legend(fontsize=8)
