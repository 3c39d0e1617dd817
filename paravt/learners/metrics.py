"""What the trainer records: per-step rollout metrics, the curves of ``RUN/curves.png``, JSONL logs that
survive a kill, and the optional TensorBoard / W&B mirrors of ``RUN/metrics.jsonl``."""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from paravt.learners.config import TrainConfig
from paravt.learners.trajectory import Trajectory
from paravt_env.protocol import parse_response

logger = logging.getLogger(__name__)

METRIC_KEYS = (
    "step", "reward_mean", "reward_std", "accuracy", "format_reward", "format_compliance",
    "tool_calls_per_rollout", "parallel_calls_per_turn", "frame_budget_mean", "kl", "loss", "clip_fraction",
    "entropy", "tokens_per_s", "rollout_s", "reference_s", "update_s", "train_tokens", "train_tokens_per_s",
    "peak_memory_mb", "wall_s",
)  # fmt: skip


# --- metrics ----------------------------------------------------------------------------------------------
def well_formed(tr: Trajectory) -> bool:
    """Every turn parses without problems and the last one answers."""
    parsed = [parse_response(t) for t in tr.turn_texts]
    return bool(parsed) and all(not p.problems for p in parsed) and parsed[-1].answer is not None


def rollout_metrics(trs: list[Trajectory]) -> dict[str, float]:
    calls_per_turn = [len(parse_response(t).valid_tool_calls) for tr in trs for t in tr.turn_texts]
    calling = [c for c in calls_per_turn if c > 0]
    return {
        "reward_mean": statistics.fmean(t.reward for t in trs),
        "reward_std": statistics.pstdev(t.reward for t in trs),
        "accuracy": statistics.fmean(t.breakdown.get("accuracy", 0.0) for t in trs),
        "format_reward": statistics.fmean(t.breakdown.get("format", 0.0) for t in trs),
        "format_compliance": statistics.fmean(1.0 if well_formed(t) else 0.0 for t in trs),
        "tool_calls_per_rollout": statistics.fmean(t.tool_calls for t in trs),
        "parallel_calls_per_turn": statistics.fmean(calling) if calling else 0.0,
        "frame_budget_mean": statistics.fmean(t.frame_budget for t in trs),
    }


CURVES = (
    ("reward_mean", "Reward", "mean episode reward"),
    ("format_reward", "Format reward f_τ", "format term"),
    ("format_compliance", "Format compliance", "share of well-formed episodes"),
    ("tool_calls_per_rollout", "Tool calls per rollout κ", "executed crops / episode"),
    ("accuracy", "Accuracy", "answer accuracy"),
    ("kl", "KL to the reference", "k3 estimate / token"),
)


def plot_curves(rows: list[dict[str, Any]], path: Path, sft_rows: list[dict[str, Any]] | None = None) -> None:
    """RL curves (one panel per metric) and, when given, the cold start's loss per stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = len(CURVES) + (1 if sft_rows else 0)
    cols = 4
    fig, axes = plt.subplots((panels + cols - 1) // cols, cols, figsize=(4 * cols, 3.2 * ((panels + cols - 1) // cols)))
    axes = list(axes.flat)
    steps = [r["step"] for r in rows]
    for ax, (key, title, ylabel) in zip(axes, CURVES, strict=False):
        ax.plot(steps, [r.get(key, float("nan")) for r in rows], marker="o", markersize=3)
        ax.set_title(title)
        ax.set_xlabel("RL step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    if sft_rows:
        ax = axes[len(CURVES)]
        for stage in ("perception", "sft"):
            pts = [r for r in sft_rows if r.get("stage", "sft") == stage]
            if pts:
                ax.plot(range(1, len(pts) + 1), [r["loss"] for r in pts], label=stage, linewidth=1)
        ax.set_title("Cold start loss")
        ax.set_xlabel("optimiser step (per stage)")
        ax.set_ylabel("cross-entropy / token")
        ax.set_yscale("log")
        ax.legend()
        ax.grid(alpha=0.3)
    for ax in axes[panels:]:
        ax.axis("off")
    fig.suptitle(f"Training curves ({path.parent.name})")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


CURVES_EVERY_S = 60.0
"""Seconds between two drawings of ``RUN/curves.png`` during a run. A drawing takes about 0.5 s (matplotlib), 7 %
of a ``repro_cpu`` step when drawn after every step; ``metrics.jsonl`` gets every step at once regardless."""


class CurvesFile:
    """``RUN/curves.png`` kept current during a run without paying a drawing per step: ``after_step`` draws when
    ``every_s`` seconds have passed since the last drawing (the first step always draws), ``draw`` at once where a
    row is not yet drawn (a checkpoint, an interrupt, the end of the run)."""

    def __init__(self, path: Path, sft_rows: Callable[[], list[dict[str, Any]]], every_s: float = CURVES_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.path, self.sft_rows, self.every_s, self.clock = path, sft_rows, float(every_s), clock
        self.drawn_at: float | None = None
        self.drawn_rows = -1  # how many rows the file shows
        self.drawings = 0
        """How many times the file was drawn (what a test reads)."""

    def after_step(self, history: list[dict[str, Any]]) -> None:
        if self.drawn_at is None or self.clock() - self.drawn_at >= self.every_s:
            self.draw(history)

    def draw(self, history: list[dict[str, Any]]) -> None:
        """Draw now, unless the file already shows every row of ``history``."""
        if self.drawn_rows == len(history):
            return
        plot_curves(history, self.path, self.sft_rows())
        self.drawn_at, self.drawn_rows = self.clock(), len(history)
        self.drawings += 1


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete rows of a JSONL log; a line cut short by a kill is dropped (its step is run again), and any other
    line that is not a JSON object too, counted in a warning that names the file."""
    if not path.is_file():
        return []
    rows, dropped = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            dropped += 1
    if dropped:
        logger.warning("%s: %d line(s) that are not JSON objects left out (a line cut short by a kill is one)", path, dropped)
    return rows



def check_sinks(cfg: TrainConfig) -> None:
    """Fail now, before the data, the model and the cold start, if a requested logging sink cannot be
    imported (ImportError naming the package to install); creates nothing."""
    if cfg.log.tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as exc:
            raise ImportError("log.tensorboard=true needs the tensorboard package: pip install tensorboard") from exc
    if cfg.log.wandb_project:
        try:
            import wandb  # noqa: F401
        except ImportError as exc:
            raise ImportError("log.wandb_project needs the wandb package: pip install wandb") from exc


class MetricSinks:
    """Optional TensorBoard / W&B mirrors of ``metrics.jsonl`` (the JSONL file is always written)."""

    def __init__(self, cfg: TrainConfig, out: Path) -> None:
        self.tb = self.wandb = None
        check_sinks(cfg)
        if cfg.log.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(out / "tensorboard"))
        if cfg.log.wandb_project:
            import wandb

            self.wandb = wandb.init(project=cfg.log.wandb_project, dir=str(out), config=cfg.as_dict(), resume="allow")

    def write(self, row: dict[str, Any]) -> None:
        scalars = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, row["step"])
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(scalars, step=row["step"])

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
