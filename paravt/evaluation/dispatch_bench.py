"""Sequential against parallel dispatch at matched crop budgets, with what each costs.

    paravt bench dispatch --data runs/heldout --policy detector --crop-budget 1,2,4,8 --out runs/dispatch

One policy (any ``paravt eval`` takes: a scripted baseline, ``hf:PATH``, ``openai:URL``, ``sglang:URL``) plays
every sample under both dispatch modes at each crop budget (``EnvConfig.crop_budget``: the same crops for both,
and the turns sequential dispatch needs to spend them), so that the two differ only in how the calls are
dispatched. Each cell is a ``paravt eval`` run in ``OUT/{mode}_budget{N}`` (resumable: rerun the command and
only what is missing plays). ``OUT/no_tool``, the no-tool baseline at the cells' K, plays first for every policy,
untimed as a cell, so that opening each video falls on no cell; for a scripted policy it is the floor.

``OUT/dispatch.json`` holds, per cell, accuracy and every cost column of ``paravt_env.records.COST_KEYS``
(means per episode over the samples, each with the half-width of its 95 % interval, Student's t over samples),
and per budget the paired parallel - sequential differences (same samples) with their intervals;
``OUT/dispatch.md`` the tables, ``OUT/dispatch.png`` accuracy against cost (latency, and prompt tokens or, for a
policy without tokens, turns) for both modes across budgets. Latencies are an episode's alone only at
``--concurrency 1`` (the default): in a batch each episode also waits for the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paravt.evaluation.harness import eval_options, evaluate, resolve_turn_tokens
from paravt.evaluation.policy_specs import make_agent_factory
from paravt.evaluation.stats import mean_ci
from paravt.evaluation.store import RESULTS, read_results
from paravt_env import VideoQASample
from paravt_env.records import COST_KEYS

MODES = ("parallel", "sequential")
DEFAULT_BUDGETS = (1, 2, 4, 8)


def parse_budgets(text: str) -> tuple[int, ...]:
    """``"1,2,4,8"`` -> (1, 2, 4, 8); each a whole number >= 1, no repeats."""
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--crop-budget takes whole numbers separated by commas (e.g. 1,2,4,8), got {text!r}") from None
    if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
        raise ValueError(f"--crop-budget needs distinct whole numbers >= 1, got {text!r}")
    return values


def cell_dir(out: Path, mode: str, budget: int | None) -> Path:
    return out / ("no_tool" if budget is None else f"{mode}_budget{budget}")


def _values(rows: Sequence[dict[str, Any]], key: str) -> list[float | None]:
    if key == "accuracy":
        return [float(r["score"]) for r in rows]
    return [((r.get("episode") or {}).get("cost") or {}).get(key) for r in rows]


def cell_stats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy and each cost column of one cell: mean and 95 % half-width over its samples (a column no row
    reports, such as the tokens of a scripted policy, is null; an error row scores 0 and has no cost)."""
    out: dict[str, Any] = {"n": len(rows), "errors": sum(1 for r in rows if r.get("error"))}
    for key in ("accuracy", *COST_KEYS):
        values = [v for v in _values(rows, key) if v is not None]
        out[key] = mean_ci(values) if values else None
    return out


def paired(par: Sequence[dict[str, Any]], seq: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Parallel - sequential, sample by sample (the samples both modes played), for accuracy and each cost."""
    by_id = {r["id"]: r for r in seq}
    pairs = [(r, by_id[r["id"]]) for r in par if r["id"] in by_id]
    out: dict[str, Any] = {"n": len(pairs)}
    for key in ("accuracy", *COST_KEYS):
        diffs = [a - b for a, b in zip(_values([p for p, _ in pairs], key), _values([s for _, s in pairs], key), strict=True)
                 if a is not None and b is not None]  # fmt: skip
        out[key] = mean_ci(diffs) if diffs else None
    return out


def run_dispatch_benchmark(
    samples: Sequence[VideoQASample], policy: str, out: str | Path, *, data: str = "", budgets: Sequence[int] = DEFAULT_BUDGETS,
    frame_budget: int | None = None, max_parallel: int | None = None, max_new_tokens: int | None = None,
    concurrency: int = 1, progress: bool = False,
) -> dict[str, Any]:
    """Every (mode, budget) cell of ``policy`` on ``samples`` (and the no-tool floor of a scripted policy), each
    a resumable ``paravt eval`` run under ``out``; returns what ``write_results`` writes."""
    from paravt.baselines import BASELINES, make_baseline

    if not samples:
        raise ValueError("the dispatch benchmark needs at least one sample")
    out = Path(out)
    tokens = resolve_turn_tokens(policy, max_new_tokens)
    factory, subagent = make_agent_factory(policy, max_new_tokens=tokens)
    run_config = {"policy": policy, "data": str(data), "max_new_tokens": tokens}
    wanted = {s.id for s in samples}

    def play(make_agent: Any, mode: str, budget: int | None, spec: str) -> list[dict[str, Any]]:
        k = frame_budget if frame_budget is not None else eval_options(policy, mode).frame_budget  # the policy's K
        config = eval_options(spec, mode, crop_budget=budget, frame_budget=k, max_parallel=max_parallel)
        target = cell_dir(out, mode, budget)
        evaluate(samples, make_agent, target, config, concurrency=concurrency, progress=progress, subagent=subagent,
                 run_config={**run_config, "policy": spec})  # fmt: skip
        return [r for r in read_results(target / RESULTS) if r["id"] in wanted]

    config = eval_options(policy, "parallel", frame_budget=frame_budget, max_parallel=max_parallel)
    # First, for every policy: the no-tool baseline over every sample at the cells' K. It opens each video and
    # decodes its overview once, so that no cell's wall time pays for what the first cell to touch a video would
    # (measured: the first cell of the detector's benchmark took 0.37 s an episode where its twin took 0.10 s).
    # Its figures are the floor of a scripted policy's table.
    floor_rows = play(lambda: make_baseline("no_tool"), "parallel", None, "no_tool")
    floor = {"mode": "no_tool", "crop_budget": 0, **cell_stats(floor_rows)} if policy in BASELINES else None
    cells, rows = [], {}
    for budget in budgets:
        for mode in MODES:
            rows[mode, budget] = play(factory, mode, budget, policy)
            cells.append({"mode": mode, "crop_budget": budget, **cell_stats(rows[mode, budget])})
    return {
        "policy": policy, "n": len(samples), "frame_budget": config.frame_budget, "max_parallel": config.max_parallel,
        "budgets": list(budgets), "concurrency": concurrency, "cells": cells, "no_tool": floor,
        "parallel_minus_sequential": [{"crop_budget": b, **paired(rows["parallel", b], rows["sequential", b])} for b in budgets],
    }  # fmt: skip


def _fmt(stat: dict[str, float | None] | None, digits: int = 3) -> str:
    if not stat:
        return "-"
    half = stat.get("ci95")
    return f"{stat['mean']:.{digits}f}" + (f" ± {half:.{digits}f}" if half is not None else "")


def to_markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Dispatch benchmark: {results['policy']}, K = {results['frame_budget']} overview frames, at most "
        f"{results['max_parallel']} crops a turn in parallel, {results['n']} samples; crop budgets "
        f"{', '.join(map(str, results['budgets']))} (each with budget + 1 turns). Means per episode ± the half-width "
        "of the 95 % interval over samples.",
        "",
        "| mode | crop budget | accuracy | turns | crops | frames decoded | generated tokens | prompt tokens | model calls "
        "| wall s | wall s, serial | n | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells = list(results["cells"]) + ([results["no_tool"]] if results.get("no_tool") else [])
    for c in cells:
        lines.append(
            f"| {c['mode']} | {c['crop_budget']} | {_fmt(c['accuracy'])} | {_fmt(c['turns'], 2)} | {_fmt(c['crops'], 2)} | "
            f"{_fmt(c['frames_decoded'], 1)} | {_fmt(c['generated_tokens'], 0)} | {_fmt(c['prompt_tokens'], 0)} | "
            f"{_fmt(c['model_calls'], 2)} | {_fmt(c['wall_s'], 2)} | {_fmt(c['wall_s_serial'], 2)} | {c['n']} | {c['errors']} |"
        )  # fmt: skip
    lines += ["", "Parallel - sequential, paired by sample:", "",
              "| crop budget | accuracy | turns | crops | prompt tokens | wall s | n |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for d in results["parallel_minus_sequential"]:
        lines.append(f"| {d['crop_budget']} | {_fmt(d['accuracy'])} | {_fmt(d['turns'], 2)} | {_fmt(d['crops'], 2)} | "
                     f"{_fmt(d['prompt_tokens'], 0)} | {_fmt(d['wall_s'], 2)} | {d['n']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: str | Path) -> Path:
    """Accuracy against latency and against tokens (turns where the policy reports no tokens), both
    modes across the budgets, with 95 % intervals on both axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = results["cells"]
    cost = "prompt_tokens" if any(c.get("prompt_tokens") for c in cells) else "turns"
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, label in ((axes[0], "wall_s", "seconds per episode"),
                           (axes[1], cost, cost.replace("_", " ") + " per episode")):  # fmt: skip
        for mode, colour in zip(MODES, ("#2a9d8f", "#e76f51"), strict=True):
            mine = [c for c in cells if c["mode"] == mode and c.get(key)]
            xs = [c[key]["mean"] for c in mine]
            ys = [c["accuracy"]["mean"] for c in mine]
            ax.errorbar(xs, ys, xerr=[c[key]["ci95"] or 0 for c in mine], yerr=[c["accuracy"]["ci95"] or 0 for c in mine],
                        marker="o", color=colour, label=mode, capsize=3)  # fmt: skip
            for c, x, y in zip(mine, xs, ys, strict=True):
                ax.annotate(str(c["crop_budget"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        floor = results.get("no_tool")
        if floor:
            ax.axhline(floor["accuracy"]["mean"], color="#adb5bd", linestyle="--", label="no tool")
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=8)
    fig.suptitle(f"{results['policy']}: accuracy against cost at crop budgets {results['budgets']} (n = {results['n']})",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_results(results: dict[str, Any], out: str | Path) -> tuple[Path, Path, Path]:
    """``OUT/dispatch.json``, ``OUT/dispatch.md`` and ``OUT/dispatch.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "dispatch.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    md = out / "dispatch.md"
    md.write_text(to_markdown(results))
    return path, md, plot(results, out / "dispatch.png")
