"""``load_samples``: read the QA data people already have into ``VideoQASample`` lists.

Detected formats (``format="auto"``):

- ``jsonl``: our own rows (``VideoQASample`` fields), or a directory holding ``samples.jsonl``;
- ``paravt``: the released ParaVT RL parquet (``prompt`` = role/content list with a ``<video>`` placeholder,
  ``videos`` = ``[{"video": relative path}]``, ``extra_info`` = JSON with ``answer`` and ``question_type``);
- lmms-eval style annotation files of ``videomme``, ``longvideobench``, ``lvbench``, ``mlvu``, ``mmvu`` and
  ``charades_sta`` (JSON, JSONL or parquet; Charades-STA also in its original ``.txt`` form).

Relative video paths resolve against ``video_root`` (default: the annotation file's directory). Rows whose
video is missing are skipped with one warning that counts them (``strict=True`` raises instead).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .sample import VideoQASample

VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".avi", ".mov")
FORMATS = ("jsonl", "paravt", "videomme", "longvideobench", "lvbench", "mlvu", "mmvu", "charades_sta")
LETTERS = "ABCDEFGHIJ"
_LETTERED = re.compile(r"^\(?([A-J])[\.\):]\s*(.*)$", re.S)


class DataFormatError(ValueError):
    """A row that cannot be read; the message names the file, the row and the field."""


# --- reading files ------------------------------------------------------------------------------------------
def _read_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(f'reading {path} needs pyarrow: pip install "paravt-gym[data]"') from exc
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataFormatError(f"{path}: line {n}: invalid JSON: {exc.msg}") from exc
        return rows
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno})") from exc
        if isinstance(data, dict):  # some releases wrap the list: {"data": [...]} or {task: [...]}
            lists = [v for v in data.values() if isinstance(v, list)]
            data = [r for lst in lists for r in lst] if lists else [data]
        return list(data)
    if suffix == ".txt":
        return [{"_line": line} for line in text.splitlines() if line.strip()]
    raise DataFormatError(
        f"{path}: unsupported file type {suffix!r} (expected .jsonl, .json, .parquet or .txt)"
    )


def detect_format(rows: list[dict[str, Any]], path: Path) -> str:
    """Name the schema of ``rows`` from their keys."""
    if not rows:
        return "jsonl"
    keys = set(rows[0])
    if "_line" in keys:
        return "charades_sta"
    if {"prompt", "videos"} <= keys or ("prompt" in keys and "extra_info" in keys):
        return "paravt"
    if (
        {"id", "video_path", "question", "answer"} <= keys
        and "question_type" in keys
        and "candidates" not in keys
    ):
        return "jsonl"
    if "videoID" in keys or ("task_type" in keys and "options" in keys and "duration" in keys):
        return "videomme"
    if "correct_choice" in keys and "candidates" in keys:
        return "longvideobench"
    if "qa" in keys or ("uid" in keys and "question" in keys):
        return "lvbench"
    if "choices" in keys and "question_type" in keys:
        return "mmvu"
    if "caption" in keys and ("timestamp" in keys or "timestamps" in keys):
        return "charades_sta"
    if "candidates" in keys or "video_name" in keys:
        return "mlvu"
    raise DataFormatError(
        f"{path}: cannot tell the format from the keys {sorted(keys)}; pass format= one of {FORMATS}"
    )


# --- helpers ------------------------------------------------------------------------------------------------
def _require(row: dict, field: str, where: str) -> Any:
    if field not in row or row[field] is None:
        raise DataFormatError(f"{where}: missing field {field!r}")
    return row[field]


def _strip_letters(options: Iterable[Any]) -> list[str]:
    """["A. red", "B. blue"] -> ["red", "blue"] (VideoQASample letters them itself)."""
    out = []
    for opt in options:
        m = _LETTERED.match(str(opt).strip())
        out.append(m.group(2).strip() if m else str(opt).strip())
    return out


def _letter(answer: Any, where: str) -> str:
    text = str(answer).strip()
    m = re.match(r"^\(?([A-J])\)?(?:[\.\):]|$)", text)
    if not m:
        raise DataFormatError(f"{where}: answer {answer!r} is not an option letter")
    return m.group(1)


def _embedded_options(question: str) -> tuple[str, list[str]]:
    """Split "Q?\n(A) x\n(B) y" (LVBench, MLVU test) into the question and its options."""
    lines = [ln.strip() for ln in question.strip().splitlines() if ln.strip()]
    stem, options = [], []
    for ln in lines:
        m = _LETTERED.match(ln)
        if m and (options or len(m.group(1)) == 1) and m.group(1) == LETTERS[len(options)]:
            options.append(m.group(2).strip())
        elif options:
            options[-1] += " " + ln
        else:
            stem.append(ln)
    return " ".join(stem), options


# --- per-format row readers ---------------------------------------------------------------------------------
# Each returns a list of (sample, candidate video paths); the first candidate that exists is used.
Row = tuple[VideoQASample, list[str]]


def _jsonl(row: dict, where: str) -> list[Row]:
    try:
        sample = VideoQASample.from_dict(row)
    except (TypeError, ValueError) as exc:
        raise DataFormatError(f"{where}: {exc}") from exc
    return [(sample, [sample.video_path])]


def _paravt(row: dict, where: str) -> list[Row]:
    prompt = _require(row, "prompt", where)
    if isinstance(prompt, str):
        prompt = json.loads(prompt)
    user = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not user:
        raise DataFormatError(f"{where}: field 'prompt' has no user message")
    content = user[-1].get("content", "")
    if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "video"}]
        content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    question = content.replace("<video>", "").strip()
    extra = row.get("extra_info") or {}
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{where}: field 'extra_info' is not valid JSON: {exc.msg}") from exc
    answer = extra.get("answer", row.get("answer"))
    if answer is None:
        raise DataFormatError(f"{where}: no answer in 'extra_info' (or 'answer')")
    qtype = str(extra.get("question_type", "oe")).lower()
    qtype = {
        "multiple_choice": "mcq",
        "multiple-choice": "mcq",
        "open_ended": "oe",
        "temporal_grounding": "tvg",
    }.get(qtype, qtype)
    if qtype not in ("mcq", "oe", "tvg"):
        qtype = "oe"
    videos = row.get("videos") or []
    video = (
        videos[0].get("video") if videos and isinstance(videos[0], dict) else (videos[0] if videos else None)
    )
    if not video:
        raise DataFormatError(f"{where}: field 'videos' names no video")
    sample_id = str(extra.get("id", extra.get("index", row.get("id", where))))
    kept = {k: v for k, v in extra.items() if k not in ("answer", "question_type")}
    sample = VideoQASample(sample_id, video, question, str(answer), qtype, extra={"paravt": kept})
    return [(sample, [video])]


def _videomme(row: dict, where: str) -> list[Row]:
    vid = str(row.get("videoID") or _require(row, "video_id", where))
    sample = VideoQASample(
        id=str(row.get("question_id") or f"{vid}-{where}"),
        video_path=f"{vid}.mp4",
        question=str(_require(row, "question", where)),
        answer=_letter(_require(row, "answer", where), where),
        question_type="mcq",
        options=_strip_letters(_require(row, "options", where)),
        extra={
            k: row.get(k)
            for k in ("duration", "domain", "sub_category", "task_type", "video_id", "url")
            if k in row
        }
        | {"subtitle_path": f"subtitle/{vid}.srt"},
    )
    return [(sample, [f"{vid}.mp4", f"data/{vid}.mp4", f"videos/{vid}.mp4", *_exts(vid)])]


def _longvideobench(row: dict, where: str) -> list[Row]:
    candidates = _require(row, "candidates", where)
    choice = int(_require(row, "correct_choice", where))
    if not 0 <= choice < len(candidates):
        raise DataFormatError(f"{where}: correct_choice {choice} outside the {len(candidates)} candidates")
    video = row.get("video_path") or f"{_require(row, 'video_id', where)}.mp4"
    sample = VideoQASample(
        id=str(row.get("id", where)),
        video_path=str(video),
        question=str(_require(row, "question", where)),
        answer=LETTERS[choice],
        question_type="mcq",
        options=[str(c) for c in candidates],
        duration=float(row["duration"]) if row.get("duration") is not None else None,
        extra={
            k: row.get(k)
            for k in ("duration_group", "question_category", "topic_category", "level", "subtitle_path")
            if k in row
        },
    )
    return [(sample, [str(video), f"videos/{video}"])]


def _lvbench(row: dict, where: str) -> list[Row]:
    key = str(row.get("key") or row.get("video") or row.get("video_path") or "")
    qas = row.get("qa") if isinstance(row.get("qa"), list) else [row]
    out = []
    for j, qa in enumerate(qas):
        w = f"{where}, qa {j}"
        question, options = _embedded_options(str(_require(qa, "question", w)))
        vid = key or str(_require(qa, "key", w))
        video = vid if vid.lower().endswith(VIDEO_EXTENSIONS) else f"{vid}.mp4"
        qtype = qa.get("question_type")
        sample = VideoQASample(
            id=str(qa.get("uid", f"{vid}-{j}")),
            video_path=video,
            question=question,
            answer=_letter(_require(qa, "answer", w), w),
            question_type="mcq",
            options=options,
            extra={"time_reference": qa.get("time_reference"), "categories": qtype, "key": vid},
        )
        out.append((sample, [video, f"videos/{video}", *_exts(vid)]))
    return out


def _mlvu(row: dict, where: str) -> list[Row]:
    video = str(row.get("video") or _require(row, "video_name", where))
    question = str(_require(row, "question", where))
    if "candidates" in row:
        options = [str(c) for c in row["candidates"]]
        answer = str(_require(row, "answer", where)).strip()
        letter = LETTERS[options.index(answer)] if answer in options else _letter(answer, where)
    else:  # lmms-eval's MLVU test rows embed the options in the question and answer with a letter
        question, options = _embedded_options(question)
        letter = _letter(_require(row, "answer", where), where)
    task = row.get("question_type") or row.get("task_type")
    sample = VideoQASample(
        id=str(row.get("question_id", row.get("id", f"{video}-{where}"))),
        video_path=video,
        question=question,
        answer=letter,
        question_type="mcq",
        options=options,
        duration=float(row["duration"]) if row.get("duration") is not None else None,
        extra={"task": task},
    )
    return [(sample, [video, f"video/{video}", f"videos/{video}", f"{task}/{video}" if task else video])]


def _mmvu(row: dict, where: str) -> list[Row]:
    url = str(_require(row, "video", where))
    # MMVU rows carry a hub URL (".../videos/<Subject>/<n>.mp4"); locally the same relative layout is used.
    rel = url.split("/resolve/main/", 1)[-1] if "/resolve/main/" in url else url
    choices = row.get("choices") or {}
    qtype = str(_require(row, "question_type", where)).lower()
    if qtype.startswith("multiple") and choices:
        letters = sorted(choices)
        options = [str(choices[k]) for k in letters]
        answer = str(_require(row, "answer", where)).strip()
        letter = (
            answer if answer in letters else LETTERS[options.index(answer)] if answer in options else None
        )
        if letter is None:
            raise DataFormatError(f"{where}: answer {answer!r} is neither a choice letter nor a choice")
        sample = VideoQASample(str(row.get("id", where)), rel, str(row["question"]), letter, "mcq", options)
    else:
        sample = VideoQASample(
            str(row.get("id", where)), rel, str(_require(row, "question", where)), str(row["answer"]), "oe"
        )
    sample.extra = {"metadata": row.get("metadata"), "url": url}
    return [(sample, [rel, rel.removeprefix("videos/"), os.path.basename(rel)])]


def _charades(row: dict, where: str) -> list[Row]:
    if "_line" in row:  # original annotation: "3MSZA 24.3 30.4##person turn a light on."
        head, _, caption = row["_line"].partition("##")
        parts = head.split()
        if len(parts) != 3 or not caption:
            raise DataFormatError(f"{where}: expected 'VIDEO START END##caption', got {row['_line'][:80]!r}")
        vid, start, end = parts[0], float(parts[1]), float(parts[2])
        duration = None
    else:
        vid = str(row.get("video") or _require(row, "video_id", where))
        span = row.get("timestamp", row.get("timestamps"))
        if isinstance(span, list) and span and isinstance(span[0], list):
            span = span[0]
        if not isinstance(span, (list, tuple)) or len(span) != 2:
            raise DataFormatError(f"{where}: field 'timestamp' must be [start, end], got {span!r}")
        start, end = float(span[0]), float(span[1])
        caption = str(_require(row, "caption", where))
        duration = float(row["duration"]) if row.get("duration") is not None else None
    vid = vid[:-4] if vid.lower().endswith(".mp4") else vid
    question = (
        f"When does the event '{caption.strip().rstrip('.')}' happen in the video? "
        "Answer with [start, end] in seconds."
    )
    sample = VideoQASample(f"{vid}_{start:.1f}_{end:.1f}", f"{vid}.mp4", question, f"[{start:.1f}, {end:.1f}]", "tvg",
                           duration=duration, extra={"caption": caption.strip()})  # fmt: skip
    return [(sample, [f"{vid}.mp4", f"videos/{vid}.mp4", *_exts(vid)])]


def _exts(stem: str) -> list[str]:
    return [stem + ext for ext in VIDEO_EXTENSIONS]


READERS: dict[str, Callable[[dict, str], list[Row]]] = {
    "jsonl": _jsonl,
    "paravt": _paravt,
    "videomme": _videomme,
    "longvideobench": _longvideobench,
    "lvbench": _lvbench,
    "mlvu": _mlvu,
    "mmvu": _mmvu,
    "charades_sta": _charades,
}


# --- entry point --------------------------------------------------------------------------------------------
def load_samples(
    path: str | os.PathLike,
    video_root: str | os.PathLike | None = None,
    *,
    format: str = "auto",
    strict: bool = False,
) -> list[VideoQASample]:
    """Read a QA file (or a directory holding ``samples.jsonl``) into samples with resolved video paths."""
    path = Path(path)
    if path.is_dir():
        path = path / "samples.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"sample file not found: {str(path)!r}")
    rows = _read_rows(path)
    fmt = detect_format(rows, path) if format == "auto" else format
    if fmt not in READERS:
        raise ValueError(f"unknown data format {fmt!r}; choose one of {('auto', *FORMATS)}")
    root = Path(video_root) if video_root is not None else path.parent
    samples, missing = [], []
    for n, row in enumerate(rows):
        where = f"{path}: row {n}"
        if not isinstance(row, dict):
            raise DataFormatError(f"{where}: expected an object, got {type(row).__name__}")
        for sample, candidates in READERS[fmt](row, where):
            found = next((c for c in (_resolve(root, c) for c in candidates) if c.is_file()), None)
            if found is None:
                missing.append(str(_resolve(root, candidates[0])))
                continue
            sample.video_path = str(found)
            samples.append(sample)
    if missing:
        message = f"skipped {len(missing)} of {len(missing) + len(samples)} samples of {path}: video not found (first: {missing[0]})"
        if strict:
            raise FileNotFoundError(message)
        warnings.warn(message, stacklevel=2)
    return samples


def _resolve(root: Path, candidate: str) -> Path:
    p = Path(os.path.expanduser(candidate.removeprefix("file://")))
    return p if p.is_absolute() else root / p
