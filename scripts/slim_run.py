"""A finished ``paravt train`` run, slimmed for committing: what its comparisons read, without weights or videos.

    python scripts/slim_run.py RUN DEST

Copies ``config.json``, ``metrics.jsonl``, ``numerics.json``, ``select/best.json``, ``heldout/samples.jsonl`` and every
evaluation ``eval*/`` (its ``eval_config.json`` and ``summary.json`` whole; its ``results.jsonl`` rows cut to the id,
score, correctness, error, the episode's cost, its events (asked, shown in the overview, found by a crop) and each
turn's crops' statuses). ``paravt.experiments.dispatch_trained`` and ``paravt.experiments.main_job`` read the copy as
they read the run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

WHOLE = ("config.json", "metrics.jsonl", "numerics.json", "select/best.json", "heldout/samples.jsonl")


def slim_row(row: dict[str, Any]) -> dict[str, Any]:
    episode = row.get("episode") or {}
    return {
        "id": row["id"], "score": row["score"], "correct": row.get("correct"), "error": row.get("error"),
        "episode": {"turns": [{"crops": [{"status": c.get("status")} for c in t.get("crops", [])]}
                              for t in episode.get("turns", [])],
                    "events": episode.get("events", []), "cost": episode.get("cost")},
    }  # fmt: skip


def slim(run: Path, dest: Path) -> list[Path]:
    written = []
    for name in WHOLE:
        if (run / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run / name, dest / name)
            written.append(dest / name)
    for ev in sorted(p for p in run.glob("eval*") if p.is_dir()):
        target = dest / ev.name
        target.mkdir(parents=True, exist_ok=True)
        for name in ("eval_config.json", "summary.json"):
            if (ev / name).is_file():
                shutil.copyfile(ev / name, target / name)
        rows = [json.loads(line) for line in (ev / "results.jsonl").read_text().splitlines() if line.strip()]
        (target / "results.jsonl").write_text("".join(json.dumps(slim_row(r)) + "\n" for r in rows))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("dest", type=Path)
    args = p.parse_args(argv)
    if not (args.run / "config.json").is_file():
        p.error(f"{args.run} holds no config.json: not a paravt train run")
    for path in slim(args.run, args.dest):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
