"""The power of the powered design (docs/repro.md, "Powered runs: the design and its goals"), computed from the
pilots' committed figures before any of its runs:

    python scripts/power.py [--out results/repro/powered/power.json] [--markdown]

(a) Tool Prior Paradox and gating, tool-neutral reward, vanilla GRPO against gating only: the pilot is the
preregistered comparison's three RL seeds (``results/repro/repro_cpu_prior/report.json``, its sound reading): the
paired difference of probe retention at K = 16 (gating minus vanilla) and each arm's collapsed runs.
(b) Sequential against parallel on ``two_colours``: the pilot is the first trained comparison's three seed pairs
(``results/dispatch_trained_two_colours/comparison.json``): the paired difference of held-out accuracy of the
selected checkpoints.

For each: the pilot's mean difference and its standard deviation over seeds, the pairs a one-sided test at 2.5 %
needs for 80 % power at the pilot's effect and at the paper's, and the smallest difference the design's pairs
resolve (``paravt.evaluation.stats``). Nothing here reads a run of the powered design itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the package beside it
    sys.path.insert(0, str(ROOT))

from paravt.evaluation.stats import fisher_power, minimum_detectable, pairs_for_power  # noqa: E402 - after the path fix

OUT = ROOT / "results/repro/powered/power.json"
PILOT_A = ROOT / "results/repro/repro_cpu_prior/report.json"
PILOT_B = ROOT / "results/dispatch_trained_two_colours/comparison.json"
PAIRS = 10
"""Pairs (RL seeds per arm, seed pairs per side) the design runs: new seeds 3-12, the pilots' 0-2 kept apart."""
PAPER_DISPATCH = 0.023
"""The paper's largest parallel-over-sequential gain, 2.3 points of accuracy."""
PAPER_RETENTION = 0.536
"""The paper's gap in tool-use retention between gating and vanilla GRPO (docs/repro.md)."""


def _paired(a: dict[str, float], b: dict[str, float]) -> list[float]:
    return [a[s] - b[s] for s in sorted(set(a) & set(b))]


def _power_row(diffs: list[float], paper: float) -> dict[str, Any]:
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    return {"pilot_diffs": diffs, "pilot_mean": mean, "pilot_sd": sd,
            "pairs_for_80pc_at_pilot_effect": pairs_for_power(abs(mean), sd) if mean else None,
            "pairs_for_80pc_at_paper_effect": pairs_for_power(paper, sd), "paper_effect": paper,
            "design_pairs": PAIRS, "minimum_detectable_at_design": minimum_detectable(PAIRS, sd)}  # fmt: skip


def compute() -> dict[str, Any]:
    sound = json.loads(PILOT_A.read_text())["goals"]["sound"]
    gating, vanilla = sound["gating_only_neutral"], sound["vanilla_grpo_neutral"]
    a = _power_row(_paired(gating["probe_retention_k16"]["seeds"], vanilla["probe_retention_k16"]["seeds"]), PAPER_RETENTION)
    rate_v = vanilla["collapsed"]["count"] / vanilla["collapsed"]["n"]
    rate_g = gating["collapsed"]["count"] / gating["collapsed"]["n"]
    a["collapse"] = {"pilot_vanilla": rate_v, "pilot_gating": rate_g,
                     "fisher_power_at_design": {f"{p:.2f}": fisher_power(p, max(rate_g, 0.02), PAIRS) for p in (rate_v, 0.5)}}  # fmt: skip
    out: dict[str, Any] = {"a_paradox_and_gating": a}
    if PILOT_B.is_file():
        pilot = json.loads(PILOT_B.read_text())
        diffs = [row["parallel"]["accuracy"] - row["sequential"]["accuracy"] for row in pilot["per_seed"]]
        out["b_sequential_against_parallel"] = {**_power_row(diffs, PAPER_DISPATCH), "pilot_disagree": pilot["disagree"],
                                                "pilot_pairs": pilot["smallest_resolvable"]["pairs"]}  # fmt: skip
    else:
        out["missing"] = [str(PILOT_B.relative_to(ROOT))]
    return out


def to_markdown(result: dict[str, Any]) -> str:
    lines = ["| design | pilot difference (per seed) | pilot sd | pairs for 80 % power: pilot's effect / paper's | "
             f"smallest difference {PAIRS} pairs resolve |", "|---|---|---|---|---|"]  # fmt: skip
    names = {"a_paradox_and_gating": "(a) gating − vanilla, probe retention at K = 16",
             "b_sequential_against_parallel": "(b) parallel − sequential, held-out accuracy"}
    for key, label in names.items():
        r = result.get(key)
        if not r:
            continue
        per = ", ".join(f"{d:+.3f}" for d in r["pilot_diffs"])
        lines.append(f"| {label} | {r['pilot_mean']:+.3f} ({per}) | {r['pilot_sd']:.3f} | "
                     f"{r['pairs_for_80pc_at_pilot_effect']} / {r['pairs_for_80pc_at_paper_effect']} (paper: "
                     f"{r['paper_effect']}) | {r['minimum_detectable_at_design']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--markdown", action="store_true", help="print the table")
    args = p.parse_args(argv)
    result = compute()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown:
        print(to_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
