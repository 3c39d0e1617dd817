"""The numbers and pictures of an evaluation: ``summarize`` (the paper's columns and breakdowns),
``to_markdown``, ``write_report`` (``summary.json``, ``report.md``, ``report.png``) and ``compare``."""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paravt.evaluation.store import CONFIG
from paravt_env.records import COST_KEYS

logger = logging.getLogger(__name__)

DURATION_BUCKETS = (
    (0, 120, "0-2 min"),
    (120, 600, "2-10 min"),
    (600, 1800, "10-30 min"),
    (1800, math.inf, "30+ min"),
)
IOU_THRESHOLDS = (0.3, 0.5, 0.7)


def _mean(values) -> float:
    values = list(values)
    return statistics.fmean(values) if values else 0.0


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The paper's numbers from result lines: accuracy (mean score), grounding mIoU and R@0.3/0.5/0.7, tool
    use, and breakdowns by question type and video duration; errors are counted (and score 0)."""
    summary: dict[str, Any] = {
        "n": len(rows),
        "accuracy": _mean(r["score"] for r in rows),
        "correct_rate": _mean(1.0 if r["correct"] else 0.0 for r in rows),
        "avg_tool_calls": _mean(r["tool_calls"] for r in rows),
        "tool_usage_rate": _mean(1.0 if r["tool_calls"] > 0 else 0.0 for r in rows),
        "avg_turns": _mean(r["turns"] for r in rows),
        "errors": sum(1 for r in rows if r.get("error")),
        "failed": [{"id": r["id"], "error": r["error"], "transient": bool(r.get("transient"))} for r in rows if r.get("error")],
        "wall_s": elapsed_s(rows),
        "wall_s_episodes_sum": sum(r["wall_s"] for r in rows),
    }
    tvg = [r for r in rows if r["question_type"] == "tvg"]
    if tvg:
        summary["grounding"] = {"n": len(tvg), "mIoU": _mean(r["score"] for r in tvg)}
        for th in IOU_THRESHOLDS:
            summary["grounding"][f"R@{th}"] = _mean(1.0 if r["score"] >= th else 0.0 for r in tvg)
    by_type: dict[str, list] = {}
    for r in rows:
        by_type.setdefault(r["question_type"], []).append(r)
    summary["by_question_type"] = {
        qt: {
            "n": len(rs),
            "accuracy": _mean(r["score"] for r in rs),
            "avg_tool_calls": _mean(r["tool_calls"] for r in rs),
        }
        for qt, rs in sorted(by_type.items())
    }
    by_dur: dict[str, list] = {}
    for r in rows:
        d = r.get("duration")
        label = "unknown" if d is None else next(lab for lo, hi, lab in DURATION_BUCKETS if lo <= d < hi)
        by_dur.setdefault(label, []).append(r)
    order = [lab for _, _, lab in DURATION_BUCKETS] + ["unknown"]
    summary["by_duration"] = {
        lab: {"n": len(by_dur[lab]), "accuracy": _mean(r["score"] for r in by_dur[lab])}
        for lab in order
        if lab in by_dur
    }
    by_overview = overview_split(rows)
    if by_overview:
        summary["by_overview"] = by_overview
    cost = cost_means(rows)
    if cost:
        summary["cost"] = cost
    return summary


def elapsed_s(rows: Sequence[dict[str, Any]]) -> float:
    """The seconds the evaluation spent playing ``rows``, measured: the length of the union of the episodes'
    [started_at, ended_at] intervals, so episodes played at once count once, and the time between two
    invocations of a resumed run does not count. A row without its times (written before they were recorded)
    adds its own ``wall_s``, as if it ran alone. ``wall_s_episodes_sum`` is the plain sum, named as such."""
    def timed(r: dict[str, Any]) -> bool:
        return isinstance(r.get("started_at"), (int, float)) and isinstance(r.get("ended_at"), (int, float))

    spans = sorted((float(r["started_at"]), float(r["ended_at"])) for r in rows if timed(r))
    total, end = 0.0, -math.inf
    for a, b in spans:
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total + sum(float(r.get("wall_s") or 0.0) for r in rows if not timed(r))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``, linear between order statistics (numpy's default); None
    for none."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


LATENCY_PERCENTILES = (50, 95)
"""The episode latencies ``cost_means`` reports beside the mean (``wall_s_p50``, ``wall_s_p95``)."""


def cost_means(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean per episode of each ``paravt_env.records.COST_KEYS`` column over the rows whose episode record
    has its cost (``n``: how many; a column no row reports, e.g. tokens of a scripted policy, is null), and the
    episodes' latency percentiles ``wall_s_p50`` and ``wall_s_p95``."""
    costs = [r["episode"]["cost"] for r in rows if isinstance(r.get("episode"), dict) and isinstance(r["episode"].get("cost"), dict)]
    if not costs:
        return {}
    out: dict[str, Any] = {"n": len(costs)}
    for key in COST_KEYS:
        values = [c[key] for c in costs if c.get(key) is not None]
        out[key] = _mean(values) if values else None
    for q in LATENCY_PERCENTILES:  # an episode's latency: its tail, not only its mean
        out[f"wall_s_p{q}"] = percentile([c["wall_s"] for c in costs if c.get("wall_s") is not None], q)
    return out


def overview_showed(episode: dict[str, Any]) -> bool | None:
    """Whether one of the episode's overview frames (by its true timestamp) lies inside an event the question
    asks about (all events when the record does not mark which); None when the record holds no events
    (real data) or no overview."""
    events = episode.get("events") or []
    asked = [e for e in events if e.get("asked")] or events
    times = episode.get("overview") or []
    if not asked or not times:
        return None
    return any(e["start"] <= t < e["end"] for e in asked for t in times)


def overview_split(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Tool use and accuracy split by whether the overview already showed the asked event ("showed") or not
    ("missed"): the Tool Necessity Gap per episode. A policy that gates its calls crops on misses and skips
    on hits. Empty when no row's episode records where its events are (real data)."""
    split: dict[str, list] = {"showed": [], "missed": []}
    for r in rows:
        shown = overview_showed(r.get("episode") or {}) if not r.get("error") else None
        if shown is not None:
            split["showed" if shown else "missed"].append(r)
    if not split["showed"] and not split["missed"]:
        return {}
    return {
        key: {"n": len(rs), "accuracy": _mean(r["score"] for r in rs), "avg_tool_calls": _mean(r["tool_calls"] for r in rs),
              "tool_usage_rate": _mean(1.0 if r["tool_calls"] > 0 else 0.0 for r in rs)}
        for key, rs in split.items()
    }  # fmt: skip


def to_markdown(summary: dict[str, Any], title: str = "Evaluation") -> str:
    lines = [
        f"# {title}",
        "",
        "| n | accuracy | avg tool calls | tool usage rate | avg turns | errors |",
        "|---|---|---|---|---|---|",
        f"| {summary['n']} | {summary['accuracy']:.3f} | {summary['avg_tool_calls']:.2f} | "
        f"{summary['tool_usage_rate']:.2f} | {summary['avg_turns']:.2f} | {summary['errors']} |",
    ]
    if "grounding" in summary:
        g = summary["grounding"]
        lines += ["", "| grounding n | mIoU | R@0.3 | R@0.5 | R@0.7 |", "|---|---|---|---|---|",
                  f"| {g['n']} | {g['mIoU']:.3f} | {g['R@0.3']:.3f} | {g['R@0.5']:.3f} | {g['R@0.7']:.3f} |"]  # fmt: skip
    for key, head in (("by_question_type", "question type"), ("by_duration", "duration")):
        lines += ["", f"| {head} | n | accuracy |", "|---|---|---|"]
        lines += [f"| {k} | {v['n']} | {v['accuracy']:.3f} |" for k, v in summary[key].items()]
    if summary.get("by_overview"):
        lines += ["", "| the overview ... the asked event | n | accuracy | avg tool calls | tool usage rate |", "|---|---|---|---|---|"]
        lines += [f"| {k} | {v['n']} | {v['accuracy']:.3f} | {v['avg_tool_calls']:.2f} | {v['tool_usage_rate']:.2f} |"
                  for k, v in summary["by_overview"].items()]  # fmt: skip
    cost = summary.get("cost")
    if cost:  # what an episode cost, beside what it scored ("-": a column the policy does not report)
        cells = [("turns", 2), ("crops", 2), ("frames_decoded", 1), ("visual_tokens", 0), ("generated_tokens", 0),
                 ("prompt_tokens", 0), ("model_calls", 2), ("critical_path", 2), ("wall_s", 2), ("wall_s_p50", 2),
                 ("wall_s_p95", 2)]  # fmt: skip
        lines += ["", "| cost | " + " | ".join(k.replace("_", " ") for k, _ in cells) + " |",
                  "|---|" + "---|" * len(cells),
                  "| per episode (mean; p50 and p95 of wall s) | " + " | ".join("-" if cost.get(k) is None else f"{cost[k]:.{d}f}" for k, d in cells) + " |"]  # fmt: skip
    if isinstance(summary.get("wall_s"), (int, float)):
        lines += ["", f"Elapsed: {summary['wall_s']:.1f} s (the episodes' own seconds add up to "
                      f"{summary.get('wall_s_episodes_sum', summary['wall_s']):.1f} s: episodes played at once count once "
                      "in the elapsed time)."]  # fmt: skip
    failed = summary.get("failed", [])
    if failed:  # errors score 0 and stay in n; name them so they can be fixed
        lines += ["", f"Failed samples ({len(failed)}; transient ones are retried when the run is resumed):", ""]
        lines += [f"- `{f['id']}`{' (transient)' if f['transient'] else ''}: {f['error'][:200]}" for f in failed[:20]]
        if len(failed) > 20:
            lines.append(f"- ... and {len(failed) - 20} more (summary.json lists them all)")
    return "\n".join(lines) + "\n"


def write_report(summary: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(to_markdown(summary, f"Evaluation: {out.name}"))
    try:
        _plot(summary, out / "report.png")
    except ImportError:  # matplotlib is the "plot" extra; the JSON and Markdown suffice, but say so
        if not _warned_no_plot:
            logger.warning("%s/report.png not drawn: matplotlib is not installed (pip install matplotlib, or the "
                           "project's [plot] extra); summary.json and report.md are written", out)  # fmt: skip
            _warned_no_plot.append(True)


_warned_no_plot: list[bool] = []  # once per process: write_report runs after every sample


def _plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # where the records say where the needles are, a third panel: accuracy and crops where the overview missed
    # the asked event and where it showed it (what tells a policy that crops when it must from one that never does)
    overview = summary.get("by_overview") or {}
    fig, axes = plt.subplots(1, 3 if overview else 2, figsize=(13.5 if overview else 9, 3.2))
    for ax, key, title in zip(
        axes, ("by_question_type", "by_duration"), ("by question type", "by duration"), strict=False
    ):
        names = list(summary[key])
        bars = ax.bar(names, [summary[key][n]["accuracy"] for n in names], color="#2a9d8f")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"accuracy {title}")
    if overview:
        ax, names = axes[2], [k for k in ("missed", "showed") if k in overview]
        xs = range(len(names))
        acc = ax.bar([x - 0.2 for x in xs], [overview[k]["accuracy"] for k in names], 0.4, color="#2a9d8f", label="accuracy")
        ax.bar_label(acc, fmt="%.2f", fontsize=8)
        twin = ax.twinx()
        crops = twin.bar([x + 0.2 for x in xs], [overview[k]["avg_tool_calls"] for k in names], 0.4, color="#36c", label="crops per episode")
        twin.bar_label(crops, fmt="%.2f", fontsize=8)
        twin.set_ylim(0, max([overview[k]["avg_tool_calls"] for k in names] + [1.0]) * 1.35)
        ax.set_ylim(0, 1.3)  # room for the legend above the bars
        ax.set_xticks(list(xs), [f"overview {k} it (n = {overview[k]['n']})" for k in names], fontsize=8)
        ax.set_title("where the overview ... the asked event")
        ax.legend(handles=[acc, crops], fontsize=7, loc="upper center", ncol=2)
    fig.suptitle(
        f"n = {summary['n']}, accuracy {summary['accuracy']:.3f}, tool calls {summary['avg_tool_calls']:.2f}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def compare(dirs: Sequence[str | Path]) -> str:
    """A side-by-side Markdown table of several evaluation directories (their ``summary.json``)."""
    rows = []
    for d in dirs:
        path = Path(d) / "summary.json"
        if not path.exists():
            raise FileNotFoundError(f"no summary.json in {d} (run paravt eval --out {d} first)")
        s = json.loads(path.read_text())
        cfg_path = Path(d) / CONFIG
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        rows.append((str(d), cfg, s))
    types = sorted({qt for _, _, s in rows for qt in s.get("by_question_type", {})})
    head = [
        "run",
        "policy",
        "dispatch",
        "K",
        "n",
        "accuracy",
        "avg tool calls",
        "tool usage",
        "avg turns",
        "errors",
    ]
    head += [f"acc {qt}" for qt in types]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d, cfg, s in rows:
        cells = [d, str(cfg.get("policy", "?")), str(cfg.get("dispatch", "?")), str(cfg.get("frame_budget", "?")),
                 str(s["n"]), f"{s['accuracy']:.3f}", f"{s['avg_tool_calls']:.2f}", f"{s['tool_usage_rate']:.2f}",
                 f"{s['avg_turns']:.2f}", str(s["errors"])]  # fmt: skip
        cells += [
            f"{s['by_question_type'][qt]['accuracy']:.3f}" if qt in s["by_question_type"] else "-"
            for qt in types
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
