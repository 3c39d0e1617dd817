"""The preregistered comparison's goals, set before its runs (docs/repro.md, "The claims tested so that they can fail"), judged on
the runs' files: one verdict per test, with its figures, and how many tests were made.

Each goal reads what ``report.collect`` gathers per arm and seed (κ per step, format compliance, held-out
evaluations by dispatch and K) and the cold start's evaluations. Retention is the mean κ of the last quarter of
the steps over the mean κ of the first ones (``report.EARLY_STEPS``: steps 1-10 of 150). Intervals are 95 %,
Student's t over seeds, paired by seed where two arms are compared; a test with fewer than two seeds gives no
verdict. Nothing here is tuned to the results: the thresholds are the ones written before the runs.

What the tests are, stated (``chance``): a "(paired) above 0" test is met when the lower end of a two-sided 95 %
interval is above 0, a one-sided test at 2.5 %; a threshold test is met or not by where the figure lies, so a run
in which RL changed nothing meets it whenever the cold start already does (goals 3 and 5). Each test carries
``null_met``, how likely it is met were RL to change nothing, and the report sums them.

Beside the preregistered verdicts, which stand as written, ``sound_statistics`` reads the same runs with measures
that do not have their faults: retention on a fixed probe (the final policy's held-out crops per episode over the
cold start's on the same videos, one greedy evaluation: no noisy denominator of ten training steps), a count of
collapsed runs with its exact binomial interval, and intervals over seeds that stay within [0, 1] for
proportions (percentile bootstrap). It is exploratory: no goal was set on it before the runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paravt.evaluation.stats import bootstrap_ci, clopper_pearson, mean_ci

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


ONE_SIDED = 0.025
"""The level of a "(paired) above 0" test: the lower end of a two-sided 95 % interval above 0."""


def _test(goal: str, reward: str, what: str, passed: bool | None, figures: str, null_met: float | None) -> dict[str, Any]:
    """One test; ``null_met``: the chance it is met were RL to change nothing (None: the cold start's figure it
    rests on was not measured)."""
    verdict = "no verdict (fewer than 2 seeds, or not measured)" if passed is None else (
        "met" if passed else "NOT met")  # fmt: skip
    return {"goal": goal, "reward": reward, "test": what, "verdict": verdict, "passed": passed, "figures": figures,
            "null_met": null_met}  # fmt: skip


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
                       None if len(r) < 2 else all(v <= 0.25 for v in r.values()), _interval(list(r.values()))[1],
                       0.0))  # unchanged by RL, retention stays near 1
    reported = retention(arm("vanilla_grpo"))  # under the released reward: reported beside, not a test
    for reward, sfx in REWARDS.items():
        # Goal 2: gating keeps the tool.
        gated, vanilla = retention(arm(f"gating_only{sfx}")), retention(arm(f"vanilla_grpo{sfx}"))
        level, level_text = _interval(list(gated.values()))
        above, diff_text = _paired(gated, vanilla)
        ok = None if above is None or level["ci95"] is None else (level["mean"] >= 0.5 and above)
        tests.append(_test(2, reward, "gating only's retention >= 0.5, and minus vanilla GRPO's (paired) above 0", ok,
                           f"gating only {level_text}; difference {diff_text}", ONE_SIDED))
        above, diff_text = _paired(retention(arm(f"para_grpo{sfx}")), retention(arm(f"ea_only{sfx}")))
        tests.append(_test(2, reward, "PARA-GRPO's retention minus EA only's (paired) above 0", above, diff_text,
                           ONE_SIDED))
        # Goal 3: gated policies crop on overview misses at K = 16 and 64.
        cells, ok = [], True
        for name in ("gating_only", "para_grpo"):
            for k in KS:
                m, text = _interval(list(held_out(arm(f"{name}{sfx}"), k, miss_crop_rate).values()))
                cells.append(f"{name} K={k}: {text}")
                ok = None if ok is None or m["ci95"] is None else ok and m["mean"] >= 0.8
        base_rates = [miss_crop_rate(coldstart[k]) if k in coldstart else None for k in KS]
        tests.append(_test(3, reward, "gating only and PARA-GRPO crop on >= 0.8 of overview misses at K = 16 and 64", ok,
                           "; ".join(cells), None if None in base_rates else float(all(r >= 0.8 for r in base_rates))))
        # Goal 4: EA keeps the format.
        above, text = _paired(last_quarter(arm(f"para_grpo{sfx}"), "format_compliance"),
                              last_quarter(arm(f"vanilla_grpo{sfx}"), "format_compliance"))
        tests.append(_test(4, reward, "PARA-GRPO's last-quarter format compliance minus vanilla GRPO's (paired) above 0",
                           above, text, ONE_SIDED))
        # Goal 5: no arm below the cold start at K = 16.
        base = (coldstart.get("16") or {}).get("accuracy")
        cells, ok = [], True
        for name in ("vanilla_grpo", "ea_only", "gating_only", "para_grpo"):
            m, text = _interval(list(held_out(arm(f"{name}{sfx}"), "16", lambda s: s.get("accuracy")).values()))
            cells.append(f"{name}: {text}")
            ok = None if ok is None or base is None or m["ci95"] is None else ok and m["mean"] + m["ci95"] >= base
        tests.append(_test(5, reward, "every arm's K = 16 held-out accuracy not below the cold start's (interval)", ok,
                           f"cold start {base if base is None else f'{base:.3f}'}; " + "; ".join(cells),
                           1.0))  # arms equal to the cold start reach its figure
        # Goal 6: the headline.
        above, text = _paired(held_out(arm(f"para_grpo{sfx}"), "64", lambda s: s.get("accuracy")),
                              held_out(arm(f"vanilla_grpo{sfx}"), "64", lambda s: s.get("accuracy")))
        tests.append(_test(6, reward, "PARA-GRPO's K = 64 held-out accuracy minus vanilla GRPO's (paired) above 0", above,
                           text, ONE_SIDED))
    return {"tests": tests, "made": sum(t["passed"] is not None for t in tests), "count": len(tests),
            "vanilla_retention_released": _interval(list(reported.values()))[1], "chance": chance(tests),
            "sound": sound_statistics(arms, coldstart)}  # fmt: skip


def chance(tests: list[dict[str, Any]]) -> dict[str, Any]:
    """How many of ``tests`` would be met by chance: were RL to change nothing (each test's ``null_met`` summed;
    the threshold tests the cold start already meets count whole), and were only the arms' differences zero (the
    one-sided tests alone, each at 2.5 %)."""
    known = [t["null_met"] for t in tests if t["null_met"] is not None]
    one_sided = sum(1 for t in tests if t["null_met"] == ONE_SIDED)
    return {"do_nothing": sum(known), "unknown": len(tests) - len(known), "one_sided_tests": one_sided,
            "one_sided_level": ONE_SIDED, "no_difference": one_sided * ONE_SIDED,
            "met_by_the_cold_start": [f"goal {t['goal']} ({t['reward']})" for t in tests if t["null_met"] == 1.0]}  # fmt: skip


COLLAPSED_BELOW = 0.1
"""A run has collapsed when its final policy crops on fewer than this share of the held-out episodes whose overview
missed the event (K = 16): it no longer calls the tool where it must."""


def _boot(values: dict[int, float]) -> dict[str, Any]:
    vals = [values[s] for s in sorted(values)]
    if not vals:
        return {"mean": None, "low": None, "high": None, "seeds": {}}
    return {**bootstrap_ci(vals), "seeds": {s: values[s] for s in sorted(values)}}


def sound_statistics(arms: dict[str, Any], coldstart: dict[str, Any]) -> dict[str, Any]:
    """Per arm: probe retention at K = 16 and 64 (held-out crops per episode over the cold start's), the collapsed
    runs (``COLLAPSED_BELOW``) with their Clopper-Pearson interval, and the proportions of goals 3 and 5 with
    bootstrap intervals over seeds."""
    out: dict[str, Any] = {}
    for name, a in sorted(arms.items()):
        row: dict[str, Any] = {}
        for k in KS:
            base = (coldstart.get(k) or {}).get("avg_tool_calls")
            if base:
                row[f"probe_retention_k{k}"] = _boot(held_out(a, k, lambda s, b=base: s.get("avg_tool_calls", 0.0) / b))
            row[f"miss_crop_rate_k{k}"] = _boot(held_out(a, k, miss_crop_rate))
            row[f"accuracy_k{k}"] = _boot(held_out(a, k, lambda s: s.get("accuracy")))
        rates = held_out(a, "16", miss_crop_rate)
        if rates:
            collapsed = sum(1 for v in rates.values() if v < COLLAPSED_BELOW)
            low, high = clopper_pearson(collapsed, len(rates))
            row["collapsed"] = {"count": collapsed, "n": len(rates), "low": low, "high": high}
        out[name] = row
    return out


def to_markdown(result: dict[str, Any]) -> list[str]:
    lines = [f"## The comparison's goals, set before the runs ({result['made']} of {result['count']} tests made)", "",
             "| goal | reward | test | verdict | figures |", "|---|---|---|---|---|"]  # fmt: skip
    for t in result["tests"]:
        lines.append(f"| {t['goal']} | {t['reward']} | {t['test']} | {t['verdict']} | {t['figures']} |")
    lines += ["", f"Vanilla GRPO's retention under the released reward (reported, not a test: a call pays there): "
              f"{result['vanilla_retention_released']}.", "",
              *chance_lines(result), ""]  # fmt: skip
    if result.get("sound"):
        lines += sound_lines(result["sound"])
    return lines


def chance_lines(result: dict[str, Any]) -> list[str]:
    c = result.get("chance")
    if not c:
        return [f"{result['count']} tests."]
    by_cold_start = ", ".join(c["met_by_the_cold_start"]) or "none"
    unknown = f" ({c['unknown']} rest on a cold-start figure not measured)" if c["unknown"] else ""
    return [f"What chance would give: {c['one_sided_tests']} of the {result['count']} tests are one-sided tests of a "
            f"difference at {c['one_sided_level']:.1%} (the lower end of a two-sided 95 % interval above 0); were the "
            f"arms' differences all zero, about {c['no_difference']:.2f} of them would be met. The other tests compare "
            f"a figure with a threshold: were RL to change nothing at all, the final policies would behave as the cold "
            f"start does, and the tests it already meets would be met ({by_cold_start}): about {c['do_nothing']:.1f} "
            f"of the {result['count']} in all{unknown}. A test of \"every seed\" (goal 1) gets harder to meet the more "
            "seeds are run."]  # fmt: skip


def _cell(b: dict[str, Any] | None, digits: int = 3) -> str:
    if not b or b.get("mean") is None:
        return "-"
    if b.get("low") is None:
        return f"{b['mean']:.{digits}f}"
    return f"{b['mean']:.{digits}f} [{b['low']:.{digits}f}, {b['high']:.{digits}f}]"


def sound_lines(sound: dict[str, Any]) -> list[str]:
    lines = ["## The same runs, read with sound statistics (exploratory: no goal was set on these)", "",
             "Probe retention: the final policy's held-out crops per episode over the cold start's, on the same videos "
             "(one greedy evaluation, a fixed denominator). Collapsed: runs whose final policy crops on fewer than "
             f"{COLLAPSED_BELOW:.0%} of the held-out overview misses at K = 16, with the exact binomial interval. "
             "Means over seeds with percentile-bootstrap 95 % intervals in brackets (they stay within [0, 1] for "
             "proportions).", "",
             "| arm | probe retention K = 16 | probe retention K = 64 | crops on misses K = 16 | K = 64 | accuracy K = 16 "
             "| K = 64 | collapsed |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in sound.items():
        c = row.get("collapsed")
        collapsed = "-" if not c else f"{c['count']} of {c['n']} [{c['low']:.2f}, {c['high']:.2f}]"
        lines.append(f"| {name} | {_cell(row.get('probe_retention_k16'), 2)} | {_cell(row.get('probe_retention_k64'), 2)} | "
                     f"{_cell(row.get('miss_crop_rate_k16'))} | {_cell(row.get('miss_crop_rate_k64'))} | "
                     f"{_cell(row.get('accuracy_k16'))} | {_cell(row.get('accuracy_k64'))} | {collapsed} |")  # fmt: skip
    return [*lines, ""]
