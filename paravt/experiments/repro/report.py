"""``paravt repro``, evaluation and report half: each arm's final policy on the held-out videos at several
overview budgets K, with parallel and with sequential dispatch, then ``report.md`` / ``report.png`` /
``report.json``.

The report reads the comparison as dynamics, from the first RL step:

- (0) the probe gate the shared cold start passed (``paravt.experiments.repro.gate``);
- (A) format (f_τ, format compliance of the rollouts at the training temperature) and (B) tool use (κ,
  executed crops per rollout), training accuracy and reward: first ``EARLY_STEPS`` steps and last quarter;
- (D) the same four figures over the steps, binned from step 1, per arm;
- (E) the step at which each seed's tool use fell to half its early level;
- (C) held-out accuracy and crops of the final policies at every K and dispatch;
- a verdict per claim of the paper, under the released reward and under the prefix-scored variant.

Every figure is a mean over seeds with its 95 % confidence interval (Student's t, ``paravt.evaluation.stats``);
a claim compares two arms seed by seed (the arms of one seed share its data order and gating draws) and counts
as reproduced only when the 95 % interval of the paired difference excludes zero in the paper's direction.
The paper column holds only what the paper states in its abstract and project page (training-time format
compliance 0.13 under vanilla GRPO, 0.64 at peak under PARA-GRPO; the vanilla tool-call rate collapsing within
a few steps): its per-arm tables were not available offline, and no number is filled in from memory.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paravt.evaluation.report import summarize
from paravt.evaluation.stats import finite, mean_ci
from paravt.evaluation.store import read_results
from paravt.experiments.repro.arms import ARM_LABELS, ReproConfig, coldstart_model
from paravt.experiments.repro.evaluations import eval_budgets, eval_dir
from paravt.experiments.repro.train import finished_runs, unreadable_runs
from paravt_env.storage import DamagedFile, read_json, read_jsonl

PAPER = {
    "format_compliance": {"vanilla_grpo": "0.13", "para_grpo": "0.64 (peak)"},
    "tool_calls_per_rollout": {"vanilla_grpo": "collapses within a few steps"},
}
"""The paper's figures we could source (abstract, project page); '-' elsewhere."""

TRAIN_METRICS = (
    ("format_reward", "f_τ (format reward)"),
    ("format_compliance", "format compliance"),
    ("tool_calls_per_rollout", "κ (crops per rollout)"),
    ("accuracy", "training accuracy"),
    ("reward_mean", "reward"),
)

EARLY_STEPS = 10
"""The "early" window: the mean of the first steps (one step of 8-16 rollouts is too noisy to stand alone)."""

STEP_BINS = ((1, 1), (2, 10), (11, 25), (26, 50), (51, 100), (101, 150), (151, 300))
"""The dynamics table's step ranges (inclusive): step 1 alone (what RL starts from), then wider bins."""


# --- aggregation --------------------------------------------------------------------------------------------
def _rows(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    rows = read_jsonl(path) if path.is_file() else []
    return [r for r in rows if r.get("stage", "rl") == "rl" and isinstance(r.get("step"), int)]


def _stat(values: Sequence[float]) -> tuple[float, float | None, int]:
    """(mean, half-width of its 95 % interval or None for one value, n) of the finite values."""
    vals = finite(values)
    if not vals:
        return float("nan"), None, 0
    m = mean_ci(vals)
    return m["mean"], m["ci95"], len(vals)


def _fmt(stat: tuple[float, float | None, int]) -> str:
    mean, ci, n = stat
    if n == 0:
        return "-"
    return f"{mean:.2f} ± {ci:.2f}" if ci is not None else f"{mean:.2f}"


def _bin_mean(curve: dict[int, float | None], lo: int, hi: int) -> float | None:
    vals = finite(v for s, v in curve.items() if lo <= s <= hi)
    return statistics.fmean(vals) if vals else None


EVAL_FIELDS = {"accuracy": float, "avg_tool_calls": float, "n": int}
"""What the report reads of every evaluation's ``summary.json``."""


def eval_summary(path: Path) -> dict[str, Any]:
    """An evaluation's ``summary.json`` with the fields the report reads; a missing or wrong-typed one is named."""
    summary = read_json(path)
    for field, kind in EVAL_FIELDS.items():
        value = summary.get(field)
        if not isinstance(value, (int, float) if kind is float else int) or isinstance(value, bool):
            raise DamagedFile(f"{path}: damaged, field {field!r} is {value!r}, not a {kind.__name__}")
    return summary


def collect(out: Path, cfg: ReproConfig) -> dict[str, Any]:
    """Per arm and seed: the training curves by step, their early / late means and step bins, and the held-out
    evaluations by dispatch and K."""
    arms: dict[str, Any] = {}
    for arm, seed, run in finished_runs(out, cfg.arms):
        a = arms.setdefault(arm, {"seeds": [], "curves": {}, "per_seed": {}, "eval": {}})
        rows = _rows(run)
        a["seeds"].append(seed)
        curves = {k: {r["step"]: r.get(k) for r in rows} for k, _ in TRAIN_METRICS}
        a["curves"][seed] = {k: [c[s] for s in sorted(c)] for k, c in curves.items()}
        per = a["per_seed"][seed] = {}
        for key, _ in TRAIN_METRICS:
            vals = finite(curves[key][s] for s in sorted(curves[key]))
            if vals:
                per[key] = {"first": statistics.fmean(vals[: min(EARLY_STEPS, max(1, len(vals) // 4))]),
                            "last": statistics.fmean(vals[-max(1, len(vals) // 4) :]),
                            "bins": [_bin_mean(curves[key], lo, hi) for lo, hi in STEP_BINS]}  # fmt: skip
        for d in cfg.dispatch:
            for k in eval_budgets(cfg):
                path = eval_dir(run, d, k) / "summary.json"
                if path.is_file():
                    a["eval"].setdefault(d, {}).setdefault(str(k), {})[seed] = eval_summary(path)
    for a in arms.values():
        a["train"] = {key: {w: _stat([p[key][w] for p in a["per_seed"].values() if key in p]) for w in ("first", "last")}
                      for key, _ in TRAIN_METRICS}  # fmt: skip
        a["kappa_halved_at"] = {seed: halved_at(curve["tool_calls_per_rollout"]) for seed, curve in a["curves"].items()}
    return arms


def halved_at(values: Sequence[float | None], window: int = EARLY_STEPS) -> int | None:
    """The first step (1-based) at which the running mean over ``window`` steps is below half the mean of the
    first ``window`` steps; None when it never is (or there is nothing to halve)."""
    vals = [v for v in values if v is not None]
    if len(vals) < window:
        return None
    start = statistics.fmean(vals[:window])
    if start <= 0:
        return None
    for end in range(window, len(vals) + 1):
        if statistics.fmean(vals[end - window : end]) < start / 2:
            return end
    return None


# --- the paper's claims -------------------------------------------------------------------------------------
def _per_seed(arms: dict[str, Any], arm: str, what: tuple) -> dict[int, float]:
    """Per-seed values of one side of a claim: ("train", metric, "first"|"last") or ("eval", dispatch, k)."""
    a = arms.get(arm)
    if a is None:
        return {}
    if what[0] == "train":
        _, key, w = what
        return {s: p[key][w] for s, p in a["per_seed"].items() if key in p}
    _, d, k = what
    return {s: r["accuracy"] for s, r in a["eval"].get(d, {}).get(str(k), {}).items()}


def compare(ours: dict[int, float], ref: dict[int, float]) -> dict[str, Any]:
    """The paired difference ``ours - ref`` over the seeds both have: per seed, mean, 95 % interval, verdict
    ("reproduced" when the interval lies above zero, "opposite" below it, "not resolved" across it)."""
    seeds = sorted(set(ours) & set(ref))
    diffs = [ours[s] - ref[s] for s in seeds]
    if not diffs:
        return {"seeds": [], "diffs": [], "verdict": "not measured"}
    m = mean_ci(diffs)
    if m["ci95"] is None:
        verdict = "one seed: no verdict"
    elif m["mean"] - m["ci95"] > 0:
        verdict = "reproduced"
    elif m["mean"] + m["ci95"] < 0:
        verdict = "NOT reproduced: the opposite, beyond the 95 % interval"
    else:
        verdict = "not resolved: the 95 % interval includes 0"
    return {"seeds": seeds, "diffs": diffs, "mean": m["mean"], "ci95": m["ci95"], "verdict": verdict}


def claims(cfg: ReproConfig) -> list[tuple[str, str, tuple[str, tuple], tuple[str, tuple]]]:
    """(claim, reward, (arm, what) expected higher, (arm, what) expected lower) for every claim the arms test,
    under the released reward and again under the prefix-scored variant where an arm differs there (vanilla
    GRPO and gating-only force no prefix: one run serves both)."""
    late = {"format": ("train", "format_compliance", "last"), "kappa": ("train", "tool_calls_per_rollout", "last")}
    out: list = []
    for reward, sfx in (("released", ""), ("prefix scored", "_scored")):
        para, ea = f"para_grpo{sfx}", f"ea_only{sfx}"
        out += [
            ("Exploration Anchoring keeps format: PARA-GRPO's format compliance (last quarter) > vanilla GRPO's",
             reward, (para, late["format"]), ("vanilla_grpo", late["format"])),
            ("EA alone raises format compliance over vanilla GRPO", reward, (ea, late["format"]), ("vanilla_grpo", late["format"])),
            ("nFrames Gating keeps tool use: PARA-GRPO's κ (last quarter) > EA only's", reward, (para, late["kappa"]),
             (ea, late["kappa"])),
            ("PARA-GRPO keeps more tool use than vanilla GRPO (κ, last quarter)", reward, (para, late["kappa"]),
             ("vanilla_grpo", late["kappa"])),
        ]  # fmt: skip
        for k in eval_budgets(cfg):
            out.append((f"PARA-GRPO answers held-out questions better than vanilla GRPO (K = {k or 'card'}, parallel)",
                        reward, (para, ("eval", "parallel", k)), ("vanilla_grpo", ("eval", "parallel", k))))  # fmt: skip
    out += [
        ("Vanilla GRPO's tool use collapses: κ in the first steps > κ in the last quarter", "released",
         ("vanilla_grpo", ("train", "tool_calls_per_rollout", "first")), ("vanilla_grpo", late["kappa"])),
        ("Gating alone keeps more tool use than vanilla GRPO (κ, last quarter)", "released",
         ("gating_only", late["kappa"]), ("vanilla_grpo", late["kappa"])),
    ]  # fmt: skip
    if "sequential" in cfg.dispatch and "parallel" in cfg.dispatch:
        for k in eval_budgets(cfg):
            out.append((f"{MISMATCH}: the parallel-trained PARA-GRPO policy, parallel minus sequential dispatch "
                        f"(K = {k or 'card'})", "released", ("para_grpo", ("eval", "parallel", k)),
                        ("para_grpo", ("eval", "sequential", k))))  # fmt: skip
    return [c for c in out if c[2][0] in cfg.arms and c[3][0] in cfg.arms]


MISMATCH = "Protocol mismatch, not the paper's dispatch claim"
"""The dispatch rows: every arm is trained for parallel calls and then evaluated under sequential dispatch, which
runs the first call of a turn and refuses the rest. Their difference measures that mismatch (20-60 times the
paper's effect, the same in every arm), not sequential against parallel dispatch; the paper's comparison (each
policy trained for its own protocol, at one crop budget) is ``paravt bench dispatch`` with a sequentially trained
policy (docs/repro.md, "Sequential against parallel")."""


def verdicts(arms: dict[str, Any], cfg: ReproConfig) -> list[dict[str, Any]]:
    out = [{"claim": claim, "reward": reward, "higher": hi[0], "lower": lo[0],
            **compare(_per_seed(arms, *hi), _per_seed(arms, *lo))} for claim, reward, hi, lo in claims(cfg)]  # fmt: skip
    for v in out:
        if v["claim"].startswith(MISMATCH):  # a measurement of the mismatch: no claim of the paper is judged here
            v["verdict"] = "not a test of the claim (protocol mismatch); " + {
                "reproduced": "interval above 0"}.get(v["verdict"], v["verdict"])
    return out


# --- report -------------------------------------------------------------------------------------------------
def write_report(out: Path, cfg: ReproConfig, coldstart: dict[str, Any] | None = None,
                 wall_s: dict[str, float] | None = None) -> str:  # fmt: skip
    """``report.md``, ``report.png`` and ``report.json`` in ``out``; returns the Markdown. ``coldstart``: the
    cold start's held-out summaries by K (``coldstart_summary``)."""
    from paravt.experiments.repro.gate import gate_path, read_gate
    from paravt.experiments.repro.gate import to_markdown as gate_table

    arms = collect(out, cfg)
    seeds = sorted({s for a in arms.values() for s in a["seeds"]})
    skipped = unreadable_runs(out, cfg.arms)
    steps = sorted({len(c["tool_calls_per_rollout"]) for a in arms.values() for c in a["curves"].values()})
    budgets = eval_budgets(cfg)
    lines = [
        "# paravt repro: the paper's training comparison at CPU scale",
        "",
        f"Recipe `{cfg.recipe}` (overrides: {', '.join(cfg.overrides) or 'none'}); RL steps per arm: "
        f"{cfg.steps or 'the recipe'} (finished runs have {', '.join(map(str, steps)) or '-'}); seeds: "
        f"{', '.join(map(str, seeds)) or 'none finished'}; held-out evaluation at K = "
        f"{', '.join(str(k or 'each card') for k in budgets)}, {' and '.join(cfg.dispatch)} dispatch. Every arm "
        f"starts from one shared cold start (`{coldstart_model(out)}`). Figures: mean over seeds ± the half-width of "
        f"its 95 % confidence interval (Student's t; none for one seed); training figures are the mean of the last "
        f"quarter of the RL steps, the first {EARLY_STEPS} steps in brackets.",
        "",
    ]
    fewer = {arm: a["seeds"] for arm, a in arms.items() if sorted(a["seeds"]) != seeds}
    if fewer:  # the header's seeds are the union: say which arms' means rest on fewer
        lines += ["Arms with fewer finished seeds: " + "; ".join(f"{ARM_LABELS.get(a, a)}: {', '.join(map(str, sorted(s)))}"
                                                             for a, s in fewer.items()) + ".", ""]  # fmt: skip
    if skipped:
        lines += [f"**{len(skipped)} run(s) not read (damaged), left out of every figure:** "
                  + "; ".join(f"{ARM_LABELS.get(a, a)} seed {s}: {why}" for a, s, why in skipped) + ".", ""]
    if wall_s:
        lines += ["Wall time on this machine: " + ", ".join(f"{k} {v / 60:.1f} min" for k, v in wall_s.items()) + ".", ""]
    gate = gate_path(out)
    if gate.is_file():
        g = read_gate(gate)
        lines += [f"## (0) The shared cold start: probe gate ({'passed' if g['passed'] else '**failed**'}, {g['n']} "
                  f"held-out videos)", "", gate_table(g)]  # fmt: skip
        if not g["passed"] and not cfg.gate:
            lines += ["The arms below were trained with `--no-gate`: read them knowing which check failed.", ""]

    def table(title: str, keys: list[tuple[str, str]]):
        head = "| arm | " + " | ".join(f"{label} (ours) | paper" for _, label in keys) + " |"
        lines.extend([f"## {title}", "", head, "|---|" + "---|---|" * len(keys)])
        for arm in cfg.arms:
            a = arms.get(arm)
            cells = []
            for key, _ in keys:
                if a is None:
                    cells.append("not run")
                else:
                    t = a["train"][key]
                    cells.append(f"{_fmt(t['last'])} ({_fmt(t['first'])})")
                cells.append(PAPER.get(key, {}).get(arm, "-"))
            lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(cells) + " |")
        lines.append("")

    table("(A) Format under RL: Exploration Anchoring", [("format_reward", "f_τ"), ("format_compliance", "compliance")])
    lines += ["f_τ is each arm's own format term: the released reward (answer-suffix weighting, anchor bonus) and the "
              "vanilla one have different scales, so compare f_τ within an arm over time; format compliance (every "
              "turn parses, the last one answers; rollouts at the training temperature) is the same measure for every "
              "arm.", ""]  # fmt: skip
    table("(B) Tool use under RL: nFrames Gating",
          [("tool_calls_per_rollout", "κ"), ("accuracy", "train accuracy"), ("reward_mean", "reward")])

    bins = [(lo, hi) for lo, hi in STEP_BINS if lo <= max(steps or [0])]
    lines += ["## (D) Dynamics from step 1: each figure's mean over the steps of each range, over seeds", ""]
    for key, label in TRAIN_METRICS[1:]:
        lines += [f"**{label}**", "", "| arm | " + " | ".join(f"step {lo}" if lo == hi else f"steps {lo}-{hi}" for lo, hi in bins) + " |",
                  "|---|" + "---|" * len(bins)]  # fmt: skip
        for arm in cfg.arms:
            per = arms.get(arm, {}).get("per_seed", {})
            cells = [_fmt(_stat([p[key]["bins"][i] for p in per.values() if key in p])) for i in range(len(bins))]
            lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"## (E) When tool use fell: the step at which κ's {EARLY_STEPS}-step running mean first fell below half "
              f"its first-{EARLY_STEPS}-step mean, per seed ('-': never)", "", "| arm | " + " | ".join(
                  f"seed {s}" for s in seeds) + " |", "|---|" + "---|" * len(seeds)]  # fmt: skip
    for arm in cfg.arms:
        at = arms.get(arm, {}).get("kappa_halved_at", {})
        lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(
            "not run" if s not in at else (str(at[s]) if at[s] is not None else "-") for s in seeds) + " |")
    lines.append("")

    cols = [(d, k) for k in budgets for d in cfg.dispatch]
    lines += ["## (C) Held-out accuracy (crops per episode) of the final policies, by K and dispatch", "",
              "| arm | " + " | ".join(f"K = {k or 'card'}, {d}" for d, k in cols) + " |", "|---|" + "---|" * len(cols)]  # fmt: skip
    if coldstart:
        cells = []
        for d, k in cols:
            c = coldstart.get(str(k)) if d == "parallel" else None
            cells.append(f"{c['accuracy']:.2f} ({c['avg_tool_calls']:.2f})" if c else "-")
        lines.append("| cold start (shared) | " + " | ".join(cells) + " |")
    for arm in cfg.arms:
        ev = arms.get(arm, {}).get("eval", {})
        cells = []
        for d, k in cols:
            runs = list(ev.get(d, {}).get(str(k), {}).values())
            cells.append(f"{_fmt(_stat([r['accuracy'] for r in runs]))} ({_fmt(_stat([r['avg_tool_calls'] for r in runs]))})"
                         if runs else "-")  # fmt: skip
        lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(cells) + " |")
    n_eval = {r["n"] for a in arms.values() for d in a["eval"].values() for kk in d.values() for r in kk.values()}
    lines += ["", f"Held-out samples per evaluation: {', '.join(map(str, sorted(n_eval))) or '-'}.", ""]
    lines += ["**When does a final policy crop?** Share of held-out episodes with a crop, where the overview missed "
              "the asked event / where it already showed it (parallel dispatch; `by_overview` of each evaluation; in "
              "brackets how many of the episodes the overview missed). A policy that gates its calls crops on misses "
              "and skips on hits; one that dropped the tool skips both.", "",
              "| arm | " + " | ".join(f"K = {k or 'card'}: missed / showed" for k in budgets) + " |",
              "|---|" + "---|" * len(budgets)]  # fmt: skip

    def gating_cell(summaries: list[dict[str, Any]]) -> str:
        split = [x["by_overview"] for x in summaries if x.get("by_overview")]
        if not split:
            return "-"
        rate = {w: _fmt(_stat([x[w]["tool_usage_rate"] for x in split if x.get(w, {}).get("n")])) for w in ("missed", "showed")}
        missed = statistics.fmean(x.get("missed", {}).get("n", 0) / max(1, x.get("missed", {}).get("n", 0) + x.get("showed", {}).get("n", 0)) for x in split)
        return f"{rate['missed']} / {rate['showed']} ({missed:.0%})"

    if coldstart:
        lines.append("| cold start (shared) | " + " | ".join(gating_cell([coldstart[str(k)]] if str(k) in coldstart else [])
                                                          for k in budgets) + " |")  # fmt: skip
    for arm in cfg.arms:
        ev = arms.get(arm, {}).get("eval", {}).get("parallel", {})
        lines.append(f"| {ARM_LABELS[arm]} | " + " | ".join(gating_cell(list(ev.get(str(k), {}).values())) for k in budgets) + " |")
    lines.append("")

    goals = None
    if any(a.endswith("_neutral") for a in cfg.arms):  # the tool-neutral design: its goals, set before the runs, come first
        from paravt.experiments.repro.goals import judge
        from paravt.experiments.repro.goals import to_markdown as goals_table

        goals = judge(arms, coldstart or {})
        lines += goals_table(goals)
        lines += ["## The earlier design's claim rows (exploratory: not among the preregistered tests above)", ""]
    else:
        lines += ["## Which of the paper's claims reproduced", ""]
    lines += ["| the paper's claim | reward | paired difference (mean ± 95 % CI) | per seed | verdict |", "|---|---|---|---|---|"]  # fmt: skip
    found = verdicts(arms, cfg)
    for v in found:
        diff = "-" if not v["diffs"] else (f"{v['mean']:+.3f}" + (f" ± {v['ci95']:.3f}" if v["ci95"] is not None else ""))
        per = ", ".join(f"{s}: {x:+.2f}" for s, x in zip(v["seeds"], v["diffs"], strict=True)) or "-"
        lines.append(f"| {v['claim']} | {v['reward']} | {diff} | {per} | {v['verdict']} |")
    lines += ["", "A claim compares two arms seed by seed (same RL seed: same data order and gating draws); it counts as "
              "reproduced only when the 95 % interval of the paired difference lies on the paper's side of zero. "
              "The prefix-scored rows put PARA-GRPO and EA only under the reward variant that scores the forced "
              "`<think>` as the policy's opening tag; vanilla GRPO and gating only force no prefix, so their runs "
              "serve both rewards. The protocol-mismatch rows are not claims: every arm is trained for parallel calls, "
              "and sequential dispatch runs the first call of a turn and refuses the rest, so their difference "
              "measures that mismatch; the paper's comparison, each policy trained for its own protocol at one crop "
              "budget, is `paravt bench dispatch` (docs/repro.md, \"Sequential against parallel\").", ""]  # fmt: skip
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    record = {"arms": arms, "verdicts": found, "coldstart": coldstart, "wall_s": wall_s}
    if goals is not None:
        record["goals"] = goals
    if skipped:
        record["unreadable_runs"] = [{"arm": a, "seed": s, "why": why} for a, s, why in skipped]
    (out / "report.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    plot_report(arms, out / "report.png", cfg)
    return text


def plot_report(arms: dict[str, Any], path: Path, cfg: ReproConfig) -> None:
    """One panel per training metric: each arm's mean over seeds (a 5-step running mean), with the min-max band
    of the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(TRAIN_METRICS), figsize=(4.2 * len(TRAIN_METRICS), 3.4))
    for ax, (key, label) in zip(axes, TRAIN_METRICS, strict=True):
        for arm in cfg.arms:
            curves = [c[key] for c in arms.get(arm, {}).get("curves", {}).values()]
            curves = [[np.nan if v is None else v for v in c] for c in curves if c]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            data = np.array([c[:n] for c in curves], dtype=float)
            w = min(5, n)
            smooth = np.array([np.convolve(np.nan_to_num(row), np.ones(w) / w, mode="valid") for row in data])
            x = np.arange(w, n + 1)
            ax.plot(x, smooth.mean(axis=0), label=f"{ARM_LABELS[arm]} ({len(curves)} seeds)")
            ax.fill_between(x, smooth.min(axis=0), smooth.max(axis=0), alpha=0.15)
        ax.set_title(label)
        ax.set_xlabel("RL step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if axes[0].get_legend_handles_labels()[0]:  # nothing finished yet: no legend to draw
        axes[0].legend(fontsize=7)
    fig.suptitle("paravt repro: training curves from step 1 (5-step running mean; mean over seeds, band = min-max)")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def coldstart_summary(out: Path, cfg: ReproConfig | None = None) -> dict[str, Any]:
    """The cold start's held-out figures by K (``str(K)``, "None" for its card's): each finished
    ``summary.json`` (what a report directory without per-sample results keeps), else a summary of the
    results written so far."""
    found = {}
    for k in eval_budgets(cfg) if cfg is not None else (None,):
        path = eval_dir(Path(out) / "coldstart", "parallel", k)
        if (path / "summary.json").exists():
            found[str(k)] = read_json(path / "summary.json")
        elif rows := read_results(path / "results.jsonl"):
            found[str(k)] = summarize(rows)
    return found
