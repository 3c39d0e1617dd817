"""The paper's dispatch comparison with each side trained for its own protocol, paired by training seed:
``python -m paravt.experiments.dispatch_trained --parallel RUN... --sequential RUN... --out DIR
[--eval eval_selected] [--turn-budget 2,3]``.

Each ``RUN`` is a finished ``paravt train`` directory. The parallel runs were trained with parallel dispatch and the
sequential ones with sequential dispatch (``env.dispatch=sequential``: one crop a turn, the LongVT protocol),
everything else equal: the same recipe, steps, crop budget (``env.crop_budget``) and held-out videos. Each run's
own held-out evaluation (``RUN/eval``, greedy, under the protocol it was trained for: its card's dispatch and
budget; ``--eval eval_selected``: the checkpoint the run selected on its validation split) is read, never re-run.
With ``--turn-budget``, the same checkpoint is also evaluated on the same videos under its own protocol at each
turn budget (``RUN/{eval}_turnsT``, resumable, played only where missing), and compared the same way: where turns,
not crops, are scarce. Refused: runs of the wrong dispatch, budgets, steps or held-out sets that differ, and seeds
without a partner, each named.

``DIR/comparison.json`` and ``DIR/comparison.md`` hold per seed: accuracy and every cost column of
``paravt_env.records.COST_KEYS`` (means per episode), the most crops any turn executed (sequential: at most 1),
and errors; over seeds: each side's mean with its 95 % interval (Student's t over seeds) and the paired
parallel - sequential difference; the (seed, video) pairs whose scores differ (``disagree``: few of them means
the task is at ceiling for both, whatever the means say); and the smallest difference these figures resolve: the
half-width of that paired interval over seeds (the spread of training), beside the one over every (seed, video)
pair (the spread of videos alone, which ignores that the videos of one seed share a policy).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paravt.evaluation.stats import mean_ci
from paravt.evaluation.store import read_results
from paravt_env.records import COST_KEYS

SIDES = ("parallel", "sequential")
FIGURES = ("accuracy", *COST_KEYS)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is {path.parent.parent if path.parent.name == 'eval' else path.parent} "
                                "a finished paravt train run?")  # fmt: skip
    return json.loads(path.read_text())


def run_figures(run: Path, evaluation: str = "eval") -> dict[str, Any]:
    """One run: its settings (from ``config.json``), its evaluation ``RUN/{evaluation}``'s figures and its per-video
    scores."""
    run = Path(run)
    config = _read_json(run / "config.json")
    summary = _read_json(run / evaluation / "summary.json")
    scores, most = {}, 0
    for row in read_results(run / evaluation / "results.jsonl"):
        scores[row["id"]] = float(row["score"])
        for turn in (row.get("episode") or {}).get("turns", []):
            most = max(most, sum(1 for c in turn.get("crops", []) if c.get("status") == "executed"))
    env = config.get("env", {})
    return {
        "run": str(run), "seed": int(config["seed"]), "dispatch": env.get("dispatch", "parallel"),
        "crop_budget": env.get("crop_budget"), "steps": int(config["steps"]), "n": summary["n"],
        "errors": summary.get("errors", 0), "accuracy": summary["accuracy"],
        **{k: summary.get("cost", {}).get(k) for k in COST_KEYS},
        "most_crops_in_a_turn": most, "scores": scores,
    }  # fmt: skip


def evaluate_at_turns(run: Path, turns: int, evaluation: str = "eval", progress: bool = False) -> str:
    """``RUN/{evaluation}_turns{turns}``: the checkpoint behind ``RUN/{evaluation}`` (the selected one for
    ``eval_selected``, else the last) evaluated greedily on the run's held-out videos under its own protocol and
    crop budget, with a turn budget of ``turns``; resumable. Returns the evaluation's name."""
    from paravt.evaluation.harness import evaluate_checkpoint
    from paravt.evaluation.heldout import SELECTED_EVAL, selected

    run = Path(run)
    choice = selected(run) if evaluation == SELECTED_EVAL else None
    if evaluation == SELECTED_EVAL and choice is None:
        raise FileNotFoundError(f"{run} selected no checkpoint (no {run / 'select' / 'best.json'}): nothing to evaluate")
    model = choice["model"] if choice is not None else run / "checkpoint" / "model"
    if not Path(model).is_dir():
        raise FileNotFoundError(f"{model} is missing: {run}'s weights are needed to evaluate it at a turn budget")
    name = f"{evaluation}_turns{turns}"
    # as the run's own held-out evaluation was made (its card's protocol, budgets and tokens a turn), the turns aside
    evaluate_checkpoint(model, run / "heldout", run / name, turn_budget=turns, progress=progress)
    return name


def compare(parallel: Sequence[Path], sequential: Sequence[Path], evaluation: str = "eval") -> dict[str, Any]:
    """The per-seed table, the means over seeds and the paired differences of ``RUN/{evaluation}`` (``ValueError``
    naming what does not match: a run of the wrong dispatch, another budget, steps or held-out set, a seed without
    a partner)."""
    sides = {"parallel": [run_figures(r, evaluation) for r in parallel],
             "sequential": [run_figures(r, evaluation) for r in sequential]}
    for side, runs in sides.items():
        if not runs:
            raise ValueError(f"no {side} run given")
        for r in runs:
            if r["dispatch"] != side:
                raise ValueError(f"{r['run']} was trained with {r['dispatch']} dispatch, given as a {side} run")
        seeds = [r["seed"] for r in runs]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"two {side} runs of one seed: {seeds}")
    every = sides["parallel"] + sides["sequential"]
    for key in ("crop_budget", "steps"):
        values = {r[key] for r in every}
        if len(values) > 1:
            raise ValueError(f"the runs differ in {key}: " + ", ".join(f"{r['run']} {r[key]}" for r in every))
    videos = {frozenset(r["scores"]) for r in every}
    if len(videos) > 1:
        raise ValueError("the runs were evaluated on different held-out videos: " + ", ".join(
            f"{r['run']} ({len(r['scores'])})" for r in every))  # fmt: skip
    by_seed = {side: {r["seed"]: r for r in runs} for side, runs in sides.items()}
    unpaired = sorted(set(by_seed["parallel"]) ^ set(by_seed["sequential"]))
    if unpaired:
        raise ValueError(f"seed(s) {unpaired} have a run on one side only: the comparison pairs by seed")
    seeds = sorted(by_seed["parallel"])
    per_seed = [{"seed": s, **{side: {k: v for k, v in by_seed[side][s].items() if k != "scores"} for side in SIDES}}
                for s in seeds]  # fmt: skip
    over, diff = {}, {}
    for fig in FIGURES:
        values = {side: [by_seed[side][s][fig] for s in seeds] for side in SIDES}
        if any(v is None for side in SIDES for v in values[side]):
            continue
        over[fig] = {side: mean_ci(values[side]) for side in SIDES}
        diff[fig] = mean_ci([p - q for p, q in zip(values["parallel"], values["sequential"], strict=True)])
    pairs = [by_seed["parallel"][s]["scores"][v] - by_seed["sequential"][s]["scores"][v]
             for s in seeds for v in sorted(by_seed["parallel"][s]["scores"])]  # fmt: skip
    per_video = mean_ci(pairs)
    return {
        "evaluation": evaluation, "disagree": sum(1 for d in pairs if d != 0),
        "seeds": seeds, "crop_budget": every[0]["crop_budget"], "steps": every[0]["steps"],
        "videos": len(next(iter(videos))), "per_seed": per_seed, "over_seeds": over,
        "parallel_minus_sequential": diff,
        "smallest_resolvable": {"over_seeds": diff["accuracy"]["ci95"], "over_seed_video_pairs": per_video["ci95"],
                                "pairs": len(pairs)},
        "accuracy_paired_by_seed_and_video": per_video,
    }  # fmt: skip


def _fmt(stat: dict[str, float | None], digits: int = 3) -> str:
    return f"{stat['mean']:.{digits}f}" + ("" if stat["ci95"] is None else f" ± {stat['ci95']:.{digits}f}")


DIGITS = {"accuracy": 3, "turns": 2, "crops": 2, "frames_decoded": 1, "visual_tokens": 0, "generated_tokens": 0,
          "prompt_tokens": 0, "model_calls": 2, "critical_path": 2, "wall_s": 2, "wall_s_serial": 2}  # fmt: skip


def to_markdown(result: dict[str, Any]) -> str:
    figs = [f for f in FIGURES if f in result["over_seeds"]]
    lines = [f"Trained parallel against trained sequential, crop budget {result['crop_budget']}, {result['steps']} RL "
             f"steps, {result['videos']} held-out videos, seeds {', '.join(map(str, result['seeds']))}; each policy "
             f"greedy under the protocol it was trained for (`RUN/{result.get('evaluation', 'eval')}`).", "",
             "| seed | side | " + " | ".join(figs) + " | most crops in a turn | errors |",
             "|---|---|" + "---|" * (len(figs) + 2)]  # fmt: skip
    for row in result["per_seed"]:
        for side in SIDES:
            r = row[side]
            cells = [f"{r[f]:.{DIGITS[f]}f}" for f in figs]
            lines.append(f"| {row['seed']} | {side} | " + " | ".join(cells) + f" | {r['most_crops_in_a_turn']} | {r['errors']} |")
    lines += ["", "Over seeds (mean ± 95 % half-width, Student's t), and parallel - sequential paired by seed:", "",
              "| figure | parallel | sequential | parallel - sequential |", "|---|---|---|---|"]  # fmt: skip
    for f in figs:
        o, d = result["over_seeds"][f], result["parallel_minus_sequential"][f]
        lines.append(f"| {f} | {_fmt(o['parallel'], DIGITS[f])} | {_fmt(o['sequential'], DIGITS[f])} | {_fmt(d, DIGITS[f])} |")
    small = result["smallest_resolvable"]
    pooled = result["accuracy_paired_by_seed_and_video"]
    lines += ["", "`wall_s` is as the runs' evaluations measured it: they play 16 episodes at once, so an episode's time "
              "includes waiting for the others' turns; one episode's latency under each protocol is `paravt bench "
              "dispatch`'s, which plays one at a time."]  # fmt: skip
    over_seeds = "none with one seed" if small["over_seeds"] is None else f"± {small['over_seeds']:.3f}"
    lines += ["", f"Smallest accuracy difference these figures resolve: {over_seeds} over seeds (the paired "
              f"interval's half-width); ± {small['over_seed_video_pairs']:.3f} over the {small['pairs']} (seed, video) "
              f"pairs (mean {pooled['mean']:+.3f}; this one ignores that a seed's videos share one policy).", ""]  # fmt: skip
    if "disagree" in result:
        lines += [f"(Seed, video) pairs whose scores differ: {result['disagree']} of {small['pairs']}.", ""]
    return "\n".join(lines)


def _evaluation_name(text: str) -> str:
    """``--eval``: a run's evaluation folder, ``eval`` or ``eval_...`` (a name, never a path)."""
    import re

    if not re.fullmatch(r"eval(_[a-z0-9]+)*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an evaluation of a run (eval, eval_selected, eval_selected_turns3)")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parallel", nargs="+", type=Path, required=True, help="runs trained with parallel dispatch")
    p.add_argument("--sequential", nargs="+", type=Path, required=True, help="runs trained with sequential dispatch")
    p.add_argument("--out", type=Path, required=True, help="folder for comparison.json and comparison.md")
    p.add_argument("--eval", default="eval", type=_evaluation_name,
                   help="which held-out evaluation of each run: eval (the last step, default), eval_selected (the "
                        "checkpoint selected on validation), or one made at a turn budget (eval_selected_turns3)")
    p.add_argument("--turn-budget", default=None,
                   help="also evaluate each checkpoint under its own protocol at these turn budgets (comma-separated; "
                        "played where missing) and compare them: comparison_turnsT.json / .md")
    args = p.parse_args(argv)
    try:
        from paravt.evaluation.dispatch_bench import parse_budgets

        turns = parse_budgets(args.turn_budget, "--turn-budget") if args.turn_budget else ()
        names = [(args.eval, "comparison")]
        for t in turns:
            for run in [*args.parallel, *args.sequential]:
                if not (Path(run) / f"{args.eval}_turns{t}" / "summary.json").is_file():  # played once, then read
                    evaluate_at_turns(run, t, args.eval)
            names.append((f"{args.eval}_turns{t}", f"comparison_turns{t}"))
        results = [(compare(args.parallel, args.sequential, name), stem) for name, stem in names]
    except (ValueError, FileNotFoundError, KeyError) as exc:
        p.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    for result, stem in results:
        (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
        text = to_markdown(result)
        (args.out / f"{stem}.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
