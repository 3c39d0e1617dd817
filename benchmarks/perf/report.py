"""Ratios against the reference, from a pytest-benchmark JSON file.

    python -m benchmarks.perf.report runs/bench_video.json [--markdown OUT.md]

In each benchmark group the row whose name contains "reference" is the baseline; every other row gets
``speedup = reference mean / row mean`` (both measured in the same run, on the same machine). A benchmark that
records ``tokens_per_s`` in its ``extra_info`` (the RL step) gets that column too: where two paths produce
different episodes, throughput is the fairer comparison than seconds per step.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict


def speedup_table(data: dict) -> list[dict]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for bench in data.get("benchmarks", []):
        groups[bench.get("group") or ""].append(bench)
    rows = []
    for group, benches in sorted(groups.items()):
        ref = next((b for b in benches if "reference" in b["name"]), None)
        for b in sorted(benches, key=lambda b: b["stats"]["mean"]):
            mean = b["stats"]["mean"]
            rows.append(
                {
                    "group": group,
                    "name": b["name"],
                    "mean_s": mean,
                    "min_s": b["stats"]["min"],
                    "rounds": b["stats"]["rounds"],
                    "speedup_vs_reference": (ref["stats"]["mean"] / mean) if ref else None,
                    "tokens_per_s": b.get("extra_info", {}).get("tokens_per_s"),
                }
            )
    return rows


def to_markdown(rows: list[dict]) -> str:
    throughput = any(r.get("tokens_per_s") is not None for r in rows)
    head = "| group | benchmark | mean (s) | min (s) | rounds | speed-up vs reference |"
    lines = [
        head + (" tokens/s |" if throughput else ""),
        "|---|---|---|---|---|---|" + ("---|" if throughput else ""),
    ]
    for r in rows:
        ratio = f"{r['speedup_vs_reference']:.2f}x" if r["speedup_vs_reference"] else "-"
        line = (
            f"| {r['group']} | {r['name']} | {r['mean_s']:.4f} | {r['min_s']:.4f} | {r['rounds']} | {ratio} |"
        )
        if throughput:
            line += f" {r['tokens_per_s']:.0f} |" if r.get("tokens_per_s") is not None else " - |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json_file")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    with open(args.json_file, encoding="utf-8") as fh:
        table = to_markdown(speedup_table(json.load(fh)))
    sys.stdout.write(table)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as fh:
            fh.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
