"""A finished ``paravt repro`` directory, slimmed for committing: what ``paravt repro --report-only`` reads to write
its report again (goals and verdicts included), without the arms' weights, rollouts or videos.

    python scripts/slim_repro.py OUT DEST

Copies the report (``report.json``, ``.md``, ``.png``), ``repro.json`` and ``wall_s.json``; the cold start's
config, gate, numerics, SFT metrics, summary, weights (the arms start from them) and evaluation summaries; and each
arm run's ``config.json``, ``metrics.jsonl``, ``numerics.json``, ``checkpoint/state.json`` and evaluation
summaries. Everything else is left out and counted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from fnmatch import fnmatch
from pathlib import Path

KEEP = (
    "report.json", "report.md", "report.png", "repro.json", "wall_s.json",
    "coldstart/config.json", "coldstart/gate.json", "coldstart/numerics.json", "coldstart/sft_metrics.jsonl",
    "coldstart/eval_*/summary.json", "coldstart/coldstart/summary.json", "coldstart/coldstart/model/*",
    "arms/*/seed*/config.json", "arms/*/seed*/metrics.jsonl", "arms/*/seed*/numerics.json",
    "arms/*/seed*/checkpoint/state.json", "arms/*/seed*/eval_*/summary.json",
)  # fmt: skip


def slim(out: Path, dest: Path) -> tuple[int, int]:
    """Copy what ``KEEP`` names from ``out`` to ``dest``; returns (files kept, files left out)."""
    if not (out / "repro.json").is_file():
        raise FileNotFoundError(f"{out}: no repro.json (not a paravt repro directory)")
    kept = left = 0
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        # fnmatch's * crosses "/": the patterns are matched segment for segment
        if any(len(rel.split("/")) == len(k.split("/")) and fnmatch(rel, k) for k in KEEP):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / rel)
            kept += 1
        else:
            left += 1
    return kept, left


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="a paravt repro --out directory")
    p.add_argument("dest", type=Path, help="where the slim copy goes (created)")
    a = p.parse_args(argv)
    try:
        kept, left = slim(a.out, a.dest)
    except FileNotFoundError as exc:
        print(f"slim_repro: {exc}", file=sys.stderr)
        return 2
    print(f"{a.dest}: {kept} files kept, {left} left out (weights, rollouts, videos, evaluation rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
