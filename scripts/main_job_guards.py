"""The preregistered comparison's two tests against the main job's late collapse, judged from the committed runs against the goals
docs/training.md wrote before them ("Late format collapse, and a guard tested"):

    python scripts/main_job_guards.py [--out results/tiny_cpu/pinned_linear_patch_embed/guards.json]

The runs, per seed S of the four (``results/tiny_cpu/pinned_linear_patch_embed/``): ``seedS`` (the release's
scoring, stopped and evaluated at steps 50-80), ``guard_penalty/seedS`` (the same RL with
``para.broken_call_penalty=0.1``, stops 60 and 80) and ``selection/seedS`` (the same RL as ``seedS``, with the
checkpoint chosen on a validation split: ``select.every=10 select.after=30 data.validation_n=40``, stops 60 and 80).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "results/tiny_cpu/pinned_linear_patch_embed"
SEEDS = ("0", "1", "2", "3")
FORMAT_STEPS = (41, 80)
"""Steps over which the guard's goal (iii) compares sampled format compliance."""


def _accuracy(path: Path) -> float:
    return float(json.loads(path.read_text())["accuracy"])


def _format(run: Path) -> float:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    values = [r["format_compliance"] for r in rows if FORMAT_STEPS[0] <= r["step"] <= FORMAT_STEPS[1]]
    if len(values) != FORMAT_STEPS[1] - FORMAT_STEPS[0] + 1:
        raise ValueError(f"{run}/metrics.jsonl holds {len(values)} of the steps {FORMAT_STEPS[0]}-{FORMAT_STEPS[1]}")
    return statistics.fmean(values)


def judge(root: Path = ROOT) -> dict:
    base, penalty, select = {}, {}, {}
    for s in SEEDS:
        b, p, q = root / f"seed{s}", root / "guard_penalty" / f"seed{s}", root / "selection" / f"seed{s}"
        base[s] = {"60": _accuracy(b / "stops/60/eval/summary.json"), "80": _accuracy(b / "stops/80/eval/summary.json"),
                   "format_41_80": _format(b)}  # fmt: skip
        if (p / "stops/80/eval/summary.json").is_file():
            penalty[s] = {"60": _accuracy(p / "stops/60/eval/summary.json"), "80": _accuracy(p / "stops/80/eval/summary.json"),
                          "format_41_80": _format(p)}  # fmt: skip
        if (q / "stops/80/eval_selected/summary.json").is_file():
            select[s] = {}
            for t in ("60", "80"):
                best = json.loads((q / f"stops/{t}/best.json").read_text())
                select[s][t] = {"accuracy": _accuracy(q / f"stops/{t}/eval_selected/summary.json"), "step": best["step"],
                                "validation": best["accuracy"]}  # fmt: skip
    out: dict = {"base": base, "penalty": penalty, "selection": select}
    if len(penalty) == len(SEEDS):
        diff60 = [penalty[s]["60"] - base[s]["60"] for s in SEEDS]
        loss = [penalty[s]["60"] - penalty[s]["80"] for s in SEEDS]
        fmt = [penalty[s]["format_41_80"] - base[s]["format_41_80"] for s in SEEDS]
        tests = {"(i) step-60 accuracy, penalty - none, paired mean >= 0": (statistics.fmean(diff60), statistics.fmean(diff60) >= 0),
                 "(ii) no penalty seed loses > 0.1 from step 60 to 80": (max(loss), max(loss) <= 0.1),
                 "(iii) format compliance steps 41-80, penalty - none, paired mean > 0": (statistics.fmean(fmt), statistics.fmean(fmt) > 0)}  # fmt: skip
        out["guard"] = {"tests": {k: {"value": v, "passed": ok} for k, (v, ok) in tests.items()},
                        "adopted": all(ok for _, ok in tests.values())}  # fmt: skip
    if len(select) == len(SEEDS):
        moves = [abs(select[s]["80"]["accuracy"] - select[s]["60"]["accuracy"]) for s in SEEDS]
        gain = [select[s]["60"]["accuracy"] - base[s]["60"] for s in SEEDS]
        tests = {"(a) on every seed, selected held-out accuracy at stops 60 and 80 differs by <= 0.05": (max(moves), max(moves) <= 0.05 + 1e-9),
                 "(b) selected at stop 60 - last step at stop 60, paired mean >= 0": (statistics.fmean(gain), statistics.fmean(gain) >= 0)}  # fmt: skip
        out["select"] = {"tests": {k: {"value": v, "passed": ok} for k, (v, ok) in tests.items()},
                         "adopted": all(ok for _, ok in tests.values())}  # fmt: skip
    return out


def to_markdown(data: dict) -> str:
    lines = ["| seed | last step, stop 60 | stop 80 | format 41-80 | penalty, stop 60 | stop 80 | format 41-80 | "
             "selected at stop 60 (step) | at stop 80 (step) |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for s in SEEDS:
        b, p, q = data["base"][s], data["penalty"].get(s), data["selection"].get(s)
        pc = [f"{p['60']:.3f}", f"{p['80']:.3f}", f"{p['format_41_80']:.2f}"] if p else ["-"] * 3
        qc = [f"{q[t]['accuracy']:.3f} ({q[t]['step']})" for t in ("60", "80")] if q else ["-"] * 2
        lines.append(f"| {s} | {b['60']:.3f} | {b['80']:.3f} | {b['format_41_80']:.2f} | " + " | ".join(pc + qc) + " |")
    for key in ("guard", "select"):
        if key in data:
            lines.append("")
            for name, t in data[key]["tests"].items():
                lines.append(f"- {name}: {t['value']:+.3f}, {'passed' if t['passed'] else 'failed'}")
            lines.append(f"- {'the penalty' if key == 'guard' else 'the selection'}: {'adopted' if data[key]['adopted'] else 'not adopted'}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="also write the figures and verdicts as JSON here")
    args = p.parse_args(argv)
    data = judge()
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(to_markdown(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
