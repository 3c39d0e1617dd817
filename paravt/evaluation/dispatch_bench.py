"""Sequential vs parallel tool dispatch on the same samples, and the no-tool floor.

    paravt bench dispatch --data runs/synth --policy detector --frame-budget 8 --max-turns 3 --out runs/dispatch.json

One policy plays every sample three times: with parallel dispatch (all crops of a turn run, concurrently),
with sequential dispatch (one crop per turn), and without tools (answers from the overview). Results go to
``FILE.json`` (``{"parallel": {...}, "sequential": {...}, "no_tool": {...}}``, each with ``accuracy``,
``mean_turns``, ``mean_tool_calls``, ``wall_s``, ``n``), then to ``FILE.md`` (a table) and ``FILE.png``.
"""

from __future__ import annotations

import json
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from paravt.baselines import BASELINES, ScriptedAgent, make_baseline
from paravt_env import EnvConfig, VideoQASample, VideoToolEnv
from paravt_env.play import play_episode
from paravt_env.video import VideoDecodeError

MODES = ("parallel", "sequential", "no_tool")


def agent_factories(policy: str) -> dict[str, Callable[[], ScriptedAgent]]:
    """The agent of each mode for a policy name: the policy itself with tools, the no-tool baseline without."""
    if policy not in BASELINES:
        raise ValueError(f"unknown policy {policy!r} for the dispatch benchmark; known: {sorted(BASELINES)}")
    return {
        "parallel": lambda: make_baseline(policy),
        "sequential": lambda: make_baseline(policy),
        "no_tool": lambda: make_baseline("no_tool"),
    }


def run_mode(
    samples: Sequence[VideoQASample],
    make_agent: Callable[[], ScriptedAgent],
    config: EnvConfig,
    progress: bool = False,
) -> dict[str, Any]:
    """Play every sample once; summarise accuracy, turns, executed crops and wall time. A sample whose video
    is missing or cannot be decoded is an error (a warning names it): counted in ``errors`` and in ``n``,
    scoring 0, as ``paravt eval`` counts it (one denominator for every harness: every sample asked for)."""
    env = VideoToolEnv(list(samples), config)
    episodes, skipped = [], []
    t0 = time.perf_counter()
    iterator = range(len(samples))
    if progress:
        from tqdm import tqdm

        iterator = tqdm(
            iterator, desc=config.dispatch if make_agent().name != "no_tool" else "no_tool", unit="ep"
        )
    try:
        for i in iterator:
            try:
                episodes.append(play_episode(env, make_agent(), options={"index": i}))
            except (FileNotFoundError, VideoDecodeError) as exc:
                skipped.append(samples[i].id)
                warnings.warn(f"sample {samples[i].id!r} not played (scored 0): {exc} ({len(skipped)} so far)", stacklevel=2)
    finally:
        env.close()
    wall = time.perf_counter() - t0
    if not episodes:
        raise ValueError(f"no sample could be played: all {len(skipped)} videos are missing or undecodable")
    n = len(samples)  # an error row plays no turn, makes no call and scores 0, as in paravt eval
    return {
        "errors": len(skipped),
        "failed": skipped,
        "accuracy": sum(e.breakdown["accuracy"] for e in episodes) / n,
        "mean_reward": sum(e.reward for e in episodes) / n,
        "mean_turns": sum(e.turns for e in episodes) / n,
        "mean_tool_calls": sum(e.tool_calls for e in episodes) / n,
        "wall_s": wall,
        "n": n,
        "by_question_type": _by_type(episodes),
    }


def _by_type(episodes) -> dict[str, dict[str, float]]:
    out: dict[str, list] = {}
    for e in episodes:
        out.setdefault(e.question_type, []).append(e)
    return {
        qt: {"accuracy": statistics.fmean(e.breakdown["accuracy"] for e in eps), "n": len(eps)}
        for qt, eps in sorted(out.items())
    }


def run_dispatch_benchmark(
    samples: Sequence[VideoQASample],
    policy: str = "detector",
    *,
    frame_budget: int = 8,
    max_turns: int = 3,
    max_parallel: int = 5,
    progress: bool = False,
) -> dict[str, dict[str, Any]]:
    """Parallel, sequential and no-tool runs of ``policy`` on ``samples`` with one overview budget."""
    if not samples:
        raise ValueError("the dispatch benchmark needs at least one sample")
    agents = agent_factories(policy)
    results = {}
    for mode in MODES:
        dispatch = "sequential" if mode == "sequential" else "parallel"
        config = EnvConfig(
            dispatch=dispatch, frame_budget=frame_budget, max_turns=max_turns, max_parallel=max_parallel
        )
        results[mode] = run_mode(samples, agents[mode], config, progress)
        results[mode].update(
            policy=agents[mode]().name, dispatch=dispatch, frame_budget=frame_budget, max_turns=max_turns
        )
    return results


def to_markdown(results: dict[str, dict[str, Any]]) -> str:
    any_mode = next(iter(results.values()))
    lines = [
        f"Dispatch benchmark: K = {any_mode['frame_budget']} overview frames, {any_mode['max_turns']} turns, "
        f"{any_mode['n']} samples.",
        "",
        "| mode | policy | accuracy | mean turns | mean tool calls | wall (s) | n | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, r in results.items():
        lines.append(
            f"| {mode} | {r['policy']} | {r['accuracy']:.3f} | {r['mean_turns']:.2f} | {r['mean_tool_calls']:.2f} "
            f"| {r['wall_s']:.1f} | {r['n']} | {r.get('errors', 0)} |"
        )
    if {"parallel", "sequential", "no_tool"} <= set(results):
        p, s, z = results["parallel"], results["sequential"], results["no_tool"]
        lines += [
            "",
            f"Parallel - sequential accuracy: {p['accuracy'] - s['accuracy']:+.3f}; parallel - no-tool: "
            f"{p['accuracy'] - z['accuracy']:+.3f}; turns saved by parallel dispatch: "
            f"{s['mean_turns'] - p['mean_turns']:.2f} per episode.",
        ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, Any]], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(results)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    for ax, key, title in zip(
        axes,
        ("accuracy", "mean_turns", "mean_tool_calls"),
        ("accuracy", "mean turns", "mean tool calls"),
        strict=True,
    ):
        values = [results[m][key] for m in modes]
        bars = ax.bar(modes, values, color=["#2a9d8f", "#e9c46a", "#adb5bd"][: len(modes)])
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.set_title(title)
        ax.tick_params(axis="x", labelsize=8)
    any_mode = next(iter(results.values()))
    fig.suptitle(
        f"{any_mode['policy']}: K = {any_mode['frame_budget']}, {any_mode['max_turns']} turns, n = {any_mode['n']}"
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_results(results: dict[str, dict[str, Any]], out: str | Path) -> tuple[Path, Path, Path]:
    """``out`` (JSON), and beside it the Markdown table and the PNG chart."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    md = out.with_suffix(".md")
    md.write_text(to_markdown(results))
    png = plot(results, out.with_suffix(".png"))
    return out, md, png
