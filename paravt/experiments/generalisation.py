"""Does the main job's RL generalise? ``python -m paravt.experiments.generalisation RUN [RUN ...] --out FILE.json``

Each ``RUN`` is a finished ``paravt train`` run on synthetic data (one seed of the main job). Its two policies
(the cold start, ``RUN/coldstart/model``, and the RL checkpoint) are evaluated on held-out videos under settings
it was not all trained under, each into ``RUN/generalisation/POLICY/SETTING`` (resumable; a changed checkpoint
is evaluated again):

- greedy at every overview budget K of ``--budgets`` (default 4, 8, 16, 32; the main job gates over {4, 8, 16});
- greedy on longer videos at the recipe's K: each span of ``--long`` (default ``auto``: from the longest duration
  the run trained on to 50 s beyond it) is a split of its own seed in ``RUN/heldout_LO-HIs``;
- sampled at the training temperature (the recipe's ``rollout.temperature``, ``--seed``) at the recipe's K.

Per setting it reports accuracy and, from each evaluation's ``by_overview``, how often the policy crops where its
overview missed the asked event and where it already showed it: a policy that learnt when to call the tool
crops on misses and skips on hits at every K and duration. Figures per run, their mean over runs with a 95 %
confidence interval, and the paired RL - cold start difference (``paravt.evaluation.stats``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paravt.evaluation.stats import mean_ci

POLICIES = (("cold start", "coldstart/model"), ("RL", "checkpoint/model"))
FIGURES = ("accuracy", "crops_on_miss", "crops_on_hit", "missed")
"""Per setting: accuracy; share of episodes with a crop where the overview missed / showed the asked event; share
of episodes whose overview missed it."""


@dataclass(frozen=True)
class Setting:
    """One evaluation condition."""

    name: str
    frame_budget: int
    split: str = "heldout"
    temperature: float = 0.0


@dataclass(frozen=True)
class RunSettings:
    """What the evaluations take from the run's ``config.json``."""

    data: Any
    """The run's ``DataConfig`` (its synthetic task)."""
    frame_budget: int
    """The recipe's overview budget K (``env.frame_budget``)."""
    temperature: float
    """The rollouts' sampling temperature (``rollout.temperature``)."""
    max_new_tokens: int
    """Tokens per turn the run's rollouts had (``rollout.max_new_tokens``): the policies are evaluated under the
    cap they were trained under (``paravt.policies.card.turn_tokens``)."""


def run_settings(run: Path) -> RunSettings:
    from paravt.learners.config import DataConfig

    saved = json.loads((run / "config.json").read_text())
    return RunSettings(DataConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved["data"].items()}),
                       int(saved["env"]["frame_budget"]), float(saved["rollout"]["temperature"]),
                       int(saved["rollout"]["max_new_tokens"]))  # fmt: skip


Span = tuple[float, float]
AUTO = "auto"
"""``--long auto``: from the longest duration the run trained on (``data.max_duration``) to ``AUTO_BEYOND_S`` past it."""
AUTO_BEYOND_S = 50.0


def long_spans(cfg: RunSettings, long: tuple[Span | str, ...]) -> list[Span]:
    """The longer splits' duration spans for a run trained under ``cfg`` (``AUTO`` resolved)."""
    top = float(cfg.data.max_duration)
    return [(top, top + AUTO_BEYOND_S) if span == AUTO else span for span in long]


def split_name(span: Span) -> str:
    return f"heldout_{span[0]:g}-{span[1]:g}s"


def settings(cfg: RunSettings, budgets: tuple[int, ...], long: tuple[Span | str, ...] = ()) -> list[Setting]:
    """The conditions for a run trained under ``cfg``: every K of ``budgets``, each longer split, sampling."""
    k = cfg.frame_budget
    out = [Setting(f"K={b}", b) for b in budgets]
    for span in long_spans(cfg, long):
        out.append(Setting(f"{span[0]:g}-{span[1]:g} s, K={k}", k, split=split_name(span)))
    if cfg.temperature > 0:
        out.append(Setting(f"sampled T={cfg.temperature:g}, K={k}", k, temperature=cfg.temperature))
    return out


def write_long_split(cfg: RunSettings, run: Path, span: Span) -> Path:
    """``RUN/heldout_LO-HIs``: ``data.heldout_n`` videos of the run's task at durations in ``span``, their own
    seed (the held-out seed + 1 + LO: never the training or held-out videos, and each span its own videos)."""
    from paravt_env.data.synthetic import generate_dataset

    synth = cfg.data.synth_config(n=cfg.data.heldout_n, seed=cfg.data.heldout_seed + 1 + int(span[0]),
                                  min_duration=span[0], max_duration=span[1])  # fmt: skip
    out = run / split_name(span)
    generate_dataset(out, synth, progress=False, workers=2)
    return out


def figures(summary: dict[str, Any]) -> dict[str, float | None]:
    split = summary.get("by_overview") or {}
    missed, shown = split.get("missed", {}), split.get("showed", {})
    n = missed.get("n", 0) + shown.get("n", 0)
    return {"accuracy": summary["accuracy"],
            "crops_on_miss": missed["tool_usage_rate"] if missed.get("n") else None,
            "crops_on_hit": shown["tool_usage_rate"] if shown.get("n") else None,
            "missed": missed.get("n", 0) / n if n else None}  # fmt: skip


def evaluate_run(run: Path, budgets: tuple[int, ...], long: tuple[Span | str, ...] = (AUTO,), seed: int = 0,
                 progress: bool = False) -> dict[str, dict[str, dict[str, float | None]]]:  # fmt: skip
    """{policy: {setting: figures}} of one run; evaluations already written are kept when their checkpoint is
    unchanged."""
    from paravt.evaluation.fingerprints import checkpoint_identity
    from paravt.evaluation.harness import evaluate_checkpoint
    from paravt.evaluation.heldout import fresh

    if not (run / "config.json").is_file():
        raise FileNotFoundError(f"{run} holds no config.json: not a paravt train run")
    cfg = run_settings(run)
    for span in long_spans(cfg, long):
        write_long_split(cfg, run, span)
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for label, rel in POLICIES:
        model = run / rel
        if not (model / "config.json").is_file():
            raise FileNotFoundError(f"{model} is missing: is {run} a finished paravt train run with a cold start?")
        for s in settings(cfg, budgets, long):
            target = run / "generalisation" / label.replace(" ", "_") / s.name.replace(" ", "_").replace(",", "")
            fresh(target, checkpoint_identity(model))
            summary = evaluate_checkpoint(model, run / s.split, target, frame_budget=s.frame_budget,
                                          max_new_tokens=cfg.max_new_tokens, temperature=s.temperature, seed=seed,
                                          progress=progress)  # fmt: skip
            out.setdefault(label, {})[s.name] = figures(summary)
    return out


def summarise(per_run: dict[str, dict[str, dict[str, dict[str, float | None]]]]) -> dict[str, Any]:
    """Mean ± 95 % CI over runs per policy, setting and figure, and the paired RL - cold start difference."""
    runs = list(per_run)
    names = list(next(iter(per_run.values()))["RL"]) if per_run else []
    mean: dict[str, Any] = {}
    for label in [p for p, _ in POLICIES] + ["RL − cold start, paired"]:
        for name in names:
            for fig in FIGURES:
                if label.startswith("RL −"):
                    pairs = [(per_run[r]["RL"][name][fig], per_run[r]["cold start"][name][fig]) for r in runs]
                    values = [a - b for a, b in pairs if a is not None and b is not None]
                else:
                    values = [v for r in runs if (v := per_run[r][label][name][fig]) is not None]
                mean.setdefault(label, {}).setdefault(name, {})[fig] = mean_ci(values) | {"values": values} if values else None
    return {"runs": runs, "settings": names, "per_run": per_run, "mean": mean}


def to_markdown(data: dict[str, Any]) -> str:
    def cell(m: dict[str, Any] | None) -> str:
        if not m:
            return "-"
        spread = "" if m["ci95"] is None else f" ± {m['ci95']:.2f}"
        values = m.get("values") or []
        return f"{m['mean']:.2f}{spread}" + (f" ({', '.join(f'{v:.2f}' for v in values)})" if len(values) > 1 else "")

    lines = ["| policy | setting | accuracy | crops where the overview missed | crops where it showed | overview missed |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for label, by_setting in data["mean"].items():
        for name, figs in by_setting.items():
            lines.append(f"| {label} | {name} | " + " | ".join(cell(figs[f]) for f in FIGURES) + " |")
    lines += ["", f"Mean over {len(data['runs'])} run(s) ± the half-width of its 95 % interval (Student's t), then each "
              "run's value where there are several (a run without such episodes has no value)."]
    return "\n".join(lines) + "\n"


def _spans(text: str) -> tuple[Span | str, ...]:
    """``--long``: comma-separated spans like ``135-180``, ``auto``, or ``none``."""
    if text.strip() in ("", "none"):
        return ()
    out: list[Span | str] = []
    for part in (x.strip() for x in text.split(",")):
        if part == AUTO:
            out.append(AUTO)
            continue
        try:
            lo, hi = (float(x) for x in part.split("-", 1))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--long {part!r}: expected seconds like 135-180, auto or none") from None
        if not 0 < lo <= hi:
            raise argparse.ArgumentTypeError(f"--long {part!r}: expected 0 < min <= max")
        out.append((lo, hi))
    return tuple(out)


def _budgets(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        out = ()
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"--budgets {text!r}: expected positive frame counts like 4,8,16")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="finished paravt train runs (one per seed)")
    parser.add_argument("--out", type=Path, help="write the figures here (JSON)")
    parser.add_argument("--from", dest="source", type=Path, help="print the table of a JSON written before")
    parser.add_argument("--budgets", type=_budgets, default=(4, 8, 16, 32),
                        help="overview budgets K (default 4,8,16,32)")
    parser.add_argument("--long", type=_spans, default=(AUTO,),
                        help="durations of the longer splits, seconds, comma-separated (default auto: from the "
                             "run's longest training duration to 50 s beyond; 'none' skips them)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled evaluations (default 0)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: PARAVT_THREADS, else half the usable cores; paravt.learners.threads)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.source:
        print(to_markdown(json.loads(args.source.read_text())), end="")
        return 0
    if not args.runs:
        parser.error("give finished runs (RUN ...) or --from FILE.json")
    from paravt.learners.threads import set_torch_threads

    try:
        set_torch_threads(args.threads)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        per_run = {str(r): evaluate_run(r, args.budgets, args.long, args.seed, not args.no_progress) for r in args.runs}
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    data = summarise(per_run)
    if args.out:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(to_markdown(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
