"""The main job's figures over seeds: ``python -m paravt.experiments.main_job RUN [RUN ...] --out FILE.json``
(``--figure PNG`` draws the picture; ``--from FILE.json`` redraws it from committed figures).

Each ``RUN`` is a finished ``paravt train --recipe tiny_cpu`` directory (one seed). For the cold start and the RL
checkpoint it reads the held-out evaluations the run wrote (``RUN/eval_coldstart``, ``RUN/eval``: accuracy, crops
per episode, tool use) and their counterfactual twins (``paravt.evaluation.counterfactual``: how often the answer
follows the recoloured needle, how often it keeps the old colour), and writes them per seed with the mean over
seeds and its 95 % confidence interval (Student's t over the seeds), then prints the Markdown table the docs
show. The docs' table is this rendering of the committed JSON (``scripts/docs_tables.py`` rewrites it,
``tests/test_docs.py`` checks it), so a rerun that changes a figure shows up as a stale page.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from paravt.evaluation.stats import mean_ci

POLICIES = (("cold start", "eval_coldstart"), ("RL", "eval"), ("RL, selected", "eval_selected"))
"""The run's policies (label, evaluation folder): the cold start, the last RL step, and the checkpoint the run selected
on its validation split (``select``; ``paravt.learners.selection``; absent from runs without a selection)."""
OPTIONAL = {"RL, selected"}
COLOURS = {"cold start": "#999", "RL": "#36c", "RL, selected": "#393"}
FIGURES = ("accuracy", "crops", "tool_use", "follows", "keeps")
CURVES = ("step", "accuracy", "tool_calls_per_rollout", "format_compliance")
"""Per-step training figures kept per seed (``RUN/metrics.jsonl``: the rollouts' accuracy, crops and format)."""


def run_figures(run: Path) -> dict[str, dict[str, float | None]]:
    """One run's figures per policy; a run without its evaluations is a ``FileNotFoundError`` naming it."""
    from paravt.evaluation.counterfactual import follow_rates

    out = {}
    for label, name in POLICIES:
        path = run / name / "summary.json"
        if not path.is_file() and label in OPTIONAL:
            continue
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: is {run} a finished paravt train run?")
        summary = json.loads(path.read_text())
        figures = {"accuracy": summary["accuracy"], "crops": summary["avg_tool_calls"],
                   "tool_use": summary["tool_usage_rate"], "n": summary["n"], "follows": None, "keeps": None}  # fmt: skip
        twin = run / f"{name}_counterfactual"
        if (twin / "results.jsonl").is_file():
            rates = follow_rates(run / "heldout", run / "heldout_counterfactual", twin)
            figures.update(follows=rates["follows"], keeps=rates["keeps"])
        out[label] = figures
    return out


def summarise(runs: list[Path]) -> dict[str, Any]:
    per_seed, curves = {}, {}
    for run in runs:
        figures = run_figures(run)
        seed = str(json.loads((run / "config.json").read_text())["seed"])
        per_seed[seed] = figures
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        curves[seed] = {k: [r.get(k) for r in rows] for k in CURVES}
    # the policies every run has; the headline is the selected checkpoint where every run selected one
    labels = [label for label, _ in POLICIES if all(label in s for s in per_seed.values())]
    headline = "RL, selected" if "RL, selected" in labels else "RL"
    over = {}
    for label in labels:
        over[label] = {}
        for fig in FIGURES:
            values = [s[label][fig] for s in per_seed.values() if s[label][fig] is not None]
            over[label][fig] = mean_ci(values) | {"values": values} if values else None
    # the paired difference per seed (each RL checkpoint against its own cold start)
    gain = {}
    for fig in FIGURES:
        diffs = [s[headline][fig] - s["cold start"][fig] for s in per_seed.values()
                 if s[headline][fig] is not None and s["cold start"][fig] is not None]  # fmt: skip
        gain[fig] = mean_ci(diffs) | {"values": diffs} if diffs else None
    over[f"{headline} − cold start, paired"] = gain
    out: dict[str, Any] = {"seeds": sorted(per_seed, key=int), "per_seed": per_seed, "mean": over, "curves": curves}
    if headline != "RL":
        out["headline"] = headline
        out["selected_steps"] = {seed: _selected_step(run) for seed, run in zip(per_seed, runs, strict=True)}
    return out


def _selected_step(run: Path) -> int | None:
    """The step of the checkpoint the run selected (its weights need not be there)."""
    from paravt.evaluation.heldout import selected_choice

    best = selected_choice(run)
    return None if best is None else int(best["step"])


def to_markdown(data: dict[str, Any]) -> str:
    """The table: mean over seeds ± the half-width of its 95 % CI, then each seed's value; the last row is each
    seed's RL checkpoint minus its own cold start."""

    def cell(label: str, fig: str, digits: int) -> str:
        m = data["mean"][label][fig]
        if m is None:
            return "-"
        ci = "" if m["ci95"] is None else f" ± {m['ci95']:.{digits}f}"
        seeds = ", ".join(f"{v:.{digits}f}" for v in m["values"])
        return f"{m['mean']:.{digits}f}{ci} ({seeds})"

    head = ("| policy | held-out accuracy | crops per episode | tool use | recoloured needles: follows the new colour "
            "| keeps the old one |")  # fmt: skip
    lines = [head, "|---|---|---|---|---|---|"]
    for label in data["mean"]:
        lines.append(f"| {label} | {cell(label, 'accuracy', 3)} | {cell(label, 'crops', 2)} | {cell(label, 'tool_use', 2)} "
                     f"| {cell(label, 'follows', 3)} | {cell(label, 'keeps', 3)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def seed_offsets(n: int, width: float = 0.5) -> list[float]:
    """Horizontal places of ``n`` seeds' points across a bar ``width`` wide (centred; one seed in the middle)."""
    if n <= 1:
        return [0.0] * n
    return [-width / 2 + width * i / (n - 1) for i in range(n)]


def seed_colours(seeds: list[str]) -> dict[str, str]:
    """One colour per seed (matplotlib's cycle), the same in every panel."""
    return {seed: f"C{i % 10}" for i, seed in enumerate(seeds)}


def plot(data: dict[str, Any], path: Path) -> None:
    """The picture: held-out accuracy of the cold start and the RL checkpoint per seed with the mean and its
    interval, then the rollouts' accuracy and crops per rollout over the RL steps, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    ax = axes[0]
    colours = seed_colours(data["seeds"])
    labels = [label for label in data["mean"] if "paired" not in label]
    for x, label in enumerate(labels):
        m = data["mean"][label]["accuracy"]
        ax.bar(x, m["mean"], width=0.6, color=COLOURS.get(label, "#666"), alpha=0.5, yerr=m["ci95"] or 0, capsize=6)
        # each seed at its own place across the bar, in its curves' colour: seeds with one value never overlap
        for offset, seed, v in zip(seed_offsets(len(data["seeds"])), data["seeds"], m["values"], strict=True):
            ax.plot(x + offset, v, "o", color=colours[seed], markeredgecolor="#222", label=f"seed {seed}" if x == 0 else None)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"held-out accuracy (mean ± 95 % CI, {len(data['seeds'])} seeds)", fontsize=10)
    for ax, key, title in ((axes[1], "accuracy", "rollout accuracy"), (axes[2], "tool_calls_per_rollout", "crops per rollout")):
        for seed, c in data["curves"].items():
            ax.plot(c["step"], c[key], label=f"seed {seed}", color=colours.get(seed))
        ax.set_xlabel("PARA-GRPO step")
        ax.set_title(title, fontsize=10)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="finished paravt train runs, one per seed")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    p.add_argument("--from", dest="source", type=Path, default=None, help="read the figures from this JSON instead of runs")
    p.add_argument("--figure", type=Path, default=None, help="also draw the picture (PNG) here")
    args = p.parse_args(argv)
    if bool(args.runs) == bool(args.source):
        p.error("give either RUN directories or --from FILE")
    try:
        data = summarise(args.runs) if args.runs else json.loads(args.source.read_text())
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"main_job: error: {exc}", file=sys.stderr)
        return 1
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    if args.figure is not None:
        plot(data, args.figure)
    print(to_markdown(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
