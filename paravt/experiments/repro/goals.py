"""Issue 62's goals, set before its runs (docs/repro.md, "The claims tested so that they can fail"), judged on
the runs' files: one verdict per test, with its figures, and how many tests were made.

Each goal reads what ``report.collect`` gathers per arm and seed (κ per step, format compliance, held-out
evaluations by dispatch and K) and the cold start's evaluations. Retention is the mean κ of the last quarter of
the steps over the mean κ of the first ones (``report.EARLY_STEPS``: steps 1-10 of 150). Intervals are 95 %,
Student's t over seeds, paired by seed where two arms are compared; a test with fewer than two seeds gives no
verdict. Nothing here is tuned to the results: the thresholds are the ones written before the runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paravt.evaluation.stats import mean_ci

REWARDS = {"released": "", "tool-neutral": "_neutral"}
"""The two rewards of the design and the suffix of their arms' names."""
KS = ("16", "64")
"""The fixed overview budgets the goals read (parallel dispatch: the protocol the arms are trained for)."""


def retention(arm: dict[str, Any]) -> dict[int, float]:
    """Per seed: mean κ of the last quarter / mean κ of the first steps (seeds whose first steps made no crop left
    out: nothing to retain)."""
    out = {}
    for seed, per in arm.get("per_seed", {}).items():
        kappa = per.get("tool_calls_per_rollout")
        if kappa and kappa["first"] > 0:
            out[seed] = kappa["last"] / kappa["first"]
    return out


def last_quarter(arm: dict[str, Any], key: str) -> dict[int, float]:
    """Per seed: the mean of ``key`` over the last quarter of the RL steps."""
    return {s: p[key]["last"] for s, p in arm.get("per_seed", {}).items() if key in p}


def held_out(arm: dict[str, Any], k: str, read: Callable[[dict[str, Any]], float | None]) -> dict[int, float]:
    """Per seed: ``read`` of the arm's held-out summary at K = ``k`` (parallel dispatch); seeds it gives None left out."""
    rows = arm.get("eval", {}).get("parallel", {}).get(k, {})
    return {s: v for s, summary in rows.items() if (v := read(summary)) is not None}


def miss_crop_rate(summary: dict[str, Any]) -> float | None:
    """The share of the episodes whose overview missed the event in which the policy cropped (None: none missed)."""
    missed = summary.get("by_overview", {}).get("missed")
    return None if not missed or not missed.get("n") else missed["tool_usage_rate"]


def _test(goal: str, reward: str, what: str, passed: bool | None, figures: str) -> dict[str, Any]:
    verdict = "no verdict (fewer than 2 seeds, or not measured)" if passed is None else (
        "met" if passed else "NOT met")  # fmt: skip
    return {"goal": goal, "reward": reward, "test": what, "verdict": verdict, "passed": passed, "figures": figures}


def _interval(values: list[float]) -> tuple[dict[str, Any], str]:
    if not values:
        return {"mean": None, "ci95": None}, "not measured"
    m = mean_ci(values)
    half = "" if m["ci95"] is None else f" ± {m['ci95']:.3f}"
    return m, f"{m['mean']:.3f}{half} (seeds: {', '.join(f'{v:.3f}' for v in values)})"


def _paired(higher: dict[int, float], lower: dict[int, float]) -> tuple[bool | None, str]:
    """Whether ``higher - lower``, paired by seed, has a 95 % interval above 0."""
    seeds = sorted(set(higher) & set(lower))
    m, text = _interval([higher[s] - lower[s] for s in seeds])
    if m["ci95"] is None:
        return None, text
    return m["mean"] - m["ci95"] > 0, text


def judge(arms: dict[str, Any], coldstart: dict[str, Any]) -> dict[str, Any]:
    """Every test of the six goals the runs in ``arms`` allow (``report.collect``'s output); ``coldstart``: the cold
    start's evaluations by K (``report.coldstart_summary``)."""
    tests: list[dict[str, Any]] = []
    arm = lambda name: arms.get(name, {})  # noqa: E731 - a missing arm gives empty figures: "not measured"

    # Goal 1, tool-neutral only: vanilla GRPO's retention at most 0.25 on every seed.
    r = retention(arm("vanilla_grpo_neutral"))
    tests.append(_test(1, "tool-neutral", "vanilla GRPO's retention <= 0.25 on every seed",
                       None if len(r) < 2 else all(v <= 0.25 for v in r.values()), _interval(list(r.values()))[1]))
    reported = retention(arm("vanilla_grpo"))  # under the released reward: reported beside, not a test
    for reward, sfx in REWARDS.items():
        # Goal 2: gating keeps the tool.
        gated, vanilla = retention(arm(f"gating_only{sfx}")), retention(arm(f"vanilla_grpo{sfx}"))
        level, level_text = _interval(list(gated.values()))
        above, diff_text = _paired(gated, vanilla)
        ok = None if above is None or level["ci95"] is None else (level["mean"] >= 0.5 and above)
        tests.append(_test(2, reward, "gating only's retention >= 0.5, and minus vanilla GRPO's (paired) above 0", ok,
                           f"gating only {level_text}; difference {diff_text}"))
        above, diff_text = _paired(retention(arm(f"para_grpo{sfx}")), retention(arm(f"ea_only{sfx}")))
        tests.append(_test(2, reward, "PARA-GRPO's retention minus EA only's (paired) above 0", above, diff_text))
        # Goal 3: gated policies crop on overview misses at K = 16 and 64.
        cells, ok = [], True
        for name in ("gating_only", "para_grpo"):
            for k in KS:
                m, text = _interval(list(held_out(arm(f"{name}{sfx}"), k, miss_crop_rate).values()))
                cells.append(f"{name} K={k}: {text}")
                ok = None if ok is None or m["ci95"] is None else ok and m["mean"] >= 0.8
        tests.append(_test(3, reward, "gating only and PARA-GRPO crop on >= 0.8 of overview misses at K = 16 and 64", ok,
                           "; ".join(cells)))
        # Goal 4: EA keeps the format.
        above, text = _paired(last_quarter(arm(f"para_grpo{sfx}"), "format_compliance"),
                              last_quarter(arm(f"vanilla_grpo{sfx}"), "format_compliance"))
        tests.append(_test(4, reward, "PARA-GRPO's last-quarter format compliance minus vanilla GRPO's (paired) above 0",
                           above, text))
        # Goal 5: no arm below the cold start at K = 16.
        base = (coldstart.get("16") or {}).get("accuracy")
        cells, ok = [], True
        for name in ("vanilla_grpo", "ea_only", "gating_only", "para_grpo"):
            m, text = _interval(list(held_out(arm(f"{name}{sfx}"), "16", lambda s: s.get("accuracy")).values()))
            cells.append(f"{name}: {text}")
            ok = None if ok is None or base is None or m["ci95"] is None else ok and m["mean"] + m["ci95"] >= base
        tests.append(_test(5, reward, "every arm's K = 16 held-out accuracy not below the cold start's (interval)", ok,
                           f"cold start {base if base is None else f'{base:.3f}'}; " + "; ".join(cells)))
        # Goal 6: the headline.
        above, text = _paired(held_out(arm(f"para_grpo{sfx}"), "64", lambda s: s.get("accuracy")),
                              held_out(arm(f"vanilla_grpo{sfx}"), "64", lambda s: s.get("accuracy")))
        tests.append(_test(6, reward, "PARA-GRPO's K = 64 held-out accuracy minus vanilla GRPO's (paired) above 0", above,
                           text))
    return {"tests": tests, "made": sum(t["passed"] is not None for t in tests), "count": len(tests),
            "vanilla_retention_released": _interval(list(reported.values()))[1]}  # fmt: skip


def to_markdown(result: dict[str, Any]) -> list[str]:
    lines = [f"## Issue 62's goals, set before the runs ({result['made']} of {result['count']} tests made)", "",
             "| goal | reward | test | verdict | figures |", "|---|---|---|---|---|"]  # fmt: skip
    for t in result["tests"]:
        lines.append(f"| {t['goal']} | {t['reward']} | {t['test']} | {t['verdict']} | {t['figures']} |")
    lines += ["", f"Vanilla GRPO's retention under the released reward (reported, not a test: a call pays there): "
              f"{result['vanilla_retention_released']}.", "",
              f"{result['count']} tests at the 5 % level: were no effect real, about {0.05 * result['count']:.1f} of them "
              "would come out \"met\" by chance. Each verdict counts with its figures.", ""]  # fmt: skip
    return lines
