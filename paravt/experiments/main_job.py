"""The main job's figures over seeds: ``python -m paravt.experiments.main_job RUN [RUN ...] --out FILE.json``.

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
import statistics
import sys
from pathlib import Path
from typing import Any

POLICIES = (("cold start", "eval_coldstart"), ("RL", "eval"))
FIGURES = ("accuracy", "crops", "tool_use", "follows", "keeps")
# two-sided 95 % Student t quantiles by degrees of freedom (seeds - 1)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def run_figures(run: Path) -> dict[str, dict[str, float | None]]:
    """One run's figures per policy; a run without its evaluations is a ``FileNotFoundError`` naming it."""
    from paravt.evaluation.counterfactual import follow_rates

    out = {}
    for label, name in POLICIES:
        path = run / name / "summary.json"
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


def mean_ci(values: list[float]) -> dict[str, float | None]:
    """Mean and the half-width of its 95 % confidence interval (None for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "ci95": None}
    t = T95.get(len(values) - 1, 1.96)
    return {"mean": mean, "ci95": t * statistics.stdev(values) / len(values) ** 0.5}


def summarise(runs: list[Path]) -> dict[str, Any]:
    per_seed = {}
    for run in runs:
        figures = run_figures(run)
        per_seed[str(json.loads((run / "config.json").read_text())["seed"])] = figures
    over = {}
    for label, _ in POLICIES:
        over[label] = {}
        for fig in FIGURES:
            values = [s[label][fig] for s in per_seed.values() if s[label][fig] is not None]
            over[label][fig] = mean_ci(values) | {"values": values} if values else None
    return {"seeds": sorted(per_seed, key=int), "per_seed": per_seed, "mean": over}


def to_markdown(data: dict[str, Any]) -> str:
    """The table: mean over seeds [95 % CI], then each seed's value."""

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
    for label, _ in POLICIES:
        lines.append(f"| {label} | {cell(label, 'accuracy', 3)} | {cell(label, 'crops', 2)} | {cell(label, 'tool_use', 2)} "
                     f"| {cell(label, 'follows', 3)} | {cell(label, 'keeps', 3)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="finished paravt train runs, one per seed")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    try:
        data = summarise(args.runs)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"main_job: error: {exc}", file=sys.stderr)
        return 1
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(to_markdown(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
