"""``paravt eval suite``: the paper's Table 1 columns from a data root laid out as the released driver expects.

The release reads every benchmark under ``$HF_HOME`` (``paravt/eval/utils.py::load_samples``); ``--data-root``
is that folder, with each benchmark's annotation file where a ``huggingface-cli download --local-dir`` of its
repository puts it and the videos where the release looks for them:

| column | annotations (first match) | videos |
|---|---|---|
| Video-MME w/o sub | ``videomme/videomme/test-*.parquet`` (lmms-lab/Video-MME) | ``videomme/data/<videoID>.mp4`` |
| Video-MME w/ sub | the same, subtitles from ``videomme/subtitle/<videoID>.srt`` | the same |
| LongVideoBench | ``datasets/longvideobench/validation-*.parquet`` or ``lvb_val.json`` | ``datasets/longvideobench/videos/`` |
| LVBench | ``lvbench/*.parquet`` / ``*.json`` / ``*.jsonl`` (lmms-lab/LVBench) | ``lvbench/<video_path>`` |
| MLVU | ``MLVU/*.parquet`` / ``*.json`` (sy1998/MLVU_dev) | ``MLVU/video/<video_name>`` |
| MMVU | ``MMVU/validation.json`` (yale-nlp/MMVU) | ``MMVU/videos/<subject>/<n>.mp4`` |
| Charades-STA (mIoU) | ``charades_sta/*.parquet`` / ``*.json`` / ``*.txt`` (lmms-lab/charades_sta) | ``charades_sta/Charades_v1_480/`` |

Each column is an ordinary ``paravt eval`` run in ``OUT/<column>/`` (resumable, locked, its own report); the
suite then writes ``OUT/suite.json`` and ``OUT/suite.md``: our row beside the paper's published rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from paravt.evaluation.harness import evaluate
from paravt_env import EnvConfig


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    annotations: tuple[str, ...]
    """Globs under the data root, tried in order; every file the first matching glob finds is read."""
    video_root: str
    subtitles: bool = False
    grounding: bool = False


COLUMNS = (
    Column("videomme", "Video-MME w/o sub", ("videomme/videomme/test-*.parquet", "videomme/*.parquet", "videomme/*.json"), "videomme"),
    Column("videomme_wsub", "Video-MME w/ sub", ("videomme/videomme/test-*.parquet", "videomme/*.parquet", "videomme/*.json"), "videomme", subtitles=True),
    Column("longvideobench", "LongVideoBench", ("datasets/longvideobench/validation-*.parquet", "datasets/longvideobench/lvb_val.json"), "datasets/longvideobench"),
    Column("lvbench", "LVBench", ("lvbench/*.parquet", "lvbench/*.jsonl", "lvbench/*.json"), "lvbench"),
    Column("mlvu", "MLVU", ("MLVU/*.parquet", "MLVU/*.json", "MLVU/json/*.json"), "MLVU/video"),
    Column("mmvu", "MMVU", ("MMVU/validation.json", "MMVU/*.parquet", "MMVU/*.json"), "MMVU"),
    Column("charades", "Charades-STA mIoU", ("charades_sta/*.parquet", "charades_sta/*.json", "charades_sta/*.txt"), "charades_sta", grounding=True),
)  # fmt: skip
COLUMN_KEYS = tuple(c.key for c in COLUMNS)

PAPER_ROWS: dict[str, dict[str, float]] = {"ParaVT-8B (paper)": {"videomme_wsub": 69.4}}
"""Published numbers only: the paper's abstract gives ParaVT-8B's Video-MME w/ subtitles (69.4); the rest of
its Table 1 was not available offline when this was written, so those cells show "-" (pass ``--paper-rows
FILE``, a JSON ``{row name: {column key: value}}``, to fill them from the paper)."""
PAPER_ROW_NAMES = ("ParaVT-8B (paper)", "Qwen3-VL-8B (paper)")


def annotation_files(root: Path, column: Column) -> list[Path]:
    for pattern in column.annotations:
        found = sorted(p for p in root.glob(pattern) if p.is_file())
        if found:
            return found
    return []


def column_samples(root: Path, column: Column, limit: int | None) -> list:
    from paravt_env import load_samples

    samples = []
    for path in annotation_files(root, column):
        samples += load_samples(path, video_root=root / column.video_root, strict=False, keep_missing=True)
    return samples[: limit or None]


def run_suite(root: str | Path, make_agent, out: str | Path, options: EnvConfig, *, grounding_prompt_mode: str,
              grounding_video_channel: str = "image_url", columns: tuple[str, ...] = COLUMN_KEYS, limit: int | None = None, concurrency: int | None = None,
              progress: bool = True, run_config: dict[str, Any] | None = None, subagent: Any = None,
              paper_rows: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:  # fmt: skip
    """Evaluate every column found under ``root``; return (and write) the table."""
    root, out = Path(root), Path(out)
    if not root.is_dir():
        raise FileNotFoundError(f"data root {root} is not a directory")
    unknown = sorted(set(columns) - set(COLUMN_KEYS))
    if unknown:
        raise ValueError(f"unknown suite column(s) {unknown}; known: {list(COLUMN_KEYS)}")
    results: dict[str, Any] = {}
    for column in (c for c in COLUMNS if c.key in columns):
        samples = column_samples(root, column, limit)
        if not samples:
            results[column.key] = {"missing": f"no annotation file matches {list(column.annotations)} under {root}"}
            continue
        col_options = replace(options, subtitles=column.subtitles,
                              prompt_mode=grounding_prompt_mode if column.grounding else options.prompt_mode,
                              video_channel=grounding_video_channel if column.grounding else options.video_channel)  # fmt: skip
        summary = evaluate(samples, make_agent, out / column.key, col_options, concurrency=concurrency,
                           progress=progress, subagent=subagent,
                           run_config={**(run_config or {}), "column": column.key})  # fmt: skip
        value = summary["grounding"]["mIoU"] if column.grounding and "grounding" in summary else summary["accuracy"]
        results[column.key] = {"value": 100.0 * value, "n": summary["n"], "errors": summary["errors"]}
    if all("missing" in r for r in results.values()):
        raise FileNotFoundError(
            f"no benchmark found under {root}: " + "; ".join(f"{k}: {r['missing']}" for k, r in results.items())
        )
    table = {"columns": [{"key": c.key, "title": c.title} for c in COLUMNS if c.key in columns], "ours": results,
             "paper": {**{name: {} for name in PAPER_ROW_NAMES}, **PAPER_ROWS, **(paper_rows or {})}}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.json").write_text(json.dumps(table, indent=2) + "\n")
    (out / "suite.md").write_text(to_markdown(table, run_config or {}))
    return table


def to_markdown(table: dict[str, Any], run_config: dict[str, Any]) -> str:
    cols = table["columns"]
    head = ["model", *(c["title"] for c in cols)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(v: Any) -> str:
        return f"{v:.1f}" if isinstance(v, (int, float)) else "-"

    ours = table["ours"]
    name = f"ours: {run_config.get('policy', '?')} ({run_config.get('protocol', 'paravt')} protocol)"
    lines.append("| " + " | ".join([name, *(cell(ours.get(c["key"], {}).get("value")) for c in cols)]) + " |")
    for row, values in table["paper"].items():
        lines.append("| " + " | ".join([row, *(cell(values.get(c["key"])) for c in cols)]) + " |")
    notes = [f"- {c['title']}: n = {ours[c['key']]['n']}, errors {ours[c['key']]['errors']}"
             for c in cols if "n" in ours.get(c["key"], {})]  # fmt: skip
    notes += [f"- {c['title']}: not run ({ours[c['key']]['missing']})" for c in cols if "missing" in ours.get(c["key"], {})]
    notes.append('- Paper rows: published values only; "-" where the paper\'s table was not available here.')
    return "# Evaluation suite (Table 1 layout)\n\n" + "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


__all__ = ["COLUMNS", "COLUMN_KEYS", "PAPER_ROWS", "annotation_files", "run_suite", "to_markdown"]
