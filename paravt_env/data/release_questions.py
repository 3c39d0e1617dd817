"""Benchmark questions as the released ParaVT eval driver writes them (``paravt/eval/utils.py::load_samples``).

Each format reader stores, in ``sample.extra["release"]``, what the release's loader derives from the same
annotation row: the question ``body``, whether the option-letter ``instruction`` follows it, the ``answer``
the release compares with, ``is_mcq`` and, for grounding, the annotation's raw ``span``. The release's
quirks are kept here on purpose (``protocol="paravt"`` does not have them):

- Video-MME: ``options`` already read ``"A. ..."`` and are lettered again (``"A. A. ..."``);
- Video-MME with subtitles: the whole ``.srt`` text (cue text only, tags removed) before the question;
- LongVideoBench: ``option0`` ... ``option4`` without "N/A" and empty ones, unstripped;
- LVBench: the question as stored, its ``(A) ...`` lines included, no "Options:" header;
- MLVU: ``candidates`` lettered after the question; the answer letter is the candidate whose text equals the
  answer, else ``"?"`` (the sample cannot score);
- MMVU: every row is multiple choice, open-ended ones included (an empty "Options:" list, and the free-text
  answer compared with a letter: they never score);
- Charades-STA: one fixed instruction around the caption; scored against the raw (float16-noisy) span.

Samples from elsewhere (our own JSONL, synthetic videos) get the Video-MME-style body of their question and
options; grounding questions get the Charades-STA instruction around their question.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..protocol.release import mcq_instruction
from .sample import VideoQASample

CHARADES_TEMPLATE = (
    "Please find the visual event described by a sentence in the video, determining its starting and ending "
    "times. The format should be: 'The event happens in the start time - end time'. For example, The event "
    "'person turn a light on' happens in the 24.3 - 30.4 seconds. Now I will give you the textual sentence: "
    '"{caption}". Please return its start time and end time.'
)


def _lettered(options: Any) -> str:
    if isinstance(options, (list, tuple)):
        return "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(options))
    return str(options)


def _mcq(body: str, answer: Any, release_id: Any = None) -> dict[str, Any]:
    """``release_id``: the id the release's driver gives the sample in its results (to match rows)."""
    return {"body": body, "instruction": True, "answer": str(answer), "is_mcq": True, "id": release_id}


def videomme(row: dict) -> dict[str, Any]:
    return _mcq(f"Question: {row['question']}\nOptions:\n{_lettered(row.get('options', []))}", row.get("answer", ""),
                row.get("videoID"))


def longvideobench(row: dict) -> dict[str, Any]:
    if isinstance(row.get("candidates"), list):  # lvb_val.json (the release reads the parquet's option0..4)
        options = [c for c in row["candidates"] if c and c != "N/A"]
    else:
        options = [row.get(f"option{i}", "") for i in range(5)]
        options = [o for o in options if o and o != "N/A"]
    choice = row.get("correct_choice", -1)
    answer = (chr(65 + choice) if choice >= 0 else "?") if isinstance(choice, int) else str(choice)
    return _mcq(f"Question: {row['question']}\nOptions:\n{_lettered(options)}", answer,
                str(row.get("id", row.get("video_id", ""))))


def lvbench(row: dict) -> dict[str, Any]:
    return _mcq(f"{row['question']}", row.get("answer", ""), row.get("uid", ""))


def mlvu(row: dict, index: int | None = None) -> dict[str, Any]:
    options = row.get("candidates", [])
    answer_text = row.get("answer", "")
    letter = "?"
    if isinstance(options, (list, tuple)):
        for j, option in enumerate(options):
            if str(option).strip() == str(answer_text).strip():
                letter = chr(65 + j)
                break
    return _mcq(f"Question: {row['question']}\nOptions:\n{_lettered(options)}", letter,
                f"{row.get('task_type', 'mlvu')}-{index}" if index is not None else None)


def mmvu(row: dict) -> dict[str, Any]:
    choices = row.get("choices", {}) or {}
    if isinstance(choices, (list, tuple)):
        choices = {chr(65 + i): v for i, v in enumerate(choices)}
    options = "\n".join(f"{k}. {v}" for k, v in sorted(choices.items()) if v not in (None, ""))
    return _mcq(f"Question: {row['question']}\nOptions:\n{options}", str(row.get("answer", "")).strip(), row.get("id", ""))


def charades(caption: str, span: tuple[float, float], index: int | None = None) -> dict[str, Any]:
    body = CHARADES_TEMPLATE.format(caption=caption)
    return {"body": body, "instruction": False, "answer": str(list(span)), "is_mcq": False, "span": list(span),
            "id": index}  # fmt: skip


def default_fields(sample: VideoQASample) -> dict[str, Any]:
    """Release fields for a sample that no benchmark reader made."""
    if sample.question_type == "tvg":
        from ..rewards import parse_span

        span = parse_span(sample.answer) or (0.0, 0.0)
        return charades(sample.question, (float(span[0]), float(span[1])))
    lettered = [f"{chr(65 + i)}. {o}" for i, o in enumerate(sample.options)]
    body = f"Question: {sample.question}\nOptions:\n" + "\n".join(lettered) if sample.options else sample.question
    return {"body": body, "instruction": bool(sample.options), "answer": sample.answer,
            "is_mcq": True}  # fmt: skip


def release_fields(sample: VideoQASample) -> dict[str, Any]:
    fields = sample.extra.get("release")
    return fields if isinstance(fields, dict) and "body" in fields else default_fields(sample)


def parse_srt(path: str | Path | None) -> str:
    """The cue text of an ``.srt`` file, one line per subtitle line, tags removed ("" when unreadable)."""
    if not path:
        return ""
    try:
        content = Path(path).read_text(encoding="utf-8", errors="ignore")
    except OSError:
        return ""
    lines = []
    for block in re.split(r"\n\s*\n", content.strip()):
        parts = block.strip().split("\n")
        if len(parts) >= 3:
            for line in parts[2:]:
                clean = re.sub(r"<[^>]+>", "", line).strip()
                if clean:
                    lines.append(clean)
    return "\n".join(lines)


def subtitle_prefix(sample: VideoQASample) -> str:
    text = parse_srt(sample.extra.get("subtitle_path"))
    return f"This video's subtitles are listed below:\n{text}\n\n" if text else ""


def release_question(sample: VideoQASample, mode: str, *, subtitles: bool = False) -> str:
    """The question text the release's driver sends for ``sample`` in prompt ``mode`` (before the video-path
    sentence the agentic modes add)."""
    fields = release_fields(sample)
    text = fields["body"]
    if fields["instruction"]:
        text = f"{text}\n{mcq_instruction(mode)}"
    return (subtitle_prefix(sample) if subtitles else "") + text


__all__ = ["CHARADES_TEMPLATE", "parse_srt", "release_fields", "release_question", "subtitle_prefix"]
