"""Read what ``side_by_side.sh`` wrote: RL seconds a step and training tokens/s (steps 2-6), evaluation seconds
(in the process and the whole process), the new checkout's ratios, and whether the evaluations' rows are identical."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def main(out: str) -> None:
    root = Path(out)
    process = {tuple(x.split()[:2]): float(x.split()[2]) for x in (root / "eval_process_s.txt").read_text().splitlines()}
    rounds = sorted({int(p.name.rsplit("_", 1)[1]) for p in root.glob("ref_train_*") if p.is_dir()})
    for r in rounds:
        fig = {}
        for v in ("ref", "new"):
            steps = [x for x in rows(root / f"{v}_train_{r}" / "metrics.jsonl") if "wall_s" in x][1:]
            wall, tokens = sum(x["wall_s"] for x in steps), sum(x["train_tokens"] for x in steps)
            summary = json.loads((root / f"{v}_eval_{r}" / "summary.json").read_text())
            fig[v] = {"s_per_step": wall / len(steps), "train_tokens_per_s": tokens / wall, "eval_s": summary["wall_s"],
                      "eval_process_s": process[(v, str(r))]}  # fmt: skip
        key = lambda x: (x["id"], x["prediction"], x["correct"], x["tool_calls"])  # noqa: E731
        same = sorted(map(key, rows(root / f"ref_eval_{r}" / "results.jsonl"))) == sorted(map(key, rows(root / f"new_eval_{r}" / "results.jsonl")))
        ratio = {"step": fig["ref"]["s_per_step"] / fig["new"]["s_per_step"],
                 "per_training_token": fig["new"]["train_tokens_per_s"] / fig["ref"]["train_tokens_per_s"],
                 "eval": fig["ref"]["eval_s"] / fig["new"]["eval_s"],
                 "eval_process": fig["ref"]["eval_process_s"] / fig["new"]["eval_process_s"]}  # fmt: skip
        print(json.dumps({"round": r, **{v: {k: round(x, 2) for k, x in f.items()} for v, f in fig.items()},
                          "new_over_ref": {k: round(x, 2) for k, x in ratio.items()}, "eval_rows_identical": same}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
