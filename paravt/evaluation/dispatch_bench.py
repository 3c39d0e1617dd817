"""Sequential against parallel dispatch at matched crop and turn budgets, with the whole cost of each.

    paravt bench dispatch --data runs/heldout --policy detector --crop-budget 1,2,4,8 --turn-budget 2,3 --out DIR

One policy (any ``paravt eval`` takes: a scripted baseline, ``hf:PATH``, ``openai:URL``, ``sglang:URL``) plays
every sample under both dispatch modes at each crop budget (``EnvConfig.crop_budget``: the same crops for both,
and the turns sequential dispatch needs to spend them) and, where ``turn_budgets`` are given, at each turn budget
too (``EnvConfig.turn_budget``: the same turns for both; what parallel calling buys shows where turns, not crops,
are scarce), so that the two differ only in how the calls are dispatched. Each cell is a ``paravt eval`` run in
``OUT/{mode}_budget{N}`` (``..._turns{T}`` under a turn budget; resumable: rerun the command and only what is
missing plays). ``OUT/no_tool``, the no-tool baseline at the cells' K, plays first for every policy, untimed as
a cell, so that opening each video falls on no cell; for a scripted policy it is the floor.

The cells are interleaved: the samples are played in ``rounds`` chunks, every cell plays a chunk before any plays
the next, in forward order on even rounds and reversed on odd ones (ABBA), so that a change of the machine's load
during the benchmark lands on both modes alike; each cell records the 1-minute load average at the start of each
of its chunks (``load``) and the machine's cores.

``OUT/dispatch.json`` holds, per cell, accuracy and every cost column of ``paravt_env.records.COST_KEYS`` (visual
tokens and the critical path included; means per episode over the samples, each with the half-width of its 95 %
interval, Student's t over samples) with the episodes' latency percentiles (p50, p95), and per (crop, turn) budget
the paired parallel - sequential differences (same samples) with their intervals; ``OUT/dispatch.md`` the tables,
``OUT/dispatch.png`` accuracy against each cost axis, every cell of both modes, with the Pareto front (the cells
no other cell beats on both accuracy and that cost). Latencies are an episode's alone only at ``--concurrency 1``
(the default): in a batch each episode also waits for the others.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paravt.evaluation.harness import eval_options, evaluate, pending_samples, resolve_turn_tokens
from paravt.evaluation.policy_specs import make_agent_factory
from paravt.evaluation.report import LATENCY_PERCENTILES, percentile
from paravt.evaluation.stats import mean_ci
from paravt.evaluation.store import RESULTS, read_results
from paravt_env import VideoQASample
from paravt_env.records import COST_KEYS
from paravt_env.storage import write_text_atomic

MODES = ("parallel", "sequential")
ARMS = {"parallel": ("paravt", "parallel"), "sequential": ("paravt", "sequential"), "longvt": ("longvt", "sequential")}
"""Each cell's arm: (protocol, dispatch). ``parallel`` and ``sequential`` are our protocol under either dispatch,
always played; ``longvt`` is LongVT's own protocol (one call a turn, its prompt, crops and scorer), played where
``peers`` names it."""
PEERS = tuple(a for a in ARMS if a not in MODES)
DEFAULT_BUDGETS = (1, 2, 4, 8)
DEFAULT_ROUNDS = 8
"""Chunks the samples are played in, every cell playing each chunk in turn (fewer where there are fewer samples)."""


def parse_budgets(text: str, flag: str = "--crop-budget") -> tuple[int, ...]:
    """``"1,2,4,8"`` -> (1, 2, 4, 8); each a whole number >= 1, no repeats (``flag`` names the option in errors)."""
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{flag} takes whole numbers separated by commas (e.g. 1,2,4,8), got {text!r}") from None
    if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
        raise ValueError(f"{flag} needs distinct whole numbers >= 1, got {text!r}")
    return values


def cell_dir(out: Path, mode: str, budget: int | None, turns: int | None = None) -> Path:
    if budget is None:
        return out / "no_tool"
    return out / (f"{mode}_budget{budget}" + (f"_turns{turns}" if turns is not None else ""))


def _values(rows: Sequence[dict[str, Any]], key: str) -> list[float | None]:
    if key == "accuracy":
        return [float(r["score"]) for r in rows]
    return [((r.get("episode") or {}).get("cost") or {}).get(key) for r in rows]


def cell_stats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy and each cost column of one cell: mean and 95 % half-width over its samples (a column no row
    reports, such as the tokens of a scripted policy, is null; an error row scores 0 and has no cost), and the
    episodes' latency percentiles ``wall_s_p50`` / ``wall_s_p95``."""
    out: dict[str, Any] = {"n": len(rows), "errors": sum(1 for r in rows if r.get("error"))}
    for key in ("accuracy", *COST_KEYS):
        values = [v for v in _values(rows, key) if v is not None]
        out[key] = mean_ci(values) if values else None
    for q in LATENCY_PERCENTILES:
        out[f"wall_s_p{q}"] = percentile([v for v in _values(rows, "wall_s") if v is not None], q)
    return out


def paired(par: Sequence[dict[str, Any]], seq: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Parallel - sequential, sample by sample (the samples both modes played), for accuracy and each cost;
    ``disagree``: the samples whose scores differ."""
    by_id = {r["id"]: r for r in seq}
    pairs = [(r, by_id[r["id"]]) for r in par if r["id"] in by_id]
    out: dict[str, Any] = {"n": len(pairs), "disagree": sum(1 for p, q in pairs if float(p["score"]) != float(q["score"]))}
    for key in ("accuracy", *COST_KEYS):
        diffs = [a - b for a, b in zip(_values([p for p, _ in pairs], key), _values([s for _, s in pairs], key), strict=True)
                 if a is not None and b is not None]  # fmt: skip
        out[key] = mean_ci(diffs) if diffs else None
    return out


def interleaved_order(cells: Sequence[Any], rounds: int) -> list[tuple[int, Any]]:
    """(round, cell) in the order they play: every cell once a round, forward on even rounds and reversed on
    odd ones (ABBA), so that a drift of the machine's speed falls on the modes alike."""
    return [(r, c) for r in range(rounds) for c in (cells if r % 2 == 0 else list(reversed(cells)))]


def chunk_ends(n: int, rounds: int) -> list[int]:
    """Where each round's chunk of ``n`` samples ends (near-equal chunks)."""
    return [round(n * (r + 1) / rounds) for r in range(rounds)]


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


LOADS = "load.json"
"""A cell's 1-minute load averages, one at the start of each chunk it played (kept across resumed runs)."""


def record_load(cell: Path) -> None:
    load = load_average()
    if load is None:
        return
    cell.mkdir(parents=True, exist_ok=True)
    path = cell / LOADS
    try:
        loads = json.loads(path.read_text()) if path.is_file() else []
    except ValueError:
        loads = []  # a damaged load record loses only the load figure, never a result
    write_text_atomic(path, json.dumps([*(x for x in loads if isinstance(x, (int, float))), load]) + "\n")


def mean_load(cell: Path) -> float | None:
    """The mean of the loads a cell recorded (None where it recorded none)."""
    try:
        loads = [x for x in json.loads((cell / LOADS).read_text()) if isinstance(x, (int, float))]
    except (OSError, ValueError, TypeError):
        return None
    return round(sum(loads) / len(loads), 2) if loads else None


def run_dispatch_benchmark(
    samples: Sequence[VideoQASample], policy: str, out: str | Path, *, data: str = "", budgets: Sequence[int] = DEFAULT_BUDGETS,
    turn_budgets: Sequence[int | None] = (None,), frame_budget: int | None = None, max_parallel: int | None = None,
    max_new_tokens: int | None = None, concurrency: int = 1, rounds: int = DEFAULT_ROUNDS, progress: bool = False,
    peers: Sequence[str] = (),
) -> dict[str, Any]:
    """Every (mode, crop budget, turn budget) cell of ``policy`` on ``samples``, interleaved (``interleaved_order``)
    in ``rounds`` chunks of the samples (and the no-tool floor of a scripted policy), each cell a resumable
    ``paravt eval`` run under ``out``; returns what ``write_results`` writes. A turn budget None: the crop
    budget's own ``budget + 1`` turns. ``peers``: other protocols played at the same budgets (``PEERS``: LongVT's),
    each paired against parallel dispatch too."""
    from paravt.baselines import BASELINES, make_baseline

    if not samples:
        raise ValueError("the dispatch benchmark needs at least one sample")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        raise ValueError(f"unknown peer protocol(s) {unknown}: choose from {', '.join(PEERS)}")
    arms = (*MODES, *dict.fromkeys(peers))
    out = Path(out)
    tokens = resolve_turn_tokens(policy, max_new_tokens)
    factory, subagent = make_agent_factory(policy, max_new_tokens=tokens)
    run_config = {"policy": policy, "data": str(data), "max_new_tokens": tokens}
    wanted = {s.id for s in samples}
    rounds = min(rounds, len(samples))
    ends = chunk_ends(len(samples), rounds)

    def play(make_agent: Any, mode: str, budget: int | None, turns: int | None, spec: str, upto: int) -> None:
        protocol, dispatch = ARMS[mode]
        k = frame_budget if frame_budget is not None else eval_options(policy, dispatch).frame_budget  # the policy's K
        config = eval_options(spec, dispatch, protocol=protocol, crop_budget=budget, turn_budget=turns, frame_budget=k,
                              max_parallel=max_parallel)  # fmt: skip
        evaluate(samples[:upto], make_agent, cell_dir(out, mode, budget, turns), config, concurrency=concurrency,
                 progress=progress, subagent=subagent, run_config={**run_config, "policy": spec})  # fmt: skip

    def rows_of(mode: str, budget: int | None, turns: int | None) -> list[dict[str, Any]]:
        return [r for r in read_results(cell_dir(out, mode, budget, turns) / RESULTS) if r["id"] in wanted]

    config = eval_options(policy, "parallel", frame_budget=frame_budget, max_parallel=max_parallel)
    # First, for every policy: the no-tool baseline over every sample at the cells' K. It opens each video and
    # decodes its overview once, so that no cell's wall time pays for what the first cell to touch a video would
    # (measured: the first cell of the detector's benchmark took 0.37 s an episode where its twin took 0.10 s).
    # Its figures are the floor of a scripted policy's table.
    play(lambda: make_baseline("no_tool"), "parallel", None, None, "no_tool", len(samples))
    floor = {"mode": "no_tool", "crop_budget": 0, "turn_budget": None, **cell_stats(rows_of("parallel", None, None))} \
        if policy in BASELINES else None  # fmt: skip
    keys = [(mode, b, t) for b in budgets for t in turn_budgets for mode in arms]
    for r, key in interleaved_order(keys, rounds):
        if pending_samples(cell_dir(out, *key), samples[: ends[r]]):  # a chunk that plays: its load is recorded
            record_load(cell_dir(out, *key))
        play(factory, *key, policy, ends[r])
    rows = {key: rows_of(*key) for key in keys}
    cells = [{"mode": m, "crop_budget": b, "turn_budget": t, **cell_stats(rows[m, b, t]),
              "load": mean_load(cell_dir(out, m, b, t))} for m, b, t in keys]  # fmt: skip
    return {
        "policy": policy, "n": len(samples), "frame_budget": config.frame_budget, "max_parallel": config.max_parallel,
        "budgets": list(budgets), "turn_budgets": list(turn_budgets), "concurrency": concurrency, "rounds": rounds,
        "arms": {a: {"protocol": ARMS[a][0], "dispatch": ARMS[a][1]} for a in arms},
        "cores": os.cpu_count(), "cells": cells, "no_tool": floor,
        "parallel_minus_sequential": [{"crop_budget": b, "turn_budget": t,
                                       **paired(rows["parallel", b, t], rows["sequential", b, t])}
                                      for b in budgets for t in turn_budgets],
        **{f"parallel_minus_{peer}": [{"crop_budget": b, "turn_budget": t, **paired(rows["parallel", b, t], rows[peer, b, t])}
                                      for b in budgets for t in turn_budgets] for peer in arms[len(MODES):]},
    }  # fmt: skip


def _fmt(stat: dict[str, float | None] | None, digits: int = 3) -> str:
    if not stat:
        return "-"
    half = stat.get("ci95")
    return f"{stat['mean']:.{digits}f}" + (f" ± {half:.{digits}f}" if half is not None else "")


def _turns(value: int | None) -> str:
    return "budget + 1" if value is None else str(value)


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def to_markdown(results: dict[str, Any]) -> str:
    turn_budgets = results.get("turn_budgets", [None])
    lines = [
        f"Dispatch benchmark: {results['policy']}, K = {results['frame_budget']} overview frames, at most "
        f"{results['max_parallel']} crops a turn in parallel, {results['n']} samples; crop budgets "
        f"{', '.join(map(str, results['budgets']))}; turn budgets {', '.join(_turns(t) for t in turn_budgets)}. Means "
        "per episode ± the half-width of the 95 % interval over samples; wall seconds and their p50 / p95 are an "
        f"episode's latency at concurrency {results.get('concurrency', 1)}; cells interleaved over "
        f"{results.get('rounds', 1)} rounds, load = the 1-minute load average while the cell played "
        f"({results.get('cores', '?')} cores).",
        "",
        "| mode | crop budget | turn budget | accuracy | turns | crops | frames decoded | visual tokens | generated tokens "
        "| prompt tokens | model calls | critical path | wall s | p50 s | p95 s | wall s, serial | load | n | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells = list(results["cells"]) + ([results["no_tool"]] if results.get("no_tool") else [])
    for c in cells:
        lines.append(
            f"| {c['mode']} | {c['crop_budget']} | {_turns(c.get('turn_budget')) if c['mode'] != 'no_tool' else 1} | "
            f"{_fmt(c['accuracy'])} | {_fmt(c['turns'], 2)} | {_fmt(c['crops'], 2)} | {_fmt(c['frames_decoded'], 1)} | "
            f"{_fmt(c.get('visual_tokens'), 0)} | {_fmt(c['generated_tokens'], 0)} | {_fmt(c['prompt_tokens'], 0)} | "
            f"{_fmt(c['model_calls'], 2)} | {_fmt(c.get('critical_path'), 2)} | {_fmt(c['wall_s'], 2)} | "
            f"{_num(c.get('wall_s_p50'))} | {_num(c.get('wall_s_p95'))} | {_fmt(c['wall_s_serial'], 2)} | "
            f"{_num(c.get('load'))} | {c['n']} | {c['errors']} |"
        )  # fmt: skip
    for other in ("sequential", *(a for a in results.get("arms", {}) if a not in MODES)):
        what = "sequential" if other == "sequential" else f"{other} (its own protocol)"
        lines += ["", f"Parallel - {what}, paired by sample (disagree: samples whose scores differ):", "",
                  "| crop budget | turn budget | accuracy | disagree | turns | crops | visual tokens | critical path | prompt tokens "
                  "| wall s | n |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for d in results[f"parallel_minus_{other}"]:
            lines.append(f"| {d['crop_budget']} | {_turns(d.get('turn_budget'))} | {_fmt(d['accuracy'])} | {d.get('disagree', '-')} | "
                         f"{_fmt(d['turns'], 2)} | {_fmt(d['crops'], 2)} | {_fmt(d.get('visual_tokens'), 0)} | "
                         f"{_fmt(d.get('critical_path'), 2)} | {_fmt(d['prompt_tokens'], 0)} | {_fmt(d['wall_s'], 2)} | {d['n']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


PARETO_AXES = (("turns", "turns"), ("crops", "crops"), ("visual_tokens", "visual tokens"),
               ("critical_path", "critical path (dependent steps)"), ("prompt_tokens", "prompt tokens"),
               ("wall_s", "wall seconds"))  # fmt: skip
"""The cost axes of ``plot``, each a panel (one a policy reports nothing on, such as a scripted policy's tokens,
is left out)."""


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (cost, accuracy) points no other point beats: none cheaper-or-equal with higher-or-equal accuracy and
    better on one of them; sorted by cost."""
    front = [p for p in points if not any(q[0] <= p[0] and q[1] >= p[1] and q != p for q in points)]
    return sorted(set(front))


def plot(results: dict[str, Any], path: str | Path) -> Path:
    """Accuracy against each cost axis (``PARETO_AXES``), every cell of both modes labelled by its crop / turn
    budget, with 95 % intervals and the Pareto front over all cells (the grey steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = results["cells"]
    axes_keys = [(k, label) for k, label in PARETO_AXES if any(c.get(k) for c in cells)]
    cols = min(3, len(axes_keys))
    nrows = -(-len(axes_keys) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols, 3.6 * nrows), squeeze=False)
    for ax, (key, label) in zip(axes.flat, axes_keys, strict=False):
        arms = list(results.get("arms") or MODES)
        for mode, colour in zip(arms, ("#2a9d8f", "#e76f51", "#6a4c93", "#1d3557"), strict=False):
            mine = [c for c in cells if c["mode"] == mode and c.get(key)]
            xs = [c[key]["mean"] for c in mine]
            ys = [c["accuracy"]["mean"] for c in mine]
            ax.errorbar(xs, ys, xerr=[c[key]["ci95"] or 0 for c in mine], yerr=[c["accuracy"]["ci95"] or 0 for c in mine],
                        marker="o", linestyle="none", color=colour, label=mode, capsize=3)  # fmt: skip
            for c, x, y in zip(mine, xs, ys, strict=True):
                tag = str(c["crop_budget"]) + ("" if c.get("turn_budget") is None else f"/{c['turn_budget']}t")
                ax.annotate(tag, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        front = pareto_front([(c[key]["mean"], c["accuracy"]["mean"]) for c in cells if c.get(key)])
        if front:
            ax.step([x for x, _ in front], [y for _, y in front], where="post", color="#6c757d", linewidth=1,
                    alpha=0.7, label="Pareto front")  # fmt: skip
        floor = results.get("no_tool")
        if floor:
            ax.axhline(floor["accuracy"]["mean"], color="#adb5bd", linestyle="--", label="no tool")
        ax.set_xlabel(label + " per episode")
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(axes_keys):]:
        ax.set_visible(False)
    fig.suptitle(f"{results['policy']}: accuracy against cost, crop budgets {results['budgets']} (label: crop budget"
                 f"/turn budget), n = {results['n']}", fontsize=9)  # fmt: skip
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
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
