"""The powered design's goals, written before its runs (docs/repro.md, "Powered runs: the design and its goals"),
judged on the runs' committed files:

    python -m paravt.experiments.powered_goals --a REPORT_JSON --b COMPARISON_JSON [--b-turns COMPARISON_JSON]

(a) Tool Prior Paradox and gating, tool-neutral reward: vanilla GRPO against gating only, RL seeds 3-12 from the
committed tool-prior cold start, each final policy evaluated greedily on the same 200 held-out videos at K = 16
(``paravt repro``'s ``report.json``, its sound reading). (b) Sequential against parallel on ``two_colours``: seed
pairs 3-12, each side trained for its own protocol at crop budget 8 (``paravt.experiments.dispatch_trained``'s
``comparison.json`` of the selected checkpoints; ``--b-turns``: the same at a turn budget of 3).

Every test is one of: a one-sided test of a paired difference at 2.5 % (the lower end of the two-sided 95 %
Student t interval above 0), Fisher's exact test one-sided at 2.5 %, or a count against a bound fixed here. The
pilots' seeds (0-2) are not part of any test: they set the power (``scripts/power.py``). A goal whose runs are
missing gives no verdict and says so; nothing is tuned to the results.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from paravt.evaluation.stats import clopper_pearson, fisher_one_sided, mean_ci

SEEDS = tuple(range(3, 13))
"""The design's RL seeds (and seed pairs): ten, apart from the pilots' 0-2."""
LEVEL = 0.025
"""Every test is one-sided at 2.5 %."""
MOST_GATING_COLLAPSES = 1
"""Goal A3: gating only collapses on at most this many of its ten runs (the exact 95 % interval of 1 of 10 ends at
0.445, below one half)."""
MIN_DISAGREE = 0.10
"""Goal B3: the task is off ceiling when at least this share of the (seed, video) pairs score differently."""


def _verdict(passed: bool | None) -> str:
    return "no verdict (runs missing)" if passed is None else ("met" if passed else "NOT met")


def _test(goal: str, what: str, passed: bool | None, figures: str, null_met: float) -> dict[str, Any]:
    return {"goal": goal, "test": what, "passed": passed, "verdict": _verdict(passed), "figures": figures,
            "null_met": null_met}  # fmt: skip


def _paired_above(diffs: list[float]) -> tuple[bool | None, str]:
    if len(diffs) < len(SEEDS):
        return None, f"{len(diffs)} of {len(SEEDS)} pairs"
    m = mean_ci(diffs)
    return m["mean"] - m["ci95"] > 0, f"{m['mean']:+.3f} ± {m['ci95']:.3f} ({', '.join(f'{d:+.3f}' for d in diffs)})"


def judge_a(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Goals A1-A3 from ``paravt repro``'s ``report.json`` (its ``goals.sound`` per-seed figures)."""
    sound = (report.get("goals") or {}).get("sound") or {}
    gating, vanilla = sound.get("gating_only_neutral", {}), sound.get("vanilla_grpo_neutral", {})

    def seeds(row: dict[str, Any], key: str) -> dict[int, float]:
        return {int(s): v for s, v in ((row.get(key) or {}).get("seeds") or {}).items() if int(s) in SEEDS}

    g, v = seeds(gating, "probe_retention_k16"), seeds(vanilla, "probe_retention_k16")
    passed, figures = _paired_above([g[s] - v[s] for s in SEEDS if s in g and s in v])
    tests = [_test("A1", "gating only's probe retention at K = 16 minus vanilla GRPO's, paired by seed, above 0",
                   passed, figures, LEVEL)]
    rates = {name: seeds(row, "miss_crop_rate_k16") for name, row in (("vanilla", vanilla), ("gating", gating))}
    if all(len(r) == len(SEEDS) for r in rates.values()):
        counts = {name: sum(1 for x in r.values() if x < 0.1) for name, r in rates.items()}
        p = fisher_one_sided(counts["vanilla"], len(SEEDS), counts["gating"], len(SEEDS))
        lo, hi = clopper_pearson(counts["gating"], len(SEEDS))
        tests += [_test("A2", "vanilla GRPO collapses on more runs than gating only (Fisher's exact, one-sided)",
                        p <= LEVEL, f"vanilla {counts['vanilla']} of 10, gating {counts['gating']} of 10; p = {p:.4f}", 0.0),
                  _test("A3", f"gating only collapses on at most {MOST_GATING_COLLAPSES} of 10 runs",
                        counts["gating"] <= MOST_GATING_COLLAPSES,
                        f"{counts['gating']} of 10 [{lo:.2f}, {hi:.2f}]", 1.0)]  # fmt: skip
    else:
        missing = ", ".join(f"{n}: {len(r)} of 10 runs evaluated" for n, r in rates.items())
        tests += [_test("A2", "vanilla GRPO collapses on more runs than gating only (Fisher's exact, one-sided)", None,
                        missing, 0.0),
                  _test("A3", f"gating only collapses on at most {MOST_GATING_COLLAPSES} of 10 runs", None, missing, 1.0)]
    return tests


def _b_diffs(comparison: dict[str, Any]) -> list[float]:
    return [row["parallel"]["accuracy"] - row["sequential"]["accuracy"] for row in comparison.get("per_seed", [])
            if row["seed"] in SEEDS]  # fmt: skip


def judge_b(comparison: dict[str, Any] | None, at_turns: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Goals B1-B3 from ``dispatch_trained``'s comparison of the selected checkpoints (and at a turn budget of 3)."""
    comparison = comparison or {}
    diffs = _b_diffs(comparison)
    if len(diffs) == len(SEEDS):
        m = mean_ci(diffs)
        lo, hi = m["mean"] - m["ci95"], m["mean"] + m["ci95"]
        b1 = (lo > 0, f"{m['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({', '.join(f'{d:+.3f}' for d in diffs)}); "
                      f"{'sequential above' if hi < 0 else 'parallel above' if lo > 0 else 'not resolved'}")
    else:
        b1 = (None, f"{len(diffs)} of {len(SEEDS)} pairs")
    tests = [_test("B1", "parallel minus sequential held-out accuracy (own protocols, crop budget 8), paired by seed, "
                   "above 0", *b1, LEVEL)]  # fmt: skip
    passed, figures = _paired_above(_b_diffs(at_turns or {}))
    tests.append(_test("B2", "the same at a turn budget of 3 (two call turns), above 0", passed, figures, LEVEL))
    pairs = (comparison.get("smallest_resolvable") or {}).get("pairs")
    seeds_ok = sorted(comparison.get("seeds", [])) == list(SEEDS)
    share = comparison.get("disagree", 0) / pairs if pairs else None
    tests.append(_test("B3", f"at least {MIN_DISAGREE:.0%} of the (seed, video) pairs score differently (off ceiling)",
                       None if not seeds_ok or share is None else share >= MIN_DISAGREE,
                       "runs missing" if not seeds_ok or share is None else
                       f"{comparison['disagree']} of {pairs} ({share:.1%})", 1.0))  # a check of the testbed: two policies
    # trained apart disagree on some videos whichever protocol is better, so a world with no effect meets it too
    return tests


def judge(report_a: dict[str, Any] | None, comparison_b: dict[str, Any] | None,
          comparison_b_turns: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    tests = [*judge_a(report_a or {}), *judge_b(comparison_b, comparison_b_turns)]
    return {"tests": tests, "made": sum(t["passed"] is not None for t in tests), "count": len(tests),
            "null_met_if_nothing_differs": sum(t["null_met"] for t in tests)}  # fmt: skip


def to_markdown(result: dict[str, Any]) -> str:
    lines = [f"The powered design's goals ({result['made']} of {result['count']} tests made)", "",
             "| goal | test | verdict | figures |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {t['goal']} | {t['test']} | {t['verdict']} | {t['figures']} |" for t in result["tests"]]
    lines += ["", f"Were nothing to differ (RL changing nothing, the two protocols equal), about "
              f"{result['null_met_if_nothing_differs']:.2f} of the {result['count']} tests would be met: A3 by the cold "
              "start's own behaviour, B3 by what the task already is (a check that the testbed can decide, not of the claim), "
              "each one-sided difference test at 2.5 %.", ""]  # fmt: skip
    return "\n".join(lines)


def _read(path: Path | None) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path is not None and path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", type=Path, default=None, help="design (a)'s paravt repro report.json")
    p.add_argument("--b", type=Path, default=None, help="design (b)'s dispatch_trained comparison.json (eval_selected)")
    p.add_argument("--b-turns", type=Path, default=None, help="design (b)'s comparison at a turn budget of 3")
    p.add_argument("--out", type=Path, default=None, help="write the verdicts here as JSON")
    args = p.parse_args(argv)
    result = judge(_read(args.a), _read(args.b), _read(args.b_turns))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(to_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
