"""The preregistered comparison's spread over cold starts: the same two arms (vanilla GRPO and gating only, tool-neutral reward, RL seed
0) trained from the cold starts of several pipeline seeds, set beside the spread over RL seeds from one cold start
(docs/repro.md, "The spread over cold starts"):

    python scripts/coldstart_spread.py [--out results/repro/coldstart_spread.json] [--markdown]

Each pipeline seed's ``paravt repro`` directory (``DIRS``) holds its cold start's probe gate (``coldstart/gate.json``)
and the ``report.json`` that ``paravt repro --report-only`` wrote from its runs; nothing is recomputed from the runs
here, so this script and the reports cannot disagree. A pipeline seed whose directory or arm runs are missing is
left out and named in the output (``missing``), never filled in.
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

from paravt.experiments.repro.gate import read_gate  # noqa: E402 - after the path fix above
from paravt.experiments.repro.goals import held_out, last_quarter, miss_crop_rate, retention  # noqa: E402

REPRO = ROOT / "results/repro"
DIRS = {0: REPRO / "repro_cpu_prior_seed0", 1: REPRO / "repro_cpu_prior", 2: REPRO / "repro_cpu_prior_seed2"}
"""The cold starts, by pipeline seed: seed 1's carries the comparison (it passed the probe gate); seed 0's failed the
habit check, seed 2's the crop check (both arms' runs trained with ``--no-gate``, read knowing which failed)."""
COMPARISON = 1
"""The pipeline seed whose cold start carries the comparison: its RL seeds 0-2 give the spread over RL seeds."""
ARMS = ("vanilla_grpo_neutral", "gating_only_neutral")
RL_SEED = "0"
OUT = REPRO / "coldstart_spread.json"

MEASURES = {
    "retention": "κ retention (last quarter / steps 1-10)",
    "compliance_last": "format compliance, last quarter",
    "accuracy_16": "held-out accuracy, K = 16",
    "accuracy_64": "held-out accuracy, K = 64",
    "miss_crop_16": "crop rate on overview misses, K = 16",
    "miss_crop_64": "crop rate on overview misses, K = 64",
}


def arm_figures(arm: dict[str, Any], seed: str) -> dict[str, float | None] | None:
    """One arm run's six measures, read from its repro's ``report.json`` entry with the goals' own readers; None when
    that seed did not finish."""
    if seed not in {str(s) for s in arm.get("seeds", [])}:
        return None
    accuracy = lambda summary: summary.get("accuracy")  # noqa: E731
    return {
        "retention": retention(arm).get(seed),
        "compliance_last": last_quarter(arm, "format_compliance").get(seed),
        "accuracy_16": held_out(arm, "16", accuracy).get(seed),
        "accuracy_64": held_out(arm, "64", accuracy).get(seed),
        "miss_crop_16": held_out(arm, "16", miss_crop_rate).get(seed),
        "miss_crop_64": held_out(arm, "64", miss_crop_rate).get(seed),
    }


def _spread(values: list[float | None]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0}
    return {"n": len(vals), "min": min(vals), "max": max(vals), "range": max(vals) - min(vals),
            "sd": statistics.stdev(vals) if len(vals) > 1 else None}  # fmt: skip


def cold_start(directory: Path, report: dict[str, Any]) -> dict[str, Any]:
    """The cold start's gate and held-out figures, and each of ``ARMS``' RL seed ``RL_SEED`` figures (``report``: the
    directory's ``report.json``)."""
    gate = read_gate(directory / "coldstart/gate.json")
    habit = next(c for c in gate["checks"] if c["name"] == "calls by habit")
    base = report.get("coldstart", {})
    return {
        "dir": directory.relative_to(ROOT).as_posix(),
        "gate_passed": gate["passed"],
        "failed_checks": [c["name"] for c in gate["checks"] if not c["passed"]],
        "habit": habit["value"],
        "coldstart": {k: (base.get(k) or {}).get("accuracy") for k in ("16", "64")},
        "coldstart_miss_crop": {k: miss_crop_rate(base[k]) if base.get(k) else None for k in ("16", "64")},
        "arms": {a: arm_figures(report["arms"].get(a, {}), RL_SEED) for a in ARMS},
    }


def judge(dirs: dict[int, Path] = DIRS) -> dict[str, Any]:
    starts, reports, missing = {}, {}, []
    for seed, directory in dirs.items():
        if not (directory / "report.json").is_file() or not (directory / "coldstart/gate.json").is_file():
            missing.append(f"pipeline seed {seed}: no report.json or gate.json in {directory.relative_to(ROOT)}")
            continue
        reports[seed] = json.loads((directory / "report.json").read_text())
        starts[str(seed)] = cold_start(directory, reports[seed])
        missing += [f"pipeline seed {seed}: {a} RL seed {RL_SEED} not finished" for a, f in starts[str(seed)]["arms"].items()
                    if f is None]  # fmt: skip
    spread: dict[str, Any] = {}
    comparison = reports[COMPARISON]["arms"] if COMPARISON in reports else {}
    for arm in ARMS:
        rl_seeds = [arm_figures(comparison.get(arm, {}), str(s)) for s in comparison.get(arm, {}).get("seeds", [])]
        spread[arm] = {
            m: {"over_cold_starts": _spread([(s["arms"][arm] or {}).get(m) for s in starts.values()]),
                "over_rl_seeds": _spread([(f or {}).get(m) for f in rl_seeds])}
            for m in MEASURES
        }  # fmt: skip
    spread["coldstart"] = {f"accuracy_{k}": _spread([s["coldstart"][k] for s in starts.values()]) for k in ("16", "64")}
    spread["coldstart"]["habit"] = _spread([s["habit"] for s in starts.values()])
    return {"arms": list(ARMS), "rl_seed": int(RL_SEED), "comparison_seed": COMPARISON, "cold_starts": starts,
            "spread": spread, "missing": missing}  # fmt: skip


def _cell(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def to_markdown(result: dict[str, Any]) -> str:
    starts = result["cold_starts"]
    lines = ["| pipeline seed | gate | habit | cold start K = 16 / 64 | arm | " + " | ".join(MEASURES.values()) + " |",
             "|---" * (5 + len(MEASURES)) + "|"]  # fmt: skip
    for seed, s in starts.items():
        for arm in result["arms"]:
            f = s["arms"][arm] or {}
            gate = "passed" if s["gate_passed"] else "failed: " + ", ".join(s["failed_checks"])
            lines.append(f"| {seed} | {gate} | {s['habit']:.3f} | "
                         f"{_cell(s['coldstart']['16'])} / {_cell(s['coldstart']['64'])} | {arm} | "
                         + " | ".join(_cell(f.get(m)) for m in MEASURES) + " |")  # fmt: skip
    lines += ["", "| arm | measure | range over cold starts (n) | range over RL seeds 0-2 of seed "
              f"{result['comparison_seed']}'s cold start (n) |", "|---|---|---|---|"]  # fmt: skip
    for arm in result["arms"]:
        for m, label in MEASURES.items():
            a, b = result["spread"][arm][m]["over_cold_starts"], result["spread"][arm][m]["over_rl_seeds"]
            show = lambda x: "-" if not x["n"] else f"{x['min']:.3f}-{x['max']:.3f} ({x['n']})"  # noqa: E731
            lines.append(f"| {arm} | {label} | {show(a)} | {show(b)} |")
    if result["missing"]:
        lines += ["", "Missing: " + "; ".join(result["missing"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT, help="where to write the JSON (default: %(default)s)")
    p.add_argument("--markdown", action="store_true", help="print the tables as markdown too")
    args = p.parse_args(argv)
    result = judge()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}" + (f"; missing: {len(result['missing'])}" if result["missing"] else ""))
    if args.markdown:
        print(to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
